#include "runtime/sampling/StopChecker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvjit::sampling {

absl::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop_string";
    case StopReason::kLength:
      return "length";
  }
  return "";
}

absl::StatusOr<StopChecker> StopChecker::Create(StopConditions conditions) {
  for (size_t i = 0; i < conditions.stop_strings.size(); ++i) {
    if (conditions.stop_strings[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop string ", i, " is empty"));
    }
  }
  if (conditions.max_tokens.has_value() && *conditions.max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens = ", *conditions.max_tokens, " must be at least 1"));
  }
  return StopChecker(std::move(conditions));
}

StopChecker::StopChecker(StopConditions conditions) : conditions_(std::move(conditions)) {
  for (const std::string& stop_string : conditions_.stop_strings) {
    longest_stop_string_ = std::max(longest_stop_string_, stop_string.size());
  }
}

StopDecision StopChecker::Stop(StopReason reason, std::string text) {
  reason_ = reason;
  held_.clear();
  return StopDecision{true, reason, std::move(text)};
}

size_t StopChecker::LengthOfPossibleStopStart() const {
  if (longest_stop_string_ == 0) return 0;
  // A complete stop string would have been found, so only proper prefixes
  // (shorter than the longest stop string) can be pending.
  const size_t longest_candidate = std::min(held_.size(), longest_stop_string_ - 1);
  for (size_t length = longest_candidate; length > 0; --length) {
    const absl::string_view suffix = absl::string_view(held_).substr(held_.size() - length);
    for (const std::string& stop_string : conditions_.stop_strings) {
      if (absl::StartsWith(stop_string, suffix)) return length;
    }
  }
  return 0;
}

StopDecision StopChecker::Append(int32_t token, absl::string_view token_text) {
  if (stopped()) return StopDecision{true, reason_, ""};
  ++num_tokens_;
  const std::vector<int32_t>& stop_tokens = conditions_.stop_token_ids;
  if (std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end()) {
    return Stop(StopReason::kEos, std::move(held_));
  }

  // held_ is the only text a match can start in: everything emitted before
  // was, by construction, no start of a stop string.
  held_.append(token_text.data(), token_text.size());
  size_t first_match = std::string::npos;
  for (const std::string& stop_string : conditions_.stop_strings) {
    first_match = std::min(first_match, held_.find(stop_string));
  }
  if (first_match != std::string::npos) return Stop(StopReason::kStopString, held_.substr(0, first_match));
  if (conditions_.max_tokens.has_value() && num_tokens_ >= *conditions_.max_tokens) {
    return Stop(StopReason::kLength, std::move(held_));
  }

  const size_t emit_length = held_.size() - LengthOfPossibleStopStart();
  StopDecision decision;
  decision.text_to_emit = held_.substr(0, emit_length);
  held_.erase(0, emit_length);
  return decision;
}

std::string StopChecker::TakeHeldText() { return std::exchange(held_, {}); }

}  // namespace kvjit::sampling
