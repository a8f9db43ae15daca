#include "runtime/exec/OpTable.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/exec/ElementwiseOpTable.h"
#include "runtime/ops/RowOps.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::runtime {
namespace {

// ---- Shapes, as the checks compare them ----

bool SameDim(const kvx::Dim& a, const kvx::Dim& b) {
  return a.kind() == b.kind() && (a.kind() != kvx::DimKind::Static || a.size() == b.size());
}

// A reshape keeps the element count for every size of the step: the same
// per-step dimensions, in order, and the same product of static ones.
bool SameElementCount(const kvx::TensorRef& a, const kvx::TensorRef& b) {
  auto summarize = [](const kvx::TensorRef& ref) {
    std::pair<std::vector<kvx::DimKind>, int64_t> summary{{}, 1};
    for (const kvx::Dim* dim : *ref.shape()) {
      if (dim->kind() == kvx::DimKind::Static) {
        summary.second *= dim->size();
      } else {
        summary.first.push_back(dim->kind());
      }
    }
    return summary;
  };
  return summarize(a) == summarize(b);
}

// ---- Costs ----

// Bytes of one token's keys and values in the cache, all KV heads, as the
// layout's types store them.
int64_t KvSlotBytes(const kvx::Executable& executable) {
  const kvx::KvLayout* kv = executable.kv_layout();
  if (kv == nullptr) return 0;
  uint64_t bytes = 0;
  for (kvx::StorageType type : {kv->key_type(), kv->value_type()}) {
    const kvx::KvCacheFormat* format = kvx::FindKvCacheFormat(type);
    const std::optional<uint64_t> slot =
        format ? kvx::KvSlotBytes(*format, kv->num_kv_heads(), kv->head_dim()) : std::nullopt;
    bytes += slot.value_or(0);
  }
  return static_cast<int64_t>(bytes);
}

void NoFlops(const OpCostContext&, InstructionCost&) {}

// ---- The ops ----

// Embedding: in table (weight), tokens → out [T, hidden].
absl::Status VerifyEmbedding(const OpCheckContext& context) {
  using Operand = kvx::EmbeddingOperand;
  return OutputFits(context.input(Operand::Table).kind() == kvx::BufferKind::Weight &&
                    LastStaticDim(context.output(0)) == context.WeightDim(Operand::Table, 1));
}

// Reads one row of the table per token, not the whole table.
void CostEmbedding(const OpCostContext& context, InstructionCost& cost) {
  const kvx::Weight& table = *context.executable.weights()->Get(
      kvx::InputOf(context.instruction, kvx::EmbeddingOperand::Table).index());
  if (table.shape() == nullptr || table.shape()->size() == 0 || table.shape()->Get(0) <= 0) return;
  const int64_t rows = table.shape()->Get(0);
  cost.weight_bytes = table.size_bytes() / rows * std::min(context.sizes.tokens, rows);
}

// Linear: in x, weight[, bias] → out.
absl::Status VerifyLinear(const OpCheckContext& context) {
  using Operand = kvx::LinearOperand;
  const kvx::TensorRef& x = context.input(Operand::X);
  const kvx::TensorRef& out = context.output(0);
  const int64_t out_features = context.WeightDim(Operand::Weight, 0);
  const int64_t in_features = context.WeightDim(Operand::Weight, 1);
  return OutputFits(context.input(Operand::Weight).kind() == kvx::BufferKind::Weight &&
                    in_features > 0 && LastStaticDim(x) == in_features &&
                    LastStaticDim(out) == out_features &&
                    out.shape()->size() == x.shape()->size() &&
                    SameDim(*out.shape()->Get(0), *x.shape()->Get(0)) &&
                    (!kvx::HasOperand(context.instruction, Operand::Bias) ||
                     LastStaticDim(context.input(Operand::Bias)) == out_features));
}

void CostLinear(const OpCostContext& context, InstructionCost& cost) {
  using Operand = kvx::LinearOperand;
  const kvx::Instruction& instruction = context.instruction;
  const kvx::Weight& weight = *context.executable.weights()->Get(
      kvx::InputOf(instruction, Operand::Weight).index());
  const int64_t out_features = weight.shape()->Get(0), in_features = weight.shape()->Get(1);
  const int64_t rows =
      ElementsOf(context.executable, kvx::InputOf(instruction, Operand::X), context.sizes) /
      in_features;
  cost.flops = 2 * rows * in_features * out_features;
  if (kvx::HasOperand(instruction, Operand::Bias)) cost.flops += rows * out_features;
}

// Elementwise: in operands → out the last step of the chain.
absl::Status VerifyElementwise(const OpCheckContext& context) {
  bool fits = true;
  for (const kvx::TensorRef* ref : *context.instruction.inputs()) {
    fits = fits && SameShape(*ref, context.output(0));
  }
  if (absl::Status status = OutputFits(fits); !status.ok()) return status;
  const auto* steps = context.instruction.params_as_ElementwiseParams()->steps();
  if (steps->size() == 0) {
    return absl::InvalidArgumentError("has no elementwise steps");
  }
  const int inputs = static_cast<int>(context.num_inputs());
  for (size_t k = 0; k < steps->size(); ++k) {
    if (FindElementwiseOp(steps->Get(k)->op()) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", k, " has elementwise opcode ", static_cast<int>(steps->Get(k)->op()),
                       ", which this runtime does not know"));
    }
    for (int operand : {steps->Get(k)->lhs(), steps->Get(k)->rhs()}) {
      if (operand >= inputs || -operand - 1 >= static_cast<int>(k)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "step ", k, " names operand ", operand, ", which does not exist yet"));
      }
    }
  }
  return absl::OkStatus();
}

