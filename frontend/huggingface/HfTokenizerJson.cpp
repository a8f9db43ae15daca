#include "frontend/huggingface/HfTokenizerJson.h"

#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/huggingface/JsonFile.h"

namespace kvjit::hf {
namespace {

absl::Status ReadVocab(const nlohmann::json& model, const std::string& where,
                       BpeTokenizerJson& tokenizer,
                       absl::flat_hash_map<int64_t, std::string>& token_by_id) {
  const nlohmann::json* vocab = FindField(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "vocab must be an object"));
  }
  for (const auto& [token, id_value] : vocab->items()) {
    absl::StatusOr<int64_t> id =
        NonNegativeInteger(id_value, absl::StrCat(where, "vocab['", token, "']"));
    if (!id.ok()) return id.status();
    auto [existing, inserted] = token_by_id.emplace(*id, token);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(where, "vocab gives id ", *id, " to both '",
                                                     existing->second, "' and '", token, "'"));
    }
    tokenizer.vocab.emplace(token, *id);
  }
  return absl::OkStatus();
}

absl::Status ReadMerges(const nlohmann::json& model, const std::string& where,
                        BpeTokenizerJson& tokenizer) {
  const nlohmann::json* merges = FindField(model, "merges");
  if (merges == nullptr || merges->is_null()) return absl::OkStatus();
  if (!merges->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "merges must be a list"));
  }
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const nlohmann::json& merge = (*merges)[rank];
    std::string merge_where = absl::StrCat(where, "merges[", rank, "]");
    std::pair<std::string, std::string> pieces;
    // Older files write "left right"; newer ones ["left", "right"], which
    // allows pieces that contain a space.
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(merge_where, " '", text, "' must be two pieces separated by one space"));
      }
      pieces = {text.substr(0, space), text.substr(space + 1)};
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      pieces = {merge[0].get<std::string>(), merge[1].get<std::string>()};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(merge_where, " must be \"left right\" or [\"left\", \"right\"]"));
    }
    for (const std::string& token : {pieces.first, pieces.second, pieces.first + pieces.second}) {
      if (!tokenizer.vocab.contains(token)) {
        return absl::InvalidArgumentError(
            absl::StrCat(merge_where, " uses '", token, "', which is not in the vocab"));
      }
    }
    tokenizer.merges.push_back(std::move(pieces));
  }
  return absl::OkStatus();
}

absl::Status ReadAddedTokens(const nlohmann::json& root, const std::string& source,
                             BpeTokenizerJson& tokenizer,
                             const absl::flat_hash_map<int64_t, std::string>& token_by_id) {
  const nlohmann::json* added_tokens = FindField(root, "added_tokens");
  if (added_tokens == nullptr || added_tokens->is_null()) return absl::OkStatus();
  if (!added_tokens->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": added_tokens must be a list"));
  }
  for (size_t i = 0; i < added_tokens->size(); ++i) {
    const nlohmann::json& entry = (*added_tokens)[i];
    std::string where = absl::StrCat(source, ": added_tokens[", i, "]");
    const nlohmann::json* id_value = FindField(entry, "id");
    const nlohmann::json* content = FindField(entry, "content");
    if (id_value == nullptr || content == nullptr || !content->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " must be an object with an integer id and a string content"));
    }
    AddedToken token;
    absl::StatusOr<int64_t> id = NonNegativeInteger(*id_value, absl::StrCat(where, ".id"));
    if (!id.ok()) return id.status();
    token.id = *id;
    token.content = content->get<std::string>();
    const nlohmann::json* special = FindField(entry, "special");
    if (special != nullptr && !special->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".special must be true or false"));
    }
    token.special = special != nullptr && special->get<bool>();
    // These change which text around the token it takes; matching them
    // exactly is not implemented, so a file using them is refused rather than
    // tokenized differently from Hugging Face's tokenizers.
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      const nlohmann::json* value = FindField(entry, flag);
      if (value != nullptr && *value != false) {
        return absl::UnimplementedError(
            absl::StrCat(where, ".", flag, " ", Describe(*value), " is not supported"));
      }
    }
    auto in_vocab = token_by_id.find(token.id);
    if (in_vocab != token_by_id.end() && in_vocab->second != token.content) {
      return absl::InvalidArgumentError(absl::StrCat(where, " gives id ", token.id, " to '",
                                                     token.content, "', which the vocab gives to '",
                                                     in_vocab->second, "'"));
    }
    tokenizer.added_tokens.push_back(std::move(token));
  }
  return absl::OkStatus();
}

