#ifndef KVJIT_RUNTIME_GENERATION_MODELDRAFTER_H_
#define KVJIT_RUNTIME_GENERATION_MODELDRAFTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/generation/Drafter.h"
#include "runtime/kv/KvBlockManager.h"

namespace kvjit::runtime {

// Drafts with a model: a smaller one of the same vocabulary (a draft
// executable, with a KV pool of its own) or the target's own first layers
// (the layer-skipping self-draft, over the target's pool). Each draft token
// is the draft model's most likely one, so the draft is a certain choice (q
// one-hot) and Sampler::SampleAgainstDraft verifies it exactly for sampled
// decoding too. Sequences of one Propose call share its steps: first each
// sequence's tokens the draft has not seen (for a self-draft, those the
// target's cache lacks: the newest), chunked to the draft's tokens per step,
// then one token per sequence per step until each has its drafts.
class ModelDrafter final : public Drafter {
 public:
  // A draft model with a pool of its own. It remembers the tokens it fed
  // each sequence, and cuts its cache back to where they part from the
  // sequence's history before feeding the rest.
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> WithOwnCache(
      std::unique_ptr<Executable> executable, std::unique_ptr<StepRunner> runner);

  // A draft whose runner reads and writes the target's pool
  // (CpuStepRunner::CreateOverPool): the target's cache already holds the
  // draft's keys and values of every token it holds, and the drafts' own are
  // cut away again before Propose returns.
  static std::unique_ptr<ModelDrafter> OverTargetCache(std::unique_ptr<Executable> executable,
                                                       std::unique_ptr<StepRunner> runner,
                                                       int64_t layers);

  absl::string_view name() const override { return name_; }
  double cost_per_token() const override { return cost_per_token_; }
  // RelativeStepCost of the draft against its target; 0 until set.
  void set_cost_per_token(double cost) { cost_per_token_ = cost; }
  absl::StatusOr<std::vector<std::vector<int32_t>>> Propose(
      absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) override;
  absl::Status Forget(kv::SequenceId sequence) override;

  // Blocks of its own pool its sequences hold (0 for a draft over the
  // target's cache).
  int32_t own_blocks_in_use() const {
    return own_cache_.has_value() ? own_cache_->counters().blocks_in_use : 0;
  }

 private:
  ModelDrafter(std::string name, std::unique_ptr<Executable> executable,
               std::unique_ptr<StepRunner> runner, std::optional<kv::KvBlockManager> own_cache)
      : name_(std::move(name)),
        executable_(std::move(executable)),
        runner_(std::move(runner)),
        own_cache_(std::move(own_cache)) {}

  std::string name_;
  double cost_per_token_ = 0.0;
  // Declared before the runner, which reads it, so that it outlives it.
  std::unique_ptr<Executable> executable_;
  std::unique_ptr<StepRunner> runner_;
  // Empty for a draft over the target's cache.
  std::optional<kv::KvBlockManager> own_cache_;
  // With a cache of its own: the tokens whose keys and values it holds, per
  // sequence.
  absl::flat_hash_map<kv::SequenceId, std::vector<int32_t>> fed_;
};

// Whether a draft model can draft for a target: the same vocabulary, token
// for token where both executables carry one. The error names the first
// difference (the sizes, or an id and its two spellings).
absl::Status CheckSameVocabulary(const Executable& draft, const Executable& target);

// A one-token step of `draft` against one of `target`, as the bytes of
// their weights: a decode step reads each weight once.
double RelativeStepCost(const Executable& draft, const Executable& target);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_MODELDRAFTER_H_
