#include "runtime/tokenizer/DecoderChain.h"

#include <optional>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD

std::vector<std::string> FallBackToBytes(std::vector<std::string> tokens) {
  std::vector<std::string> decoded;
  std::string pending_bytes;
  const auto flush = [&] {
    if (pending_bytes.empty()) return;
    if (CheckUtf8(pending_bytes).ok()) {
      decoded.push_back(std::move(pending_bytes));
    } else {
      for (size_t i = 0; i < pending_bytes.size(); ++i) {
        decoded.push_back(kReplacementCharacter);
      }
    }
    pending_bytes.clear();
  };
  for (std::string& token : tokens) {
    if (std::optional<uint8_t> byte = ParseByteToken(token)) {
      pending_bytes.push_back(static_cast<char>(*byte));
      continue;
    }
    flush();
    decoded.push_back(std::move(token));
  }
  flush();
  return decoded;
}

// The characters of `text` (UTF-8) one by one.
std::vector<std::string_view> Characters(std::string_view text) {
  std::vector<std::string_view> characters;
  for (size_t at = 0; at < text.size();) {
    const size_t length = CharacterLengthAt(text, at);
    characters.push_back(text.substr(at, length));
    at += length;
  }
  return characters;
}

std::string Strip(const std::string& token, const DecoderStep& step) {
  const std::vector<std::string_view> characters = Characters(token);
  size_t start = 0;
  while (start < step.strip_start && start < characters.size() &&
         characters[start] == step.content) {
    ++start;
  }
  size_t stop = characters.size();
  for (uint32_t i = 0; i < step.strip_stop && stop > start; ++i) {
    if (characters[stop - 1] != step.content) break;
    --stop;
  }
  std::string stripped;
  for (size_t i = start; i < stop; ++i) stripped += characters[i];
  return stripped;
}

// Metaspace's decoder: the replacement becomes a space, and in the first
// token it is dropped wherever it is, as tokenizers does.
std::string UndoMetaspace(const std::string& token, const DecoderStep& step,
                          bool first) {
  const bool drop = first && step.prepend_scheme != PrependScheme::kNever;
  return absl::StrReplaceAll(token, {{step.pattern, drop ? "" : " "}});
}

}  // namespace

std::string DecoderChain::Decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) return absl::StrJoin(tokens, " ");
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderKind::kReplace:
        for (std::string& token : tokens) {
          token = absl::StrReplaceAll(token, {{step.pattern, step.content}});
        }
        break;
      case DecoderKind::kByteFallback:
        tokens = FallBackToBytes(std::move(tokens));
        break;
      case DecoderKind::kFuse: {
        std::string fused = absl::StrJoin(tokens, "");
        tokens.assign(1, std::move(fused));
        break;
      }
      case DecoderKind::kStrip:
        for (std::string& token : tokens) token = Strip(token, step);
        break;
      case DecoderKind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = UndoMetaspace(tokens[i], step, i == 0);
        }
        break;
    }
  }
  return absl::StrJoin(tokens, "");
}

std::string DecoderChain::DecodeContinuation(std::string token) const {
  if (steps_.empty()) return " " + token;
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderKind::kReplace:
        token = absl::StrReplaceAll(token, {{step.pattern, step.content}});
        break;
      case DecoderKind::kByteFallback:
        if (std::optional<uint8_t> byte = ParseByteToken(token)) {
          token.assign(1, static_cast<char>(*byte));
        }
        break;
      case DecoderKind::kFuse:
        return token;
      case DecoderKind::kStrip:
        token = Strip(token, step);
        break;
      case DecoderKind::kMetaspace:
        token = UndoMetaspace(token, step, /*first=*/false);
        break;
    }
  }
  return token;
}

}  // namespace kvjit::tokenizer