// Real files nest Sequence steps one or two deep; the limit keeps a hostile
// file from exhausting the stack.
constexpr int kMaxSequenceDepth = 8;

// `field` of `step`: absent gives `fallback`, anything but a boolean fails.
absl::StatusOr<bool> ReadBool(const nlohmann::json& step, const char* field,
                              const std::string& where, bool fallback) {
  const nlohmann::json* value = FindField(step, field);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", field, " must be true or false, got ", Describe(*value)));
  }
  return value->get<bool>();
}

// The "type" of a normalizer or pre-tokenizer object.
absl::StatusOr<std::string> ReadStepType(const nlohmann::json& step, const std::string& where,
                                         int depth) {
  if (depth > kMaxSequenceDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": Sequence steps nest more than ", kMaxSequenceDepth, " deep"));
  }
  const nlohmann::json* type = step.is_object() ? FindField(step, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be an object with a string type"));
  }
  return type->get<std::string>();
}

absl::StatusOr<SplitBehavior> ReadSplitBehavior(const nlohmann::json& step,
                                                const std::string& where) {
  const nlohmann::json* behavior = FindField(step, "behavior");
  if (behavior == nullptr || behavior->is_null()) return SplitBehavior::kIsolated;
  static constexpr std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Isolated", SplitBehavior::kIsolated},
      {"Removed", SplitBehavior::kRemoved},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous},
  };
  for (const auto& [name, value] : kBehaviors) {
    if (*behavior == name) return value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ".behavior must be Isolated, Removed, MergedWithPrevious, "
                          "MergedWithNext or Contiguous, got ",
                   Describe(*behavior)));
}

absl::Status ReadSplit(const nlohmann::json& step, PreTokenizerStep& split) {
  const std::string& where = split.where;
  const nlohmann::json* pattern = FindField(step, "pattern");
  const nlohmann::json* regex = pattern == nullptr ? nullptr : FindField(*pattern, "Regex");
  const nlohmann::json* literal = pattern == nullptr ? nullptr : FindField(*pattern, "String");
  if (regex != nullptr && regex->is_string()) {
    split.pattern = regex->get<std::string>();
  } else if (literal != nullptr && literal->is_string()) {
    split.pattern = literal->get<std::string>();
    split.pattern_is_literal = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}"));
  }
  absl::StatusOr<SplitBehavior> behavior = ReadSplitBehavior(step, where);
  if (!behavior.ok()) return behavior.status();
  split.behavior = *behavior;
  absl::StatusOr<bool> invert = ReadBool(step, "invert", where, false);
  if (!invert.ok()) return invert.status();
  split.invert = *invert;
  return absl::OkStatus();
}

absl::Status ReadPreTokenizer(const nlohmann::json& step, const std::string& where, int depth,
                              BpeTokenizerJson& tokenizer) {
  if (step.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type_name = ReadStepType(step, where, depth);
  if (!type_name.ok()) return type_name.status();
  if (*type_name == "Sequence") {
    const nlohmann::json* steps = FindField(step, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".pretokenizers must be a list"));
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      absl::Status status = ReadPreTokenizer(
          (*steps)[i], absl::StrCat(where, ".pretokenizers[", i, "]"), depth + 1, tokenizer);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  PreTokenizerStep parsed;
  parsed.where = where;
  if (*type_name == "ByteLevel") {
    parsed.kind = PreTokenizerStep::Kind::kByteLevel;
    absl::StatusOr<bool> use_regex = ReadBool(step, "use_regex", where, true);
    if (!use_regex.ok()) return use_regex.status();
    parsed.use_regex = *use_regex;
    // trim_offsets only changes the offsets reported, not the ids. Files
    // Hugging Face writes always spell add_prefix_space out.
    absl::StatusOr<bool> add_prefix_space = ReadBool(step, "add_prefix_space", where, false);
    if (!add_prefix_space.ok()) return add_prefix_space.status();
    if (*add_prefix_space) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": ByteLevel with add_prefix_space true is not supported"));
    }
  } else if (*type_name == "Digits") {
    parsed.kind = PreTokenizerStep::Kind::kDigits;
    absl::StatusOr<bool> individual = ReadBool(step, "individual_digits", where, false);
    if (!individual.ok()) return individual.status();
    parsed.individual_digits = *individual;
  } else if (*type_name == "Split") {
    parsed.kind = PreTokenizerStep::Kind::kSplit;
    if (absl::Status status = ReadSplit(step, parsed); !status.ok()) return status;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(where, ": pre-tokenizer type '", *type_name, "' is not supported"));
  }
  tokenizer.pre_tokenizer_steps.push_back(std::move(parsed));
  return absl::OkStatus();
}

