#include "runtime/exec/StepRunner.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/cpu/Rope.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/quant/Dequantize.h"

namespace kvjit::runtime {
namespace {

cpu::RopeParams RopeParamsOf(const kvx::RopeParams* rope, int64_t head_dim) {
  cpu::RopeParams params;
  if (rope == nullptr) return params;
  params.style = rope->style() == kvx::RopeStyle::NeoX ? cpu::RopeStyle::kNeox
                                                       : cpu::RopeStyle::kInterleaved;
  params.theta = rope->theta();
  params.rotary_dim = rope->rotary_dim() > 0 ? rope->rotary_dim() : head_dim;
  if (const kvx::RopeScaling* scaling = rope->scaling()) {
    switch (scaling->kind()) {
      case kvx::RopeScalingKind::None:
        break;
      case kvx::RopeScalingKind::Linear:
        params.scaling.kind = cpu::RopeScaling::Kind::kLinear;
        break;
      case kvx::RopeScalingKind::Llama3:
        params.scaling.kind = cpu::RopeScaling::Kind::kLlama3;
        break;
    }
    params.scaling.factor = scaling->factor();
    params.scaling.low_freq_factor = scaling->low_freq_factor();
    params.scaling.high_freq_factor = scaling->high_freq_factor();
    params.scaling.original_max_positions = scaling->original_context();
  }
  if (const flatbuffers::Vector<float>* factors = rope->freq_factors()) {
    params.freq_factors = absl::MakeConstSpan(factors->data(), factors->size());
  }
  return params;
}

float Gelu(float x, bool approximate_tanh) {
  if (approximate_tanh) {
    const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * double{x} * x * x);
    return static_cast<float>(0.5 * x * (1.0 + std::tanh(inner)));
  }
  return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
}

int64_t Extent(const kvx::Dim& dim, const StepSizes& sizes) {
  return DimExtent(dim.kind(), dim.size(), sizes);
}

// Floats from one row's start to the next: a column view's stride, else the
// row's own width.
int64_t RowStride(const kvx::TensorRef& ref, int64_t width) {
  return ref.row_stride() != 0 ? static_cast<int64_t>(ref.row_stride()) : width;
}

}  // namespace

CpuStepRunner::CpuStepRunner(const Executable& executable, int64_t num_blocks, int threads)
    : executable_(executable), num_blocks_(num_blocks), pool_(threads) {}

absl::StatusOr<std::unique_ptr<CpuStepRunner>> CpuStepRunner::Create(const Executable& executable,
                                                                     int64_t num_blocks,
                                                                     int threads) {
  const kvx::KvLayout& kv = executable.kv_layout();
  if (kv.element_type() != kvx::StorageType::F32 && kv.element_type() != kvx::StorageType::F16) {
    return absl::UnimplementedError(absl::StrCat(
        executable.path(), ": the CPU backend keeps the KV cache in f32 or f16, not ",
        kvx::EnumNameStorageType(kv.element_type())));
  }
  if (num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the KV pool needs at least one block, got ",
                                                   num_blocks));
  }
  std::unique_ptr<CpuStepRunner> runner(new CpuStepRunner(executable, num_blocks, threads));
  runner->kv_layout_ = {kv.num_layers(), kv.num_kv_heads(), kv.head_dim(), kv.block_size(),
                        kv.element_type() == kvx::StorageType::F32 ? cpu::KvElementType::kF32
                                                                   : cpu::KvElementType::kF16};
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
  runner->vocab_size_ = executable.config().vocab_size();
  return runner;
}

int64_t CpuStepRunner::ElementCount(const kvx::TensorRef& ref, const StepSizes& sizes) const {
  int64_t count = 1;
  for (const kvx::Dim* dim : *ref.shape()) count *= Extent(*dim, sizes);
  return count;
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
  return StepInputValues(inputs, static_cast<kvx::StepInput>(ref.index())).data();
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
  return view;
}

