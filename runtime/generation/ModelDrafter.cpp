#include "runtime/generation/ModelDrafter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/StepBuilder.h"

namespace kvjit::runtime {
namespace {

// One sequence's drafting within a Propose call.
struct Drafting {
  size_t index;  // into the requests and the drafts
  kv::SequenceId sequence;
  // Tokens to feed, the first at `position`; `fed` of them are in the cache.
  std::vector<int32_t> pending;
  int64_t position;
  int64_t fed = 0;
  int64_t wanted;
};

int32_t MostLikely(absl::Span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::WithOwnCache(
    std::unique_ptr<Executable> executable, std::unique_ptr<StepRunner> runner) {
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager cache,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner->num_blocks()),
                                                    static_cast<int32_t>(runner->block_size())));
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(
      "draft", std::move(executable), std::move(runner), std::move(cache)));
}

std::unique_ptr<ModelDrafter> ModelDrafter::OverTargetCache(std::unique_ptr<Executable> executable,
                                                            std::unique_ptr<StepRunner> runner,
                                                            int64_t layers) {
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(
      absl::StrCat("layers:", layers), std::move(executable), std::move(runner), std::nullopt));
}

absl::Status ModelDrafter::Forget(kv::SequenceId sequence) {
  fed_.erase(sequence);
  if (!own_cache_.has_value() || own_cache_->FindSequence(sequence) == nullptr) {
    return absl::OkStatus();
  }
  return own_cache_->Free(sequence);
}

absl::StatusOr<std::vector<std::vector<int32_t>>> ModelDrafter::Propose(
    absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) {
  kv::KvBlockManager& cache = own_cache_.has_value() ? *own_cache_ : target_cache;
  const int64_t context_length = executable_->config().context_length();
  std::vector<std::vector<int32_t>> drafts(requests.size());
  std::vector<Drafting> active;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& request = requests[i];
    const int64_t length = static_cast<int64_t>(request.history.size());
    if (length == 0 || request.max_tokens < 1) continue;
    int64_t start = request.cached_tokens;
    if (own_cache_.has_value()) {
      // The draft's cache keeps what it was fed up to where that parts from
      // the history (the target rejected the drafts after it), and at least
      // the newest token is fed again for its logits.
      std::vector<int32_t>& fed = fed_[request.sequence];
      const kv::BlockTable* table = cache.FindSequence(request.sequence);
      int64_t common = 0;
      if (table != nullptr) {
        const auto parted = std::mismatch(fed.begin(), fed.end(), request.history.begin(),
                                          request.history.end());
        common = std::min<int64_t>(parted.first - fed.begin(), length - 1);
        if (!cache.Truncate(request.sequence, common).ok()) {
          // Cut into blocks released behind the window: start over.
          KVJIT_RETURN_IF_ERROR(cache.Free(request.sequence));
          common = 0;
        }
      }
      fed.resize(common);
      start = common;
    }
    // Drafts 1 .. wanted-1 are fed too; the last sits at the context's end
    // at the latest.
    const int64_t wanted = std::min(request.max_tokens, context_length - length + 1);
    const int64_t tokens = length - start + wanted - 1;
    if (wanted < 1 || start < 0 || start >= length) continue;
    KVJIT_ASSIGN_OR_RETURN(const int64_t needed, cache.BlocksNeeded(request.sequence, tokens));
    // A pool too full for the drafts drafts nothing: speculation never takes
    // blocks the target's sequences need.
    if (needed > cache.num_free_blocks()) continue;
    KVJIT_RETURN_IF_ERROR(cache.Reserve(request.sequence, tokens));
    active.push_back({i, request.sequence,
                      std::vector<int32_t>(request.history.begin() + start, request.history.end()),
                      start, 0, wanted});
  }
  for (const kv::BlockCopy& copy : cache.TakePendingCopies()) {
    KVJIT_RETURN_IF_ERROR(runner_->CopyBlock(copy.source, copy.destination));
  }

  const int64_t vocab = runner_->vocab_size();
  std::vector<Drafting> drafting = active;
  while (!drafting.empty()) {
    StepBuilder builder(cache);
    int64_t budget = runner_->max_tokens_per_step();
    std::vector<std::pair<Drafting*, bool>> in_step;  // with whether it has a logits row
    for (Drafting& d : drafting) {
      if (budget == 0) break;
      const int64_t left = static_cast<int64_t>(d.pending.size()) - d.fed;
      const int64_t count = std::min(left, budget);
      const bool ends = count == left;
      KVJIT_RETURN_IF_ERROR(builder.AddSequence(
          d.sequence, absl::MakeConstSpan(d.pending).subspan(d.fed, count), d.position + d.fed,
          ends ? StepLogits::kLast : StepLogits::kNone));
      if (own_cache_.has_value()) {
        std::vector<int32_t>& fed = fed_[d.sequence];
        fed.insert(fed.end(), d.pending.begin() + d.fed, d.pending.begin() + d.fed + count);
      }
      d.fed += count;
      budget -= count;
      in_step.push_back({&d, ends});
    }
    KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner_->Run(std::move(builder).Finish()));
    int64_t row = 0;
    for (auto& [d, has_row] : in_step) {
      if (!has_row) continue;
      const int32_t token = MostLikely(logits.subspan(row++ * vocab, vocab));
      std::vector<int32_t>& draft = drafts[d->index];
      draft.push_back(token);
      d->position += static_cast<int64_t>(d->pending.size());
      d->pending = {token};
      d->fed = 0;
      if (static_cast<int64_t>(draft.size()) == d->wanted) d->wanted = 0;  // done
    }
    drafting.erase(std::remove_if(drafting.begin(), drafting.end(),
                                  [](const Drafting& d) { return d.wanted == 0; }),
                   drafting.end());
  }

  for (const Drafting& d : active) {
    if (own_cache_.has_value()) {
      KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(cache, d.sequence, runner_->attention_window()));
    } else {
      // The target's cache ends where it ended: its next step writes these
      // slots itself.
      KVJIT_RETURN_IF_ERROR(cache.Truncate(d.sequence, requests[d.index].cached_tokens));
    }
  }
  return drafts;
}

