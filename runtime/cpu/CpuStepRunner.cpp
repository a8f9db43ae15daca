#include "runtime/cpu/CpuStepRunner.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/exec/StepValidation.h"
#include "runtime/quant/Dequantize.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/WeightLayout.h"

namespace kvjit::runtime {
namespace {

// A tensor-parallel rank's program runs with the communicator of its ranks,
// as that rank; any other program alone.
absl::Status CheckRankOf(const Executable& executable, dist::Communicator* communicator) {
  const kvx::TensorParallel* parallel = executable.root().tensor_parallel();
  if (parallel == nullptr) {
    if (communicator == nullptr || communicator->size() == 1) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " runs in one process, and this one is rank ", communicator->rank(),
        " of ", communicator->size(), ": compile it with --tp ", communicator->size(),
        " to split it over the ranks"));
  }
  if (communicator == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " is split over ", parallel->ranks(),
        " tensor-parallel ranks: run it under mpirun -np ", parallel->ranks()));
  }
  if (static_cast<uint32_t>(communicator->size()) != parallel->ranks() ||
      static_cast<uint32_t>(communicator->rank()) != parallel->rank()) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " holds rank ", parallel->rank(), " of ", parallel->ranks(),
        ", and this process is rank ", communicator->rank(), " of ", communicator->size()));
  }
  return absl::OkStatus();
}

}  // namespace

CpuStepRunner::CpuStepRunner(const Executable& executable, int64_t num_blocks, int threads)
    : executable_(executable), num_blocks_(num_blocks), pool_(threads) {}

absl::StatusOr<std::unique_ptr<CpuStepRunner>> CpuStepRunner::Create(
    const Executable& executable, int64_t num_blocks, int threads,
    dist::Communicator* communicator) {
  KVJIT_RETURN_IF_ERROR(CheckRankOf(executable, communicator));
  // The loader admitted only KvCacheFormat.h's key and value types, each of
  // which the CPU kernels store and read.
  const kvx::KvLayout& kv = executable.kv_layout();
  if (num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the KV pool needs at least one block, got ",
                                                   num_blocks));
  }
  // Kernels are looked up by opcode; the loader refused opcodes it does not
  // know, and every known one has a kernel (CpuKernelTable.cpp checks it).
  std::unique_ptr<CpuStepRunner> runner(new CpuStepRunner(executable, num_blocks, threads));
  runner->kv_layout_ = {kv.num_layers(), kv.num_kv_heads(), kv.head_dim(), kv.block_size(),
                        kv.key_type(),   kv.value_type(), kv.key_rotation(), kv.value_rotation()};
  if (static_cast<uint64_t>(runner->kv_layout_.BlockBytes()) != kv.bytes_per_block()) {
    return absl::InvalidArgumentError(absl::StrCat(
        executable.path(), ": kv_layout.bytes_per_block is ", kv.bytes_per_block(),
        " but its dimensions give ", runner->kv_layout_.BlockBytes()));
  }
  uint64_t pool_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(num_blocks), kv.bytes_per_block(), &pool_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(num_blocks, " KV blocks overflow the address space"));
  }
  // Zero-filled pages, resident only once written: a pool sized for the
  // longest run and an arena planned for the largest step cost memory only
  // for the blocks and rows a run really uses.
  KVJIT_ASSIGN_OR_RETURN(runner->arena_,
                         PageBuffer::Allocate(executable.program().arena_bytes() + sizeof(float),
                                              absl::StrCat(executable.path(), "'s activation arena")));
  KVJIT_ASSIGN_OR_RETURN(runner->kv_pool_,
                         PageBuffer::Allocate(pool_bytes, absl::StrCat("a KV pool of ", num_blocks,
                                                                        " blocks")));
  runner->kv_data_ = runner->kv_pool_.data();
  runner->vocab_size_ = executable.config().vocab_size();
  runner->communicator_ = communicator;
  return runner;
}

