#include "frontend/tokenizer/HfVocabulary.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <tuple>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/huggingface/JsonFile.h"
#include "frontend/tokenizer/SentencePieceModelFile.h"
#include "runtime/tokenizer/WordSplitter.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"

namespace kvjit::tokenizer {
namespace {

constexpr PreTokenizer kSupportedPreTokenizers[] = {
    PreTokenizer::kGpt2,
    PreTokenizer::kLlama3,
    PreTokenizer::kSmolLm,
    PreTokenizer::kQwen2,
};

// `status` with the file named, keeping its code.
absl::Status WithSource(const std::string& source, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(source, ": ", status.message()));
}

SplitBehavior SplitBehaviorOf(hf::SplitBehavior behavior) {
  switch (behavior) {
    case hf::SplitBehavior::kIsolated:
      return SplitBehavior::kIsolated;
    case hf::SplitBehavior::kRemoved:
      return SplitBehavior::kRemoved;
    case hf::SplitBehavior::kMergedWithPrevious:
      return SplitBehavior::kMergedWithPrevious;
    case hf::SplitBehavior::kMergedWithNext:
      return SplitBehavior::kMergedWithNext;
    case hf::SplitBehavior::kContiguous:
      return SplitBehavior::kContiguous;
  }
  return SplitBehavior::kIsolated;
}

SplitRule SplitRuleOf(const hf::PreTokenizerStep& step) {
  if (step.kind == hf::PreTokenizerStep::Kind::kDigits) {
    // Hugging Face's Digits isolates each numeric character (Unicode
    // categories Nd, Nl and No: \p{N}), or else each run of them.
    return SplitRule{step.individual_digits ? R"(\p{N})" : R"(\p{N}+)"};
  }
  return SplitRule{step.pattern, step.pattern_is_literal, SplitBehaviorOf(step.behavior),
                   step.invert};
}

// The pre-tokenizer of a byte-level file: its steps as the split rules that
// cut text before the byte alphabet is applied, which the ByteLevel step
// does; it must come last.
absl::StatusOr<std::vector<SplitRule>> ByteLevelSplitRulesOf(
    const hf::BpeTokenizerJson& json) {
  std::vector<SplitRule> rules;
  bool byte_level = false;
  for (const hf::PreTokenizerStep& step : json.pre_tokenizer_steps) {
    if (byte_level) {
      return absl::UnimplementedError(absl::StrCat(
          step.where,
          ": steps after ByteLevel would cut text already in the byte "
          "alphabet, which is not supported"));
    }
    switch (step.kind) {
      case hf::PreTokenizerStep::Kind::kSplit:
      case hf::PreTokenizerStep::Kind::kDigits:
        rules.push_back(SplitRuleOf(step));
        break;
      case hf::PreTokenizerStep::Kind::kByteLevel:
        byte_level = true;
        if (step.use_regex) rules.push_back(SplitRule{std::string(Gpt2Pattern())});
        break;
      case hf::PreTokenizerStep::Kind::kMetaspace:
        return absl::UnimplementedError(absl::StrCat(
            step.where, ": Metaspace in a byte-level pre-tokenizer is not supported"));
    }
  }
  return rules;
}

bool HasByteLevelStep(const hf::BpeTokenizerJson& json) {
  for (const hf::PreTokenizerStep& step : json.pre_tokenizer_steps) {
    if (step.kind == hf::PreTokenizerStep::Kind::kByteLevel) return true;
  }
  return false;
}

// The pre-tokenizer and decoder of a file without a ByteLevel step: split
// rules, then Metaspace, which must come last.
absl::Status ReadCharacterPipeline(const hf::BpeTokenizerJson& json, const std::string& source,
                                   Vocabulary& vocabulary) {
  std::vector<SplitRule> rules;
  for (const hf::PreTokenizerStep& step : json.pre_tokenizer_steps) {
    if (vocabulary.metaspace.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          step.where, ": steps after Metaspace are not supported"));
    }
    if (step.kind == hf::PreTokenizerStep::Kind::kMetaspace) {
      vocabulary.metaspace = step.metaspace;
    } else {
      rules.push_back(SplitRuleOf(step));
    }
  }
  if (!rules.empty()) vocabulary.split_rules = std::move(rules);
  if (json.byte_level_decoder) {
    return absl::UnimplementedError(absl::StrCat(
        source, ": decoder: a ByteLevel decoder needs a ByteLevel pre-tokenizer, which "
                "the file lacks"));
  }
  vocabulary.decoder = json.decoder_steps;
  vocabulary.byte_fallback = json.byte_fallback;
  vocabulary.fuse_unk = json.fuse_unk;
  return absl::OkStatus();
}