void CostElementwise(const OpCostContext& context, InstructionCost& cost) {
  for (const kvx::ElementwiseStep* step : *context.instruction.params_as_ElementwiseParams()->steps()) {
    cost.flops += FindElementwiseOp(step->op())->flops * context.output_elements;
  }
}

// A layer of the KV layout.
absl::Status CacheLayer(const OpCheckContext& context, uint32_t layer) {
  const uint32_t layers = context.executable.kv_layout()->num_layers();
  if (layer >= layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " of a KV layout of ", layers));
  }
  return absl::OkStatus();
}

// KvWrite: in key, value, slot_mapping → the cache's layer.
absl::Status VerifyKvWrite(const OpCheckContext& context) {
  if (absl::Status heads =
          HeadOperand(context, context.input(kvx::KvWriteOperand::Key), /*of_the_cache=*/true);
      !heads.ok()) {
    return heads;
  }
  return CacheLayer(context, context.instruction.params_as_KvWriteParams()->layer());
}

void CostKvWrite(const OpCostContext& context, InstructionCost& cost) {
  cost.kv_bytes = context.sizes.tokens * KvSlotBytes(context.executable);
}

// KvAttention: in query, positions, seq_starts, context_lens, block_tables →
// out.
absl::Status VerifyKvAttention(const OpCheckContext& context) {
  const kvx::TensorRef& query = context.input(kvx::KvAttentionOperand::Query);
  if (absl::Status fits = OutputFits(SameShape(context.output(0), query)); !fits.ok()) {
    return fits;
  }
  if (absl::Status heads = HeadOperand(context, query, /*of_the_cache=*/true); !heads.ok()) {
    return heads;
  }
  return CacheLayer(context, context.instruction.params_as_KvAttentionParams()->layer());
}

// Each (query head, key) pair: the q·k and p·v dot products, and the score's
// scaling, exp and sum; each query head's row is divided once.
void CostKvAttention(const OpCostContext& context, InstructionCost& cost) {
  const kvx::TensorRef& query = kvx::InputOf(context.instruction, kvx::KvAttentionOperand::Query);
  const int64_t heads = Extent(query, 1, context.sizes);
  const int64_t head_dim = Extent(query, 2, context.sizes);
  cost.kv_bytes = context.attention.cached_tokens * KvSlotBytes(context.executable);
  cost.flops = heads * context.attention.query_key_pairs * (4 * head_dim + 3) +
               context.sizes.tokens * heads * head_dim;
}

