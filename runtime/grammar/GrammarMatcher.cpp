#include "runtime/grammar/GrammarMatcher.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "runtime/grammar/CompiledGrammarState.h"

namespace kvjit::grammar {

GrammarMatcher::GrammarMatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

bool GrammarMatcher::PrepareAllowedTokens() {
  State& state = *state_;
  if (state.prepared) return false;
  state.prepared = true;
  state.any_allowed = false;
  if (state.matcher.IsTerminated()) return false;
  int64_t shape[2] = {1, static_cast<int64_t>(state.bitmask.size())};
  DLTensor tensor{};
  tensor.data = state.bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 2;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  try {
    state.matcher.FillNextTokenBitmask(&tensor);
  } catch (const std::exception& error) {
    state.error = error.what();
    return true;
  }
  state.any_allowed =
      std::any_of(state.bitmask.begin(), state.bitmask.end(), [](int32_t word) { return word != 0; });
  return true;
}

absl::StatusOr<absl::Span<const uint32_t>> GrammarMatcher::AllowedTokens() {
  PrepareAllowedTokens();
  if (!state_->error.empty()) {
    return absl::InternalError(
        absl::StrCat("grammar: computing the allowed tokens failed: ", state_->error));
  }
  if (!state_->any_allowed) return absl::Span<const uint32_t>();
  return absl::MakeConstSpan(reinterpret_cast<const uint32_t*>(state_->bitmask.data()),
                             state_->bitmask.size());
}

absl::Status GrammarMatcher::Accept(int32_t token) {
  State& state = *state_;
  bool accepted = false;
  try {
    accepted = token >= 0 && token < state.vocab_size && state.matcher.AcceptToken(token);
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat("grammar: accepting token ", token, " failed: ", error.what()));
  }
  if (!accepted) {
    return absl::InternalError(
        absl::StrCat("grammar: token ", token, " was drawn where the grammar does not allow it"));
  }
  state.prepared = false;
  return absl::OkStatus();
}

bool GrammarMatcher::Terminated() const { return state_->matcher.IsTerminated(); }

GrammarMatcher GrammarMatcher::Fork() const {
  auto state = std::make_unique<State>(state_->matcher.Fork(), state_->vocab_size);
  // The mask depends only on the place, so a prepared one comes along.
  state->bitmask = state_->bitmask;
  state->prepared = state_->prepared;
  state->any_allowed = state_->any_allowed;
  state->error = state_->error;
  return GrammarMatcher(std::move(state));
}

}  // namespace kvjit::grammar
