#include "runtime/cuda/CudaStepRunner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cuda/CollectiveLayout.h"
#include "runtime/cuda/CudaModuleVerifier.h"
#include "runtime/cuda/PoolLayout.h"
#include "runtime/exec/OpTable.h"

namespace kvjit::cuda {
namespace {

using runtime::StepSizes;

void* DevicePointer(CUdeviceptr address) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address));
}

template <typename Visit>
void ForEachLaunch(const kvx::CudaPath& path, const Visit& visit) {
  for (const auto* launches : {path.launches(), path.epilogue()}) {
    if (launches == nullptr) continue;
    for (const kvx::CudaLaunch* launch : *launches) visit(*launch);
  }
}

}  // namespace

CudaStepRunner::CudaStepRunner(const runtime::Executable& executable, int64_t num_blocks,
                               const CudaRunnerOptions& options,
                               std::unique_ptr<runtime::dist::DeviceCommunicator> communicator)
    : executable_(executable),
      module_(*executable.cuda()),
      num_blocks_(num_blocks),
      options_(options),
      communicator_(std::move(communicator)) {}

CudaStepRunner::~CudaStepRunner() {
  // Members free device memory, graphs and the cuBLAS handle as they go,
  // which needs the context current and the stream idle.
  if (device_ != nullptr && device_->MakeCurrent().ok()) AwaitStream().IgnoreError();
}

absl::StatusOr<std::unique_ptr<CudaStepRunner>> CudaStepRunner::Create(
    const runtime::Executable& executable, int64_t num_blocks, const CudaRunnerOptions& options,
    std::unique_ptr<runtime::dist::DeviceCommunicator> communicator) {
  if (executable.cuda() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(executable.path(),
                     " has no CUDA kernels: it was compiled for the CPU; compile the model "
                     "with --target cuda to run it on a GPU"));
  }
  KVJIT_RETURN_IF_ERROR(VerifyCudaModule(executable));
  if (num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV pool needs at least one block, got ", num_blocks));
  }
  const auto& program = *executable.program().instructions();
  const auto collective = std::find_if(program.begin(), program.end(), [](const auto* instruction) {
    return IsCollective(instruction->op());
  });
  if (collective != program.end() && communicator == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), ": instruction ", collective - program.begin(), " (",
        kvx::EnumNameOpCode(collective->op()), ") runs between the GPUs of ",
        executable.tensor_parallel_ranks(), " tensor-parallel ranks, and this CUDA runner was "
        "made without a device communicator (NCCL): start the ranks with mpirun -np ",
        executable.tensor_parallel_ranks(), " kvjit ... --device cuda"));
  }
  if (communicator != nullptr && (communicator->size() != executable.tensor_parallel_ranks() ||
                                  communicator->rank() != executable.tensor_parallel_rank())) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " holds the program of rank ", executable.tensor_parallel_rank(),
        " of ", executable.tensor_parallel_ranks(), ", and the device communicator is rank ",
        communicator->rank(), " of ", communicator->size()));
  }
  std::unique_ptr<CudaStepRunner> runner(
      new CudaStepRunner(executable, num_blocks, options, std::move(communicator)));
  absl::Status status = runner->Initialize();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(executable.path(), ": ", status.message()));
  }
  return runner;
}

