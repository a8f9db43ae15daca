#ifndef KVJIT_RUNTIME_TOKENIZER_PAIRMERGER_H
#define KVJIT_RUNTIME_TOKENIZER_PAIRMERGER_H

#include <optional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

namespace kvjit::tokenizer {

// How much two neighbouring pieces want to merge: a higher priority merges
// first, nullopt never merges. `joined` is `left` followed by `right`.
using MergePriority = absl::FunctionRef<std::optional<double>(
    std::string_view joined, std::string_view left, std::string_view right)>;

// The core of both BPE flavours: starts with one piece per UTF-8 character of
// `text` and repeatedly merges the neighbouring pair of highest priority (the
// leftmost on a tie) until no pair may merge. Returns the final pieces, which
// view `text`.
std::vector<std::string_view> MergePairs(std::string_view text,
                                         MergePriority priority);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_PAIRMERGER_H
