// kvjit reference MODEL -p PROMPT: greedy generation by the reference
// evaluator, recomputing the whole sequence for every token. Slow; it proves
// the frontend end to end before any cache or backend is involved.

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "absl/flags/flag.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/CompilerCommands.h"
#include "passes/registration/KvjitRegistration.h"

ABSL_FLAG(int, top_logits, 0, "write the K largest logits of every step to stderr");
ABSL_FLAG(bool, raw, false, "tokenize the prompt without BOS and without special-token parsing");

namespace kvjit::cli {
namespace {

absl::Status RunReference(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL argument");
  KVJIT_ASSIGN_OR_RETURN(model::ModelFile model, model::OpenModelFile(arguments[0]));
  KVJIT_ASSIGN_OR_RETURN(auto tokenizer, model::LoadTokenizer(model));
  const bool raw = absl::GetFlag(FLAGS_raw);
  KVJIT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt,
                         tokenizer->Encode(absl::GetFlag(FLAGS_p), !raw, !raw));
  if (static_cast<int64_t>(prompt.size()) + absl::GetFlag(FLAGS_n) > model.config.context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt's ", prompt.size(), " tokens plus ", absl::GetFlag(FLAGS_n),
        " new ones exceed the context of ", model.config.context_length));
  }

  mlir::DialectRegistry registry;
  RegisterKvjitDialects(registry);
  mlir::MLIRContext context(registry);
  KVJIT_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                         model::BuildDecoderModule(context, model.config, *model.weights));
  model::ReferenceWeights weights(*model.weights);
  reference::ReferenceEvaluator evaluator(*module, weights);

  tokenizer::StreamingDecoder decoder(*tokenizer);
  reference::GreedyOptions options;
  options.max_new_tokens = absl::GetFlag(FLAGS_n);
  options.is_stop_token = [&](int32_t id) { return tokenizer->IsEndOfGeneration(id); };
  options.on_token = [&](int32_t id) {
    std::fputs(decoder.Push(id).c_str(), stdout);
    std::fflush(stdout);
  };
  if (const int top = absl::GetFlag(FLAGS_top_logits); top > 0) {
    options.on_logits = [top, step = 0](absl::Span<const float> logits) mutable {
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      const int k = std::min<int>(top, logits.size());
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      std::fprintf(stderr, "step %d:", step++);
      for (int i = 0; i < k; ++i) std::fprintf(stderr, " %d=%.4f", order[i], logits[order[i]]);
      std::fprintf(stderr, "\n");
    };
  }
  KVJIT_ASSIGN_OR_RETURN(std::vector<int32_t> generated,
                         reference::GenerateGreedy(evaluator, model::kForwardFunctionName, prompt,
                                                   options));
  std::fputs(decoder.Flush().c_str(), stdout);
  std::fputs("\n", stdout);
  return absl::OkStatus();
}

}  // namespace

Subcommand ReferenceCommand() { return CompilerCommand("reference", RunReference); }

}  // namespace kvjit::cli
