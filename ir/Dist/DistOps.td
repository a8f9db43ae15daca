#ifndef KVJIT_IR_DIST_DISTOPS_TD
#define KVJIT_IR_DIST_DISTOPS_TD

include "ir/Dist/DistDialect.td"
include "ir/Tfm/TfmTraits.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Dist_Activation : RankedTensorOf<[F32]>;

// Neither op is Pure: a collective is a meeting of every rank, which no rank's
// program may drop, merge or reorder on its own.

def Dist_AllReduceOp : Dist_Op<"all_reduce", [SameOperandsAndResultType,
    Tfm_CommutesWithRowGather]> {
  let summary = "sums a tensor over every rank";
  let description = [{
    Each element of the result is the sum of that element of `input` on
    every rank, added in rank order, so that every rank holds the same
    bits. A row-parallel linear (its input's columns split over the ranks)
    computes a partial product on each rank; their sum is the linear's
    result.

    ```mlir
    %sum = dist.all_reduce %partial : tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Dist_Activation:$input);
  let results = (outs Dist_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Dist_AllGatherOp : Dist_Op<"all_gather", [Tfm_CommutesWithRowGather]> {
  let summary = "joins the ranks' columns of a [rows, columns] tensor";
  let description = [{
    `input` is this rank's `[rows, rank_columns[rank]]`; the result is
    `[rows, sum(rank_columns)]`: each row holds every rank's columns in
    rank order. The output projection split by vocabulary rows gives each
    rank the logits of its part of the vocabulary; their gathering is the
    whole vocabulary's logits.

    ```mlir
    %logits = dist.all_gather %part columns [256, 256] rank 0
        : (tensor<?x256xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Dist_Activation:$input, DenseI64ArrayAttr:$rank_columns, I64Attr:$rank);
  let results = (outs Dist_Activation:$result);
  let assemblyFormat = [{
    $input `columns` $rank_columns `rank` $rank attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif  // KVJIT_IR_DIST_DISTOPS_TD
