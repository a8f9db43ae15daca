#include "runtime/cpu/CpuKernelTable.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/exec/ElementwiseOpTable.h"
#include "runtime/ops/RowOps.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::runtime {
namespace {

// Embedding: in table (weight), tokens → out [T, hidden].
absl::Status RunEmbedding(CpuOpContext& context) {
  using Operand = kvx::EmbeddingOperand;
  KVJIT_ASSIGN_OR_RETURN(cpu::WeightView table, context.Matrix(context.input(Operand::Table)));
  KVJIT_ASSIGN_OR_RETURN(const int32_t* ids, context.Ints(context.input(Operand::Tokens)));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  return cpu::EmbeddingLookup(table, ids, context.sizes.tokens, out, context.pool);
}

// Linear: in x, weight[, bias] → out.
absl::Status RunLinear(CpuOpContext& context) {
  using Operand = kvx::LinearOperand;
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(context.input(Operand::X)));
  KVJIT_ASSIGN_OR_RETURN(cpu::WeightView w, context.Matrix(context.input(Operand::Weight)));
  KVJIT_ASSIGN_OR_RETURN(float* y, context.Floats(context.output(0)));
  const int64_t rows = context.Elements(context.input(Operand::X)) / w.cols;
  KVJIT_RETURN_IF_ERROR(cpu::MatMul(w, x, rows, y, context.pool));
  if (kvx::HasOperand(context.instruction, Operand::Bias)) {
    KVJIT_ASSIGN_OR_RETURN(float* bias, context.Floats(context.input(Operand::Bias)));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < w.rows; ++o) y[r * w.rows + o] += bias[o];
    }
  }
  return absl::OkStatus();
}

// One step of an elementwise chain over `n` elements (`rhs` repeats `lhs`
// for a unary op).
using ElementwiseKernel = absl::Status (*)(const float* lhs, const float* rhs, float factor,
                                           float* out, int64_t n, cpu::ThreadPool& pool);

absl::Status AddStep(const float* lhs, const float* rhs, float, float* out, int64_t n,
                     cpu::ThreadPool& pool) {
  return cpu::Add(lhs, rhs, out, n, pool);
}
absl::Status MulStep(const float* lhs, const float* rhs, float, float* out, int64_t n,
                     cpu::ThreadPool& pool) {
  return cpu::Mul(lhs, rhs, out, n, pool);
}
absl::Status ScaleStep(const float* lhs, const float*, float factor, float* out, int64_t n,
                       cpu::ThreadPool& pool) {
  return cpu::Scale(lhs, factor, out, n, pool);
}
absl::Status SiluStep(const float* lhs, const float*, float, float* out, int64_t n,
                      cpu::ThreadPool& pool) {
  return cpu::Silu(lhs, out, n, pool);
}
absl::Status GeluTanhStep(const float* lhs, const float*, float, float* out, int64_t n,
                          cpu::ThreadPool& pool) {
  return cpu::GeluTanh(lhs, out, n, pool);
}
absl::Status TanhStep(const float* lhs, const float*, float, float* out, int64_t n,
                      cpu::ThreadPool& pool) {
  return cpu::Tanh(lhs, out, n, pool);
}

// The elementwise ops whose CPU kernel is a vector kernel of RowKernels
// (their table entries have no scalar form); every other op runs its scalar
// form from runtime/exec/ElementwiseOpTable.h.
constexpr std::pair<kvx::ElementwiseOpCode, ElementwiseKernel> kVectorElementwiseKernels[] = {
    {kvx::ElementwiseOpCode::Add, AddStep},
    {kvx::ElementwiseOpCode::Mul, MulStep},
    {kvx::ElementwiseOpCode::Scale, ScaleStep},
    {kvx::ElementwiseOpCode::Silu, SiluStep},
    {kvx::ElementwiseOpCode::GeluTanh, GeluTanhStep},
    {kvx::ElementwiseOpCode::Tanh, TanhStep},
};

