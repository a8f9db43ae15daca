#ifndef KVJIT_RUNTIME_TOKENIZER_VOCABULARY_H
#define KVJIT_RUNTIME_TOKENIZER_VOCABULARY_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvjit::tokenizer {

// The values are those of GGUF's tokenizer.ggml.token_type.
enum class TokenType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerModel {
  kSentencePiece,  // GGUF "llama": score-ordered merges over characters.
  kByteLevelBpe,   // GGUF "gpt2": ranked merges over GPT-2's byte alphabet.
  // tokenizer.json's BPE model without a ByteLevel step (the files of
  // SentencePiece-born families): ranked merges over Unicode characters,
  // characters outside the vocabulary spelled with <0xXX> tokens.
  kCharacterBpe,
};

// The regexes that cut text into words before byte-level BPE merges them.
enum class PreTokenizer {
  kGpt2,
  kLlama3,
  kSmolLm,
  kQwen2,
};

// What a split rule makes of the text its pattern matches, as Hugging Face's
// SplitDelimiterBehavior does.
enum class SplitBehavior {
  kIsolated,           // a piece of its own
  kRemoved,            // dropped
  kMergedWithPrevious, // joined to the piece before it
  kMergedWithNext,     // joined to the piece after it
  kContiguous,         // adjacent matches joined into one piece
};

// One step of cutting text into words: every piece the steps before left is
// cut where `pattern` matches.
struct SplitRule {
  // A PCRE2 regex as tokenizer.json writes it, or literal text.
  std::string pattern;
  bool pattern_is_literal = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  // The text between matches is what `behavior` applies to instead.
  bool invert = false;

  bool operator==(const SplitRule& other) const {
    return pattern == other.pattern &&
           pattern_is_literal == other.pattern_is_literal &&
           behavior == other.behavior && invert == other.invert;
  }
};

// One step of tokenizer.json's normalizer, which rewrites each stretch of
// text between added tokens before it is cut into words.
enum class NormalizerKind {
  kNfc, kNfd, kNfkc, kNfkd,  // Unicode normalization forms
  kLowercase,
  kPrepend,  // `content` before a non-empty text
  kReplace,  // every match of `pattern` becomes `content`
  kStrip,    // Unicode whitespace off the start and/or end
};

struct NormalizerStep {
  NormalizerKind kind = NormalizerKind::kNfc;
  // kReplace: literal text, or a PCRE2 regex where pattern_is_regex.
  std::string pattern;
  bool pattern_is_regex = false;
  std::string content;
  bool strip_left = false;
  bool strip_right = false;

  bool operator==(const NormalizerStep& other) const {
    return kind == other.kind && pattern == other.pattern &&
           pattern_is_regex == other.pattern_is_regex &&
           content == other.content && strip_left == other.strip_left &&
           strip_right == other.strip_right;
  }
};

// Where Metaspace puts its replacement before a piece of text.
enum class PrependScheme {
  kFirst,   // before the text that starts the input only
  kAlways,  // before every piece
  kNever,
};

// tokenizer.json's Metaspace pre-tokenizer: spaces become `replacement`
// (U+2581), which is also prepended as `prepend_scheme` says to a piece that
// does not already start with it; with `split`, each replacement starts a
// new word.
struct Metaspace {
  std::string replacement = "\xE2\x96\x81";  // U+2581
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};

// One step of tokenizer.json's decoder, which turns the tokens of a text
// back into it.
enum class DecoderKind {
  kReplace,       // in each token, `pattern` (literal) becomes `content`
  kByteFallback,  // <0xXX> tokens become their bytes; bytes that are not
                  // UTF-8 become U+FFFD each
  kFuse,          // the tokens become one
  kStrip,         // up to strip_start / strip_stop `content` characters off
                  // each token's start / end
  kMetaspace,     // U+2581 becomes a space, dropped in the first token
                  // unless prepend_scheme is kNever
};

