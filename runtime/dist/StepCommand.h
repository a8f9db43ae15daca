#ifndef KVJIT_RUNTIME_DIST_STEPCOMMAND_H_
#define KVJIT_RUNTIME_DIST_STEPCOMMAND_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/exec/StepInputs.h"

// What rank 0 of a tensor-parallel model tells the other ranks
// (TensorParallelRunner.h, RankWorker.h), and its bytes on the wire
// (BroadcastBytes). The ranks run one build of kvjit on one kind of machine,
// so numbers travel in the machine's own byte order; the first byte, the
// format's version, catches ranks that run different builds.
namespace kvjit::runtime::dist {

// How every rank makes its step runner, sent once before any step.
struct RankSetup {
  std::string executable_path;  // the `kvjit compile --tp N` executable, which every rank loads
  int64_t num_blocks = 0;       // the KV pool's blocks, the same on every rank
  int threads = 0;              // each rank's CPU threads
  std::string device;           // as RunnerFactory.h spells it: "cpu", "cuda", "cuda:N"

  bool operator==(const RankSetup& other) const;
};

// StepRunner::CopyBlock's arguments.
struct CopyBlockCommand {
  int64_t source = 0;
  int64_t destination = 0;

  bool operator==(const CopyBlockCommand& other) const {
    return source == other.source && destination == other.destination;
  }
};

// The end of the workers' loop: rank 0 is done.
struct StopCommand {
  bool operator==(const StopCommand&) const { return true; }
};

// A step to run is its inputs.
using StepCommand = std::variant<RankSetup, StepInputs, CopyBlockCommand, StopCommand>;

std::vector<uint8_t> EncodeStepCommand(const StepCommand& command);

// The command `bytes` encode. Bytes from another build, of no command, cut
// short or with bytes left over are an InvalidArgument error that says which
// and where.
absl::StatusOr<StepCommand> DecodeStepCommand(absl::Span<const uint8_t> bytes);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_STEPCOMMAND_H_
