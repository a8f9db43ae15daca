#include "runtime/generation/SpeculativeStep.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime {

absl::StatusOr<std::vector<std::vector<int32_t>>> ProposeDrafts(
    Drafter& drafter, absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) {
  KVJIT_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> drafts,
                         drafter.Propose(requests, target_cache));
  if (drafts.size() != requests.size()) {
    return absl::InternalError(absl::StrCat("the ", drafter.name(), " drafter answered ",
                                            drafts.size(), " of ", requests.size(), " sequences"));
  }
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (static_cast<int64_t>(drafts[i].size()) > requests[i].max_tokens) {
      return absl::InternalError(absl::StrCat("the ", drafter.name(), " drafter proposed ",
                                              drafts[i].size(), " tokens for sequence ",
                                              requests[i].sequence, " where ",
                                              requests[i].max_tokens, " were asked for"));
    }
  }
  return drafts;
}

double SampleStepCost(const StepRunner& runner, double draft_cost, int64_t step_tokens,
                      int64_t decodes, int64_t tokens) {
  const double step_cost = runner.decode_step_cost(step_tokens);
  const double part = step_cost / static_cast<double>(decodes);
  return 1.0 + (runner.decode_step_cost(step_tokens + tokens - 1) - step_cost) / part +
         draft_cost * static_cast<double>(tokens - 1);
}

absl::StatusOr<VerifiedDrafts> TakeVerifiedTokens(absl::Span<const float> rows, int64_t vocab,
                                                  absl::Span<const int32_t> drafts,
                                                  sampling::Sampler& sampler,
                                                  const std::vector<int32_t>& history,
                                                  grammar::GrammarMatcher* grammar,
                                                  TakeToken take) {
  VerifiedDrafts verified;
  const int64_t drafted = static_cast<int64_t>(drafts.size());
  for (int64_t row = 0; row <= drafted; ++row) {
    const absl::Span<const float> logits = rows.subspan(row * vocab, vocab);
    absl::Span<const uint32_t> allowed;
    if (grammar != nullptr) {
      KVJIT_ASSIGN_OR_RETURN(allowed, grammar->AllowedTokens());
      if (allowed.empty()) {
        verified.goes_on = false;
        verified.grammar_ended = true;
        break;
      }
    }
    const bool has_draft = row < drafted;
    const int32_t token = has_draft
                              ? sampler.SampleAgainstDraft(logits, history, drafts[row], allowed)
                              : sampler.Sample(logits, history, allowed);
    const bool kept = has_draft && token == drafts[row];
    if (kept) ++verified.accepted;
    if (grammar != nullptr) KVJIT_RETURN_IF_ERROR(grammar->Accept(token));
    KVJIT_ASSIGN_OR_RETURN(verified.goes_on, take(logits, token));
    if (!verified.goes_on || !kept) break;
  }
  return verified;
}

}  // namespace kvjit::runtime
