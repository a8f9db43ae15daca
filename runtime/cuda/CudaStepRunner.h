#ifndef KVJIT_RUNTIME_CUDA_CUDASTEPRUNNER_H_
#define KVJIT_RUNTIME_CUDA_CUDASTEPRUNNER_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/cuda/CublasGemm.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/DecodePadding.h"
#include "runtime/cuda/LaunchBinding.h"
#include "runtime/dist/CollectiveTimeout.h"
#include "runtime/dist/DeviceCommunicator.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/exec/StepValidation.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/StepContract.h"

namespace kvjit::cuda {

struct CudaRunnerOptions {
  int device_ordinal = 0;
  // Replay pure decode steps of up to this many sequences from CUDA graphs
  // (one per power-of-two batch bucket, captured on first use); 0 runs every
  // step launch by launch.
  int64_t largest_graph_batch = 64;
  // Waits for each instruction and reports the first that fails, by index and
  // opcode (kernel faults are otherwise reported by the step's last call);
  // for debugging, and slower. Turns graphs off.
  bool synchronize_each_instruction = false;
  // How long a wait for the stream may last where it holds collectives: a
  // rank that never joins one must end the step, not hang it.
  absl::Duration collective_timeout = runtime::dist::kDefaultCollectiveTimeout;
};

// Runs an executable's step program on one GPU, through the CUDA module the
// compiler wrote into it (`kvjit compile --target cuda`): every kernel and
// launch size comes from there (see kvx.fbs, CudaModule, and
// runtime/schema/CudaLaunchAbi.h).
//
// Device memory is one allocation (PoolLayout): the weights, uploaded once,
// byte for byte as in their files; the activation arena of the memory plan;
// one fixed buffer per step input, sized for the program's tokens per step;
// the scratch of the largest path; and the paged KV pool of `num_blocks`
// blocks plus one padding block (see DecodePadding.h). A step uploads its
// inputs into the fixed buffers, runs each instruction's decode path (few
// rows) or prefill path (cuBLAS GEMM), and copies the logits back.
//
// A tensor-parallel rank's program (`kvjit compile --tp N --target cuda`)
// holds collectives: each runs between its path's launches and epilogue as
// a call of `communicator` (NCCL) on the runner's stream
// (CollectiveLayout.h), and the runner waits for its steps with the
// communicator's bounded AwaitStream instead of cuStreamSynchronize.
class CudaStepRunner final : public runtime::StepRunner {
 public:
  // `communicator` is this rank's, on `options.device_ordinal`, for a
  // tensor-parallel rank's program (which is refused without one); null for
  // a whole model's. The runner owns it.
  static absl::StatusOr<std::unique_ptr<CudaStepRunner>> Create(
      const runtime::Executable& executable, int64_t num_blocks, const CudaRunnerOptions& options,
      std::unique_ptr<runtime::dist::DeviceCommunicator> communicator = nullptr);
  ~CudaStepRunner() override;

  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return limits_.vocab_size; }
  int64_t max_tokens_per_step() const override { return limits_.max_tokens; }
  int64_t block_size() const override { return limits_.block_size; }
  int64_t attention_window() const override { return executable_.AttentionWindow(); }
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  absl::StatusOr<absl::Span<const float>> Run(const runtime::StepInputs& inputs) override;
  // Times each instruction with a CUDA event before and after it on the
  // stream, read once the step is done; an observed step runs its launches
  // one by one, never from a graph, so that each instruction's own events
  // enclose it.
  absl::Status SetObserver(runtime::StepObserver* observer) override;

  const CudaDevice& device() const { return *device_; }
  // Decode steps served by replaying a graph, and graphs captured so far.
  int64_t graph_replays() const { return graph_replays_; }
  int64_t graphs_captured() const { return static_cast<int64_t>(graphs_.size()); }
  // The batch buckets whose decode steps replay graphs (empty without graphs).
  const std::vector<int64_t>& graph_buckets() const { return graph_buckets_.buckets(); }

 private:
  // Buffer pointers of one instruction's LaunchArgs; the sizes and the
  // scratch pointer are filled per step.
  struct PreparedInstruction {
    const kvx::Instruction* instruction;
    const kvx::CudaInstruction* cuda;
    BoundInstruction launch;
  };

