#include "runtime/generation/BeamSearch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RequestValidation.h"
#include "runtime/generation/StepBuilder.h"
#include "runtime/sampling/Sampler.h"

namespace kvjit::runtime {
namespace {

using sampling::StopReason;

// A live hypothesis. Its KV sequence holds the prompt and every generated
// token but the last, which the next step feeds.
struct Beam {
  kv::SequenceId sequence = 0;
  std::vector<int32_t> tokens;
  double sum_logprobs = 0;
  // Under a grammar: where the beam's tokens have taken it.
  std::optional<grammar::GrammarMatcher> grammar;
};

// One continuation of a live beam by one token.
struct Candidate {
  double sum_logprobs;
  // The parent's rank among the live beams (0 is the best).
  int32_t beam;
  int32_t token;
};

// The candidate order: likelier first, ties to the better-ranked parent, then
// to the lower token id.
bool ComesBefore(const Candidate& a, const Candidate& b) {
  if (a.sum_logprobs != b.sum_logprobs) return a.sum_logprobs > b.sum_logprobs;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// The best `capacity` finished hypotheses, best first; among equal scores
// the one that finished first stays ahead.
class FinishedHypotheses {
 public:
  explicit FinishedHypotheses(int64_t capacity) : capacity_(capacity) {}

  void Add(BeamHypothesis hypothesis) {
    if (full() && !(hypothesis.score > hypotheses_.back().score)) return;
    auto after_equal_or_better =
        absl::c_upper_bound(hypotheses_, hypothesis.score,
                            [](double score, const BeamHypothesis& h) { return score > h.score; });
    hypotheses_.insert(after_equal_or_better, std::move(hypothesis));
    if (static_cast<int64_t>(hypotheses_.size()) > capacity_) {
      // Of several worst ones, the one that finished first goes, as in HF's
      // BeamHypotheses.add (it deletes the first of the sorted (score, index)).
      const double worst = hypotheses_.back().score;
      hypotheses_.erase(absl::c_find_if(
          hypotheses_, [worst](const BeamHypothesis& h) { return h.score == worst; }));
    }
  }

  bool full() const { return static_cast<int64_t>(hypotheses_.size()) == capacity_; }
  double worst_score() const { return hypotheses_.back().score; }
  std::vector<BeamHypothesis> Take(int64_t count) && {
    if (static_cast<int64_t>(hypotheses_.size()) > count) hypotheses_.resize(count);
    return std::move(hypotheses_);
  }

 private:
  int64_t capacity_;
  std::vector<BeamHypothesis> hypotheses_;
};

// One search: the live beams, their KV sequences and the finished
// hypotheses.
class BeamSearchRun {
 public:
  BeamSearchRun(StepRunner& runner, kv::KvBlockManager& blocks, const BeamSearchParams& params,
                const std::vector<int32_t>& prompt, int64_t max_new_tokens)
      : runner_(runner),
        blocks_(blocks),
        params_(params),
        prompt_(prompt),
        max_new_tokens_(max_new_tokens),
        candidates_per_step_(
            std::max<int64_t>(2, 1 + static_cast<int64_t>(params.eos_token_ids.size())) *
            params.num_beams),
        candidates_per_beam_(std::min(candidates_per_step_, runner.vocab_size())),
        finished_(params.num_beams) {}

  absl::Status Run(const std::function<bool(int64_t)>& keep_going);
  // Frees every sequence the search holds, whatever state it stopped in.
  absl::Status FreeAll();
  BeamSearchResult TakeResult() && {
    return {std::move(finished_).Take(params_.num_return_sequences), stats_};
  }

 private:
  absl::Status Prefill();
  absl::Status DecodeStep();
  // Finishes hypotheses and picks the next live beams from candidates_.
  std::vector<Candidate> Select();
  // Makes the chosen candidates the live beams: parents that no candidate
  // continues are freed, the others forked once per further child.
  absl::Status Advance(const std::vector<Candidate>& chosen);
  bool EarlyStop(int64_t generated) const;
  // Adds the logits' best continuations of live beam `beam` to candidates_.
  absl::Status AddCandidates(absl::Span<const float> logits, int32_t beam, double beam_sum);
  absl::Status RunPendingCopies();
  void NoteMemory();
  void Finish(std::vector<int32_t> tokens, double sum_logprobs, StopReason reason);
  kv::SequenceId NewSequence();
  bool IsEos(int32_t token) const { return absl::c_linear_search(params_.eos_token_ids, token); }

  StepRunner& runner_;
  kv::KvBlockManager& blocks_;
  const BeamSearchParams& params_;
  const std::vector<int32_t>& prompt_;
  const int64_t max_new_tokens_;
  const int64_t candidates_per_step_;
  const int64_t candidates_per_beam_;
  std::vector<Beam> live_;
  absl::flat_hash_set<kv::SequenceId> owned_;
  kv::SequenceId next_sequence_ = 0;
  std::vector<Candidate> candidates_;
  std::vector<Candidate> scratch_;
  FinishedHypotheses finished_;
  BeamSearchStats stats_;
};

kv::SequenceId BeamSearchRun::NewSequence() {
  while (blocks_.FindSequence(next_sequence_) != nullptr) ++next_sequence_;
  owned_.insert(next_sequence_);
  return next_sequence_++;
}

absl::Status BeamSearchRun::FreeAll() {
  absl::Status status;
  for (kv::SequenceId sequence : owned_) {
    // A sequence whose first Reserve failed never came into being.
    if (blocks_.FindSequence(sequence) != nullptr) status.Update(blocks_.Free(sequence));
  }
  owned_.clear();
  live_.clear();
  return status;
}

absl::Status BeamSearchRun::RunPendingCopies() {
  for (const kv::BlockCopy& copy : blocks_.TakePendingCopies()) {
    KVJIT_RETURN_IF_ERROR(runner_.CopyBlock(copy.source, copy.destination));
    ++stats_.blocks_copied;
  }
  return absl::OkStatus();
}

void BeamSearchRun::NoteMemory() {
  std::vector<kv::SequenceId> sequences;
  sequences.reserve(live_.size());
  for (const Beam& beam : live_) sequences.push_back(beam.sequence);
  const kv::GroupBlockUsage usage = blocks_.UsageOf(sequences);
  if (usage.distinct > stats_.peak_kv_blocks) {
    stats_.peak_kv_blocks = usage.distinct;
    stats_.peak_kv_blocks_unshared = usage.total;
  }
  stats_.peak_blocks_shared = std::max(stats_.peak_blocks_shared, usage.shared);
}

absl::Status BeamSearchRun::AddCandidates(absl::Span<const float> logits, int32_t beam,
                                          double beam_sum) {
  // log_softmax in double; NaN logits count as -infinity, as in the sampler.
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float logit : logits) {
    if (!std::isnan(logit)) max_logit = std::max<double>(max_logit, logit);
  }
  if (!std::isfinite(max_logit)) {
    return absl::InternalError(
        absl::StrCat(params_.request_id, ": the logits of beam ", beam, " have no finite maximum"));
  }
  double exp_sum = 0;
  for (float logit : logits) {
    if (!std::isnan(logit)) exp_sum += std::exp(logit - max_logit);
  }
  const double log_exp_sum = std::log(exp_sum);
  absl::Span<const uint32_t> allowed;
  if (live_[beam].grammar) {
    KVJIT_ASSIGN_OR_RETURN(allowed, live_[beam].grammar->AllowedTokens());
    if (allowed.empty()) {
      return absl::InternalError(absl::StrCat(params_.request_id, ": beam ", beam,
                                              "'s grammar allows no token"));
    }
  }
  scratch_.clear();
  for (int32_t token = 0; token < static_cast<int32_t>(logits.size()); ++token) {
    const float logit = logits[token];
    const double logprob = std::isnan(logit) ||
                                   (!allowed.empty() && !sampling::IsTokenAllowed(allowed, token))
                               ? -std::numeric_limits<double>::infinity()
                               : (logit - max_logit) - log_exp_sum;
    scratch_.push_back({beam_sum + logprob, beam, token});
  }
  // No candidate past a beam's own best candidates_per_step_ can be among
  // the best candidates_per_step_ of all beams.
  std::partial_sort(scratch_.begin(), scratch_.begin() + candidates_per_beam_, scratch_.end(),
                    ComesBefore);
  candidates_.insert(candidates_.end(), scratch_.begin(), scratch_.begin() + candidates_per_beam_);
  return absl::OkStatus();
}

absl::Status BeamSearchRun::Prefill() {
  const kv::SequenceId sequence = NewSequence();
  live_.push_back({sequence, {}, 0, std::nullopt});
  if (params_.grammar) live_.back().grammar = params_.grammar->NewMatcher(params_.eos_token_ids);
  const int64_t prompt_tokens = static_cast<int64_t>(prompt_.size());
  absl::Span<const float> logits;
  for (int64_t done = 0; done < prompt_tokens;) {
    const int64_t count = std::min(runner_.max_tokens_per_step(), prompt_tokens - done);
    KVJIT_RETURN_IF_ERROR(blocks_.Reserve(sequence, count));
    NoteMemory();
    KVJIT_RETURN_IF_ERROR(RunPendingCopies());
    StepBuilder builder(blocks_);
    KVJIT_RETURN_IF_ERROR(builder.AddSequence(
        sequence, absl::MakeConstSpan(prompt_).subspan(done, count), done, StepLogits::kLast));
    KVJIT_ASSIGN_OR_RETURN(logits, runner_.Run(std::move(builder).Finish()));
    KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(blocks_, sequence, runner_.attention_window()));
    done += count;
  }
  if (static_cast<int64_t>(logits.size()) != runner_.vocab_size()) {
    return absl::InternalError(absl::StrCat(params_.request_id, ": the prefill returned ",
                                            logits.size(), " logits for a vocabulary of ",
                                            runner_.vocab_size()));
  }
  candidates_.clear();
  return AddCandidates(logits, /*beam=*/0, /*beam_sum=*/0);
}

absl::Status BeamSearchRun::DecodeStep() {
  for (const Beam& beam : live_) KVJIT_RETURN_IF_ERROR(blocks_.Reserve(beam.sequence, 1));
  NoteMemory();
  KVJIT_RETURN_IF_ERROR(RunPendingCopies());
  candidates_.clear();
  const int64_t vocab = runner_.vocab_size();
  const int64_t prompt_tokens = static_cast<int64_t>(prompt_.size());
  const int64_t beams = static_cast<int64_t>(live_.size());
  for (int64_t first = 0; first < beams;) {
    const int64_t count = std::min(runner_.max_tokens_per_step(), beams - first);
    StepBuilder builder(blocks_);
    for (int64_t b = first; b < first + count; ++b) {
      const Beam& beam = live_[b];
      const int64_t position = prompt_tokens + static_cast<int64_t>(beam.tokens.size()) - 1;
      KVJIT_RETURN_IF_ERROR(builder.AddSequence(beam.sequence,
                                                absl::MakeConstSpan(&beam.tokens.back(), 1),
                                                position, StepLogits::kLast));
    }
    KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits,
                           runner_.Run(std::move(builder).Finish()));
    if (static_cast<int64_t>(logits.size()) != count * vocab) {
      return absl::InternalError(absl::StrCat(params_.request_id, ": a step of ", count,
                                              " beams returned ", logits.size(),
                                              " logits for a vocabulary of ", vocab));
    }
    for (int64_t b = first; b < first + count; ++b) {
      KVJIT_RETURN_IF_ERROR(AddCandidates(logits.subspan((b - first) * vocab, vocab),
                                          static_cast<int32_t>(b), live_[b].sum_logprobs));
    }
    first += count;
  }
  // Each beam lets go of its own references: a prefix block the other beams
  // share stays in the pool until the last of them passes it.
  for (const Beam& beam : live_) {
    KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(blocks_, beam.sequence, runner_.attention_window()));
  }
  ++stats_.decode_steps;
  return absl::OkStatus();
}