absl::StatusOr<std::unique_ptr<CpuStepRunner>> CpuStepRunner::CreateOverPool(
    const Executable& executable, CpuStepRunner& target, int threads) {
  const kvx::KvLayout& kv = executable.kv_layout();
  const cpu::PagedKvLayout& pool = target.kv_layout_;
  const cpu::PagedKvLayout layout{kv.num_layers(),   kv.num_kv_heads(),   kv.head_dim(),
                                  kv.block_size(),   kv.key_type(),       kv.value_type(),
                                  kv.key_rotation(), kv.value_rotation(), pool.layers};
  if (layout.layers > pool.layers || layout.kv_heads != pool.kv_heads ||
      layout.head_dim != pool.head_dim || layout.block_size != pool.block_size ||
      layout.key_type != pool.key_type || layout.value_type != pool.value_type ||
      layout.key_rotation != pool.key_rotation || layout.value_rotation != pool.value_rotation) {
    return absl::InvalidArgumentError(absl::StrCat(
        executable.path(), "'s KV cache (", layout.layers, " layers of ", layout.kv_heads, "x",
        layout.head_dim, " ", kvx::KvCacheTypesName(kv.key_type(), kv.value_type()),
        ", blocks of ", layout.block_size, ") is not the first layers of ",
        target.executable_.path(), "'s (", pool.layers, " layers of ", pool.kv_heads, "x",
        pool.head_dim, " ",
        kvx::KvCacheTypesName(target.executable_.kv_layout().key_type(),
                              target.executable_.kv_layout().value_type()),
        ", blocks of ", pool.block_size, "), so it cannot share its pool"));
  }
  std::unique_ptr<CpuStepRunner> runner(new CpuStepRunner(executable, target.num_blocks_, threads));
  runner->kv_layout_ = layout;
  KVJIT_ASSIGN_OR_RETURN(runner->arena_,
                         PageBuffer::Allocate(executable.program().arena_bytes() + sizeof(float),
                                              absl::StrCat(executable.path(), "'s activation arena")));
  runner->kv_data_ = target.kv_data_;
  runner->vocab_size_ = executable.config().vocab_size();
  return runner;
}

double CpuStepRunner::decode_step_cost(int64_t tokens) const {
  // SmolLM2-135M Q4_1 at 2 threads (kvjit bench --prompt_tokens N, medians
  // of 9 runs): steps of 2, 3 and 4 tokens took 4.45, 5.3 and 5.5 ms
  // against a one-token decode step's 2.9 ms. Two tokens go through the
  // single-row kernels; three and more through the GEMMs, which take tokens
  // in groups of four, each further group costing about 1.1 steps (5 tokens
  // 8.1 ms, 8 tokens 8.9 ms).
  static constexpr double kMeasured[] = {1.0, 1.0, 1.55, 1.85, 1.9};
  constexpr int64_t kLast = static_cast<int64_t>(std::size(kMeasured)) - 1;
  constexpr double kPerFurtherGroupOfFour = 1.1;
  if (tokens <= kLast) return kMeasured[std::max<int64_t>(tokens, 0)];
  return kMeasured[kLast] + kPerFurtherGroupOfFour * static_cast<double>((tokens - kLast + 3) / 4);
}

absl::StatusOr<float*> CpuStepRunner::Floats(const kvx::TensorRef& ref) {
  switch (ref.kind()) {
    case kvx::BufferKind::Arena:
      return reinterpret_cast<float*>(arena_.data()) + ref.offset() / sizeof(float);
    case kvx::BufferKind::Weight: {
      const kvx::Weight* weight = executable_.root().weights()->Get(ref.index());
      absl::Span<const uint8_t> bytes = executable_.WeightBytes(ref.index());
      // An f32 weight is read where the model file holds it (read-only pages:
      // weights are operands, never written), not copied.
      if (weight->storage() == kvx::StorageType::F32 &&
          reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
        return const_cast<float*>(reinterpret_cast<const float*>(bytes.data()));
      }
      auto [cached, inserted] = vector_weights_.try_emplace(ref.index());
      if (inserted) {
        KVJIT_ASSIGN_OR_RETURN(quant::StorageType storage, FromKvxStorage(weight->storage()));
        int64_t count = 1;
        for (int64_t dim : *weight->shape()) count *= dim;
        cached->second.resize(count);
        absl::Status status =
            quant::DequantizeRow(storage, bytes, absl::MakeSpan(cached->second));
        if (!status.ok()) {
          vector_weights_.erase(cached);
          return absl::Status(status.code(), absl::StrCat("weight '", weight->name()->str(),
                                                          "': ", status.message()));
        }
      }
      return cached->second.data();
    }
    case kvx::BufferKind::Input:
      break;
  }
  return absl::InvalidArgumentError("an f32 operand refers to a step input");
}

