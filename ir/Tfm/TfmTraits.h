#ifndef KVJIT_IR_TFM_TFMTRAITS_H_
#define KVJIT_IR_TFM_TFMTRAITS_H_

#include "mlir/IR/OpDefinition.h"

// The C++ side of the op classes of TfmTraits.td, where each is defined.
// They carry no methods: passes ask `op->hasTrait<tfm::OpTrait::X>()`.
namespace kvjit::tfm::OpTrait {

template <typename ConcreteOp>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteOp, Elementwise> {};

template <typename ConcreteOp>
class RowWise : public mlir::OpTrait::TraitBase<ConcreteOp, RowWise> {};

template <typename ConcreteOp>
class FusesResidualAdd : public mlir::OpTrait::TraitBase<ConcreteOp, FusesResidualAdd> {};

template <typename ConcreteOp>
class CommutesWithRowGather : public mlir::OpTrait::TraitBase<ConcreteOp, CommutesWithRowGather> {
};

}  // namespace kvjit::tfm::OpTrait

#endif  // KVJIT_IR_TFM_TFMTRAITS_H_
