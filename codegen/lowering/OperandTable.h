#ifndef KVJIT_CODEGEN_LOWERING_OPERANDTABLE_H_
#define KVJIT_CODEGEN_LOWERING_OPERANDTABLE_H_

#include <cstddef>
#include <vector>

#include "mlir/IR/Value.h"
#include "runtime/schema/EnumTable.h"
#include "runtime/schema/OpOperands.h"

// How a lowering states the inputs of its instruction: a table of the
// opcode's operands (runtime/schema/OpOperands.h), each with the value of
// the op that fills it, which the lowering checks with
//   static_assert(kvx::CoversEnumInOrder(kTable, &Entry::operand));
// so that an operand added to the enum without its value here, or a table
// out of the enum's order, fails to compile.
namespace kvjit::codegen {

// An instruction input and the value of `Source` (an op, or what a fusion
// lowers from) that fills it. An optional operand's value is null where the
// op has none.
template <typename Source, typename Operand>
struct OperandOf {
  Operand operand;
  mlir::Value (*value)(Source source);
};

// The instruction's inputs, in the order the operand table states. An
// absent optional operand ends them: only the last operands are optional
// (OpOperands.h), so none after it is present either.
template <typename Source, typename Operand, size_t N>
std::vector<mlir::Value> InputsOf(Source source, const OperandOf<Source, Operand> (&operands)[N]) {
  std::vector<mlir::Value> inputs;
  for (const OperandOf<Source, Operand>& operand : operands) {
    const mlir::Value value = operand.value(source);
    if (!value) break;
    inputs.push_back(value);
  }
  return inputs;
}

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_OPERANDTABLE_H_
