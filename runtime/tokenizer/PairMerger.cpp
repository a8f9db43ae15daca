#include "runtime/tokenizer/PairMerger.h"

#include <queue>

#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// A piece of the text; pieces form a linked list so that merging two
// neighbours does not move the rest.
struct Piece {
  size_t start;
  size_t length;  // 0 once merged into its left neighbour.
  int prev;
  int next;
};

struct Candidate {
  double priority;
  int left;
  int right;
  size_t joined_length;  // Tells a candidate made stale by another merge.
};

struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;
  }
};

}  // namespace

std::vector<std::string_view> MergePairs(std::string_view text,
                                         MergePriority priority) {
  std::vector<Piece> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t length = CharacterLengthAt(text, start);
    const int index = static_cast<int>(pieces.size());
    pieces.push_back({start, length, index - 1, index + 1});
    start += length;
  }
  if (pieces.empty()) return {};
  pieces.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Piece& a = pieces[left];
    const Piece& b = pieces[right];
    const size_t joined_length = a.length + b.length;
    const std::optional<double> value = priority(
        text.substr(a.start, joined_length), text.substr(a.start, a.length),
        text.substr(b.start, b.length));
    if (value.has_value()) queue.push({*value, left, right, joined_length});
  };
  for (size_t i = 1; i < pieces.size(); ++i) {
    consider(static_cast<int>(i) - 1, static_cast<int>(i));
  }
  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    Piece& left = pieces[candidate.left];
    Piece& right = pieces[candidate.right];
    // A piece only grows by taking in its right neighbour, so unchanged
    // lengths mean the candidate still joins the same two pieces.
    if (left.length == 0 || right.length == 0 ||
        left.length + right.length != candidate.joined_length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) pieces[right.next].prev = candidate.left;
    consider(left.prev, candidate.left);
    consider(candidate.left, left.next);
  }

  std::vector<std::string_view> result;
  for (int i = 0; i >= 0; i = pieces[i].next) {
    result.push_back(text.substr(pieces[i].start, pieces[i].length));
  }
  return result;
}

}  // namespace kvjit::tokenizer
