#include "tools/kvjit/SpeculationFlags.h"

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/ModelDrafter.h"
#include "runtime/generation/RunnerFactory.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/SharedFlags.h"

ABSL_FLAG(std::string, speculative, "",
          "speculative decoding's draft: ngram (prompt lookup: what followed the latest earlier "
          "occurrence of the text's last --ngram_max..--ngram_min tokens), draft:FILE (a smaller "
          "model with the same vocabulary: a .kvx, a GGUF or a Hugging Face directory) or "
          "layers:K (the target's own first K layers, compiled from its model and sharing its "
          "weights and KV cache); greedy output is token for token that without it, sampled "
          "output is verified by rejection sampling");
ABSL_FLAG(int, draft_tokens, 3, "--speculative: tokens drafted per step");
ABSL_FLAG(int, ngram_max, 3, "--speculative ngram: the longest suffix looked up");
ABSL_FLAG(int, ngram_min, 2, "--speculative ngram: the shortest suffix that may propose a draft");
// 8 is a first guess; where verification stops paying is the lead's to
// measure (docs/speculative-decoding.md).
ABSL_FLAG(int, speculation_max_batch, 8,
          "--speculative with in-flight batching (chat, serve, bench --requests, run --samples): "
          "speculate only in steps of at most this many decoding sequences, since a larger "
          "batch's verify steps are no longer nearly free");

namespace kvjit::cli {

std::vector<std::string> WithSpeculationFlags(std::vector<std::string> names) {
  for (const char* flag :
       {"speculative", "draft_tokens", "ngram_min", "ngram_max", "speculation_max_batch"}) {
    names.push_back(flag);
  }
  return names;
}

std::string SpeculationChoice::Name() const {
  switch (draft) {
    case Draft::kNone:
      return "none";
    case Draft::kNgram:
      return "ngram";
    case Draft::kExecutable:
      return absl::StrCat("draft:", draft_path);
    case Draft::kLayers:
      return absl::StrCat("layers:", layers);
  }
  return "";
}

absl::StatusOr<SpeculationChoice> SpeculationFromFlags() {
  SpeculationChoice choice;
  const std::string draft = absl::GetFlag(FLAGS_speculative);
  if (draft.empty()) return choice;
  if (draft == "ngram") {
    choice.draft = SpeculationChoice::Draft::kNgram;
  } else if (absl::StartsWith(draft, "draft:") && draft.size() > 6) {
    choice.draft = SpeculationChoice::Draft::kExecutable;
    choice.draft_path = draft.substr(6);
  } else if (absl::StartsWith(draft, "layers:") &&
             absl::SimpleAtoi(absl::string_view(draft).substr(7), &choice.layers) &&
             choice.layers >= 1) {
    choice.draft = SpeculationChoice::Draft::kLayers;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative ", draft,
                     ": expected ngram, draft:FILE or layers:K with K at least 1"));
  }
  if (absl::GetFlag(FLAGS_draft_tokens) < 1 || absl::GetFlag(FLAGS_ngram_min) < 1 ||
      absl::GetFlag(FLAGS_ngram_max) < absl::GetFlag(FLAGS_ngram_min)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--draft_tokens ", absl::GetFlag(FLAGS_draft_tokens), " and --ngram_min ",
        absl::GetFlag(FLAGS_ngram_min), " must be at least 1 and --ngram_max ",
        absl::GetFlag(FLAGS_ngram_max), " at least --ngram_min"));
  }
  choice.draft_tokens = absl::GetFlag(FLAGS_draft_tokens);
  choice.min_ngram = absl::GetFlag(FLAGS_ngram_min);
  choice.max_ngram = absl::GetFlag(FLAGS_ngram_max);
  choice.max_batch = absl::GetFlag(FLAGS_speculation_max_batch);
  if (choice.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--speculation_max_batch must be at least 1, got ",
                                                   choice.max_batch));
  }
  return choice;
}