// The PreTokenizer whose regexes `rules` are, so that such a file runs as the
// GGUF of the same model does; nullopt for any other rules.
std::optional<PreTokenizer> KnownPreTokenizerOf(
    const std::vector<SplitRule>& rules) {
  std::vector<std::string_view> patterns;
  for (const SplitRule& rule : rules) {
    if (rule.pattern_is_literal || rule.invert ||
        rule.behavior != SplitBehavior::kIsolated) {
      return std::nullopt;
    }
    patterns.push_back(rule.pattern);
  }
  for (PreTokenizer candidate : kSupportedPreTokenizers) {
    if (patterns == PreTokenizerPatterns(candidate)) return candidate;
  }
  return std::nullopt;
}

// Lays out model.vocab and added_tokens by id, which must run from 0 without
// gaps.
absl::Status ReadTokens(const hf::BpeTokenizerJson& json,
                        const std::string& source, Vocabulary& vocabulary) {
  struct Token {
    const std::string* text;
    TokenType type;
  };
  absl::flat_hash_map<int64_t, Token> token_by_id;
  token_by_id.reserve(json.vocab.size() + json.added_tokens.size());
  for (const auto& [text, id] : json.vocab) {
    token_by_id.emplace(id, Token{&text, TokenType::kNormal});
  }
  for (const hf::AddedToken& added : json.added_tokens) {
    const TokenType type =
        added.special ? TokenType::kControl : TokenType::kUserDefined;
    auto [token, inserted] =
        token_by_id.try_emplace(added.id, Token{&added.content, type});
    if (!inserted && *token->second.text != added.content) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": added_tokens give id ", added.id, " to '", added.content,
          "', which already belongs to '", *token->second.text, "'"));
    }
    token->second.type = type;
  }

  const size_t token_count = token_by_id.size();
  vocabulary.tokens.reserve(token_count);
  vocabulary.token_types.reserve(token_count);
  for (size_t id = 0; id < token_count; ++id) {
    auto token = token_by_id.find(static_cast<int64_t>(id));
    if (token == token_by_id.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": model.vocab and added_tokens hold ",
                       token_count, " ids, which must be 0 to ",
                       token_count - 1, ", but no token has id ", id));
    }
    vocabulary.tokens.push_back(*token->second.text);
    vocabulary.token_types.push_back(token->second.type);
  }
  return absl::OkStatus();
}

// tokenizer_config.json names a special token as "text", as
// {"content": "text", ...} (a serialized AddedToken), or not at all (null).
absl::StatusOr<int32_t> ReadSpecialTokenId(const nlohmann::json& config,
                                           const char* field,
                                           const std::string& path,
                                           const Vocabulary& vocabulary,
                                           int32_t fallback) {
  const nlohmann::json* value = hf::FindField(config, field);
  if (value == nullptr) return fallback;
  if (value->is_null()) return kNoToken;
  const nlohmann::json* text = value;
  if (value->is_object()) text = hf::FindField(*value, "content");
  if (text == nullptr || !text->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", field,
        " must be a string, an object with a string content, or null; got ",
        hf::Describe(*value)));
  }
  const std::string& token_text = text->get_ref<const std::string&>();
  const auto found =
      std::find(vocabulary.tokens.begin(), vocabulary.tokens.end(), token_text);
  if (found == vocabulary.tokens.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", field, " '", token_text,
                     "' is not a token of tokenizer.json"));
  }
  return static_cast<int32_t>(found - vocabulary.tokens.begin());
}

absl::StatusOr<bool> ReadFlag(const nlohmann::json& config, const char* field,
                              const std::string& path, bool fallback) {
  const nlohmann::json* value = hf::FindField(config, field);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", field, " must be true or false, got ",
                     hf::Describe(*value)));
  }
  return value->get<bool>();
}

absl::Status ApplyTokenizerConfig(const std::string& path,
                                  Vocabulary& vocabulary) {
  KVJIT_ASSIGN_OR_RETURN(nlohmann::json config, hf::ReadJsonFile(path));
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be an object, got ", hf::Describe(config)));
  }
  // A token the config does not name keeps what tokenizer.json's
  // post-processor made it.
  KVJIT_ASSIGN_OR_RETURN(
      vocabulary.bos_id,
      ReadSpecialTokenId(config, "bos_token", path, vocabulary, vocabulary.bos_id));
  KVJIT_ASSIGN_OR_RETURN(
      vocabulary.eos_id,
      ReadSpecialTokenId(config, "eos_token", path, vocabulary, vocabulary.eos_id));
  // Without add_bos_token, BOS is added where the post-processor adds it,
  // and (for files without one) as transformers' LlamaTokenizer
  // (SentencePiece) and Llama 3's tokenizer.json add it.
  const bool adds_bos_by_default =
      vocabulary.bos_id != kNoToken &&
      (vocabulary.add_bos_token || vocabulary.model == TokenizerModel::kSentencePiece ||
       vocabulary.pre_tokenizer == PreTokenizer::kLlama3);
  KVJIT_ASSIGN_OR_RETURN(
      vocabulary.add_bos_token,
      ReadFlag(config, "add_bos_token", path, adds_bos_by_default));
  KVJIT_ASSIGN_OR_RETURN(
      vocabulary.add_eos_token,
      ReadFlag(config, "add_eos_token", path,
               vocabulary.add_eos_token && vocabulary.eos_id != kNoToken));
  if (absl::Status status = ValidateVocabulary(vocabulary); !status.ok()) {
    return WithSource(path, status);
  }
  return absl::OkStatus();
}

