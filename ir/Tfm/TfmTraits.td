#ifndef KVJIT_IR_TFM_TFMTRAITS_TD
#define KVJIT_IR_TFM_TFMTRAITS_TD

include "mlir/IR/OpBase.td"

// The classes of tfm ops that passes reason about, declared once here and
// attached to the ops in TfmOps.td, so that a new op joins a class by its
// definition, not by an edit to each pass. Each class states a property of
// the op's math; a pass may rely on it for every op that carries it. An op
// that has the property may still lack the trait: passes then leave it alone.
//
// "Row" is a slice of the leading (token) dimension: the features of one
// token, or its heads.

class Tfm_OpClass<string name> : NativeOpTrait<name> {
  let cppNamespace = "::kvjit::tfm::OpTrait";
}

// Each result element depends only on the operands' elements at the same
// index, and on that index (tfm.causal_mask compares the query and key
// indices). All operands and the result have one shape. fuse-elementwise
// grows elementwise trees out of these ops, and a `kernel.fusion` of kind
// `elementwise` holds only them.
// Ops: tfm.add, tfm.mul, tfm.scale, tfm.silu, tfm.gelu, tfm.causal_mask.
def Tfm_Elementwise : Tfm_OpClass<"Elementwise">;

// Not elementwise, but each result row depends only on the same row of the
// operands that have a token dimension and on operands that have none (a
// norm's weight), with work proportional to the row's length: one thread
// block holding the row computes it. Each such op is a kernel of its own:
// fuse-elementwise gives it a `kernel.fusion` of kind `row_wise`, and the
// lowering asks the op for its opcode and parameters. A GEMM (tfm.linear)
// is not row-wise: it reads a whole weight matrix per row and runs as a
// library call.
// Ops: tfm.rms_norm, tfm.layer_norm, tfm.rope.
def Tfm_RowWise : Tfm_OpClass<"RowWise">;

// A row-wise op whose kernel also computes the residual add that produces
// its operand 0: fuse-elementwise takes a `tfm.add` computing that operand
// into the op's `row_wise` fusion, which then yields the sum (the residual
// stream the next add reads) before the op's result.
// Ops: tfm.rms_norm.
def Tfm_FusesResidualAdd : Tfm_OpClass<"FusesResidualAdd">;

// Gathering rows commutes with the op through its first operand:
// op(gather_rows(x), rest) = gather_rows(op(x, rest)). Each result row
// depends only on the same row of operand 0; every other operand is the
// same for every row (a weight, a bias). insert-kv-cache walks up through
// these ops from the logits to gather the requested rows as early as it can.
// tfm.add and tfm.mul are not: their second operand has rows of its own;
// nor is tfm.rope: it reads each row's position.
// Ops: tfm.linear, tfm.rms_norm, tfm.layer_norm, tfm.scale, tfm.silu, tfm.gelu.
def Tfm_CommutesWithRowGather : Tfm_OpClass<"CommutesWithRowGather">;

#endif  // KVJIT_IR_TFM_TFMTRAITS_TD
