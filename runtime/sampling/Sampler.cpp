#include "runtime/sampling/Sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kvjit::sampling {
namespace {

absl::Status CheckParam(bool in_range, const char* name, float value, const char* expected) {
  if (in_range) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("sampling parameter ", name, " = ", value, " must be ", expected));
}

}  // namespace

// Every range is written so that NaN falls outside it.
absl::Status ValidateSamplingParams(const SamplingParams& params) {
  const float kInfinity = std::numeric_limits<float>::infinity();
  for (absl::Status status : {
           CheckParam(params.temperature >= 0 && params.temperature < kInfinity, "temperature", params.temperature,
                      "finite and at least 0"),
           CheckParam(params.top_k >= 0, "top_k", static_cast<float>(params.top_k), "at least 0 (0 keeps all)"),
           CheckParam(params.top_p > 0 && params.top_p <= 1, "top_p", params.top_p, "in (0, 1]"),
           CheckParam(params.min_p >= 0 && params.min_p <= 1, "min_p", params.min_p, "in [0, 1]"),
           CheckParam(params.repetition_penalty > 0 && params.repetition_penalty < kInfinity, "repetition_penalty",
                      params.repetition_penalty, "finite and above 0"),
           CheckParam(std::isfinite(params.presence_penalty), "presence_penalty", params.presence_penalty, "finite"),
           CheckParam(std::isfinite(params.frequency_penalty), "frequency_penalty", params.frequency_penalty,
                      "finite"),
       }) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

double LogSumExp(absl::Span<const float> logits) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float logit : logits) max_logit = std::max(max_logit, static_cast<double>(logit));
  double sum = 0;
  for (float logit : logits) sum += std::exp(logit - max_logit);
  return max_logit + std::log(sum);
}

std::vector<float> LogSoftmax(absl::Span<const float> logits) {
  const double log_normalizer = LogSumExp(logits);
  std::vector<float> log_probs(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) log_probs[i] = static_cast<float>(logits[i] - log_normalizer);
  return log_probs;
}

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& params) {
  absl::Status valid = ValidateSamplingParams(params);
  if (!valid.ok()) return valid;
  return Sampler(params);
}

double Sampler::NextUniform() { return static_cast<double>(random_() >> 11) * 0x1.0p-53; }

void Sampler::ApplyPenalties(absl::Span<const int32_t> previous_tokens) {
  const int32_t vocab_size = static_cast<int32_t>(scores_.size());
  // The repetition and presence penalties apply once per seen token, the
  // frequency penalty once per occurrence: the counts are gathered first and
  // reset as they are applied.
  token_counts_.resize(vocab_size, 0);
  for (int32_t token : previous_tokens) {
    if (token >= 0 && token < vocab_size) ++token_counts_[token];
  }
  for (int32_t token : previous_tokens) {
    if (token < 0 || token >= vocab_size || token_counts_[token] == 0) continue;
    float& score = scores_[token];
    score = score > 0 ? score / params_.repetition_penalty : score * params_.repetition_penalty;
    score -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(token_counts_[token]);
    token_counts_[token] = 0;
  }
}

void Sampler::KeepTopP() {
  // The smallest prefix holding top_p of the mass: a token stays when the
  // tokens before it hold less; the first always stays.
  double total_weight = 0;
  for (double weight : weights_) total_weight += weight;
  const double mass_wanted = params_.top_p * total_weight;
  double mass_before = 0;
  size_t kept = 0;
  while (kept < candidates_.size() && (kept == 0 || mass_before < mass_wanted)) mass_before += weights_[kept++];
  candidates_.resize(kept);
  weights_.resize(kept);
}

void Sampler::KeepMinP() {
  // Weights are relative to the most likely token, so min_p compares directly.
  size_t kept = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (weights_[i] < params_.min_p) continue;
    candidates_[kept] = candidates_[i];
    weights_[kept] = weights_[i];
    ++kept;
  }
  candidates_.resize(kept);
  weights_.resize(kept);
}

