#ifndef KVJIT_RUNTIME_GENERATION_NGRAMLOOKUP_H_
#define KVJIT_RUNTIME_GENERATION_NGRAMLOOKUP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace kvjit::runtime {

// Prompt lookup, the draft of speculative decoding that needs no model
// (vLLM's `ngram`, llama.cpp's lookup): the tokens that followed the most
// recent earlier occurrence of the longest suffix of `history` between
// `min_ngram` and `max_ngram` tokens long, at most `max_tokens` of them; none
// where no such suffix occurred before. Text that copies its input (code
// edits, extraction, quotes) finds its continuation this way.
std::vector<int32_t> ProposeByNgramLookup(absl::Span<const int32_t> history, int64_t min_ngram,
                                          int64_t max_ngram, int64_t max_tokens);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_NGRAMLOOKUP_H_