void BeamSearchRun::Finish(std::vector<int32_t> tokens, double sum_logprobs, StopReason reason) {
  const double length = static_cast<double>(tokens.size());
  const double score = sum_logprobs / std::pow(length, params_.length_penalty);
  finished_.Add({std::move(tokens), sum_logprobs, score, reason});
}

std::vector<Candidate> BeamSearchRun::Select() {
  const int64_t best = std::min<int64_t>(candidates_per_step_, candidates_.size());
  std::partial_sort(candidates_.begin(), candidates_.begin() + best, candidates_.end(),
                    ComesBefore);
  std::vector<Candidate> chosen;
  for (int64_t rank = 0; rank < best; ++rank) {
    const Candidate& candidate = candidates_[rank];
    // A token the grammar does not allow (or a beam's whole vocabulary when
    // it allows few) is no continuation.
    if (candidate.sum_logprobs == -std::numeric_limits<double>::infinity()) break;
    if (IsEos(candidate.token)) {
      // As in HF, an end among the lesser half of the candidates is dropped.
      if (rank < params_.num_beams) {
        std::vector<int32_t> tokens = live_[candidate.beam].tokens;
        tokens.push_back(candidate.token);
        Finish(std::move(tokens), candidate.sum_logprobs, StopReason::kEos);
      }
      continue;
    }
    chosen.push_back(candidate);
    if (static_cast<int64_t>(chosen.size()) == params_.num_beams) break;
  }
  return chosen;
}

