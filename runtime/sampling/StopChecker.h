#ifndef KVJIT_RUNTIME_SAMPLING_STOPCHECKER_H_
#define KVJIT_RUNTIME_SAMPLING_STOPCHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::sampling {

enum class StopReason { kNone, kEos, kStopString, kLength };

// "eos", "stop_string", "length" (the names reported to users); "" for kNone.
absl::string_view StopReasonName(StopReason reason);

struct StopConditions {
  // End-of-sequence and end-of-generation tokens; their text is never emitted.
  std::vector<int32_t> stop_token_ids;
  // Matched on the generated text, wherever token boundaries fall; neither
  // the stop string nor anything after it is emitted.
  std::vector<std::string> stop_strings;
  // Generated tokens, stop tokens included; none means no limit.
  std::optional<int64_t> max_tokens;
};

struct StopDecision {
  bool stop = false;
  StopReason reason = StopReason::kNone;
  // The text the client may see now: the token's text and what was held
  // back before, up to (not including) any text that might still turn out
  // to be the start of a stop string.
  std::string text_to_emit;
};

// Decides, token by token, when one request's generation ends and which text
// to stream. A stop token wins over a stop string in the same token, and a
// stop string over the length limit.
class StopChecker {
 public:
  // An InvalidArgument error for an empty stop string or a max_tokens below 1.
  static absl::StatusOr<StopChecker> Create(StopConditions conditions);

  // `token_text` is the token's decoded text (possibly empty while a UTF-8
  // character is incomplete). Once the checker has stopped, every further
  // call repeats the stop with no text.
  StopDecision Append(int32_t token, absl::string_view token_text);

  // The text held back as a possible stop string start, for when generation
  // ends for a reason the checker does not see (cancellation, a full context).
  std::string TakeHeldText();

  int64_t num_tokens() const { return num_tokens_; }
  bool stopped() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }

 private:
  explicit StopChecker(StopConditions conditions);

  StopDecision Stop(StopReason reason, std::string text);
  // The length of the longest suffix of held_ that some stop string starts with.
  size_t LengthOfPossibleStopStart() const;

  StopConditions conditions_;
  size_t longest_stop_string_ = 0;
  std::string held_;
  int64_t num_tokens_ = 0;
  StopReason reason_ = StopReason::kNone;
};

}  // namespace kvjit::sampling

#endif  // KVJIT_RUNTIME_SAMPLING_STOPCHECKER_H_
