#include "frontend/huggingface/HfTokenizerJson.h"

#include <filesystem>
#include <tuple>
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
    for (auto [flag, value, fallback] :
         {std::tuple<const char*, bool*, bool>{"lstrip", &token.lstrip, false},
          {"rstrip", &token.rstrip, false},
          {"single_word", &token.single_word, false},
          {"normalized", &token.normalized, !token.special}}) {
      absl::StatusOr<bool> read = ReadBool(entry, flag, where, fallback);
      if (!read.ok()) return read.status();
      *value = *read;
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

// A Sequence step's members, under `list_field`, each read by `read` with
// its JSON path, one level deeper.
using StepReader = absl::Status (*)(const nlohmann::json& step, const std::string& where,
                                    int depth, BpeTokenizerJson& tokenizer);
absl::Status ReadSequence(const nlohmann::json& step, const char* list_field,
                          const std::string& where, int depth, BpeTokenizerJson& tokenizer,
                          StepReader read) {
  const nlohmann::json* steps = FindField(step, list_field);
  if (steps == nullptr || !steps->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", list_field, " must be a list"));
  }
  for (size_t i = 0; i < steps->size(); ++i) {
    absl::Status status =
        read((*steps)[i], absl::StrCat(where, ".", list_field, "[", i, "]"), depth + 1, tokenizer);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadString(const nlohmann::json& step, const char* field,
                                       const std::string& where) {
  const nlohmann::json* value = FindField(step, field);
  if (value == nullptr || !value->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".", field, " must be a string, got ",
        value == nullptr ? "nothing" : Describe(*value)));
  }
  return value->get<std::string>();
}

absl::StatusOr<uint32_t> ReadCount(const nlohmann::json& step, const char* field,
                                   const std::string& where) {
  const nlohmann::json* value = FindField(step, field);
  if (value == nullptr) return 0u;
  absl::StatusOr<int64_t> count = NonNegativeInteger(*value, absl::StrCat(where, ".", field));
  if (!count.ok()) return count.status();
  if (*count > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", field, " is too large"));
  }
  return static_cast<uint32_t>(*count);
}

// A pattern object: {"String": "..."} (literal) or {"Regex": "..."}.
absl::StatusOr<std::pair<std::string, bool>> ReadPattern(const nlohmann::json& step,
                                                         const std::string& where) {
  const nlohmann::json* pattern = FindField(step, "pattern");
  const nlohmann::json* regex = pattern == nullptr ? nullptr : FindField(*pattern, "Regex");
  const nlohmann::json* literal = pattern == nullptr ? nullptr : FindField(*pattern, "String");
  if (regex != nullptr && regex->is_string()) return std::make_pair(regex->get<std::string>(), true);
  if (literal != nullptr && literal->is_string()) {
    return std::make_pair(literal->get<std::string>(), false);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, ".pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}"));
}

