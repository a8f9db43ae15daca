#ifndef KVJIT_TESTS_UNIT_RUNTIME_SCHEMA_INPUTSBYOPERAND_H_
#define KVJIT_TESTS_UNIT_RUNTIME_SCHEMA_INPUTSBYOPERAND_H_

#include <initializer_list>
#include <utility>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "runtime/schema/OpOperands.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::testing {

// An instruction's inputs for a test's hand-built program, each reference
// placed at the index of the operand it is named for
// (runtime/schema/OpOperands.h), as the lowering places them. The names
// given must be the operand enum's first ones (all of them, or all but the
// optional ones).
template <typename Operand>
std::vector<flatbuffers::Offset<kvx::TensorRef>> InputsByOperand(
    std::initializer_list<std::pair<Operand, flatbuffers::Offset<kvx::TensorRef>>> named) {
  std::vector<flatbuffers::Offset<kvx::TensorRef>> inputs(named.size());
  for (const auto& [operand, ref] : named) inputs.at(kvx::OperandIndex(operand)) = ref;
  return inputs;
}

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_RUNTIME_SCHEMA_INPUTSBYOPERAND_H_