namespace {

// The draft executable for `model_or_kvx` compiled with `options` (when not
// a .kvx already), loaded, and refused unless its vocabulary is the target's.
absl::StatusOr<std::unique_ptr<runtime::Executable>> LoadDraft(
    const std::string& model_or_kvx, const codegen::CompileOptions& options,
    const runtime::Executable& target) {
  KVJIT_ASSIGN_OR_RETURN(const std::string kvx_path, ExecutablePathFor(model_or_kvx, options));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> draft,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  KVJIT_RETURN_IF_ERROR(runtime::CheckSameVocabulary(*draft, target));
  return draft;
}

// A draft model of its own with a pool that holds, in its blocks, twice the
// tokens the target's does: every sequence's history and its drafts.
absl::StatusOr<std::unique_ptr<runtime::Drafter>> DraftExecutable(
    const std::string& draft_model, const runtime::Executable& target,
    runtime::StepRunner& target_runner, int threads) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> draft,
                         LoadDraft(draft_model, CompileOptionsFromFlags(), target));
  const int64_t target_tokens = target_runner.num_blocks() * target_runner.block_size();
  const int64_t block_size = draft->kv_layout().block_size();
  const int64_t blocks = (2 * target_tokens + block_size - 1) / block_size;
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StepRunner> runner,
                         runtime::CreateStepRunner(*draft, blocks, threads, DeviceFromFlags(*draft)));
  const double cost_per_token = runtime::RelativeStepCost(*draft, target);
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ModelDrafter> drafter,
                         runtime::ModelDrafter::WithOwnCache(std::move(draft), std::move(runner)));
  drafter->set_cost_per_token(cost_per_token);
  return std::unique_ptr<runtime::Drafter>(std::move(drafter));
}

// The target's first `layers` layers, compiled from its model by the
// keep-first-layers pass with the target's options, running over the
// target's KV pool: their keys and values are the target's, computed once.
absl::StatusOr<std::unique_ptr<runtime::Drafter>> LayerSkippingDraft(
    const std::string& model_or_kvx, int64_t layers, const runtime::Executable& target,
    runtime::StepRunner& target_runner, int threads) {
  if (absl::EndsWith(model_or_kvx, ".kvx")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the self-draft is compiled from the target's model; give the GGUF file or Hugging Face "
        "directory instead of the executable ", model_or_kvx));
  }
  const int64_t target_layers = target.kv_layout().num_layers();
  if (layers >= target_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "keeps ", layers, " layers, but the target has ", target_layers,
        ": a self-draft must skip at least one of them to be cheaper than the target"));
  }
  auto* cpu_target = dynamic_cast<runtime::CpuStepRunner*>(&target_runner);
  if (cpu_target == nullptr) {
    return absl::UnimplementedError(
        "the self-draft shares the target's KV pool, which only the CPU runner can lend yet; "
        "use --device cpu, or --speculative ngram or draft:FILE");
  }
  codegen::CompileOptions options = CompileOptionsFromFlags();
  options.keep_layers = layers;
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> draft,
                         LoadDraft(model_or_kvx, options, target));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CpuStepRunner> runner,
                         runtime::CpuStepRunner::CreateOverPool(*draft, *cpu_target, threads));
  const double cost_per_token = runtime::RelativeStepCost(*draft, target);
  std::unique_ptr<runtime::ModelDrafter> drafter =
      runtime::ModelDrafter::OverTargetCache(std::move(draft), std::move(runner), layers);
  drafter->set_cost_per_token(cost_per_token);
  return std::unique_ptr<runtime::Drafter>(std::move(drafter));
}

// Names the --speculative choice in front of a failure to build its draft.
absl::StatusOr<std::unique_ptr<runtime::Drafter>> NamingTheChoice(
    const SpeculationChoice& choice, absl::StatusOr<std::unique_ptr<runtime::Drafter>> drafter) {
  if (drafter.ok()) return drafter;
  return absl::Status(drafter.status().code(), absl::StrCat("--speculative ", choice.Name(), ": ",
                                                            drafter.status().message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<runtime::Drafter>> MakeDrafter(
    const SpeculationChoice& choice, const std::string& model_or_kvx,
    const runtime::Executable& target, runtime::StepRunner& target_runner, int threads) {
  switch (choice.draft) {
    case SpeculationChoice::Draft::kNone:
      return nullptr;
    case SpeculationChoice::Draft::kNgram:
      return std::make_unique<runtime::NgramDrafter>(choice.min_ngram, choice.max_ngram);
    case SpeculationChoice::Draft::kExecutable:
      return NamingTheChoice(choice,
                             DraftExecutable(choice.draft_path, target, target_runner, threads));
    case SpeculationChoice::Draft::kLayers:
      return NamingTheChoice(choice, LayerSkippingDraft(model_or_kvx, choice.layers, target,
                                                        target_runner, threads));
  }
  return absl::InternalError(absl::StrCat("--speculative ", choice.Name(), ": unknown draft"));
}

}  // namespace kvjit::cli