// Metaspace's options, in a pre-tokenizer or a decoder. Older files write
// add_prefix_space instead of prepend_scheme.
absl::StatusOr<tokenizer::Metaspace> ReadMetaspace(const nlohmann::json& step,
                                                   const std::string& where) {
  tokenizer::Metaspace metaspace;
  absl::StatusOr<std::string> replacement = ReadString(step, "replacement", where);
  if (!replacement.ok()) return replacement.status();
  if (replacement->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".replacement must not be empty"));
  }
  metaspace.replacement = *std::move(replacement);
  const nlohmann::json* scheme = FindField(step, "prepend_scheme");
  if (scheme != nullptr && !scheme->is_null()) {
    static constexpr std::pair<const char*, tokenizer::PrependScheme> kSchemes[] = {
        {"first", tokenizer::PrependScheme::kFirst},
        {"always", tokenizer::PrependScheme::kAlways},
        {"never", tokenizer::PrependScheme::kNever},
    };
    bool known = false;
    for (const auto& [name, value] : kSchemes) {
      if (*scheme == name) {
        metaspace.prepend_scheme = value;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".prepend_scheme must be first, always or never, got ", Describe(*scheme)));
    }
  } else {
    absl::StatusOr<bool> add_prefix_space = ReadBool(step, "add_prefix_space", where, true);
    if (!add_prefix_space.ok()) return add_prefix_space.status();
    metaspace.prepend_scheme =
        *add_prefix_space ? tokenizer::PrependScheme::kAlways : tokenizer::PrependScheme::kNever;
  }
  absl::StatusOr<bool> split = ReadBool(step, "split", where, true);
  if (!split.ok()) return split.status();
  metaspace.split = *split;
  return metaspace;
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
  absl::StatusOr<std::pair<std::string, bool>> pattern = ReadPattern(step, where);
  if (!pattern.ok()) return pattern.status();
  split.pattern = std::move(pattern->first);
  split.pattern_is_literal = !pattern->second;
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
    return ReadSequence(step, "pretokenizers", where, depth, tokenizer, ReadPreTokenizer);
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
  } else if (*type_name == "Metaspace") {
    parsed.kind = PreTokenizerStep::Kind::kMetaspace;
    absl::StatusOr<tokenizer::Metaspace> metaspace = ReadMetaspace(step, where);
    if (!metaspace.ok()) return metaspace.status();
    parsed.metaspace = *std::move(metaspace);
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
    return ReadSequence(step, "normalizers", where, depth, tokenizer, ReadNormalizer);
  }
  using tokenizer::NormalizerKind;
  static constexpr std::pair<const char*, NormalizerKind> kForms[] = {
      {"NFC", NormalizerKind::kNfc},   {"NFD", NormalizerKind::kNfd},
      {"NFKC", NormalizerKind::kNfkc}, {"NFKD", NormalizerKind::kNfkd},
      {"Lowercase", NormalizerKind::kLowercase},
  };
  tokenizer::NormalizerStep parsed;
  bool known = false;
  for (const auto& [name, kind] : kForms) {
    if (*type_name == name) {
      parsed.kind = kind;
      known = true;
    }
  }
  if (*type_name == "Prepend") {
    parsed.kind = NormalizerKind::kPrepend;
    absl::StatusOr<std::string> prepend = ReadString(step, "prepend", where);
    if (!prepend.ok()) return prepend.status();
    parsed.content = *std::move(prepend);
    known = true;
  } else if (*type_name == "Replace") {
    parsed.kind = NormalizerKind::kReplace;
    absl::StatusOr<std::pair<std::string, bool>> pattern = ReadPattern(step, where);
    if (!pattern.ok()) return pattern.status();
    std::tie(parsed.pattern, parsed.pattern_is_regex) = *std::move(pattern);
    absl::StatusOr<std::string> content = ReadString(step, "content", where);
    if (!content.ok()) return content.status();
    parsed.content = *std::move(content);
    known = true;
  } else if (*type_name == "Strip") {
    parsed.kind = NormalizerKind::kStrip;
    for (auto [field, value] : {std::pair<const char*, bool*>{"strip_left", &parsed.strip_left},
                                {"strip_right", &parsed.strip_right}}) {
      absl::StatusOr<bool> read = ReadBool(step, field, where, true);
      if (!read.ok()) return read.status();
      *value = *read;
    }
    known = true;
  }
  if (!known) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": normalizer type '", *type_name, "' is not supported"));
  }
  tokenizer.normalizers.push_back(std::move(parsed));
  return absl::OkStatus();
}