absl::Status CpuStepRunner::ExecuteElementwise(const kvx::Instruction& instruction,
                                               const StepSizes& sizes) {
  const auto& inputs = *instruction.inputs();
  const kvx::TensorRef& out_ref = *instruction.outputs()->Get(0);
  const int64_t n = ElementCount(out_ref, sizes);
  std::vector<const float*> operands;
  // Column views, gathered into dense rows for the element-wise kernels.
  std::vector<std::vector<float>> gathered;
  gathered.reserve(inputs.size());
  for (const kvx::TensorRef* ref : inputs) {
    KVJIT_ASSIGN_OR_RETURN(float* data, Floats(*ref));
    if (ref->row_stride() != 0) {
      const int64_t rows = Extent(*ref->shape()->Get(0), sizes);
      const int64_t width = rows > 0 ? n / rows : 0;
      std::vector<float>& dense = gathered.emplace_back(n);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(dense.data() + r * width, data + r * ref->row_stride(), width * sizeof(float));
      }
      data = dense.data();
    }
    operands.push_back(data);
  }
  std::vector<std::vector<float>> steps(instruction.elementwise()->size(),
                                        std::vector<float>(n));
  auto operand = [&](int index) -> const float* {
    return index >= 0 ? operands[index] : steps[-index - 1].data();
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    const kvx::ElementwiseStep* step = instruction.elementwise()->Get(k);
    const float* lhs = operand(step->lhs());
    float* out = steps[k].data();
    switch (step->op()) {
      case kvx::ElementwiseOpCode::Add:
        KVJIT_RETURN_IF_ERROR(cpu::Add(lhs, operand(step->rhs()), out, n, pool_));
        break;
      case kvx::ElementwiseOpCode::Mul:
        KVJIT_RETURN_IF_ERROR(cpu::Mul(lhs, operand(step->rhs()), out, n, pool_));
        break;
      case kvx::ElementwiseOpCode::Scale:
        KVJIT_RETURN_IF_ERROR(cpu::Scale(lhs, step->factor(), out, n, pool_));
        break;
      case kvx::ElementwiseOpCode::Silu:
        KVJIT_RETURN_IF_ERROR(cpu::Silu(lhs, out, n, pool_));
        break;
      case kvx::ElementwiseOpCode::Gelu:
      case kvx::ElementwiseOpCode::GeluTanh: {
        const bool tanh_form = step->op() == kvx::ElementwiseOpCode::GeluTanh;
        for (int64_t i = 0; i < n; ++i) out[i] = Gelu(lhs[i], tanh_form);
        break;
      }
    }
  }
  KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref));
  std::memcpy(out, steps.back().data(), n * sizeof(float));
  return absl::OkStatus();
}

