#ifndef KVJIT_PASSES_PIPELINE_H_
#define KVJIT_PASSES_PIPELINE_H_

#include <string>

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace kvjit {

// The options of the whole compile, forwarded to the passes that own them.
struct KvjitPipelineOptions : public mlir::PassPipelineOptions<KvjitPipelineOptions> {
  Option<int64_t> blockSize{*this, "block-size", llvm::cl::desc("tokens per KV-cache block"),
                            llvm::cl::init(16)};
  Option<std::string> cacheElementType{
      *this, "cache-dtype", llvm::cl::desc("element type of the KV cache: f32, f16 or bf16"),
      llvm::cl::init("f32")};
  Option<int64_t> maxTokensPerStep{
      *this, "max-tokens-per-step",
      llvm::cl::desc("tokens one step may carry; sizes the activation arena"), llvm::cl::init(512)};
  Option<int64_t> kvMemoryMib{*this, "kv-memory-mib",
                              llvm::cl::desc("memory for the paged KV pool, in MiB"),
                              llvm::cl::init(1024)};
  Option<bool> fuseProjections{
      *this, "fuse-projections",
      llvm::cl::desc("fuse linears that read one input (Q, K, V; gate, up) into one"),
      llvm::cl::init(true)};
};

// fuse-attention → fuse-projections (unless left out) → insert-kv-cache →
// fuse-elementwise → plan-memory: from a
// whole-sequence tfm function to a planned step function at the kernel level.
void BuildKvjitPipeline(mlir::OpPassManager& pm, const KvjitPipelineOptions& options);

// Makes the pipeline available as `--kvjit-pipeline` to kvjit-opt.
void RegisterKvjitPipeline();

}  // namespace kvjit

#endif  // KVJIT_PASSES_PIPELINE_H_