template <size_t kIndex>
absl::Status ScalarStep(const float* lhs, const float* rhs, float factor, float* out, int64_t n,
                        cpu::ThreadPool&) {
  constexpr auto scalar = kElementwiseOps[kIndex].scalar;
  for (int64_t i = 0; i < n; ++i) out[i] = scalar(lhs[i], rhs[i], factor);
  return absl::OkStatus();
}

template <size_t kIndex>
constexpr ElementwiseKernel ElementwiseKernelOf() {
  if constexpr (kElementwiseOps[kIndex].scalar != nullptr) {
    return ScalarStep<kIndex>;
  } else {
    for (const auto& [op, kernel] : kVectorElementwiseKernels) {
      if (op == kElementwiseOps[kIndex].op) return kernel;
    }
    return nullptr;
  }
}

template <size_t... kIndices>
constexpr std::array<ElementwiseKernel, sizeof...(kIndices)> ElementwiseKernels(
    std::index_sequence<kIndices...>) {
  return {ElementwiseKernelOf<kIndices>()...};
}

// In ElementwiseOpCode order, as kElementwiseOps.
constexpr auto kElementwiseKernels =
    ElementwiseKernels(std::make_index_sequence<std::size(kElementwiseOps)>());

constexpr bool EveryElementwiseOpHasOneCpuKernel() {
  for (size_t i = 0; i < std::size(kElementwiseOps); ++i) {
    if (kElementwiseKernels[i] == nullptr) return false;
  }
  for (const auto& [op, kernel] : kVectorElementwiseKernels) {
    if (FindElementwiseOp(op)->scalar != nullptr) return false;
  }
  return true;
}
static_assert(EveryElementwiseOpHasOneCpuKernel(),
              "each elementwise opcode runs either its scalar form (ElementwiseOpTable.h) or a "
              "vector kernel of kVectorElementwiseKernels, not both and not neither");

// Elementwise: in operands → out the last step of the chain. The chain runs
// row by row, each thread over its rows with one row of scratch per step, so
// every operand is read once and the output written once, straight from
// column views (the halves of a fused gate/up projection) without gathering
// them first. Gathering, and whole-tensor buffers for every step, made
// Gemma's 128-token gelu(gate) * up take 8 ms a layer at 1.3 GB/s
// (docs/benchmarks.md, *Elementwise chains row by row*). The plan never
// places an op's output over its inputs (live ranges include both ends), so
// rows may be written in any order.
absl::Status RunElementwise(CpuOpContext& context) {
  const kvx::TensorRef& out_ref = context.output(0);
  const int64_t n = context.Elements(out_ref);
  const int rank = static_cast<int>(out_ref.shape()->size());
  const int64_t width = rank == 0 ? 1 : context.Extent(out_ref, rank - 1);
  const int64_t rows = width > 0 ? n / width : 0;
  if (rows == 0 || width == 0) return absl::OkStatus();
  struct Operand {
    const float* data;
    int64_t row_stride;
  };
  std::vector<Operand> operands;
  for (const kvx::TensorRef* ref : *context.instruction.inputs()) {
    KVJIT_ASSIGN_OR_RETURN(float* data, context.Floats(*ref));
    operands.push_back({data, ref->row_stride() != 0 ? static_cast<int64_t>(ref->row_stride()) : width});
  }
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(out_ref));
  const auto& chain = *context.instruction.params_as_ElementwiseParams()->steps();
  const int64_t steps = chain.size();
  if (steps == 0) return absl::InvalidArgumentError("Elementwise: a chain of no steps");
  cpu::ThreadPool& pool = context.pool;
  std::mutex error_mutex;
  absl::Status error;
  auto run_rows = [&](int64_t begin, int64_t end) {
    // Every step but the last, which writes the output row.
    std::vector<float> scratch(static_cast<size_t>((steps - 1) * width));
    for (int64_t r = begin; r < end; ++r) {
      auto operand = [&](int index) -> const float* {
        return index >= 0 ? operands[index].data + r * operands[index].row_stride
                          : scratch.data() + (-index - 1) * width;
      };
      for (int64_t k = 0; k < steps; ++k) {
        const kvx::ElementwiseStep* step = chain.Get(k);
        float* step_out = k + 1 == steps ? out + r * width : scratch.data() + k * width;
        absl::Status status = kElementwiseKernels[static_cast<size_t>(step->op())](
            operand(step->lhs()), operand(step->rhs()), step->factor(), step_out, width, pool);
        if (!status.ok()) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error.ok()) error = std::move(status);
          return;
        }
      }
    }
  };
  if (rows < pool.num_threads()) {
    // Too few rows to share out (a decode step's): each step's kernel shares
    // out its row's elements instead (Gemma 2's soft cap of 256,000 logits).
    run_rows(0, rows);
  } else {
    // Enough elements per chunk to pay for handing it to another thread.
    pool.ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 14) / width), run_rows);
  }
  return error;
}