struct DecoderStep {
  DecoderKind kind = DecoderKind::kFuse;
  std::string pattern;
  std::string content;
  uint32_t strip_start = 0;
  uint32_t strip_stop = 0;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
};

// How an added token of tokenizer.json is found in text. Tokens not listed
// match exactly where they occur, in the text as given.
struct AddedTokenOptions {
  int32_t id = 0;
  bool lstrip = false;       // takes the whitespace before it too
  bool rstrip = false;       // takes the whitespace after it too
  bool single_word = false;  // not where a word character touches it
  bool normalized = false;   // found in the normalized text instead
};

// Marks a special token (BOS, EOS, ...) that the vocabulary lacks.
inline constexpr int32_t kNoToken = -1;

// Everything either tokenizer is built from, independent of the file format.
struct Vocabulary {
  TokenizerModel model = TokenizerModel::kSentencePiece;
  // Used by byte-level BPE only.
  PreTokenizer pre_tokenizer = PreTokenizer::kGpt2;
  // Where set (by a tokenizer.json whose pre-tokenizer is none of
  // PreTokenizer's), these rules cut text instead of pre_tokenizer's.
  std::optional<std::vector<SplitRule>> split_rules;
  // Character BPE only: cuts the words split_rules left, after them.
  std::optional<Metaspace> metaspace;
  // BPE only: applied in order to the text between added tokens before it
  // is cut.
  std::vector<NormalizerStep> normalizer;
  // Character BPE only: turns tokens back into text; empty joins the tokens
  // with spaces, as tokenizer.json without a decoder does.
  std::vector<DecoderStep> decoder;
  std::vector<AddedTokenOptions> added_token_options;
  // BPE only: a word that is itself a token is taken whole, even where the
  // merges would not build it (Llama 3; tokenizer.json's
  // model.ignore_merges).
  bool ignore_merges = false;
  // Character BPE only: a character outside the vocabulary becomes its
  // <0xXX> byte tokens where all exist (else the unknown token), and
  // neighbouring unknown characters become one unknown token with fuse_unk.
  bool byte_fallback = false;
  bool fuse_unk = false;

  std::vector<std::string> tokens;
  // Same length as `tokens`.
  std::vector<TokenType> token_types;
  // SentencePiece merge priorities, same length as `tokens`; empty means all
  // equal.
  std::vector<float> scores;
  // Byte-level BPE merges, highest priority first.
  std::vector<std::pair<std::string, std::string>> merges;

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unknown_id = kNoToken;
  int32_t padding_id = kNoToken;
  // End-of-turn token of chat models, when it differs from EOS.
  int32_t end_of_turn_id = kNoToken;

  bool add_bos_token = false;
  bool add_eos_token = false;
  // SentencePiece only: prefix the text with a space, as its
  // add_dummy_prefix option does.
  bool add_space_prefix = false;
  // SentencePiece only: the prefix goes once, before the whole text and
  // before special tokens are split out, as SentencePiece itself does (a
  // text that starts with a user-defined token gets a lone U+2581 first);
  // otherwise each run of text that starts the input or follows a special
  // token gets one, as llama.cpp does.
  bool space_prefix_once = false;
};

// Reads GGUF's tokenizer.ggml.model value: "llama" or "gpt2".
absl::StatusOr<TokenizerModel> ParseTokenizerModel(std::string_view name);

// Reads GGUF's tokenizer.ggml.pre value for a byte-level BPE vocabulary.
absl::StatusOr<PreTokenizer> ParsePreTokenizer(std::string_view name);

// The byte a "<0xXX>" token stands for (hex digits of either case), as
// SentencePiece's byte pieces and tokenizers' ByteFallback spell them.
std::optional<uint8_t> ParseByteToken(std::string_view text);

// Checks the invariants the tokenizers rely on: sizes agree, special ids lie
// inside the vocabulary, merges name non-empty halves.
absl::Status ValidateVocabulary(const Vocabulary& vocabulary);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_VOCABULARY_H