absl::Status CudaStepRunner::Initialize() {
  const kvx::KvLayout& kv = executable_.kv_layout();
  limits_.max_tokens = executable_.program().max_tokens();
  limits_.vocab_size = executable_.config().vocab_size();
  limits_.num_blocks = num_blocks_;
  limits_.block_size = kv.block_size();
  if (limits_.block_size <= 0 || kv.bytes_per_block() == 0) {
    return absl::InvalidArgumentError("the KV layout has empty blocks");
  }
  // A sequence's block table covers at most the model's context, in blocks
  // of the pool.
  const int64_t context = executable_.config().context_length();
  limits_.max_columns =
      context > 0 ? std::min((context + limits_.block_size - 1) / limits_.block_size, num_blocks_)
                  : num_blocks_;
  if (executable_.program().logits()->kind() != kvx::BufferKind::Arena) {
    return absl::InvalidArgumentError("the program's logits are not in the activation arena");
  }
  KVJIT_ASSIGN_OR_RETURN(device_, CudaDevice::Create(options_.device_ordinal));
  KVJIT_RETURN_IF_ERROR(LoadKernels());
  KVJIT_RETURN_IF_ERROR(PlanAndAllocate());
  KVJIT_RETURN_IF_ERROR(UploadWeights());
  KVJIT_RETURN_IF_ERROR(PrepareInstructions());
  graph_buckets_ = DecodeBuckets(LargestGraphBucket());
  return AwaitStream();
}

