#ifndef KVJIT_CODEGEN_LOWERING_INSTRUCTIONEMITTER_H_
#define KVJIT_CODEGEN_LOWERING_INSTRUCTIONEMITTER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "flatbuffers/flatbuffers.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/APFloat.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "runtime/schema/kvx_generated.h"

// What an op's lowering (ExecutableLowerableOpInterface) sees of the
// executable writer: the part every op shares.
namespace kvjit::codegen {

// What an instruction carries besides its tensors: its op's parameter table
// (kvx.fbs OpParams), none for an op without parameters.
struct InstructionParams {
  kvx::OpParams type = kvx::OpParams::NONE;
  flatbuffers::Offset<void> table;
};

// "'tfm.matmul' at loc(...)": how every error points at an op.
std::string DescribeOp(mlir::Operation* op);

// An attribute's float as the schema stores it (f32, rounded to nearest).
float ToF32(llvm::APFloat value);

class InstructionEmitter {
 public:
  virtual ~InstructionEmitter() = default;

  // Where an op builds its parameter table.
  virtual flatbuffers::FlatBufferBuilder& builder() = 0;

  // Appends `opcode` over `inputs` with `op`'s results as outputs, in the
  // order `output_order` gives (result numbers), all of them by default.
  // The outputs' dynamic dimensions take the row kind of `rows_from`, one of
  // the inputs. Inputs are step inputs, weights or earlier results; a column
  // view is refused unless the runtime's op table says `opcode` reads views.
  virtual absl::Status Emit(mlir::Operation* op, kvx::OpCode opcode,
                            const std::vector<mlir::Value>& inputs, mlir::Value rows_from,
                            const InstructionParams& params = {},
                            std::vector<unsigned> output_order = {}) = 0;

  // `weight`'s result as a reference to the model weight its tfm.param
  // declares (checked against the model), with no instruction.
  virtual absl::Status BindWeight(tfm::WeightOp weight) = 0;

  // `slice`'s result as a reference into the viewed arena rows with their
  // stride, with no instruction.
  virtual absl::Status BindColumnView(tfm::SliceColumnsOp slice) = 0;

  // An error unless `cache` is the step function's KV cache argument.
  virtual absl::Status CheckCache(mlir::Operation* op, mlir::Value cache) = 0;
};

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_INSTRUCTIONEMITTER_H_
