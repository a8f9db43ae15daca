#include "frontend/model/ModelFile.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "frontend/model/GgufModel.h"
#include "frontend/model/HfModel.h"
#include "frontend/huggingface/HfConfig.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {
namespace {

absl::StatusOr<ModelFile> OpenHfDirectory(const std::string& directory) {
  ModelFile model;
  model.path = directory;
  model.format = "Hugging Face safetensors";
  KVJIT_ASSIGN_OR_RETURN(hf::DecoderConfig hf_config, hf::LoadDecoderConfig(directory));
  KVJIT_ASSIGN_OR_RETURN(model.config,
                         ModelConfigFromHf(hf_config, absl::StrCat(directory, "/config.json")));
  KVJIT_ASSIGN_OR_RETURN(safetensors::SafetensorsModel weights,
                         safetensors::SafetensorsModel::Open(directory));
  model.safetensors = std::make_unique<safetensors::SafetensorsModel>(std::move(weights));
  model.weights =
      std::make_unique<SafetensorsWeightSource>(*model.safetensors, hf_config.family);
  return model;
}

absl::StatusOr<ModelFile> OpenGguf(const std::string& path) {
  ModelFile model;
  model.path = path;
  KVJIT_ASSIGN_OR_RETURN(gguf::GgufModelFiles files, gguf::GgufModelFiles::Open(path));
  model.gguf_files = std::make_unique<gguf::GgufModelFiles>(std::move(files));
  model.format = absl::StrCat("GGUF v", model.gguf()->version());
  if (const size_t parts = model.gguf_files->parts().size(); parts > 1) {
    absl::StrAppend(&model.format, ", split in ", parts, " files");
  }
  KVJIT_ASSIGN_OR_RETURN(model.config, ModelConfigFromGguf(*model.gguf_files));
  model.weights = std::make_unique<GgufWeightSource>(*model.gguf_files);
  return model;
}

}  // namespace

absl::StatusOr<ModelFile> OpenModelFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return OpenHfDirectory(path);
  return OpenGguf(path);
}

absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const ModelFile& model) {
  if (model.gguf() != nullptr) return tokenizer::LoadTokenizerFromGguf(*model.gguf());
  return tokenizer::LoadTokenizerFromHfDirectory(model.path);
}

absl::StatusOr<std::string> LoadChatTemplate(const ModelFile& model) {
  if (model.gguf() != nullptr) {
    if (!model.gguf()->Has("tokenizer.chat_template")) return std::string();
    KVJIT_ASSIGN_OR_RETURN(absl::string_view chat_template,
                           model.gguf()->GetString("tokenizer.chat_template"));
    return std::string(chat_template);
  }
  // transformers (4.47 on, and 5) saves the template as chat_template.jinja
  // beside tokenizer_config.json, and reads it in preference to the field.
  const std::string jinja_path = model.path + "/chat_template.jinja";
  if (std::ifstream jinja_file(jinja_path, std::ios::binary); jinja_file) {
    std::string chat_template((std::istreambuf_iterator<char>(jinja_file)),
                              std::istreambuf_iterator<char>());
    if (jinja_file.bad()) {
      return absl::DataLossError(absl::StrCat(jinja_path, ": cannot be read"));
    }
    return chat_template;
  }
  const std::string config_path = model.path + "/tokenizer_config.json";
  std::ifstream config_file(config_path);
  if (!config_file) return std::string();
  nlohmann::json config = nlohmann::json::parse(config_file, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": not valid JSON"));
  }
  if (!config.is_object() || !config.contains("chat_template")) return std::string();
  if (!config["chat_template"].is_string()) {
    return absl::UnimplementedError(
        absl::StrCat(config_path, ": chat_template is not a single template string"));
  }
  return config["chat_template"].get<std::string>();
}

}  // namespace kvjit::model
