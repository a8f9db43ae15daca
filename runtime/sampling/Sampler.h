#ifndef KVJIT_RUNTIME_SAMPLING_SAMPLER_H_
#define KVJIT_RUNTIME_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kvjit::sampling {

// One request's decoding parameters, with the meanings vLLM and the OpenAI
// API give them. The defaults sample from the model's own distribution.
struct SamplingParams {
  // 0 picks the most likely token (greedy).
  float temperature = 1.0f;
  // Keep the k most likely tokens; 0 keeps all.
  int32_t top_k = 0;
  // Keep the most likely tokens whose probabilities add up to top_p.
  float top_p = 1.0f;
  // Drop tokens less likely than min_p times the most likely one.
  float min_p = 0.0f;
  // Above 1 discourages tokens already seen (HF / llama.cpp definition).
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token seen (OpenAI definition).
  float presence_penalty = 0.0f;
  // Subtracted from a token's logit once per time it was seen.
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

// Whether `allowed_tokens`, a grammar's mask (bit t % 32 of word t / 32 set
// for each token t that may come next), allows `token`; false past its words.
inline bool IsTokenAllowed(absl::Span<const uint32_t> allowed_tokens, int32_t token) {
  const size_t word = static_cast<size_t>(token) / 32;
  return word < allowed_tokens.size() && ((allowed_tokens[word] >> (token % 32)) & 1u) != 0;
}

// An InvalidArgument error naming the first parameter out of range.
absl::Status ValidateSamplingParams(const SamplingParams& params);

// log(sum(exp(logits))), computed stably (in double, shifted by the maximum):
// the normalizer LogSoftmax subtracts.
double LogSumExp(absl::Span<const float> logits);

// log(softmax(logits)), computed stably (in double, shifted by the maximum).
std::vector<float> LogSoftmax(absl::Span<const float> logits);

// Picks each next token of one request. The penalties apply to greedy
// decoding too (as in vLLM and llama.cpp); the rest of the pipeline is
// top-k, softmax at the temperature, top-p, min-p, then one draw.
//
// Reproducible: a sampler consumes exactly one 64-bit output of its
// mt19937_64 per sampled (non-greedy) token and turns it into a probability
// with its own arithmetic, so the same seed and logits give the same tokens
// on every platform. Ties in the ordering go to the lower token id.
class Sampler {
 public:
  static absl::StatusOr<Sampler> Create(const SamplingParams& params);

  // `logits` holds one score per vocabulary token and must not be empty;
  // `previous_tokens` are the tokens the penalties count (ids outside the
  // vocabulary are ignored). NaN logits count as -infinity; when no token has
  // a finite logit the lowest id is returned. A non-empty `allowed_tokens`
  // (a grammar's mask: bit t % 32 of word t / 32 set for each token t that
  // may come next, at least one) leaves only those tokens, as if every
  // other logit were -infinity.
  int32_t Sample(absl::Span<const float> logits, absl::Span<const int32_t> previous_tokens,
                 absl::Span<const uint32_t> allowed_tokens = {});

  // Speculative decoding's verification of a draft token proposed with
  // certainty (n-gram lookup's: the draft distribution q is one-hot): keeps
  // `draft` with probability p(draft) under this sampler's pipeline, and
  // otherwise draws from p without `draft`, renormalized (Leviathan et al.'s
  // norm(max(0, p - q))), so the token returned is distributed as Sample's.
  // Greedy decoding returns what Sample returns. One PRNG output when the
  // draft is kept, two when not.
  int32_t SampleAgainstDraft(absl::Span<const float> logits,
                             absl::Span<const int32_t> previous_tokens, int32_t draft,
                             absl::Span<const uint32_t> allowed_tokens = {});

  const SamplingParams& params() const { return params_; }

 private:
  explicit Sampler(const SamplingParams& params) : params_(params), random_(params.seed) {}

  // Fills candidates_ and weights_ for a draw, or returns the token that
  // needs none (greedy decoding, or no finite logit).
  std::optional<int32_t> PrepareDraw(absl::Span<const float> logits,
                                     absl::Span<const int32_t> previous_tokens,
                                     absl::Span<const uint32_t> allowed_tokens);
  // A uniform draw in [0, 1) from the top 53 bits of one PRNG output.
  double NextUniform();
  void ApplyPenalties(absl::Span<const int32_t> previous_tokens);
  // Narrow candidates_ and weights_ (weights_ relative to the most likely
  // token; candidates_ sorted most likely first for top-p).
  void KeepTopP();
  void KeepMinP();
  // Picks one candidate in proportion to its weight.
  int32_t Draw();

  SamplingParams params_;
  std::mt19937_64 random_;
  // Kept between calls so that sampling a token allocates nothing.
  std::vector<float> scores_;
  std::vector<int32_t> token_counts_;
  std::vector<int32_t> candidates_;
  std::vector<double> weights_;
};

}  // namespace kvjit::sampling

#endif  // KVJIT_RUNTIME_SAMPLING_SAMPLER_H_
