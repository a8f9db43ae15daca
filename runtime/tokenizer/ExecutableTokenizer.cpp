#include "runtime/tokenizer/ExecutableTokenizer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::tokenizer {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// The names ParsePreTokenizer reads back.
const char* PreTokenizerName(PreTokenizer pre_tokenizer) {
  switch (pre_tokenizer) {
    case PreTokenizer::kGpt2: return "gpt2";
    case PreTokenizer::kLlama3: return "llama3";
    case PreTokenizer::kSmolLm: return "smollm";
    case PreTokenizer::kQwen2: return "qwen2";
  }
  return "gpt2";
}

kvx::TokenizerKind KindOf(TokenizerModel model) {
  switch (model) {
    case TokenizerModel::kSentencePiece: return kvx::TokenizerKind::SentencePiece;
    case TokenizerModel::kByteLevelBpe: return kvx::TokenizerKind::ByteLevelBpe;
    case TokenizerModel::kCharacterBpe: return kvx::TokenizerKind::CharacterBpe;
  }
  return kvx::TokenizerKind::SentencePiece;
}

absl::StatusOr<TokenizerModel> ModelOf(kvx::TokenizerKind kind) {
  switch (kind) {
    case kvx::TokenizerKind::SentencePiece: return TokenizerModel::kSentencePiece;
    case kvx::TokenizerKind::ByteLevelBpe: return TokenizerModel::kByteLevelBpe;
    case kvx::TokenizerKind::CharacterBpe: return TokenizerModel::kCharacterBpe;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the executable's tokenizer is of kind ", static_cast<int>(kind),
      ", which this runtime does not know; recompile the model"));
}

// The enums below are listed in the same order on both sides, so a cast
// carries them; the static_asserts keep the orders together.
static_assert(static_cast<int>(kvx::NormalizerKind::Strip) ==
              static_cast<int>(NormalizerKind::kStrip));
static_assert(static_cast<int>(kvx::SplitBehavior::Contiguous) ==
              static_cast<int>(SplitBehavior::kContiguous));
static_assert(static_cast<int>(kvx::PrependScheme::Never) ==
              static_cast<int>(PrependScheme::kNever));
static_assert(static_cast<int>(kvx::DecoderKind::Metaspace) ==
              static_cast<int>(DecoderKind::kMetaspace));

std::string StringOf(const flatbuffers::String* text) {
  return text == nullptr ? std::string() : text->str();
}

}  // namespace