absl::Status CpuStepRunner::Execute(const kvx::Instruction& instruction, const StepInputs& inputs,
                                    const StepSizes& sizes) {
  const auto& in = *instruction.inputs();
  auto out_ref = [&](int i) -> const kvx::TensorRef& { return *instruction.outputs()->Get(i); };
  // The last dimension of a reference: the row width of row-wise kernels.
  auto width = [&](const kvx::TensorRef& ref) {
    return Extent(*ref.shape()->Get(ref.shape()->size() - 1), sizes);
  };
  switch (instruction.op()) {
    case kvx::OpCode::Embedding: {
      KVJIT_ASSIGN_OR_RETURN(cpu::WeightView table, Matrix(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(const int32_t* ids, Ints(*in[1], inputs));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      return cpu::EmbeddingLookup(table, ids, sizes.tokens, out, pool_);
    }
    case kvx::OpCode::Linear: {
      KVJIT_ASSIGN_OR_RETURN(float* x, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(cpu::WeightView w, Matrix(*in[1]));
      KVJIT_ASSIGN_OR_RETURN(float* y, Floats(out_ref(0)));
      const int64_t rows = ElementCount(*in[0], sizes) / w.cols;
      KVJIT_RETURN_IF_ERROR(cpu::MatMul(w, x, rows, y, pool_));
      if (in.size() > 2) {
        KVJIT_ASSIGN_OR_RETURN(float* bias, Floats(*in[2]));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t o = 0; o < w.rows; ++o) y[r * w.rows + o] += bias[o];
        }
      }
      return absl::OkStatus();
    }
    case kvx::OpCode::RmsNorm: {
      KVJIT_ASSIGN_OR_RETURN(float* x, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(float* weight, Floats(*in[1]));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      const int64_t w = width(*in[0]);
      return cpu::RmsNorm(x, weight, instruction.epsilon(), ElementCount(*in[0], sizes) / w, w,
                          out, pool_);
    }
    case kvx::OpCode::AddRmsNorm: {
      KVJIT_ASSIGN_OR_RETURN(float* a, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(float* b, Floats(*in[1]));
      KVJIT_ASSIGN_OR_RETURN(float* weight, Floats(*in[2]));
      KVJIT_ASSIGN_OR_RETURN(float* sum, Floats(out_ref(0)));
      KVJIT_ASSIGN_OR_RETURN(float* normed, Floats(out_ref(1)));
      const int64_t n = ElementCount(*in[0], sizes);
      if (sum != a) std::memcpy(sum, a, n * sizeof(float));
      const int64_t w = width(*in[0]);
      return cpu::AddRmsNorm(sum, b, weight, instruction.epsilon(), n / w, w, normed, pool_);
    }
    case kvx::OpCode::SwiGlu: {
      KVJIT_ASSIGN_OR_RETURN(float* gate, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(float* up, Floats(*in[1]));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      if (in[0]->row_stride() == 0 && in[1]->row_stride() == 0) {
        return cpu::SwiGlu(gate, up, out, ElementCount(*in[0], sizes), pool_);
      }
      const int64_t rows = Extent(*in[0]->shape()->Get(0), sizes);
      const int64_t w = rows > 0 ? ElementCount(*in[0], sizes) / rows : 0;
      return cpu::SwiGluRows(gate, RowStride(*in[0], w), up, RowStride(*in[1], w), out, rows, w,
                             pool_);
    }
    case kvx::OpCode::Rope: {
      KVJIT_ASSIGN_OR_RETURN(float* x, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(const int32_t* positions, Ints(*in[1], inputs));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      const int64_t heads = Extent(*in[0]->shape()->Get(1), sizes);
      const int64_t head_dim = Extent(*in[0]->shape()->Get(2), sizes);
      return cpu::Rope(x, sizes.tokens, heads, head_dim, positions,
                       RopeParamsOf(instruction.rope(), head_dim), out, pool_);
    }
    case kvx::OpCode::Elementwise:
      return ExecuteElementwise(instruction, sizes);
    case kvx::OpCode::KvWrite: {
      KVJIT_ASSIGN_OR_RETURN(float* key, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(float* value, Floats(*in[1]));
      KVJIT_ASSIGN_OR_RETURN(const int32_t* slots, Ints(*in[2], inputs));
      return cpu::WriteKv(key, value, sizes.tokens, slots, kv_layout_, instruction.layer(),
                          kv_pool_.data(), num_blocks_, pool_);
    }
    case kvx::OpCode::KvAttention: {
      KVJIT_ASSIGN_OR_RETURN(float* query, Floats(*in[0]));
      cpu::PagedAttentionBatch batch;
      KVJIT_ASSIGN_OR_RETURN(batch.positions, Ints(*in[1], inputs));
      KVJIT_ASSIGN_OR_RETURN(batch.seq_starts, Ints(*in[2], inputs));
      KVJIT_ASSIGN_OR_RETURN(batch.context_lens, Ints(*in[3], inputs));
      KVJIT_ASSIGN_OR_RETURN(batch.block_tables, Ints(*in[4], inputs));
      batch.num_sequences = sizes.sequences;
      batch.max_blocks_per_sequence = sizes.max_blocks;
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      const int64_t heads = Extent(*in[0]->shape()->Get(1), sizes);
      return cpu::PagedAttention(query, sizes.tokens, heads, kv_layout_, instruction.layer(),
                                 kv_pool_.data(), num_blocks_, batch, instruction.scale(), out,
                                 pool_);
    }
    case kvx::OpCode::GatherRows: {
      KVJIT_ASSIGN_OR_RETURN(float* x, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(const int32_t* rows, Ints(*in[1], inputs));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      const int64_t w = width(*in[0]);
      return cpu::GatherRows(x, ElementCount(*in[0], sizes) / w, w, rows, sizes.logits_rows, out,
                             pool_);
    }
    case kvx::OpCode::Copy: {
      KVJIT_ASSIGN_OR_RETURN(float* x, Floats(*in[0]));
      KVJIT_ASSIGN_OR_RETURN(float* out, Floats(out_ref(0)));
      const int64_t n = ElementCount(*in[0], sizes);
      if (in[0]->row_stride() == 0) {
        if (out != x) std::memmove(out, x, n * sizeof(float));
        return absl::OkStatus();
      }
      const int64_t rows = Extent(*in[0]->shape()->Get(0), sizes);
      const int64_t w = rows > 0 ? n / rows : 0;
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out + r * w, x + r * in[0]->row_stride(), w * sizeof(float));
      }
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(absl::StrCat("opcode ", static_cast<int>(instruction.op()),
                                               " has no CPU kernel"));
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
  const uint64_t block_bytes = executable_.kv_layout().bytes_per_block();
  if (source != destination) {
    std::memcpy(kv_pool_.data() + destination * block_bytes, kv_pool_.data() + source * block_bytes,
                block_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> CpuStepRunner::Run(const StepInputs& inputs) {
  const StepSizes sizes = {static_cast<int64_t>(inputs.tokens.size()),
                       static_cast<int64_t>(inputs.logits_rows.size()),
                       static_cast<int64_t>(inputs.context_lens.size()), inputs.max_blocks};
  if (sizes.tokens == 0 || sizes.tokens > max_tokens_per_step()) {
    return absl::InvalidArgumentError(absl::StrCat("a step carries 1 to ", max_tokens_per_step(),
                                                    " tokens, got ", sizes.tokens));
  }
  if (inputs.positions.size() != inputs.tokens.size() ||
      inputs.slot_mapping.size() != inputs.tokens.size() ||
      inputs.seq_starts.size() != inputs.context_lens.size() + 1 ||
      inputs.block_tables.size() !=
          static_cast<size_t>(sizes.sequences * sizes.max_blocks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step inputs disagree in size: ", sizes.tokens, " tokens, ", inputs.positions.size(),
        " positions, ", inputs.slot_mapping.size(), " slots, ", inputs.seq_starts.size(),
        " sequence starts for ", sizes.sequences, " sequences, ", inputs.block_tables.size(),
        " block table entries for ", sizes.max_blocks, " blocks each"));
  }
  // The arena holds logits rows for at most the step's tokens.
  if (sizes.logits_rows < 1 || sizes.logits_rows > sizes.tokens) {
    return absl::InvalidArgumentError(absl::StrCat("a step asks for 1 to ", sizes.tokens,
                                                   " logits rows, got ", sizes.logits_rows));
  }
  for (int32_t row : inputs.logits_rows) {
    if (row < 0 || row >= sizes.tokens) {
      return absl::OutOfRangeError(absl::StrCat("logits row ", row, " is not one of the step's ",
                                                sizes.tokens, " tokens"));
    }
  }
  const auto& instructions = *executable_.program().instructions();
  auto execute = [&](size_t i) -> absl::Status {
    absl::Status status = Execute(*instructions[i], inputs, sizes);
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
