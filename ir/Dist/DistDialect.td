#ifndef KVJIT_IR_DIST_DISTDIALECT_TD
#define KVJIT_IR_DIST_DISTDIALECT_TD

include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::kvjit::dist";
  let summary = "Tensor parallelism: the collectives between the ranks of one model";
  let description = [{
    A model split over `ranks` processes (`shard-tensor-parallel`) is one
    program per rank, each over its shards of the weights and its attention
    heads. Where a rank's partial results must be combined, its program
    runs a collective, and every rank's program runs the same collectives
    in the same order: `dist.all_reduce` after each row-parallel linear,
    `dist.all_gather` after the vocabulary-parallel output projection.

    The module of a rank's program says which it is: `dist.ranks` and
    `dist.rank` (integers) on the module.
  }];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
  let discardableAttrs = (ins "::mlir::IntegerAttr":$ranks, "::mlir::IntegerAttr":$rank);
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

#endif  // KVJIT_IR_DIST_DISTDIALECT_TD