Offset<kvx::Tokenizer> WriteTokenizerTable(FlatBufferBuilder& builder,
                                           const Vocabulary& vocabulary,
                                           const std::string& chat_template) {
  std::vector<Offset<flatbuffers::String>> tokens;
  tokens.reserve(vocabulary.tokens.size());
  for (const std::string& token : vocabulary.tokens) tokens.push_back(builder.CreateString(token));
  std::vector<int32_t> token_types;
  token_types.reserve(vocabulary.token_types.size());
  for (TokenType type : vocabulary.token_types) token_types.push_back(static_cast<int32_t>(type));
  std::vector<Offset<flatbuffers::String>> merge_lefts;
  std::vector<Offset<flatbuffers::String>> merge_rights;
  merge_lefts.reserve(vocabulary.merges.size());
  merge_rights.reserve(vocabulary.merges.size());
  for (const auto& [left, right] : vocabulary.merges) {
    merge_lefts.push_back(builder.CreateString(left));
    merge_rights.push_back(builder.CreateString(right));
  }
  // Strings go in with their length, not as C strings: a tokenizer.json may
  // spell U+0000 ("\u0000") in a pattern, a replacement or a content, which
  // c_str() would cut short.
  std::vector<Offset<kvx::NormalizerStep>> normalizer;
  for (const NormalizerStep& step : vocabulary.normalizer) {
    normalizer.push_back(kvx::CreateNormalizerStep(
        builder, static_cast<kvx::NormalizerKind>(step.kind), builder.CreateString(step.pattern),
        step.pattern_is_regex, builder.CreateString(step.content), step.strip_left,
        step.strip_right));
  }
  std::vector<Offset<kvx::SplitRule>> split_rules;
  if (vocabulary.split_rules.has_value()) {
    for (const SplitRule& rule : *vocabulary.split_rules) {
      split_rules.push_back(kvx::CreateSplitRule(
          builder, builder.CreateString(rule.pattern), rule.pattern_is_literal,
          static_cast<kvx::SplitBehavior>(rule.behavior), rule.invert));
    }
  }
  Offset<kvx::Metaspace> metaspace;
  if (vocabulary.metaspace.has_value()) {
    metaspace = kvx::CreateMetaspace(
        builder, builder.CreateString(vocabulary.metaspace->replacement),
        static_cast<kvx::PrependScheme>(vocabulary.metaspace->prepend_scheme),
        vocabulary.metaspace->split);
  }
  std::vector<Offset<kvx::DecoderStep>> decoder;
  for (const DecoderStep& step : vocabulary.decoder) {
    decoder.push_back(kvx::CreateDecoderStep(
        builder, static_cast<kvx::DecoderKind>(step.kind), builder.CreateString(step.pattern),
        builder.CreateString(step.content), step.strip_start, step.strip_stop,
        static_cast<kvx::PrependScheme>(step.prepend_scheme)));
  }
  std::vector<Offset<kvx::AddedTokenOptions>> added_token_options;
  for (const AddedTokenOptions& options : vocabulary.added_token_options) {
    added_token_options.push_back(kvx::CreateAddedTokenOptions(
        builder, options.id, options.lstrip, options.rstrip, options.single_word,
        options.normalized));
  }
  const bool byte_level = vocabulary.model == TokenizerModel::kByteLevelBpe;
  const auto pre_tokenizer =
      byte_level ? builder.CreateString(PreTokenizerName(vocabulary.pre_tokenizer))
                 : Offset<flatbuffers::String>();
  const auto tokens_vector = builder.CreateVector(tokens);
  const auto scores_vector = builder.CreateVector(vocabulary.scores);
  const auto token_types_vector = builder.CreateVector(token_types);
  const auto merge_lefts_vector = builder.CreateVector(merge_lefts);
  const auto merge_rights_vector = builder.CreateVector(merge_rights);
  const auto chat_template_string = builder.CreateString(chat_template);
  const auto normalizer_vector = builder.CreateVector(normalizer);
  const auto split_rules_vector = vocabulary.split_rules.has_value()
                                      ? builder.CreateVector(split_rules)
                                      : Offset<flatbuffers::Vector<Offset<kvx::SplitRule>>>();
  const auto decoder_vector = builder.CreateVector(decoder);
  const auto added_token_options_vector = builder.CreateVector(added_token_options);
  return kvx::CreateTokenizer(
      builder, KindOf(vocabulary.model), pre_tokenizer, tokens_vector, scores_vector,
      token_types_vector, vocabulary.bos_id, vocabulary.eos_id,
      vocabulary.end_of_turn_id, vocabulary.unknown_id, vocabulary.padding_id,
      vocabulary.add_bos_token, vocabulary.add_eos_token, vocabulary.add_space_prefix,
      chat_template_string, vocabulary.space_prefix_once, normalizer_vector,
      split_rules_vector, metaspace, decoder_vector, added_token_options_vector,
      vocabulary.ignore_merges, vocabulary.byte_fallback, vocabulary.fuse_unk,
      merge_lefts_vector, merge_rights_vector);
}