// GatherRows: in x, rows → out.
absl::Status VerifyGatherRows(const OpCheckContext& context) {
  const int64_t width = LastStaticDim(context.output(0));
  return OutputFits(width == LastStaticDim(context.input(kvx::GatherRowsOperand::X)) && width > 0);
}

// Copy: in x → out (a reshape: same bytes, other shape).
absl::Status VerifyCopy(const OpCheckContext& context) {
  return OutputFits(SameElementCount(context.output(0), context.input(kvx::CopyOperand::X)));
}

// A Copy into its own bytes moves nothing.
void CostCopy(const OpCostContext& context, InstructionCost& cost) {
  const kvx::TensorRef& in = kvx::InputOf(context.instruction, kvx::CopyOperand::X);
  const kvx::TensorRef& out = *context.instruction.outputs()->Get(0);
  if (in.kind() == kvx::BufferKind::Arena && out.kind() == kvx::BufferKind::Arena &&
      in.offset() == out.offset()) {
    cost.activation_bytes = 0;
  }
}

// AllReduce: in x → out, x summed over the ranks; in place where the two
// share their bytes.
absl::Status VerifyAllReduce(const OpCheckContext& context) {
  return OutputFits(SameShape(context.output(0), context.input(kvx::AllReduceOperand::X)));
}

void CostAllReduce(const OpCostContext& context, InstructionCost& cost) {
  cost.collective_bytes = static_cast<uint64_t>(ElementsOf(
                              context.executable,
                              kvx::InputOf(context.instruction, kvx::AllReduceOperand::X),
                              context.sizes)) *
                          sizeof(float);
}

// AllGather: in x [rows, this rank's columns] → out [rows, every rank's].
absl::Status VerifyAllGather(const OpCheckContext& context) {
  const kvx::TensorRef& x = context.input(kvx::AllGatherOperand::X);
  const kvx::TensorRef& out = context.output(0);
  const auto* columns = context.instruction.params_as_AllGatherParams()->rank_columns();
  int64_t total = 0;
  for (int64_t rank_columns : *columns) {
    if (rank_columns <= 0) {
      return absl::InvalidArgumentError("every rank's column count must be positive");
    }
    total += rank_columns;
  }
  const bool matrices = x.shape()->size() == 2 && out.shape()->size() == 2 &&
                        SameDim(*x.shape()->Get(0), *out.shape()->Get(0));
  const int64_t local = LastStaticDim(x);
  const bool counted = std::find(columns->begin(), columns->end(), local) != columns->end();
  return OutputFits(matrices && counted && LastStaticDim(out) == total);
}

void CostAllGather(const OpCostContext& context, InstructionCost& cost) {
  cost.collective_bytes = static_cast<uint64_t>(ElementsOf(
                              context.executable,
                              kvx::InputOf(context.instruction, kvx::AllGatherOperand::X),
                              context.sizes)) *
                          sizeof(float);
}

