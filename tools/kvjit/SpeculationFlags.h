#ifndef KVJIT_TOOLS_KVJIT_SPECULATIONFLAGS_H_
#define KVJIT_TOOLS_KVJIT_SPECULATIONFLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/generation/Drafter.h"

// Speculative decoding, for every subcommand that decodes (run, chat, serve,
// bench).
ABSL_DECLARE_FLAG(std::string, speculative);
ABSL_DECLARE_FLAG(int, draft_tokens);
ABSL_DECLARE_FLAG(int, ngram_max);
ABSL_DECLARE_FLAG(int, ngram_min);
ABSL_DECLARE_FLAG(int, speculation_max_batch);

namespace kvjit::cli {

// `names` and the flags above, for a decoding subcommand's --help
// (Subcommand::shared_flags).
std::vector<std::string> WithSpeculationFlags(std::vector<std::string> names);

// What --speculative and its settings ask for.
struct SpeculationChoice {
  enum class Draft { kNone, kNgram, kExecutable, kLayers };
  Draft draft = Draft::kNone;
  // kExecutable: the draft's .kvx (or a model compiled on the fly).
  std::string draft_path;
  // kLayers: the target's first layers the self-draft keeps.
  int64_t layers = 0;
  // 0 when draft is kNone.
  int64_t draft_tokens = 0;
  int64_t min_ngram = 2;
  int64_t max_ngram = 3;
  // The in-flight batching scheduler speculates only in steps of at most
  // this many decoding sequences (BatchSchedulerOptions).
  int64_t max_batch = 8;

  bool enabled() const { return draft != Draft::kNone; }
  // "ngram", "draft:FILE", "layers:K" as the flag spells it.
  std::string Name() const;
};

// Parses --speculative (ngram, draft:FILE or layers:K), --draft_tokens,
// --ngram_min, --ngram_max and --speculation_max_batch; an error names the
// bad value.
absl::StatusOr<SpeculationChoice> SpeculationFromFlags();

// The drafter `choice` names for a target compiled from `model_or_kvx` into
// `target` and run by `target_runner` with `threads` threads. A draft
// executable is loaded (a model compiled on the fly) and refused when its
// vocabulary differs from the target's, naming the difference; the
// layer-skipping self-draft is compiled from the target's model and reads
// and writes the target runner's KV pool. Null when choice is kNone.
absl::StatusOr<std::unique_ptr<runtime::Drafter>> MakeDrafter(
    const SpeculationChoice& choice, const std::string& model_or_kvx,
    const runtime::Executable& target, runtime::StepRunner& target_runner, int threads);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_SPECULATIONFLAGS_H_
