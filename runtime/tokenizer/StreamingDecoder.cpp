#include "runtime/tokenizer/StreamingDecoder.h"

#include <utility>

#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {

std::string StreamingDecoder::Push(int32_t id) {
  pending_ += tokenizer_.TokenToPiece(id);
  const size_t ready = pending_.size() - IncompleteUtf8SuffixLength(pending_);
  std::string text = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return text;
}

std::string StreamingDecoder::Flush() { return std::exchange(pending_, {}); }

}  // namespace kvjit::tokenizer