absl::StatusOr<Vocabulary> VocabularyFromTable(const kvx::Tokenizer& table) {
  if (table.tokens() == nullptr) {
    return absl::InvalidArgumentError("the executable's tokenizer has no tokens");
  }
  Vocabulary vocabulary;
  KVJIT_ASSIGN_OR_RETURN(vocabulary.model, ModelOf(table.kind()));
  if (table.pre_tokenizer() != nullptr && table.pre_tokenizer()->size() > 0) {
    KVJIT_ASSIGN_OR_RETURN(vocabulary.pre_tokenizer,
                           ParsePreTokenizer(table.pre_tokenizer()->string_view()));
  }
  for (const flatbuffers::String* token : *table.tokens()) vocabulary.tokens.push_back(token->str());
  if (table.token_types() != nullptr) {
    for (int32_t type : *table.token_types()) {
      vocabulary.token_types.push_back(static_cast<TokenType>(type));
    }
  }
  if (table.scores() != nullptr) {
    vocabulary.scores.assign(table.scores()->begin(), table.scores()->end());
  }
  if (table.merge_lefts() != nullptr || table.merge_rights() != nullptr) {
    if (table.merge_lefts() == nullptr || table.merge_rights() == nullptr ||
        table.merge_lefts()->size() != table.merge_rights()->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the executable's tokenizer has ",
          table.merge_lefts() == nullptr ? 0 : table.merge_lefts()->size(), " left and ",
          table.merge_rights() == nullptr ? 0 : table.merge_rights()->size(),
          " right merge pieces; they must pair up"));
    }
    vocabulary.merges.reserve(table.merge_lefts()->size());
    for (flatbuffers::uoffset_t i = 0; i < table.merge_lefts()->size(); ++i) {
      vocabulary.merges.emplace_back(table.merge_lefts()->Get(i)->str(),
                                     table.merge_rights()->Get(i)->str());
    }
  }
  if (table.normalizer() != nullptr) {
    for (const kvx::NormalizerStep* step : *table.normalizer()) {
      vocabulary.normalizer.push_back(NormalizerStep{
          static_cast<NormalizerKind>(step->kind()), StringOf(step->pattern()),
          step->pattern_is_regex(), StringOf(step->content()), step->strip_left(),
          step->strip_right()});
    }
  }
  if (table.split_rules() != nullptr) {
    std::vector<SplitRule> rules;
    for (const kvx::SplitRule* rule : *table.split_rules()) {
      rules.push_back(SplitRule{StringOf(rule->pattern()), rule->pattern_is_literal(),
                                static_cast<SplitBehavior>(rule->behavior()), rule->invert()});
    }
    vocabulary.split_rules = std::move(rules);
  }
  if (const kvx::Metaspace* metaspace = table.metaspace()) {
    vocabulary.metaspace = Metaspace{StringOf(metaspace->replacement()),
                                     static_cast<PrependScheme>(metaspace->prepend_scheme()),
                                     metaspace->split()};
  }
  if (table.decoder() != nullptr) {
    for (const kvx::DecoderStep* step : *table.decoder()) {
      vocabulary.decoder.push_back(DecoderStep{
          static_cast<DecoderKind>(step->kind()), StringOf(step->pattern()),
          StringOf(step->content()), step->strip_start(), step->strip_stop(),
          static_cast<PrependScheme>(step->prepend_scheme())});
    }
  }
  if (table.added_token_options() != nullptr) {
    for (const kvx::AddedTokenOptions* options : *table.added_token_options()) {
      vocabulary.added_token_options.push_back(
          AddedTokenOptions{options->id(), options->lstrip(), options->rstrip(),
                            options->single_word(), options->normalized()});
    }
  }
  vocabulary.bos_id = table.bos_id();
  vocabulary.eos_id = table.eos_id();
  vocabulary.end_of_turn_id = table.eot_id();
  vocabulary.unknown_id = table.unk_id();
  vocabulary.padding_id = table.pad_id();
  vocabulary.add_bos_token = table.add_bos();
  vocabulary.add_eos_token = table.add_eos();
  vocabulary.add_space_prefix = table.add_space_prefix();
  vocabulary.space_prefix_once = table.space_prefix_once();
  vocabulary.ignore_merges = table.ignore_merges();
  vocabulary.byte_fallback = table.byte_fallback();
  vocabulary.fuse_unk = table.fuse_unk();
  return vocabulary;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromExecutable(
    const kvx::Executable& executable) {
  const kvx::Tokenizer* table = executable.tokenizer();
  if (table == nullptr) return absl::InvalidArgumentError("the executable carries no tokenizer");
  KVJIT_ASSIGN_OR_RETURN(Vocabulary vocabulary, VocabularyFromTable(*table));
  return CreateTokenizer(std::move(vocabulary));
}

}  // namespace kvjit::tokenizer