int32_t Sampler::Draw() {
  double kept_weight = 0;
  for (double weight : weights_) kept_weight += weight;
  const double target = NextUniform() * kept_weight;
  double cumulative = 0;
  int32_t last_possible = candidates_.front();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += weights_[i];
    if (weights_[i] > 0) last_possible = candidates_[i];
    if (cumulative > target) return candidates_[i];
  }
  // Only when rounding put the target on the total itself.
  return last_possible;
}

std::optional<int32_t> Sampler::PrepareDraw(absl::Span<const float> logits,
                                            absl::Span<const int32_t> previous_tokens,
                                            absl::Span<const uint32_t> allowed_tokens) {
  const int32_t vocab_size = static_cast<int32_t>(logits.size());
  scores_.assign(logits.begin(), logits.end());
  for (float& score : scores_) {
    if (std::isnan(score)) score = -std::numeric_limits<float>::infinity();
  }
  // Without a finite logit the lowest id wins, the lowest allowed one here.
  int32_t best = 0;
  if (!allowed_tokens.empty()) {
    best = -1;
    for (int32_t token = 0; token < vocab_size; ++token) {
      if (IsTokenAllowed(allowed_tokens, token)) {
        if (best < 0) best = token;
      } else {
        scores_[token] = -std::numeric_limits<float>::infinity();
      }
    }
    if (best < 0) best = 0;
  }
  if (params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    ApplyPenalties(previous_tokens);
  }

  // Lowest id wins ties, here and in every ordering below.
  for (int32_t token = best + 1; token < vocab_size; ++token) {
    if (scores_[token] > scores_[best]) best = token;
  }
  // A non-finite maximum (every token masked, or an infinite logit) leaves
  // no distribution to draw from.
  if (params_.temperature == 0.0f || !std::isfinite(scores_[best])) return best;

  candidates_.clear();
  for (int32_t token = 0; token < vocab_size; ++token) {
    if (scores_[token] != -std::numeric_limits<float>::infinity()) candidates_.push_back(token);
  }
  const auto more_likely = [this](int32_t a, int32_t b) {
    return scores_[a] > scores_[b] || (scores_[a] == scores_[b] && a < b);
  };
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), more_likely);
    candidates_.resize(params_.top_k);
    sorted = true;
  }
  if (params_.top_p < 1.0f && !sorted) std::sort(candidates_.begin(), candidates_.end(), more_likely);

  // Softmax at the temperature up to its normalizer, which neither top-p nor
  // min-p needs: the most likely token weighs 1.
  const double max_score = scores_[best];
  weights_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    weights_[i] = std::exp((scores_[candidates_[i]] - max_score) / params_.temperature);
  }
  if (params_.top_p < 1.0f) KeepTopP();
  if (params_.min_p > 0.0f) KeepMinP();
  return std::nullopt;
}

int32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> previous_tokens,
                        absl::Span<const uint32_t> allowed_tokens) {
  if (std::optional<int32_t> fixed = PrepareDraw(logits, previous_tokens, allowed_tokens)) {
    return *fixed;
  }
  return Draw();
}

int32_t Sampler::SampleAgainstDraft(absl::Span<const float> logits,
                                    absl::Span<const int32_t> previous_tokens, int32_t draft,
                                    absl::Span<const uint32_t> allowed_tokens) {
  if (std::optional<int32_t> fixed = PrepareDraw(logits, previous_tokens, allowed_tokens)) {
    return *fixed;
  }
  double total = 0;
  double draft_weight = 0;
  size_t draft_index = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    total += weights_[i];
    if (candidates_[i] == draft) {
      draft_weight = weights_[i];
      draft_index = i;
    }
  }
  if (NextUniform() * total < draft_weight) return draft;
  if (draft_index < candidates_.size()) {
    candidates_.erase(candidates_.begin() + draft_index);
    weights_.erase(weights_.begin() + draft_index);
  }
  // Only rounding leaves nothing else to draw: the draft held all the weight.
  if (candidates_.empty()) return draft;
  return Draw();
}

}  // namespace kvjit::sampling