absl::Status BeamSearchRun::Advance(const std::vector<Candidate>& chosen) {
  std::vector<int32_t> children(live_.size(), 0);
  for (const Candidate& candidate : chosen) ++children[candidate.beam];
  for (size_t b = 0; b < live_.size(); ++b) {
    if (children[b] == 0) {
      KVJIT_RETURN_IF_ERROR(blocks_.Free(live_[b].sequence));
      owned_.erase(live_[b].sequence);
    }
  }
  // The first child of each parent takes over its sequence; the others fork
  // it before anyone writes, so that they all share the parent's tokens.
  std::vector<bool> taken(live_.size(), false);
  std::vector<Beam> next;
  next.reserve(chosen.size());
  for (const Candidate& candidate : chosen) {
    const Beam& parent = live_[candidate.beam];
    Beam child{parent.sequence, parent.tokens, candidate.sum_logprobs, std::nullopt};
    child.tokens.push_back(candidate.token);
    if (parent.grammar) {
      child.grammar = parent.grammar->Fork();
      KVJIT_RETURN_IF_ERROR(child.grammar->Accept(candidate.token));
    }
    if (taken[candidate.beam]) {
      child.sequence = NewSequence();
      KVJIT_RETURN_IF_ERROR(blocks_.Fork(parent.sequence, child.sequence));
    }
    taken[candidate.beam] = true;
    next.push_back(std::move(child));
  }
  live_ = std::move(next);
  return absl::OkStatus();
}

