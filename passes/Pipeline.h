#ifndef KVJIT_PASSES_PIPELINE_H_
#define KVJIT_PASSES_PIPELINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/Kv/KvTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace kvjit {

// The options of the whole compile, forwarded to the passes that own them.
struct KvjitPipelineOptions : public mlir::PassPipelineOptions<KvjitPipelineOptions> {
  Option<int64_t> keepLayers{
      *this, "keep-layers",
      llvm::cl::desc("the decoder layers to keep, counted from the first (keep-first-layers: a "
                     "layer-skipping self-draft); 0: every layer, without the pass"),
      llvm::cl::init(0)};
  Option<int64_t> blockSize{*this, "block-size", llvm::cl::desc("tokens per KV-cache block"),
                            llvm::cl::init(16)};
  Option<std::string> cacheElementType{
      *this, "cache-dtype",
      llvm::cl::desc("how the KV cache stores keys and values: f32, f16, bf16, q8_0, q4_0 or f8_e4m3"),
      llvm::cl::init("f32")};
  Option<std::string> keyElementType{
      *this, "cache-dtype-k", llvm::cl::desc("how the KV cache stores keys, where not as cache-dtype says"),
      llvm::cl::init("")};
  Option<std::string> valueElementType{
      *this, "cache-dtype-v",
      llvm::cl::desc("how the KV cache stores values, where not as cache-dtype says"), llvm::cl::init("")};
  Option<std::string> cacheRotation{
      *this, "cache-rotation",
      llvm::cl::desc("auto: quantized keys and values rotated by a Walsh-Hadamard matrix where head_dim "
                     "is a multiple of 64; none: as they are"),
      llvm::cl::init("auto")};
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
  Option<std::string> weightLayoutIsa{
      *this, "weight-layout-isa",
      llvm::cl::desc("the CPU ISA choose-weight-layouts chooses layouts for (avx512vnni, avx2, "
                     "portable), or none: every weight in GGUF's rows, without the pass"),
      llvm::cl::init("none")};
  Option<std::string> weightLayoutCpu{
      *this, "weight-layout-cpu",
      llvm::cl::desc("the microarchitecture choose-weight-layouts' measurements are for (generic, zen4, zen5)"),
      llvm::cl::init("generic")};
  Option<int64_t> tensorParallelRanks{
      *this, "tensor-parallel-ranks",
      llvm::cl::desc("the processes the model is split over (shard-tensor-parallel); 1: none, "
                     "without the pass"),
      llvm::cl::init(1)};
  Option<int64_t> tensorParallelRank{
      *this, "tensor-parallel-rank",
      llvm::cl::desc("which of them the program is for, from 0"), llvm::cl::init(0)};
};

// keep-first-layers (for keep-layers, unless 0) → fuse-attention →
// shard-tensor-parallel (for tensor-parallel-ranks, unless 1) →
// fuse-projections (unless left out) → choose-weight-layouts (for
// weight-layout-isa, unless none) → insert-kv-cache → fuse-elementwise →
// plan-memory: from a whole-sequence tfm function to a
// planned step function at the kernel level.
void BuildKvjitPipeline(mlir::OpPassManager& pm, const KvjitPipelineOptions& options);

// BuildKvjitPipeline's pipeline in MLIR's textual pass-pipeline syntax:
// "fuse-attention,insert-kv-cache{block-size=16 cache-dtype=f32},…".
std::string KvjitPipelineText(const KvjitPipelineOptions& options);

// Makes the pipeline available as `--kvjit-pipeline` to kvjit-opt.
void RegisterKvjitPipeline();

// One of kvjit's passes, as a pipeline names it, whether the executable
// writer needs the IR to have been through it, and whether IR past a later
// stage counts as past it where it left no mark: an optimization left out
// does, but a module left unsplit has not been through shard-tensor-parallel
// (it is the model of one process, not a split one without its mark).
struct KvjitStage {
  const char* pass;
  bool required;
  bool behind_when_left_out = true;
};

// fuse-attention, shard-tensor-parallel (optional), fuse-projections
// (optional), choose-weight-layouts
// (optional), insert-kv-cache, fuse-elementwise (optional) and plan-memory,
// in the order they must run.
llvm::ArrayRef<KvjitStage> KvjitStages();

// The kvjit passes `module` has been through, in stage order. Each is read
// off what the pass leaves in the IR, so IR from `kvjit import`, written by
// hand or printed by kvjit-opt is judged alike: a tfm.attention or
// kv.attention (fuse-attention), `dist.ranks` on the module
// (shard-tensor-parallel), a tfm.slice_columns (fuse-projections), a
// tfm.param with a layout (choose-weight-layouts), a function with a
// !kv.cache argument (insert-kv-cache), a kernel.fusion
// (fuse-elementwise), a function with kernel.arena (plan-memory). A
// stage before the last one found counts as passed even where it left
// nothing (an optional pass left out): it can no longer run; but for
// shard-tensor-parallel, which counts only where the module is a rank's.
std::vector<std::string> PassesBehind(mlir::ModuleOp module);

// The KV cache the module's step function reads; null before insert-kv-cache.
kv::CacheType StepCache(mlir::ModuleOp module);

// What ParsePipelineFor decided.
struct PipelineForModule {
  // The kvjit passes of the pipeline left out because the module is past them.
  std::vector<std::string> skipped;
  // Tokens per KV-cache block of the compiled program: the module's cache's
  // where it has one, else insert-kv-cache's option in the pipeline.
  int64_t kv_block_size = 0;
  // The layers keep-first-layers keeps, where the pipeline starts with it.
  // The pass is left out of the pass manager: it changes what the program
  // computes, so the compile runs it (RunKeepFirstLayers) before anything
  // else, on --verify's reference as well.
  std::optional<int64_t> keep_layers;
};

// Parses `text` (MLIR's textual pass-pipeline syntax, passes with their
// options, plugins' passes once loaded) into `pm` for `module`: the kvjit
// passes the module is already past are left out, and so is keep-first-layers
// (in `keep_layers`). Fails, with the reason on `errors`, on a syntax error or
// an unknown pass, on kvjit passes out of stage order, on keep-first-layers
// anywhere but first, and where a required pass is neither in the pipeline
// nor behind the module, naming it.
mlir::FailureOr<PipelineForModule> ParsePipelineFor(mlir::ModuleOp module, llvm::StringRef text,
                                                    mlir::OpPassManager& pm,
                                                    llvm::raw_ostream& errors);

// Runs keep-first-layers{layers=`layers`} on `module` alone; on failure its
// errors are on `errors`, each "location: message", a line apiece.
mlir::LogicalResult RunKeepFirstLayers(mlir::ModuleOp module, int64_t layers,
                                       llvm::raw_ostream& errors);

}  // namespace kvjit

#endif  // KVJIT_PASSES_PIPELINE_H_
