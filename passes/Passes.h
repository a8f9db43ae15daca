#ifndef KVJIT_PASSES_PASSES_H_
#define KVJIT_PASSES_PASSES_H_

#include <memory>

#include "ir/Dist/DistDialect.h"
#include "ir/Kv/KvDialect.h"
#include "ir/Tfm/TfmDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kvjit {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

}  // namespace kvjit

#endif  // KVJIT_PASSES_PASSES_H_