// TemplateProcessing's tokens around a single text, as BOS and EOS: one
// token each side at most.
absl::Status ApplyPostProcessor(const hf::BpeTokenizerJson& json, const std::string& source,
                                Vocabulary& vocabulary) {
  if (!json.post_processor.has_value()) return absl::OkStatus();
  for (const auto& [ids, side, id, add] :
       {std::tuple<const std::vector<int64_t>*, const char*, int32_t*, bool*>{
            &json.post_processor->prefix_ids, "before", &vocabulary.bos_id,
            &vocabulary.add_bos_token},
        {&json.post_processor->suffix_ids, "after", &vocabulary.eos_id,
         &vocabulary.add_eos_token}}) {
    if (ids->size() > 1) {
      return absl::UnimplementedError(absl::StrCat(
          source, ": post_processor: TemplateProcessing puts ", ids->size(), " tokens ", side,
          " the text; one (BOS before, EOS after) is supported"));
    }
    if (ids->empty()) continue;
    // Checked before the cast to 32 bits, which would wrap an id such as
    // 4294967297 onto token 1.
    if (ids->front() >= static_cast<int64_t>(vocabulary.tokens.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": post_processor: TemplateProcessing puts token id ", ids->front(), " ",
          side, " the text, outside the vocabulary of ", vocabulary.tokens.size(), " tokens"));
    }
    *id = static_cast<int32_t>(ids->front());
    *add = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocabulary> VocabularyFromHfTokenizerJson(
    const hf::BpeTokenizerJson& json, const std::string& source) {
  Vocabulary vocabulary;
  if (HasByteLevelStep(json)) {
    vocabulary.model = TokenizerModel::kByteLevelBpe;
    KVJIT_ASSIGN_OR_RETURN(std::vector<SplitRule> rules, ByteLevelSplitRulesOf(json));
    if (std::optional<PreTokenizer> known = KnownPreTokenizerOf(rules)) {
      vocabulary.pre_tokenizer = *known;
    } else {
      vocabulary.split_rules = std::move(rules);
    }
  } else {
    vocabulary.model = TokenizerModel::kCharacterBpe;
    KVJIT_RETURN_IF_ERROR(ReadCharacterPipeline(json, source, vocabulary));
  }
  vocabulary.normalizer = json.normalizers;
  vocabulary.ignore_merges = json.ignore_merges;
  KVJIT_RETURN_IF_ERROR(ReadTokens(json, source, vocabulary));
  vocabulary.merges = json.merges;
  for (const hf::AddedToken& added : json.added_tokens) {
    if (added.lstrip || added.rstrip || added.single_word || added.normalized) {
      vocabulary.added_token_options.push_back(
          AddedTokenOptions{static_cast<int32_t>(added.id), added.lstrip, added.rstrip,
                            added.single_word, added.normalized});
    }
  }
  if (!json.unk_token.empty()) {
    vocabulary.unknown_id = static_cast<int32_t>(json.vocab.at(json.unk_token));
  }
  KVJIT_RETURN_IF_ERROR(ApplyPostProcessor(json, source, vocabulary));
  if (absl::Status status = ValidateVocabulary(vocabulary); !status.ok()) {
    return WithSource(source, status);
  }
  return vocabulary;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromHfDirectory(
    const std::string& directory) {
  const std::filesystem::path directory_path(directory);
  const std::filesystem::path json_path = directory_path / "tokenizer.json";
  const std::filesystem::path model_path = directory_path / "tokenizer.model";
  std::error_code presence_error;
  Vocabulary vocabulary;
  // A directory with a SentencePiece model and no tokenizer.json (Llama 2,
  // Mistral and Gemma checkpoints as first published) tokenizes with it.
  if (!std::filesystem::exists(json_path, presence_error) && !presence_error &&
      std::filesystem::exists(model_path, presence_error)) {
    KVJIT_ASSIGN_OR_RETURN(vocabulary,
                           ReadVocabularyFromSentencePieceModel(model_path.string()));
  } else {
    KVJIT_ASSIGN_OR_RETURN(hf::BpeTokenizerJson json, hf::LoadBpeTokenizerJson(directory));
    KVJIT_ASSIGN_OR_RETURN(vocabulary,
                           VocabularyFromHfTokenizerJson(json, json_path.string()));
  }
  const std::filesystem::path config_path =
      directory_path / "tokenizer_config.json";
  // Where the file's presence cannot be told, reading it says why.
  if (std::filesystem::exists(config_path, presence_error) || presence_error) {
    KVJIT_RETURN_IF_ERROR(
        ApplyTokenizerConfig(config_path.string(), vocabulary));
  }
  return CreateTokenizer(std::move(vocabulary));
}

}  // namespace kvjit::tokenizer
