#include "passes/Pipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "passes/Passes.h"

namespace kvjit {

void BuildKvjitPipeline(mlir::OpPassManager& pm, const KvjitPipelineOptions& options) {
  pm.addPass(createFuseAttention());
  // Before the cache: the views of Q, K and V reach the reshapes that
  // insert-kv-cache's kv.write and kv.attention read, and fuse-elementwise
  // finds gate and up as views for its swiglu.
  if (options.fuseProjections) pm.addPass(createFuseProjections());
  InsertKvCacheOptions cache;
  cache.blockSize = options.blockSize;
  cache.cacheElementType = options.cacheElementType;
  pm.addPass(createInsertKvCache(cache));
  pm.addPass(createFuseElementwise());
  PlanMemoryOptions plan;
  plan.maxTokensPerStep = options.maxTokensPerStep;
  plan.kvMemoryMib = options.kvMemoryMib;
  pm.addPass(createPlanMemory(plan));
}

void RegisterKvjitPipeline() {
  mlir::PassPipelineRegistration<KvjitPipelineOptions>(
      "kvjit-pipeline",
      "fuse-attention, fuse-projections, insert-kv-cache, fuse-elementwise and plan-memory, in that order",
      BuildKvjitPipeline);
}

}  // namespace kvjit
