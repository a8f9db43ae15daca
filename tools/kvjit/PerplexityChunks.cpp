#include "tools/kvjit/PerplexityChunks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/StepBuilder.h"
#include "runtime/kv/KvBlockManager.h"

namespace kvjit::cli {
namespace {

constexpr kv::SequenceId kChunkSequence = 0;

}  // namespace

absl::StatusOr<ChunkPlan> PlanChunks(absl::string_view text_name, int64_t text_tokens, int64_t ctx,
                                     int64_t requested_chunks, int64_t context_length) {
  // Below 3 tokens a chunk's second half has no token with one after it.
  if (ctx < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ctx ", ctx, ": a chunk needs at least 3 tokens (its second half is scored)"));
  }
  if (ctx > context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ctx ", ctx, " exceeds the model's context of ", context_length, " tokens"));
  }
  if (requested_chunks == 0 || requested_chunks < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--chunks ", requested_chunks, ": give a positive count, or -1 for every chunk"));
  }
  if (text_tokens < 2 * ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat(text_name, ": ", text_tokens, " tokens, where --ctx ", ctx, " needs at least ",
                     2 * ctx, " (two chunks)"));
  }
  ChunkPlan plan;
  plan.ctx = ctx;
  plan.first = ctx / 2;
  plan.chunks = text_tokens / ctx;
  if (requested_chunks > 0) plan.chunks = std::min(plan.chunks, requested_chunks);
  return plan;
}

std::vector<int32_t> ChunkInput(absl::Span<const int32_t> tokens, const ChunkPlan& plan,
                                int64_t index, std::optional<int32_t> bos) {
  const absl::Span<const int32_t> chunk = tokens.subspan(index * plan.ctx, plan.ctx);
  std::vector<int32_t> input(chunk.begin(), chunk.end());
  if (bos.has_value()) input.front() = *bos;
  return input;
}

absl::Status EvaluateChunk(
    runtime::StepRunner& runner, absl::Span<const int32_t> chunk, int64_t first,
    const std::function<absl::Status(int64_t position, absl::Span<const float> logits)>& on_row) {
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager blocks,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner.num_blocks()),
                                                    static_cast<int32_t>(runner.block_size())));
  const int64_t fed = static_cast<int64_t>(chunk.size()) - 1;
  const int64_t vocab = runner.vocab_size();
  // Steps end where scoring starts, so that the unscored half asks for no
  // logits rows (a row costs a vocab-wide projection).
  for (int64_t position = 0; position < fed;) {
    const int64_t end = std::min(position + runner.max_tokens_per_step(),
                                 position < first ? first : fed);
    const bool scored = position >= first;
    KVJIT_RETURN_IF_ERROR(blocks.Reserve(kChunkSequence, end - position));
    runtime::StepBuilder builder(blocks);
    KVJIT_RETURN_IF_ERROR(builder.AddSequence(
        kChunkSequence, chunk.subspan(position, end - position), position,
        scored ? runtime::StepLogits::kEvery : runtime::StepLogits::kNone));
    KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner.Run(std::move(builder).Finish()));
    if (scored) {
      for (int64_t row = position; row < end; ++row) {
        KVJIT_RETURN_IF_ERROR(on_row(row, logits.subspan((row - position) * vocab, vocab)));
      }
    }
    KVJIT_RETURN_IF_ERROR(
        runtime::ReleaseBehindWindow(blocks, kChunkSequence, runner.attention_window()));
    position = end;
  }
  return blocks.Free(kChunkSequence);
}

}  // namespace kvjit::cli