bool BeamSearchRun::EarlyStop(int64_t generated) const {
  if (!finished_.full()) return false;
  if (params_.early_stopping == EarlyStopping::kWhenBeamsFinished) return true;
  // The best live beam's sum only falls as it grows; its score is best at the
  // length where length^length_penalty is largest.
  const bool longest_is_best =
      params_.early_stopping == EarlyStopping::kNever && params_.length_penalty > 0;
  const double length = static_cast<double>(longest_is_best ? max_new_tokens_ : generated);
  const double best_possible =
      live_.front().sum_logprobs / std::pow(length, params_.length_penalty);
  return finished_.worst_score() >= best_possible;
}

absl::Status BeamSearchRun::Run(const std::function<bool(int64_t)>& keep_going) {
  KVJIT_RETURN_IF_ERROR(Prefill());
  for (int64_t generated = 1;; ++generated) {
    KVJIT_RETURN_IF_ERROR(Advance(Select()));
    if (live_.empty() || EarlyStop(generated)) return absl::OkStatus();
    if (generated == max_new_tokens_) {
      for (Beam& beam : live_)
        Finish(std::move(beam.tokens), beam.sum_logprobs, StopReason::kLength);
      return absl::OkStatus();
    }
    if (keep_going && !keep_going(generated)) {
      return absl::CancelledError(absl::StrCat(params_.request_id, ": cancelled after ", generated,
                                               " of at most ", max_new_tokens_, " new tokens"));
    }
    KVJIT_RETURN_IF_ERROR(DecodeStep());
  }
}

}  // namespace

