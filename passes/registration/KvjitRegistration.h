#ifndef KVJIT_PASSES_REGISTRATION_KVJITREGISTRATION_H_
#define KVJIT_PASSES_REGISTRATION_KVJITREGISTRATION_H_

#include "mlir/IR/DialectRegistry.h"

// Registers kvjit's dialects, their interface models and its passes with
// MLIR, once for every tool and for the compile driver. It sits in passes/,
// the lowest layer that sees all it registers (ir's dialects and reference
// models, the passes and their pipeline).
namespace kvjit {

// Every dialect a kvjit tool may read or write, with the external models of
// their ops' interfaces (the reference evaluation). All tools call this one
// function so that kvjit-opt accepts exactly what the compiler produces.
void RegisterKvjitDialects(mlir::DialectRegistry& registry);

// kvjit's passes and the upstream transforms its pipelines use, for
// command-line pass pipelines (kvjit-opt, --dump-ir-after-all).
void RegisterKvjitPasses();

}  // namespace kvjit

#endif  // KVJIT_PASSES_REGISTRATION_KVJITREGISTRATION_H_