absl::Status CudaStepRunner::LoadKernels() {
  absl::Span<const uint8_t> cubin;
  if (module_.cubin() != nullptr) cubin = {module_.cubin()->data(), module_.cubin()->size()};
  const absl::string_view ptx =
      module_.ptx() != nullptr ? absl::string_view(module_.ptx()->c_str(), module_.ptx()->size())
                               : absl::string_view();
  const int arch = static_cast<int>(module_.arch());
  absl::StatusOr<LoadedModule> loaded = device_->LoadModule(cubin, arch, ptx, arch);
  // A cubin of this architecture that the driver still refuses (another
  // variant, an older driver) may load as PTX.
  if (!loaded.ok() && !cubin.empty() && !ptx.empty() && arch == device_->arch()) {
    absl::StatusOr<LoadedModule> jitted = device_->LoadModule({}, 0, ptx, arch);
    if (!jitted.ok()) {
      return absl::Status(
          jitted.status().code(),
          absl::StrCat(loaded.status().message(), "; and then ", jitted.status().message()));
    }
    loaded = std::move(jitted);
  }
  KVJIT_RETURN_IF_ERROR(loaded.status());
  kernels_module_ = *std::move(loaded);
  std::vector<uint32_t> shared_bytes(module_.kernels()->size(), 0);
  for (const kvx::CudaInstruction* instruction : *module_.instructions()) {
    for (const kvx::CudaPath* path : {instruction->decode(), instruction->prefill()}) {
      ForEachLaunch(*path, [&](const kvx::CudaLaunch& launch) {
        shared_bytes[launch.kernel()] =
            std::max(shared_bytes[launch.kernel()], launch.dynamic_shared_bytes());
      });
    }
  }
  for (size_t k = 0; k < module_.kernels()->size(); ++k) {
    KVJIT_ASSIGN_OR_RETURN(
        CUfunction function,
        device_->GetFunction(kernels_module_, module_.kernels()->Get(k)->name()->str()));
    constexpr uint32_t kDefaultSharedLimit = 48 * 1024;
    if (shared_bytes[k] > kDefaultSharedLimit) {
      KVJIT_RETURN_IF_ERROR(device_->SetDynamicSharedMemory(function, shared_bytes[k]));
    }
    kernels_.push_back(function);
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::PlanAndAllocate() {
  PoolLayout layout;
  const auto& weights = *executable_.root().weights();
  std::vector<uint64_t> weight_offsets;
  for (size_t i = 0; i < weights.size(); ++i) {
    KVJIT_ASSIGN_OR_RETURN(
        uint64_t offset,
        layout.Reserve("weights", executable_.WeightBytes(static_cast<uint32_t>(i)).size()));
    weight_offsets.push_back(offset);
  }
  KVJIT_ASSIGN_OR_RETURN(uint64_t arena,
                         layout.Reserve("activation arena", executable_.program().arena_bytes()));
  const int64_t tokens = limits_.max_tokens;
  // Each input's largest: a step of max_tokens tokens, each its own sequence
  // and logits row.
  const StepSizes largest = {tokens, tokens, tokens, limits_.max_columns};
  std::array<uint64_t, kvx::kStepInputCount> input_offsets{};
  uint64_t staging_bytes = 0;
  for (int k = 0; k < kvx::kStepInputCount; ++k) {
    input_capacity_[k] = runtime::StepInputElements(static_cast<kvx::StepInput>(k), largest);
    const uint64_t bytes = input_capacity_[k] * sizeof(int32_t);
    KVJIT_ASSIGN_OR_RETURN(input_offsets[k], layout.Reserve("step inputs", bytes));
    staging_offset_[k] = staging_bytes;
    staging_bytes += (bytes + 63) / 64 * 64;
  }
  // One scratch serves every path: the largest any needs at the largest step
  // that takes it. A decode path only runs below prefill_min_rows rows, and
  // its scratch (split-K attention's partial sums) grows with the rows, so
  // sizing it at the largest step would waste memory in proportion to
  // max_tokens / prefill_min_rows. The candidates are the largest step, and
  // the largest with its logits rows (the logits head's rows), or all of
  // T, L and S, just under the switch.
  const int64_t below_switch =
      std::min<int64_t>(tokens, std::max<int64_t>(1, module_.prefill_min_rows() - 1));
  const std::array<StepSizes, 3> candidates = {
      StepSizes{tokens, tokens, tokens, limits_.max_columns},
      StepSizes{tokens, below_switch, tokens, limits_.max_columns},
      StepSizes{below_switch, below_switch, below_switch, limits_.max_columns}};
  uint64_t scratch_bytes = 0;
  for (const kvx::CudaInstruction* instruction : *module_.instructions()) {
    for (const StepSizes& sizes : candidates) {
      const int64_t rows = runtime::SizeProduct(instruction->rows(), sizes);
      const kvx::CudaPath& path = rows < static_cast<int64_t>(module_.prefill_min_rows())
                                      ? *instruction->decode()
                                      : *instruction->prefill();
      scratch_bytes = std::max(scratch_bytes, runtime::ScratchBytes(path, sizes));
    }
  }
  KVJIT_ASSIGN_OR_RETURN(uint64_t scratch, layout.Reserve("scratch", scratch_bytes));
  // One more block than the pool's: the padding block of graph-replayed steps.
  uint64_t kv_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(num_blocks_ + 1),
                             executable_.kv_layout().bytes_per_block(), &kv_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_blocks_, " KV blocks overflow the address space"));
  }
  KVJIT_ASSIGN_OR_RETURN(uint64_t kv_pool, layout.Reserve("KV cache", kv_bytes));

  KVJIT_ASSIGN_OR_RETURN(
      memory_,
      device_->Allocate(layout.total_bytes(), absl::StrCat("the model (", layout.Describe(), ")")));
  const CUdeviceptr base = memory_.base();
  for (uint64_t offset : weight_offsets) weights_.push_back(base + offset);
  arena_ = base + arena;
  scratch_ = scratch_bytes > 0 ? base + scratch : 0;
  kv_pool_ = base + kv_pool;
  for (int k = 0; k < kvx::kStepInputCount; ++k) input_buffers_[k] = base + input_offsets[k];
  scratch_capacity_ = scratch_bytes;
  KVJIT_ASSIGN_OR_RETURN(staging_, device_->AllocatePinned(staging_bytes, "the step's inputs"));
  // Zeroed like the CPU pool: no step reads a slot before writing it, but a
  // fresh pool should not hold another process's bytes.
  return device_->Zero(kv_pool_, kv_bytes);
}