  CudaStepRunner(const runtime::Executable& executable, int64_t num_blocks,
                 const CudaRunnerOptions& options,
                 std::unique_ptr<runtime::dist::DeviceCommunicator> communicator);
  absl::Status Initialize();
  absl::Status LoadKernels();
  absl::Status PlanAndAllocate();
  absl::Status UploadWeights();
  absl::Status PrepareInstructions();
  // The largest bucket whose decode steps take no GEMM path (cuBLAS is not
  // captured into graphs) and the same paths as a single sequence, within
  // the options and the program.
  int64_t LargestGraphBucket() const;
  const kvx::CudaPath& PathFor(const PreparedInstruction& prepared,
                               const runtime::StepSizes& sizes) const;

  // Uploads a validated step, enqueues it (from a graph where one serves)
  // and the copy of its logits.
  absl::Status EnqueueStep(const runtime::StepInputs& inputs);
  absl::Status UploadInputs(const runtime::StepInputs& inputs);
  // Enqueues every instruction for a step of `sizes` on the stream.
  absl::Status EnqueueProgram(const runtime::StepSizes& sizes);
  absl::Status EnqueuePath(const kvx::CudaPath& path, PreparedInstruction& prepared,
                           const runtime::StepSizes& sizes);
  // The events' times of the step that ran, reported to the observer; the
  // host clock's `began` stands for the step's first event.
  absl::Status ReportInstructionTimes(const runtime::StepInputs& inputs,
                                      runtime::StepObserver::Clock::time_point began);
  absl::Status EnqueueLaunches(
      const flatbuffers::Vector<flatbuffers::Offset<kvx::CudaLaunch>>* launches,
      cuda_abi::LaunchArgs& args, const runtime::StepSizes& sizes);
  absl::Status RunGraph(int64_t bucket, const runtime::StepSizes& sizes);
  // Enqueues a collective instruction's call of the communicator.
  absl::Status EnqueueCollective(const PreparedInstruction& prepared,
                                 const runtime::StepSizes& sizes);
  // Waits until the stream's work is done: bounded by the collective
  // timeout where the program holds collectives, whose peers may never come.
  absl::Status AwaitStream();

  const runtime::Executable& executable_;
  const kvx::CudaModule& module_;
  int64_t num_blocks_;
  CudaRunnerOptions options_;
  runtime::StepLimits limits_;
  DecodeBuckets graph_buckets_{0};

  std::unique_ptr<CudaDevice> device_;
  // Null without collectives. After the device: destroyed before it, while
  // its context is still held.
  std::unique_ptr<runtime::dist::DeviceCommunicator> communicator_;
  std::unique_ptr<CublasGemm> gemm_;  // from the first GEMM on
  LoadedModule kernels_module_;
  std::vector<CUfunction> kernels_;

  DeviceAllocation memory_;
  std::vector<CUdeviceptr> weights_;  // per weight index
  CUdeviceptr arena_ = 0;
  CUdeviceptr scratch_ = 0;
  uint64_t scratch_capacity_ = 0;
  CUdeviceptr kv_pool_ = 0;
  // Per StepInput, its fixed device buffer and capacity in int32s.
  std::array<CUdeviceptr, kvx::kStepInputCount> input_buffers_{};
  std::array<int64_t, kvx::kStepInputCount> input_capacity_{};
  // Page-locked copies of the step's inputs (a region per input)
  // and of the logits, so that copies are asynchronous DMA.
  PinnedBuffer staging_;
  std::array<uint64_t, kvx::kStepInputCount> staging_offset_{};
  PinnedBuffer logits_;

  std::vector<PreparedInstruction> instructions_;
  std::map<int64_t, GraphExec> graphs_;  // by bucket
  int64_t graph_replays_ = 0;
  runtime::StepObserver* observer_ = nullptr;
  // While observed: per instruction, the events recorded before and after it.
  std::vector<std::pair<Event, Event>> instruction_events_;
};

// The factory the engines use: a CudaStepRunner as a StepRunner.
absl::StatusOr<std::unique_ptr<runtime::StepRunner>> CreateCudaStepRunner(
    const runtime::Executable& executable, int64_t num_blocks, const CudaRunnerOptions& options,
    std::unique_ptr<runtime::dist::DeviceCommunicator> communicator = nullptr);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_CUDASTEPRUNNER_H_