absl::Status ReadNormalizer(const nlohmann::json& step, const std::string& where, int depth,
                            BpeTokenizerJson& tokenizer) {
  if (step.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type_name = ReadStepType(step, where, depth);
  if (!type_name.ok()) return type_name.status();
  if (*type_name == "Sequence") {
    const nlohmann::json* steps = FindField(step, "normalizers");
    if (steps == nullptr || !steps->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".normalizers must be a list"));
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      absl::Status status = ReadNormalizer(
          (*steps)[i], absl::StrCat(where, ".normalizers[", i, "]"), depth + 1, tokenizer);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  static constexpr std::pair<const char*, Normalizer> kNormalizers[] = {
      {"NFC", Normalizer::kNfc},   {"NFD", Normalizer::kNfd},
      {"NFKC", Normalizer::kNfkc}, {"NFKD", Normalizer::kNfkd},
      {"Lowercase", Normalizer::kLowercase},
  };
  for (const auto& [name, normalizer] : kNormalizers) {
    if (*type_name == name) {
      tokenizer.normalizers.push_back(normalizer);
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(
      absl::StrCat(where, ": normalizer type '", *type_name, "' is not supported"));
}

absl::StatusOr<BpeTokenizerJson> ParseTokenizerRoot(const nlohmann::json& root,
                                                    const std::string& source) {
  const nlohmann::json* model = FindField(root, "model");
  if (model == nullptr || !model->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": missing object field 'model'"));
  }
  const nlohmann::json* type = FindField(*model, "type");
  if (type == nullptr || *type != "BPE") {
    return absl::UnimplementedError(absl::StrCat(source, ": model.type must be \"BPE\", got ",
                                                 type == nullptr ? "nothing" : Describe(*type)));
  }

  BpeTokenizerJson tokenizer;
  std::string model_where = absl::StrCat(source, ": model.");
  absl::flat_hash_map<int64_t, std::string> token_by_id;
  if (absl::Status status = ReadVocab(*model, model_where, tokenizer, token_by_id); !status.ok()) {
    return status;
  }
  if (absl::Status status = ReadMerges(*model, model_where, tokenizer); !status.ok()) return status;
  const nlohmann::json* byte_fallback = FindField(*model, "byte_fallback");
  if (byte_fallback != nullptr && !byte_fallback->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_where, "byte_fallback must be true or false"));
  }
  tokenizer.byte_fallback = byte_fallback != nullptr && byte_fallback->get<bool>();
  absl::StatusOr<bool> ignore_merges =
      ReadBool(*model, "ignore_merges", absl::StrCat(source, ": model"), false);
  if (!ignore_merges.ok()) return ignore_merges.status();
  tokenizer.ignore_merges = *ignore_merges;

  if (absl::Status status = ReadAddedTokens(root, source, tokenizer, token_by_id); !status.ok()) {
    return status;
  }
  if (const nlohmann::json* normalizer = FindField(root, "normalizer")) {
    absl::Status status =
        ReadNormalizer(*normalizer, absl::StrCat(source, ": normalizer"), 0, tokenizer);
    if (!status.ok()) return status;
  }
  if (const nlohmann::json* pre_tokenizer = FindField(root, "pre_tokenizer")) {
    absl::Status status =
        ReadPreTokenizer(*pre_tokenizer, absl::StrCat(source, ": pre_tokenizer"), 0, tokenizer);
    if (!status.ok()) return status;
  }
  return tokenizer;
}

}  // namespace

absl::StatusOr<BpeTokenizerJson> ParseBpeTokenizerJson(absl::string_view json_text,
                                                       absl::string_view source) {
  absl::StatusOr<nlohmann::json> root = ParseJson(json_text, source);
  if (!root.ok()) return root.status();
  return ParseTokenizerRoot(*root, std::string(source));
}

absl::StatusOr<BpeTokenizerJson> LoadBpeTokenizerJson(const std::string& directory) {
  std::string path = (std::filesystem::path(directory) / "tokenizer.json").string();
  absl::StatusOr<nlohmann::json> root = ReadJsonFile(path);
  if (!root.ok()) return root.status();
  return ParseTokenizerRoot(*root, path);
}

}  // namespace kvjit::hf