absl::Status CudaStepRunner::UploadWeights() {
  for (size_t i = 0; i < weights_.size(); ++i) {
    const absl::Span<const uint8_t> bytes = executable_.WeightBytes(static_cast<uint32_t>(i));
    KVJIT_RETURN_IF_ERROR(device_->CopyToDevice(weights_[i], bytes.data(), bytes.size()));
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::PrepareInstructions() {
  const auto& program = *executable_.program().instructions();
  if (module_.instructions()->size() != program.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA module has ", module_.instructions()->size(),
                     " instructions for a program of ", program.size()));
  }
  LaunchMemory memory;
  memory.arena = arena_;
  memory.weights.assign(weights_.begin(), weights_.end());
  std::copy(input_buffers_.begin(), input_buffers_.end(), memory.step_inputs.begin());
  memory.kv_pool = kv_pool_;
  memory.kv_layer_stride_bytes = executable_.kv_layout().layer_stride_bytes();
  for (size_t i = 0; i < program.size(); ++i) {
    absl::StatusOr<BoundInstruction> bound = BindInstruction(*program[i], memory);
    if (!bound.ok()) {
      return absl::Status(bound.status().code(),
                          absl::StrCat("instruction ", i, " ", bound.status().message()));
    }
    instructions_.push_back({program[i], module_.instructions()->Get(i), *std::move(bound)});
  }
  return absl::OkStatus();
}

const kvx::CudaPath& CudaStepRunner::PathFor(const PreparedInstruction& prepared,
                                             const StepSizes& sizes) const {
  const int64_t rows = runtime::SizeProduct(prepared.cuda->rows(), sizes);
  return rows < static_cast<int64_t>(module_.prefill_min_rows()) ? *prepared.cuda->decode()
                                                                 : *prepared.cuda->prefill();
}

int64_t CudaStepRunner::LargestGraphBucket() const {
  if (options_.synchronize_each_instruction) return 0;
  // A tensor-parallel rank's steps run launch by launch, never from graphs.
  // NCCL 2.9 on can be captured into graphs, but no multi-GPU machine has
  // yet checked this runner's capture and replay of collectives against
  // launch by launch (docs/scale-out.md, "On GPUs: NCCL"), and a wrong replay would
  // hang or corrupt every rank; so these programs pay the launches.
  if (communicator_ != nullptr) return 0;
  const int64_t limit = std::min(options_.largest_graph_batch, limits_.max_tokens);
  // A bucket serves steps of 1 to `bucket` sequences, which must take the
  // paths that it takes: the decode and prefill paths reduce a row in
  // different orders, and a padded step must compute what the unpadded one
  // would. Path choice grows with the step, so comparing with one sequence
  // covers every step in between.
  const StepSizes one = {1, 1, 1, limits_.max_columns};
  int64_t largest = 0;
  for (int64_t bucket = 1; bucket <= limit; bucket *= 2) {
    const StepSizes sizes = {bucket, bucket, bucket, limits_.max_columns};
    for (const PreparedInstruction& prepared : instructions_) {
      const kvx::CudaPath& path = PathFor(prepared, sizes);
      if (path.gemm() != nullptr || &path != &PathFor(prepared, one)) return largest;
    }
    largest = bucket;
  }
  return largest;
}

