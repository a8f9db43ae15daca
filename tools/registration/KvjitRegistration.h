#ifndef KVJIT_TOOLS_REGISTRATION_KVJITREGISTRATION_H_
#define KVJIT_TOOLS_REGISTRATION_KVJITREGISTRATION_H_

#include "mlir/IR/DialectRegistry.h"

namespace kvjit {

// Every dialect a kvjit tool may read or write, with the external models of
// their ops' interfaces (the reference evaluation). All tools call this one
// function so that kvjit-opt accepts exactly what the compiler produces.
void RegisterKvjitDialects(mlir::DialectRegistry& registry);

// kvjit's passes and the upstream transforms its pipelines use, for
// command-line pass pipelines (kvjit-opt, --dump-ir-after-all).
void RegisterKvjitPasses();

}  // namespace kvjit

#endif  // KVJIT_TOOLS_REGISTRATION_KVJITREGISTRATION_H_
