#include "runtime/generation/NgramLookup.h"

#include "runtime/generation/Drafter.h"

#include <algorithm>

namespace kvjit::runtime {

std::vector<int32_t> ProposeByNgramLookup(absl::Span<const int32_t> history, int64_t min_ngram,
                                          int64_t max_ngram, int64_t max_tokens) {
  const int64_t length = static_cast<int64_t>(history.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min(max_ngram, length - 1); n >= std::max<int64_t>(min_ngram, 1); --n) {
    const absl::Span<const int32_t> suffix = history.subspan(length - n);
    // The latest occurrence first: what the text did most recently is the
    // better guess of what it does next.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min(length, from + max_tokens);
      return std::vector<int32_t>(history.begin() + from, history.begin() + to);
    }
  }
  return {};
}

absl::StatusOr<std::vector<std::vector<int32_t>>> NgramDrafter::Propose(
    absl::Span<const DraftRequest> requests, kv::KvBlockManager& /*target_cache*/) {
  std::vector<std::vector<int32_t>> drafts;
  drafts.reserve(requests.size());
  for (const DraftRequest& request : requests) {
    drafts.push_back(
        ProposeByNgramLookup(request.history, min_ngram_, max_ngram_, request.max_tokens));
  }
  return drafts;
}

}  // namespace kvjit::runtime