absl::Status CheckSameVocabulary(const Executable& draft, const Executable& target) {
  const uint32_t draft_vocab = draft.config().vocab_size();
  const uint32_t target_vocab = target.config().vocab_size();
  if (draft_vocab != target_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "draft ", draft.path(), " has a vocabulary of ", draft_vocab, " tokens and target ",
        target.path(), " one of ", target_vocab, ": a draft must share the target's vocabulary"));
  }
  const auto* draft_tokenizer = draft.root().tokenizer();
  const auto* target_tokenizer = target.root().tokenizer();
  if (draft_tokenizer == nullptr || target_tokenizer == nullptr ||
      draft_tokenizer->tokens() == nullptr || target_tokenizer->tokens() == nullptr) {
    return absl::OkStatus();
  }
  const auto& draft_tokens = *draft_tokenizer->tokens();
  const auto& target_tokens = *target_tokenizer->tokens();
  if (draft_tokens.size() != target_tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "draft ", draft.path(), "'s tokenizer has ", draft_tokens.size(), " tokens and target ",
        target.path(), "'s ", target_tokens.size(), ": a draft must share the target's vocabulary"));
  }
  for (uint32_t id = 0; id < draft_tokens.size(); ++id) {
    if (draft_tokens.Get(id)->string_view() != target_tokens.Get(id)->string_view()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "draft ", draft.path(), "'s token ", id, " is '", draft_tokens.Get(id)->str(),
          "' where target ", target.path(), "'s is '", target_tokens.Get(id)->str(),
          "': a draft must share the target's vocabulary"));
    }
  }
  return absl::OkStatus();
}

double RelativeStepCost(const Executable& draft, const Executable& target) {
  const auto weight_bytes = [](const Executable& executable) {
    double bytes = 0;
    for (uint32_t i = 0; i < executable.root().weights()->size(); ++i) {
      bytes += static_cast<double>(executable.WeightBytes(i).size());
    }
    return bytes;
  };
  const double target_bytes = weight_bytes(target);
  return target_bytes > 0 ? weight_bytes(draft) / target_bytes : 0.0;
}

}  // namespace kvjit::runtime