RunnerMemory CpuStepRunner::Memory() const {
  RunnerMemory memory;
  memory.kv_pool_bytes = kv_pool_.size();
  memory.kv_pool_resident = kv_pool_.ResidentBytes();
  memory.arena_bytes = arena_.size();
  memory.arena_resident = arena_.ResidentBytes();
  for (const auto& [index, values] : vector_weights_) memory.weight_copies += values.size() * sizeof(float);
  return memory;
}

absl::StatusOr<const int32_t*> CpuStepRunner::Ints(const kvx::TensorRef& ref,
                                                   const StepInputs& inputs) const {
  if (ref.kind() != kvx::BufferKind::Input) {
    return absl::InvalidArgumentError("an i32 operand must be a step input");
  }
  if (ref.index() >= static_cast<uint32_t>(kvx::kStepInputCount)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown step input ", ref.index()));
  }
  return inputs[static_cast<kvx::StepInput>(ref.index())].data();
}

absl::StatusOr<cpu::WeightView> CpuStepRunner::Matrix(const kvx::TensorRef& ref) const {
  if (ref.kind() != kvx::BufferKind::Weight) {
    return absl::InvalidArgumentError("a matrix operand must be a weight");
  }
  const kvx::Weight* weight = executable_.root().weights()->Get(ref.index());
  if (weight->shape() == nullptr || weight->shape()->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight '", weight->name()->str(), "' is not a matrix"));
  }
  cpu::WeightView view;
  KVJIT_ASSIGN_OR_RETURN(view.type, FromKvxStorage(weight->storage()));
  view.rows = weight->shape()->Get(0);
  view.cols = weight->shape()->Get(1);
  view.bytes = executable_.WeightBytes(ref.index());
  view.rows_interleaved = kvx::RowsInterleavedBy(weight->layout());
  return view;
}

absl::Status CpuStepRunner::SetObserver(StepObserver* observer) {
  observer_ = observer;
  return absl::OkStatus();
}

absl::Status CpuStepRunner::CopyBlock(int64_t source, int64_t destination) {
  if (source < 0 || source >= num_blocks_ || destination < 0 || destination >= num_blocks_) {
    return absl::OutOfRangeError(absl::StrCat("copying KV block ", source, " to ", destination,
                                              ": the pool has blocks 0 to ", num_blocks_ - 1));
  }
  // Whole blocks, every layer of a shared pool's.
  const uint64_t block_bytes = static_cast<uint64_t>(kv_layout_.BlockBytes());
  if (source != destination) {
    std::memcpy(kv_data_ + destination * block_bytes, kv_data_ + source * block_bytes, block_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> CpuStepRunner::Run(const StepInputs& inputs) {
  // The kernels read the block tables where they are: any number of columns.
  StepLimits limits;
  limits.max_tokens = max_tokens_per_step();
  limits.vocab_size = vocab_size_;
  limits.num_blocks = num_blocks_;
  limits.block_size = block_size();
  KVJIT_RETURN_IF_ERROR(ValidateStep(inputs, limits));
  const StepSizes sizes = SizesOf(inputs);
  const auto& instructions = *executable_.program().instructions();
  rope_angles_.Clear();
  auto execute = [&](size_t i) -> absl::Status {
    const kvx::Instruction& instruction = *instructions[i];
    CpuOpContext context{instruction, inputs, sizes, *this, pool_,
                         CpuKvPool{kv_layout_, kv_data_, num_blocks_}, rope_angles_,
                         communicator_};
    absl::Status status = CpuKernelOf(instruction.op())(context);
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat(executable_.path(), ": instruction ", i, " (",
                                                    kvx::EnumNameOpCode(instructions[i]->op()),
                                                    "): ", status.message()));
  };
  // Unobserved, the loop reads no clock and checks for no observer.
  if (observer_ == nullptr) {
    for (size_t i = 0; i < instructions.size(); ++i) KVJIT_RETURN_IF_ERROR(execute(i));
  } else {
    observer_->StepBegan(inputs);
    for (size_t i = 0; i < instructions.size(); ++i) {
      const StepObserver::Clock::time_point start = StepObserver::Clock::now();
      KVJIT_RETURN_IF_ERROR(execute(i));
      observer_->InstructionRan(i, start, StepObserver::Clock::now());
    }
    observer_->StepEnded();
  }
  KVJIT_ASSIGN_OR_RETURN(float* logits, Floats(*executable_.program().logits()));
  return absl::Span<const float>(logits, sizes.logits_rows * vocab_size_);
}

}  // namespace kvjit::runtime