absl::Status CudaStepRunner::UploadInputs(const runtime::StepInputs& inputs) {
  for (int k = 0; k < kvx::kStepInputCount; ++k) {
    const runtime::StepInputs::Values& values = inputs.values[k];
    if (static_cast<int64_t>(values.size()) > input_capacity_[k]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step input ", kvx::kStepInputs[k].name, " has ",
          values.size(), " values; its device buffer holds ", input_capacity_[k]));
    }
    if (values.empty()) continue;
    auto* staged = static_cast<uint8_t*>(staging_.data()) + staging_offset_[k];
    std::memcpy(staged, values.data(), values.size() * sizeof(int32_t));
    KVJIT_RETURN_IF_ERROR(
        device_->CopyToDevice(input_buffers_[k], staged, values.size() * sizeof(int32_t)));
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::EnqueueLaunches(
    const flatbuffers::Vector<flatbuffers::Offset<kvx::CudaLaunch>>* launches,
    cuda_abi::LaunchArgs& args, const StepSizes& sizes) {
  if (launches == nullptr) return absl::OkStatus();
  void* params[] = {&args};
  for (const kvx::CudaLaunch* launch : *launches) {
    const int64_t grid[3] = {runtime::SizeProduct(launch->grid_x(), sizes),
                             runtime::SizeProduct(launch->grid_y(), sizes),
                             runtime::SizeProduct(launch->grid_z(), sizes)};
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;
    if (grid[0] > std::numeric_limits<int32_t>::max() || grid[1] > 65535 || grid[2] > 65535) {
      return absl::OutOfRangeError(absl::StrCat(
          "kernel '", module_.kernels()->Get(launch->kernel())->name()->str(), "' needs a grid of ",
          grid[0], " x ", grid[1], " x ", grid[2], " blocks, over CUDA's limits"));
    }
    LaunchDims dims;
    for (int d = 0; d < 3; ++d) dims.grid[d] = static_cast<unsigned>(grid[d]);
    dims.block[0] = launch->block_threads();
    dims.shared_bytes = launch->dynamic_shared_bytes();
    absl::Status status = device_->Launch(kernels_[launch->kernel()], dims, params);
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("kernel '", module_.kernels()->Get(launch->kernel())->name()->str(),
                       "': ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::EnqueuePath(const kvx::CudaPath& path, PreparedInstruction& prepared,
                                         const StepSizes& sizes) {
  cuda_abi::LaunchArgs& args = prepared.launch.args;
  const uint64_t scratch_bytes = runtime::ScratchBytes(path, sizes);
  if (scratch_bytes > scratch_capacity_) {
    return absl::OutOfRangeError(absl::StrCat(
        "the path needs ", scratch_bytes, " bytes of scratch; the runner has ", scratch_capacity_));
  }
  args.buffers[prepared.launch.scratch_index()] =
      scratch_bytes > 0 ? DevicePointer(scratch_) : nullptr;
  KVJIT_RETURN_IF_ERROR(EnqueueLaunches(path.launches(), args, sizes));
  if (IsCollective(prepared.instruction->op())) {
    KVJIT_RETURN_IF_ERROR(EnqueueCollective(prepared, sizes));
    return EnqueueLaunches(path.epilogue(), args, sizes);
  }
  if (const kvx::CudaGemm* gemm = path.gemm()) {
    const int64_t rows = runtime::SizeProduct(gemm->m(), sizes);
    // cuBLAS starts on the first GEMM: decode-only use never pays for it.
    if (gemm_ == nullptr) {
      KVJIT_ASSIGN_OR_RETURN(gemm_, CublasGemm::Create(device_->stream()));
    }
    if (rows > 0) {
      KVJIT_RETURN_IF_ERROR(gemm_->LinearF16(scratch_ + gemm->activation_offset(),
                                             scratch_ + gemm->weight_offset(),
                                             prepared.launch.first_output, rows, gemm->k(),
                                             gemm->n()));
    }
    KVJIT_RETURN_IF_ERROR(EnqueueLaunches(path.epilogue(), args, sizes));
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::EnqueueCollective(const PreparedInstruction& prepared,
                                               const StepSizes& sizes) {
  KVJIT_ASSIGN_OR_RETURN(const CollectiveCall call, PlanCollective(*prepared.instruction, sizes));
  if (call.count == 0) return absl::OkStatus();
  void* stream = device_->stream();
  if (call.op == kvx::OpCode::AllReduce) {
    return communicator_->AllReduceSum(
        static_cast<float*>(DevicePointer(prepared.launch.first_output)), call.count, stream);
  }
  if (call.scratch_bytes > scratch_capacity_) {
    return absl::OutOfRangeError(absl::StrCat("the all-gather needs ", call.scratch_bytes,
                                              " bytes of scratch; the runner has ",
                                              scratch_capacity_));
  }
  return communicator_->AllGather(static_cast<const float*>(DevicePointer(scratch_)), call.count,
                                  static_cast<float*>(DevicePointer(scratch_ + call.gathered_offset_bytes)),
                                  stream);
}

absl::Status CudaStepRunner::AwaitStream() {
  if (communicator_ == nullptr) return device_->Synchronize();
  return communicator_->AwaitStream([this] { return device_->StreamFinished(); },
                                    options_.collective_timeout);
}

absl::Status CudaStepRunner::EnqueueProgram(const StepSizes& sizes) {
  const auto& program = *executable_.program().instructions();
  for (size_t i = 0; i < instructions_.size(); ++i) {
    PreparedInstruction& prepared = instructions_[i];
    SetStepSizes(sizes, prepared.launch.args);
    absl::Status status =
        observer_ != nullptr ? device_->Record(instruction_events_[i].first) : absl::OkStatus();
    if (status.ok()) status = EnqueuePath(PathFor(prepared, sizes), prepared, sizes);
    if (status.ok() && observer_ != nullptr) status = device_->Record(instruction_events_[i].second);
    if (status.ok() && options_.synchronize_each_instruction) status = AwaitStream();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(executable_.path(), ": instruction ", i, " (",
                                                      kvx::EnumNameOpCode(program[i]->op()),
                                                      "): ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaStepRunner::RunGraph(int64_t bucket, const StepSizes& sizes) {
  auto graph = graphs_.find(bucket);
  if (graph == graphs_.end()) {
    // Capturing records the launches without running them; the capture must
    // end even when enqueueing fails, or the stream stays in capture mode.
    KVJIT_RETURN_IF_ERROR(device_->BeginCapture());
    const absl::Status enqueued = EnqueueProgram(sizes);
    absl::StatusOr<GraphExec> captured = device_->EndCapture();
    KVJIT_RETURN_IF_ERROR(enqueued);
    if (!captured.ok()) {
      return absl::Status(captured.status().code(),
                          absl::StrCat("capturing the decode graph for ", bucket,
                                       " sequences: ", captured.status().message()));
    }
    graph = graphs_.emplace(bucket, *std::move(captured)).first;
  } else {
    ++graph_replays_;
  }
  return device_->LaunchGraph(graph->second);
}

absl::Status CudaStepRunner::EnqueueStep(const runtime::StepInputs& inputs) {
  const std::optional<int64_t> bucket = graph_buckets_.BucketFor(inputs, limits_.max_columns);
  if (bucket.has_value() && observer_ == nullptr) {
    const runtime::StepInputs padded =
        PadDecodeStep(inputs, *bucket, limits_.max_columns, static_cast<int32_t>(num_blocks_),
                      limits_.block_size);
    KVJIT_RETURN_IF_ERROR(UploadInputs(padded));
    KVJIT_RETURN_IF_ERROR(RunGraph(*bucket, {*bucket, *bucket, *bucket, limits_.max_columns}));
  } else {
    KVJIT_RETURN_IF_ERROR(UploadInputs(inputs));
    KVJIT_RETURN_IF_ERROR(EnqueueProgram(runtime::SizesOf(inputs)));
  }
  // The step's rows come first in the logits, padded or not.
  const uint64_t logits_bytes = inputs.logits_rows().size() * limits_.vocab_size * sizeof(float);
  if (logits_.bytes() < logits_bytes) {
    KVJIT_ASSIGN_OR_RETURN(logits_, device_->AllocatePinned(logits_bytes, "the logits"));
  }
  return device_->CopyToHost(logits_.data(), arena_ + executable_.program().logits()->offset(),
                             logits_bytes);
}

absl::StatusOr<absl::Span<const float>> CudaStepRunner::Run(const runtime::StepInputs& inputs) {
  KVJIT_RETURN_IF_ERROR(device_->MakeCurrent());
  KVJIT_RETURN_IF_ERROR(runtime::ValidateStep(inputs, limits_));
  const runtime::StepObserver::Clock::time_point began = runtime::StepObserver::Clock::now();
  const absl::Status enqueued = EnqueueStep(inputs);
  // Even after an error, nothing may still be copying from the pinned
  // buffers when the next step refills them.
  const absl::Status done = AwaitStream();
  KVJIT_RETURN_IF_ERROR(enqueued);
  if (!done.ok()) {
    return absl::Status(done.code(), absl::StrCat(executable_.path(), ": the step failed on ",
                                                  device_->Describe(), ": ", done.message()));
  }
  if (observer_ != nullptr) KVJIT_RETURN_IF_ERROR(ReportInstructionTimes(inputs, began));
  return absl::Span<const float>(static_cast<const float*>(logits_.data()),
                                 inputs.logits_rows().size() * limits_.vocab_size);
}

absl::Status CudaStepRunner::SetObserver(runtime::StepObserver* observer) {
  if (observer != nullptr && instruction_events_.empty()) {
    KVJIT_RETURN_IF_ERROR(device_->MakeCurrent());
    std::vector<std::pair<Event, Event>> events;
    for (size_t i = 0; i < instructions_.size(); ++i) {
      KVJIT_ASSIGN_OR_RETURN(Event before, device_->CreateEvent());
      KVJIT_ASSIGN_OR_RETURN(Event after, device_->CreateEvent());
      events.emplace_back(std::move(before), std::move(after));
    }
    instruction_events_ = std::move(events);
  }
  observer_ = observer;
  return absl::OkStatus();
}

absl::Status CudaStepRunner::ReportInstructionTimes(
    const runtime::StepInputs& inputs, runtime::StepObserver::Clock::time_point began) {
  using Clock = runtime::StepObserver::Clock;
  // Every time is read before the first report, so that an error leaves the
  // observer without half a step.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  auto at = [&](const Event& event) -> absl::StatusOr<Clock::time_point> {
    KVJIT_ASSIGN_OR_RETURN(
        float milliseconds,
        device_->ElapsedMilliseconds(instruction_events_.front().first, event));
    return began + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double, std::milli>(milliseconds));
  };
  for (const auto& [before, after] : instruction_events_) {
    KVJIT_ASSIGN_OR_RETURN(Clock::time_point start, at(before));
    KVJIT_ASSIGN_OR_RETURN(Clock::time_point end, at(after));
    spans.emplace_back(start, end);
  }
  observer_->StepBegan(inputs);
  for (size_t i = 0; i < spans.size(); ++i) {
    observer_->InstructionRan(i, spans[i].first, spans[i].second);
  }
  observer_->StepEnded();
  return absl::OkStatus();
}

absl::Status CudaStepRunner::CopyBlock(int64_t source, int64_t destination) {
  if (source < 0 || source >= num_blocks_ || destination < 0 || destination >= num_blocks_) {
    return absl::OutOfRangeError(absl::StrCat("copying KV block ", source, " to ", destination,
                                              ": the pool has blocks 0 to ", num_blocks_ - 1));
  }
  if (source == destination) return absl::OkStatus();
  KVJIT_RETURN_IF_ERROR(device_->MakeCurrent());
  // Ordered on the stream before the step that writes into `destination`.
  const uint64_t block_bytes = executable_.kv_layout().bytes_per_block();
  return device_->CopyOnDevice(kv_pool_ + destination * block_bytes,
                               kv_pool_ + source * block_bytes, block_bytes);
}

absl::StatusOr<std::unique_ptr<runtime::StepRunner>> CreateCudaStepRunner(
    const runtime::Executable& executable, int64_t num_blocks, const CudaRunnerOptions& options,
    std::unique_ptr<runtime::dist::DeviceCommunicator> communicator) {
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaStepRunner> runner,
      CudaStepRunner::Create(executable, num_blocks, options, std::move(communicator)));
  return runner;
}

}  // namespace kvjit::cuda