absl::Status ReadDecoder(const nlohmann::json& step, const std::string& where, int depth,
                         BpeTokenizerJson& tokenizer) {
  if (step.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type_name = ReadStepType(step, where, depth);
  if (!type_name.ok()) return type_name.status();
  using tokenizer::DecoderKind;
  tokenizer::DecoderStep parsed;
  if (*type_name == "Sequence") {
    return ReadSequence(step, "decoders", where, depth, tokenizer, ReadDecoder);
  }
  if (*type_name == "ByteLevel") {
    tokenizer.byte_level_decoder = true;
    return absl::OkStatus();
  }
  if (*type_name == "Replace") {
    parsed.kind = DecoderKind::kReplace;
    absl::StatusOr<std::pair<std::string, bool>> pattern = ReadPattern(step, where);
    if (!pattern.ok()) return pattern.status();
    if (pattern->second) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": a Replace decoder with a Regex pattern is not supported"));
    }
    parsed.pattern = std::move(pattern->first);
    absl::StatusOr<std::string> content = ReadString(step, "content", where);
    if (!content.ok()) return content.status();
    parsed.content = *std::move(content);
  } else if (*type_name == "ByteFallback") {
    parsed.kind = DecoderKind::kByteFallback;
  } else if (*type_name == "Fuse") {
    parsed.kind = DecoderKind::kFuse;
  } else if (*type_name == "Strip") {
    parsed.kind = DecoderKind::kStrip;
    absl::StatusOr<std::string> content = ReadString(step, "content", where);
    if (!content.ok()) return content.status();
    parsed.content = *std::move(content);
    absl::StatusOr<uint32_t> start = ReadCount(step, "start", where);
    if (!start.ok()) return start.status();
    absl::StatusOr<uint32_t> stop = ReadCount(step, "stop", where);
    if (!stop.ok()) return stop.status();
    parsed.strip_start = *start;
    parsed.strip_stop = *stop;
  } else if (*type_name == "Metaspace") {
    parsed.kind = DecoderKind::kMetaspace;
    absl::StatusOr<tokenizer::Metaspace> metaspace = ReadMetaspace(step, where);
    if (!metaspace.ok()) return metaspace.status();
    parsed.pattern = metaspace->replacement;
    parsed.prepend_scheme = metaspace->prepend_scheme;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(where, ": decoder type '", *type_name, "' is not supported"));
  }
  tokenizer.decoder_steps.push_back(std::move(parsed));
  return absl::OkStatus();
}

// The ids of the special token named `name` in a TemplateProcessing's
// special_tokens.
absl::StatusOr<std::vector<int64_t>> TemplateTokenIds(const nlohmann::json& step,
                                                      const std::string& name,
                                                      const std::string& where) {
  const nlohmann::json* special_tokens = FindField(step, "special_tokens");
  const nlohmann::json* entry =
      special_tokens == nullptr ? nullptr : FindField(*special_tokens, name);
  const nlohmann::json* ids = entry == nullptr ? nullptr : FindField(*entry, "ids");
  if (ids == nullptr || !ids->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".special_tokens['", name, "'].ids must be a list of ids"));
  }
  std::vector<int64_t> result;
  for (size_t i = 0; i < ids->size(); ++i) {
    absl::StatusOr<int64_t> id = NonNegativeInteger(
        (*ids)[i], absl::StrCat(where, ".special_tokens['", name, "'].ids[", i, "]"));
    if (!id.ok()) return id.status();
    result.push_back(*id);
  }
  return result;
}

absl::Status ReadTemplateProcessing(const nlohmann::json& step, const std::string& where,
                                    BpeTokenizerJson& tokenizer) {
  const nlohmann::json* single = FindField(step, "single");
  if (single == nullptr || !single->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".single must be a list"));
  }
  PostProcessorTemplate processor;
  bool seen_text = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string piece_where = absl::StrCat(where, ".single[", i, "]");
    const nlohmann::json& piece = (*single)[i];
    const nlohmann::json* special = FindField(piece, "SpecialToken");
    const nlohmann::json* sequence = FindField(piece, "Sequence");
    if (sequence != nullptr) {
      if (seen_text) {
        return absl::UnimplementedError(
            absl::StrCat(piece_where, ": a template with the text twice is not supported"));
      }
      seen_text = true;
      continue;
    }
    if (special == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(piece_where, " must be a SpecialToken or a Sequence"));
    }
    absl::StatusOr<std::string> name = ReadString(*special, "id", piece_where + ".SpecialToken");
    if (!name.ok()) return name.status();
    absl::StatusOr<std::vector<int64_t>> ids = TemplateTokenIds(step, *name, where);
    if (!ids.ok()) return ids.status();
    std::vector<int64_t>& side = seen_text ? processor.suffix_ids : processor.prefix_ids;
    side.insert(side.end(), ids->begin(), ids->end());
  }
  if (!seen_text) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".single has no Sequence for the text"));
  }
  tokenizer.post_processor = std::move(processor);
  return absl::OkStatus();
}