absl::StatusOr<EarlyStopping> ParseEarlyStopping(absl::string_view text) {
  if (text == "true") return EarlyStopping::kWhenBeamsFinished;
  if (text == "false") return EarlyStopping::kHeuristic;
  if (text == "never") return EarlyStopping::kNever;
  return absl::InvalidArgumentError(
      absl::StrCat("early stopping is true, false or never, not '", text, "'"));
}

absl::StatusOr<BeamSearchResult> BeamSearch::Search(
    const std::vector<int32_t>& prompt, const BeamSearchParams& params,
    const std::function<bool(int64_t)>& keep_going) {
  const std::string& request = params.request_id;
  if (params.num_beams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(request, ": num_beams is ", params.num_beams, "; it must be at least 1"));
  }
  if (params.num_return_sequences < 1 || params.num_return_sequences > params.num_beams) {
    return absl::InvalidArgumentError(
        absl::StrCat(request, ": num_return_sequences is ", params.num_return_sequences,
                     "; it must be between 1 and num_beams (", params.num_beams, ")"));
  }
  if (!std::isfinite(params.length_penalty)) {
    return absl::InvalidArgumentError(absl::StrCat(request, ": length_penalty is ",
                                                   params.length_penalty, "; it must be finite"));
  }
  const int64_t vocab = runner_.vocab_size();
  for (int32_t token : params.eos_token_ids) {
    if (token < 0 || token >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(request, ": end-of-sequence token ", token,
                                                     " is outside the vocabulary of ", vocab));
    }
  }
  if (params.grammar && params.eos_token_ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(request, ": a grammar needs end-of-sequence tokens to end the hypotheses"));
  }
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  KVJIT_ASSIGN_OR_RETURN(const int64_t max_new_tokens,
                         ValidateRequest(request, prompt, params.max_new_tokens,
                                         {vocab, context_length_}));
  if (runner_.max_tokens_per_step() < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        request, ": the runner takes ", runner_.max_tokens_per_step(), " tokens per step"));
  }

  std::optional<kv::KvBlockManager> own_blocks;
  kv::KvBlockManager* blocks = shared_blocks_;
  if (blocks == nullptr) {
    KVJIT_ASSIGN_OR_RETURN(own_blocks,
                           kv::KvBlockManager::Create(static_cast<int32_t>(runner_.num_blocks()),
                                                      static_cast<int32_t>(runner_.block_size())));
    blocks = &*own_blocks;
  }
  const int64_t block_size = blocks->block_size();
  if (block_size != runner_.block_size()) {
    return absl::InvalidArgumentError(absl::StrCat(request, ": the KV manager's blocks hold ",
                                                   block_size, " tokens, the runner's ",
                                                   runner_.block_size()));
  }
  // Beams share the prompt's full blocks; each may hold its own copy of
  // every later block.
  const int64_t cached_tokens = prompt_tokens + max_new_tokens - 1;
  const int64_t blocks_needed =
      kv::BlocksForForkedSequences(prompt_tokens, max_new_tokens, params.num_beams, block_size);
  if (blocks_needed > blocks->num_free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        request, ": ", params.num_beams, " beams of up to ", cached_tokens,
        " cached tokens may need ", blocks_needed, " KV blocks of ", block_size, " tokens; ",
        blocks->num_free_blocks(), " of ", blocks->num_blocks(), " are free"));
  }

  BeamSearchRun run(runner_, *blocks, params, prompt, max_new_tokens);
  const absl::Status status = run.Run(keep_going);
  const absl::Status freed = run.FreeAll();
  KVJIT_RETURN_IF_ERROR(status);
  KVJIT_RETURN_IF_ERROR(freed);
  BeamSearchResult result = std::move(run).TakeResult();
  result.stats.prompt_tokens = prompt_tokens;
  return result;
}

}  // namespace kvjit::runtime
