#include "tests/unit/runtime/generation/FakeStepRunner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::testing {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<float> FakeLogits(absl::Span<const int32_t> context, int64_t vocab) {
  uint64_t hash = 0x6b766a6974ULL;
  for (int32_t token : context) hash = SplitMix64(hash ^ static_cast<uint64_t>(token));
  std::vector<float> logits(vocab);
  for (int64_t v = 0; v < vocab; ++v) {
    const double unit =
        static_cast<double>(SplitMix64(hash + static_cast<uint64_t>(v)) >> 11) * 0x1.0p-53;
    logits[v] = static_cast<float>(6 * unit - 3);
  }
  return logits;
}

int64_t RecordedStep::tokens() const {
  int64_t total = 0;
  for (const RecordedSequence& sequence : sequences) total += sequence.new_tokens;
  return total;
}

absl::Status FakeStepRunner::CopyBlock(int64_t source, int64_t destination) {
  if (source < 0 || source >= num_blocks_ || destination < 0 || destination >= num_blocks_) {
    return absl::OutOfRangeError(absl::StrCat("copy of block ", source, " to ", destination,
                                              " outside a pool of ", num_blocks_));
  }
  ++copies_;
  if (skip_copies_) return absl::OkStatus();
  std::copy_n(cache_.begin() + source * block_size_, block_size_,
              cache_.begin() + destination * block_size_);
  return absl::OkStatus();
}

absl::StatusOr<int32_t> FakeStepRunner::CachedToken(const runtime::StepInputs& inputs,
                                                    int64_t sequence, int64_t position) const {
  const int64_t column = position / block_size_;
  if (column >= inputs.max_blocks) {
    return absl::OutOfRangeError(
        absl::StrCat("sequence ", sequence, ": position ", position, " is past its block table"));
  }
  const int64_t block = inputs.block_tables()[sequence * inputs.max_blocks + column];
  if (block < 0 || block >= num_blocks_) {
    return absl::OutOfRangeError(
        absl::StrCat("sequence ", sequence, ": block ", block, " outside the pool"));
  }
  const int32_t token = cache_[block * block_size_ + position % block_size_];
  if (token == kUnwritten) {
    return absl::InternalError(absl::StrCat("sequence ", sequence, ": position ", position,
                                            " reads a slot never written"));
  }
  return token;
}

RecordedStep FakeStepRunner::Record(const runtime::StepInputs& inputs) const {
  RecordedStep step;
  for (size_t s = 0; s < inputs.context_lens().size(); ++s) {
    RecordedSequence sequence;
    sequence.new_tokens = inputs.seq_starts()[s + 1] - inputs.seq_starts()[s];
    // Read leniently, unlike CachedToken: recording must not turn a step
    // that would have succeeded into an error.
    for (int64_t p = 0; p < inputs.context_lens()[s]; ++p) {
      const int64_t column = p / block_size_;
      const int64_t block =
          column < inputs.max_blocks ? inputs.block_tables()[s * inputs.max_blocks + column] : -1;
      sequence.context.push_back(block < 0 || block >= num_blocks_
                                     ? kUnwritten
                                     : cache_[block * block_size_ + p % block_size_]);
    }
    step.sequences.push_back(std::move(sequence));
  }
  return step;
}

absl::StatusOr<absl::Span<const float>> FakeStepRunner::Run(const runtime::StepInputs& inputs) {
  const int64_t tokens = static_cast<int64_t>(inputs.tokens().size());
  const int64_t sequences = static_cast<int64_t>(inputs.context_lens().size());
  if (tokens == 0 || tokens > max_tokens_per_step_ ||
      static_cast<int64_t>(inputs.positions().size()) != tokens ||
      static_cast<int64_t>(inputs.slot_mapping().size()) != tokens ||
      static_cast<int64_t>(inputs.seq_starts().size()) != sequences + 1 ||
      static_cast<int64_t>(inputs.block_tables().size()) != sequences * inputs.max_blocks ||
      inputs.seq_starts().back() != tokens) {
    return absl::InvalidArgumentError("malformed step inputs");
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t slot = inputs.slot_mapping()[t];
    if (slot < 0 || slot >= static_cast<int64_t>(cache_.size())) {
      return absl::OutOfRangeError(absl::StrCat("slot ", slot, " outside the pool"));
    }
    cache_[slot] = inputs.tokens()[t];
  }
  logits_.clear();
  for (int32_t row : inputs.logits_rows()) {
    const int64_t sequence =
        std::upper_bound(inputs.seq_starts().begin(), inputs.seq_starts().end(), row) -
        inputs.seq_starts().begin() - 1;
    const int64_t position = inputs.positions()[row];
    if (position >= inputs.context_lens()[sequence]) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row, " lies past its context"));
    }
    std::vector<int32_t> context;
    for (int64_t p = 0; p <= position; ++p) {
      KVJIT_ASSIGN_OR_RETURN(int32_t token, CachedToken(inputs, sequence, p));
      context.push_back(token);
    }
    const std::vector<float> row_logits = FakeLogits(context, vocab_);
    logits_.insert(logits_.end(), row_logits.begin(), row_logits.end());
  }
  if (record_steps_) recorded_steps_.push_back(Record(inputs));
  ++steps_;
  return absl::MakeConstSpan(logits_);
}

}  // namespace kvjit::testing