absl::Status ReadPostProcessor(const nlohmann::json& step, const std::string& where, int depth,
                               BpeTokenizerJson& tokenizer) {
  if (step.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type_name = ReadStepType(step, where, depth);
  if (!type_name.ok()) return type_name.status();
  if (*type_name == "Sequence") {
    return ReadSequence(step, "processors", where, depth, tokenizer, ReadPostProcessor);
  }
  // ByteLevel's post-processing trims offsets only, which ids do not carry.
  if (*type_name == "ByteLevel") return absl::OkStatus();
  if (*type_name == "TemplateProcessing") {
    if (tokenizer.post_processor.has_value()) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": a second TemplateProcessing is not supported"));
    }
    return ReadTemplateProcessing(step, where, tokenizer);
  }
  return absl::UnimplementedError(
      absl::StrCat(where, ": post-processor type '", *type_name, "' is not supported"));
}

// Model options that would change the ids and that no published SentencePiece-
// or byte-level file sets.
absl::Status CheckModelOptions(const nlohmann::json& model, const std::string& where) {
  const nlohmann::json* dropout = FindField(model, "dropout");
  if (dropout != nullptr && !dropout->is_null() && *dropout != 0 && *dropout != 0.0) {
    return absl::UnimplementedError(absl::StrCat(
        where, ".dropout ", Describe(*dropout),
        " is not supported: BPE dropout samples a different split on every call"));
  }
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const nlohmann::json* value = FindField(model, field);
    if (value != nullptr && !value->is_null() && *value != "") {
      return absl::UnimplementedError(
          absl::StrCat(where, ".", field, " ", Describe(*value), " is not supported"));
    }
  }
  return absl::OkStatus();
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
  const std::string model_path = absl::StrCat(source, ": model");
  absl::StatusOr<bool> ignore_merges = ReadBool(*model, "ignore_merges", model_path, false);
  if (!ignore_merges.ok()) return ignore_merges.status();
  tokenizer.ignore_merges = *ignore_merges;
  absl::StatusOr<bool> fuse_unk = ReadBool(*model, "fuse_unk", model_path, false);
  if (!fuse_unk.ok()) return fuse_unk.status();
  tokenizer.fuse_unk = *fuse_unk;
  if (absl::Status status = CheckModelOptions(*model, model_path); !status.ok()) return status;
  if (const nlohmann::json* unk = FindField(*model, "unk_token"); unk != nullptr && !unk->is_null()) {
    if (!unk->is_string() || !tokenizer.vocab.contains(unk->get<std::string>())) {
      return absl::InvalidArgumentError(absl::StrCat(
          model_path, ".unk_token must be null or a token of the vocab, got ", Describe(*unk)));
    }
    tokenizer.unk_token = unk->get<std::string>();
  }

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
  if (const nlohmann::json* decoder = FindField(root, "decoder")) {
    absl::Status status = ReadDecoder(*decoder, absl::StrCat(source, ": decoder"), 0, tokenizer);
    if (!status.ok()) return status;
  }
  if (const nlohmann::json* post_processor = FindField(root, "post_processor")) {
    absl::Status status = ReadPostProcessor(
        *post_processor, absl::StrCat(source, ": post_processor"), 0, tokenizer);
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