// KvWrite: in key, value, slot_mapping → the cache's layer.
absl::Status RunKvWrite(CpuOpContext& context) {
  using Operand = kvx::KvWriteOperand;
  KVJIT_ASSIGN_OR_RETURN(float* key, context.Floats(context.input(Operand::Key)));
  KVJIT_ASSIGN_OR_RETURN(float* value, context.Floats(context.input(Operand::Value)));
  KVJIT_ASSIGN_OR_RETURN(const int32_t* slots, context.Ints(context.input(Operand::SlotMapping)));
  return cpu::WriteKv(key, value, context.sizes.tokens, slots, context.kv.layout,
                      context.instruction.params_as_KvWriteParams()->layer(), context.kv.data,
                      context.kv.num_blocks, context.pool);
}

// KvAttention: in query, positions, seq_starts, context_lens, block_tables →
// out.
absl::Status RunKvAttention(CpuOpContext& context) {
  using Operand = kvx::KvAttentionOperand;
  KVJIT_ASSIGN_OR_RETURN(float* query, context.Floats(context.input(Operand::Query)));
  cpu::PagedAttentionBatch batch;
  KVJIT_ASSIGN_OR_RETURN(batch.positions, context.Ints(context.input(Operand::Positions)));
  KVJIT_ASSIGN_OR_RETURN(batch.seq_starts, context.Ints(context.input(Operand::SeqStarts)));
  KVJIT_ASSIGN_OR_RETURN(batch.context_lens, context.Ints(context.input(Operand::ContextLens)));
  KVJIT_ASSIGN_OR_RETURN(batch.block_tables, context.Ints(context.input(Operand::BlockTables)));
  batch.num_sequences = context.sizes.sequences;
  batch.max_blocks_per_sequence = context.sizes.max_blocks;
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t heads = context.Extent(context.input(Operand::Query), 1);
  const kvx::KvAttentionParams& params = *context.instruction.params_as_KvAttentionParams();
  return cpu::PagedAttention(query, context.sizes.tokens, heads, context.kv.layout, params.layer(),
                             context.kv.data, context.kv.num_blocks, batch, params.scale(),
                             params.window(), params.softcap(), out, context.pool);
}

// GatherRows: in x, rows → out.
absl::Status RunGatherRows(CpuOpContext& context) {
  using Operand = kvx::GatherRowsOperand;
  const kvx::TensorRef& x_ref = context.input(Operand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(const int32_t* rows, context.Ints(context.input(Operand::Rows)));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t w = context.Width(x_ref);
  return cpu::GatherRows(x, context.Elements(x_ref) / w, w, rows, context.sizes.logits_rows, out,
                         context.pool);
}

// Copy: in x → out (a reshape); a column view is copied row by row.
absl::Status RunCopy(CpuOpContext& context) {
  const kvx::TensorRef& x_ref = context.input(kvx::CopyOperand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t n = context.Elements(x_ref);
  if (x_ref.row_stride() == 0) {
    if (out != x) std::memmove(out, x, n * sizeof(float));
    return absl::OkStatus();
  }
  const int64_t rows = context.Extent(x_ref, 0);
  const int64_t w = rows > 0 ? n / rows : 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * w, x + r * x_ref.row_stride(), w * sizeof(float));
  }
  return absl::OkStatus();
}