// The opcodes that are not row-wise; runtime/ops describes the others.
using P = kvx::OpParams;
constexpr OpDescription kOps[] = {
    {kvx::OpCode::Embedding, kvx::kOperandCount<kvx::EmbeddingOperand>,
     kvx::kOperandCount<kvx::EmbeddingOperand>, 1, P::NONE, false, VerifyEmbedding,
     CostEmbedding},
    {kvx::OpCode::Linear, kvx::kRequiredOperandCount<kvx::LinearOperand>,
     kvx::kOperandCount<kvx::LinearOperand>, 1, P::NONE, false, VerifyLinear, CostLinear},
    {kvx::OpCode::Elementwise, 1, 64, 1, P::ElementwiseParams, true, VerifyElementwise,
     CostElementwise},
    {kvx::OpCode::KvWrite, kvx::kOperandCount<kvx::KvWriteOperand>,
     kvx::kOperandCount<kvx::KvWriteOperand>, 0, P::KvWriteParams, false, VerifyKvWrite,
     CostKvWrite},
    {kvx::OpCode::KvAttention, kvx::kOperandCount<kvx::KvAttentionOperand>,
     kvx::kOperandCount<kvx::KvAttentionOperand>, 1, P::KvAttentionParams, false,
     VerifyKvAttention, CostKvAttention},
    {kvx::OpCode::GatherRows, kvx::kOperandCount<kvx::GatherRowsOperand>,
     kvx::kOperandCount<kvx::GatherRowsOperand>, 1, P::NONE, false, VerifyGatherRows, NoFlops},
    {kvx::OpCode::Copy, kvx::kOperandCount<kvx::CopyOperand>, kvx::kOperandCount<kvx::CopyOperand>,
     1, P::NONE, true, VerifyCopy, CostCopy},
    {kvx::OpCode::AllReduce, kvx::kOperandCount<kvx::AllReduceOperand>,
     kvx::kOperandCount<kvx::AllReduceOperand>, 1, P::NONE, false, VerifyAllReduce,
     CostAllReduce},
    {kvx::OpCode::AllGather, kvx::kOperandCount<kvx::AllGatherOperand>,
     kvx::kOperandCount<kvx::AllGatherOperand>, 1, P::AllGatherParams, false, VerifyAllGather,
     CostAllGather},
};

static_assert(DescribesEveryOpCodeOnce<kOps>());

}  // namespace

// ---- Checks and costs the op descriptions share (OpTable.h) ----

bool SameShape(const kvx::TensorRef& a, const kvx::TensorRef& b) {
  if (a.shape()->size() != b.shape()->size()) return false;
  for (size_t i = 0; i < a.shape()->size(); ++i) {
    if (!SameDim(*a.shape()->Get(i), *b.shape()->Get(i))) return false;
  }
  return true;
}

int64_t LastStaticDim(const kvx::TensorRef& ref) {
  const kvx::Dim* last = ref.shape()->Get(ref.shape()->size() - 1);
  return last->kind() == kvx::DimKind::Static ? last->size() : -1;
}

absl::Status OutputFits(bool fits) {
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError("the output's shape does not fit the inputs'");
}

absl::Status HeadOperand(const OpCheckContext& context, const kvx::TensorRef& head,
                         bool of_the_cache) {
  if (head.shape()->size() != 3) {
    return absl::InvalidArgumentError("needs [tokens, heads, head_dim] operands");
  }
  const kvx::Dim& head_dim = *head.shape()->Get(2);
  if (head_dim.kind() != kvx::DimKind::Static ||
      (of_the_cache && head_dim.size() != context.executable.kv_layout()->head_dim())) {
    return absl::InvalidArgumentError("head_dim differs from the KV layout's");
  }
  return absl::OkStatus();
}

int64_t Extent(const kvx::TensorRef& ref, int axis, const StepSizes& sizes) {
  if (ref.shape() == nullptr || static_cast<int>(ref.shape()->size()) <= axis) return 1;
  const kvx::Dim& dim = *ref.shape()->Get(axis);
  return DimExtent(dim.kind(), dim.size(), sizes);
}

int64_t OpCheckContext::WeightDimOf(const kvx::TensorRef& ref, size_t dim) const {
  if (ref.kind() != kvx::BufferKind::Weight) return -1;
  const auto* shape = executable.weights()->Get(ref.index())->shape();
  return shape != nullptr && dim < shape->size() ? shape->Get(dim) : -1;
}

const OpDescription* FindOp(kvx::OpCode op) {
  if (const RowOp* row = FindRowOp(op)) return &row->description;
  for (const OpDescription& description : kOps) {
    if (description.op == op) return &description;
  }
  return nullptr;
}

std::optional<uint32_t> KvCacheLayer(const kvx::Instruction& instruction) {
  if (const kvx::KvWriteParams* write = instruction.params_as_KvWriteParams()) {
    return write->layer();
  }
  if (const kvx::KvAttentionParams* attention = instruction.params_as_KvAttentionParams()) {
    return attention->layer();
  }
  return std::nullopt;
}

}  // namespace kvjit::runtime
