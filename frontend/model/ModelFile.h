#ifndef KVJIT_FRONTEND_MODEL_MODELFILE_H_
#define KVJIT_FRONTEND_MODEL_MODELFILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/gguf/GgufSplit.h"
#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"
#include "frontend/huggingface/SafetensorsModel.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace kvjit::model {

// A model opened from disk: its hyper-parameters and weights, with the file
// they are views into kept alive alongside.
struct ModelFile {
  std::string path;
  std::string format;  // "GGUF v3", ...
  ModelConfig config;
  // A GGUF model's files: one, or every part of a split.
  std::unique_ptr<gguf::GgufModelFiles> gguf_files;
  std::unique_ptr<safetensors::SafetensorsModel> safetensors;
  std::unique_ptr<WeightSource> weights;

  // The GGUF file with the model's metadata; none for a Hugging Face model.
  const gguf::GgufFile* gguf() const {
    return gguf_files != nullptr ? &gguf_files->metadata() : nullptr;
  }
};

// Opens a GGUF file (any part of a split GGUF finds the others), or a
// Hugging Face directory (config.json and one or many *.safetensors shards).
absl::StatusOr<ModelFile> OpenModelFile(const std::string& path);

// The tokenizer the model describes: GGUF tokenizer.ggml.* metadata, or a
// Hugging Face directory's tokenizer.json.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const ModelFile& model);

// The chat template the model ships: GGUF's tokenizer.chat_template, or a
// Hugging Face directory's tokenizer_config.json "chat_template"; empty
// where it has none.
absl::StatusOr<std::string> LoadChatTemplate(const ModelFile& model);

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_MODELFILE_H_