// The communicator of a tensor-parallel rank's collectives; refused where the
// runner was made without one.
absl::StatusOr<dist::Communicator*> CommunicatorOf(CpuOpContext& context, const char* op) {
  if (context.communicator != nullptr) return context.communicator;
  return absl::FailedPreconditionError(absl::StrCat(
      op, " runs between the ranks of a tensor-parallel model, and this runner has no "
          "communicator: start the executable under mpirun with one process per rank"));
}

// AllReduce: in x → out, x summed over the ranks.
absl::Status RunAllReduce(CpuOpContext& context) {
  KVJIT_ASSIGN_OR_RETURN(dist::Communicator * communicator, CommunicatorOf(context, "AllReduce"));
  const kvx::TensorRef& x_ref = context.input(kvx::AllReduceOperand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t n = context.Elements(x_ref);
  if (out != x) std::memmove(out, x, n * sizeof(float));
  return communicator->AllReduceSum(absl::MakeSpan(out, n));
}

// AllGather: in x [rows, this rank's columns] → out [rows, every rank's
// columns in rank order]. The ranks' blocks arrive one after the other and
// are interleaved into rows here.
absl::Status RunAllGather(CpuOpContext& context) {
  KVJIT_ASSIGN_OR_RETURN(dist::Communicator * communicator, CommunicatorOf(context, "AllGather"));
  const kvx::TensorRef& x_ref = context.input(kvx::AllGatherOperand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const auto& columns = *context.instruction.params_as_AllGatherParams()->rank_columns();
  if (static_cast<int>(columns.size()) != communicator->size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("AllGather gathers from ", columns.size(), " ranks, and this process runs in ",
                     communicator->size()));
  }
  const int64_t rows = context.Extent(x_ref, 0);
  std::vector<int64_t> counts;
  int64_t width = 0;
  for (int64_t rank_columns : columns) {
    counts.push_back(rows * rank_columns);
    width += rank_columns;
  }
  std::vector<float> blocks(static_cast<size_t>(rows * width));
  KVJIT_RETURN_IF_ERROR(communicator->AllGather(
      absl::MakeConstSpan(x, static_cast<size_t>(context.Elements(x_ref))), counts,
      absl::MakeSpan(blocks)));
  const float* block = blocks.data();
  int64_t first_column = 0;
  for (int64_t rank_columns : columns) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out + r * width + first_column, block + r * rank_columns,
                  rank_columns * sizeof(float));
    }
    block += rows * rank_columns;
    first_column += rank_columns;
  }
  return absl::OkStatus();
}

struct CpuKernelEntry {
  kvx::OpCode op;
  CpuKernel kernel;
};

// The opcodes that are not row-wise; runtime/ops holds the others' kernels.
constexpr CpuKernelEntry kKernels[] = {
    {kvx::OpCode::Embedding, RunEmbedding},     {kvx::OpCode::Linear, RunLinear},
    {kvx::OpCode::Elementwise, RunElementwise}, {kvx::OpCode::KvWrite, RunKvWrite},
    {kvx::OpCode::KvAttention, RunKvAttention}, {kvx::OpCode::GatherRows, RunGatherRows},
    {kvx::OpCode::Copy, RunCopy},               {kvx::OpCode::AllReduce, RunAllReduce},
    {kvx::OpCode::AllGather, RunAllGather},
};

static_assert(DescribesEveryOpCodeOnce<kKernels>());

}  // namespace

CpuKernel CpuKernelOf(kvx::OpCode op) {
  if (const RowOp* row = FindRowOp(op)) return row->cpu;
  for (const CpuKernelEntry& entry : kKernels) {
    if (entry.op == op) return entry.kernel;
  }
  return nullptr;
}

}  // namespace kvjit::runtime
