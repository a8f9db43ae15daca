#include "frontend/model/ModelFile.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "frontend/model/GgufModel.h"
#include "frontend/model/HfModel.h"
#include "frontend/safetensors/HfConfig.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {
namespace {

absl::StatusOr<ModelFile> OpenHfDirectory(const std::string& directory) {
  ModelFile model;
  model.path = directory;
  model.format = "Hugging Face safetensors";
  KVJIT_ASSIGN_OR_RETURN(hf::LlamaConfig hf_config, hf::LoadLlamaConfig(directory));
  KVJIT_ASSIGN_OR_RETURN(model.config,
                         ModelConfigFromHf(hf_config, absl::StrCat(directory, "/config.json")));
  KVJIT_ASSIGN_OR_RETURN(safetensors::SafetensorsModel weights,
                         safetensors::SafetensorsModel::Open(directory));
  model.safetensors = std::make_unique<safetensors::SafetensorsModel>(std::move(weights));
  model.weights = std::make_unique<SafetensorsWeightSource>(*model.safetensors);
  return model;
}

absl::StatusOr<ModelFile> OpenGguf(const std::string& path) {
  ModelFile model;
  model.path = path;
  KVJIT_ASSIGN_OR_RETURN(model.gguf, gguf::GgufFile::Open(path));
  model.format = absl::StrCat("GGUF v", model.gguf->version());
  KVJIT_ASSIGN_OR_RETURN(model.config, ModelConfigFromGguf(*model.gguf));
  model.weights = std::make_unique<GgufWeightSource>(*model.gguf);
  return model;
}

}  // namespace

absl::StatusOr<ModelFile> OpenModelFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return OpenHfDirectory(path);
  return OpenGguf(path);
}

absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const ModelFile& model) {
  if (model.gguf != nullptr) return tokenizer::LoadTokenizerFromGguf(*model.gguf);
  return tokenizer::LoadTokenizerFromHfDirectory(model.path);
}

}  // namespace kvjit::model
