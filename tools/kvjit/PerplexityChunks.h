#ifndef KVJIT_TOOLS_KVJIT_PERPLEXITYCHUNKS_H_
#define KVJIT_TOOLS_KVJIT_PERPLEXITYCHUNKS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::cli {

// How a text's tokens are evaluated, the way llama.cpp's llama-perplexity
// splits them (so that the two tools' figures compare): consecutive chunks
// of `ctx` tokens, the rest of the text dropped; each chunk evaluated alone
// from an empty cache, its first token replaced by BOS where the model adds
// one; and scored over its second half only, where every prediction has at
// least ctx/2 tokens of context: the distributions after positions
// first..ctx-2 predict the tokens after them.
struct ChunkPlan {
  int64_t ctx = 0;
  int64_t first = 0;
  int64_t chunks = 0;

  int64_t scored_per_chunk() const { return ctx - first - 1; }
};

// The plan for the text `text_name` of `text_tokens` tokens and
// `requested_chunks` (-1: every whole chunk the text holds). As llama.cpp,
// it needs a text of at least two chunks, even where fewer are requested.
// `context_length` is the model's; errors name the flag or text at fault.
absl::StatusOr<ChunkPlan> PlanChunks(absl::string_view text_name, int64_t text_tokens, int64_t ctx,
                                     int64_t requested_chunks, int64_t context_length);

// Chunk `index` of `tokens` as the model sees it: its first token replaced
// by `bos` where there is one.
std::vector<int32_t> ChunkInput(absl::Span<const int32_t> tokens, const ChunkPlan& plan,
                                int64_t index, std::optional<int32_t> bos);

// Runs `chunk` (plan.ctx tokens) through `runner` from an empty cache, in
// steps of at most the runner's tokens per step, and hands `on_row` the
// distribution after each scored position (first..ctx-2), in order. The
// last token is never fed: nothing reads its keys and values. The runner's
// pool must hold ctx - 1 tokens.
absl::Status EvaluateChunk(
    runtime::StepRunner& runner, absl::Span<const int32_t> chunk, int64_t first,
    const std::function<absl::Status(int64_t position, absl::Span<const float> logits)>& on_row);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_PERPLEXITYCHUNKS_H_
