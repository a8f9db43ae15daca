#include "passes/Pipeline.h"

#include <algorithm>
#include <cstdlib>

#include "ir/Dist/DistDialect.h"
#include "ir/Kernel/KernelOps.h"
#include "ir/Kv/KvOps.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/MemoryPlanChecker.h"
#include "passes/Passes.h"

namespace kvjit {
namespace {

constexpr KvjitStage kStages[] = {
    {"fuse-attention", true},
    {"shard-tensor-parallel", false, /*behind_when_left_out=*/false},
    {"fuse-projections", false},
    {"choose-weight-layouts", false},
    {"insert-kv-cache", true},
    {"fuse-elementwise", false},
    {"plan-memory", true},
};

std::optional<size_t> StageIndex(llvm::StringRef pass) {
  for (size_t index = 0; index < std::size(kStages); ++index) {
    if (pass == kStages[index].pass) return index;
  }
  return std::nullopt;
}

template <typename... OpTs>
bool Contains(mlir::ModuleOp module) {
  return module
      .walk([](mlir::Operation* op) {
        return mlir::isa<OpTs...>(op) ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
      })
      .wasInterrupted();
}

bool IsPlanned(mlir::ModuleOp module) {
  return llvm::any_of(module.getOps<mlir::func::FuncOp>(), [](mlir::func::FuncOp function) {
    return static_cast<bool>(ArenaOf(function));
  });
}

// Whether stage `index` left its mark on `module`.
bool LeftItsMark(mlir::ModuleOp module, size_t index) {
  const llvm::StringRef pass = kStages[index].pass;
  if (pass == "fuse-attention") return Contains<tfm::AttentionOp, kv::AttentionOp>(module);
  if (pass == "shard-tensor-parallel") {
    return module->hasAttr(dist::DistDialect::RanksAttrHelper::getNameStr());
  }
  // Its concatenated weights, not its column views: a frontend may emit views
  // of a weight the checkpoint stores fused (Phi-3's qkv).
  if (pass == "fuse-projections") {
    return llvm::any_of(module.getOps<tfm::ParamOp>(),
                        [](tfm::ParamOp param) { return static_cast<bool>(param.getConcat()); });
  }
  if (pass == "choose-weight-layouts") {
    return llvm::any_of(module.getOps<tfm::ParamOp>(),
                        [](tfm::ParamOp param) { return static_cast<bool>(param.getLayout()); });
  }
  if (pass == "insert-kv-cache") return static_cast<bool>(StepCache(module));
  if (pass == "fuse-elementwise") return Contains<kernel::FusionOp>(module);
  return IsPlanned(module);
}

// An integer option of a pass as its pipeline element prints it: "block-size="
// of "insert-kv-cache{block-size=32 cache-dtype=f32}" is 32; 0 where it does not.
int64_t IntegerOption(llvm::StringRef element, llvm::StringRef option) {
  const size_t at = element.find(option);
  if (at == llvm::StringRef::npos) return 0;
  int64_t value = 0;
  if (element.drop_front(at + option.size()).consumeInteger(10, value)) return 0;
  return value;
}

std::string StageOrder() {
  std::string order;
  for (const KvjitStage& stage : kStages) {
    order += order.empty() ? "" : ", ";
    order += stage.pass;
  }
  return order;
}

}  // namespace

void BuildKvjitPipeline(mlir::OpPassManager& pm, const KvjitPipelineOptions& options) {
  // First: the layers cut away need no pass's work.
  if (options.keepLayers > 0) pm.addPass(createKeepFirstLayers({options.keepLayers}));
  pm.addPass(createFuseAttention());
  // On the attentions' operands, before fuse-projections joins them.
  if (options.tensorParallelRanks > 1) {
    pm.addPass(createShardTensorParallel(
        {options.tensorParallelRanks, options.tensorParallelRank}));
  }
  // Before the cache: the views of Q, K and V reach the reshapes that
  // insert-kv-cache's kv.write and kv.attention read, and fuse-elementwise
  // finds gate and up as views for its swiglu.
  if (options.fuseProjections) pm.addPass(createFuseProjections());
  // After fuse-projections, whose concatenations are the linears' weights.
  if (options.weightLayoutIsa != "none") {
    ChooseWeightLayoutsOptions layouts;
    layouts.isa = options.weightLayoutIsa;
    layouts.cpu = options.weightLayoutCpu;
    pm.addPass(createChooseWeightLayouts(layouts));
  }
  InsertKvCacheOptions cache;
  cache.blockSize = options.blockSize;
  cache.cacheElementType = options.cacheElementType;
  cache.keyElementType = options.keyElementType;
  cache.valueElementType = options.valueElementType;
  cache.rotation = options.cacheRotation;
  pm.addPass(createInsertKvCache(cache));
  pm.addPass(createFuseElementwise());
  PlanMemoryOptions plan;
  plan.maxTokensPerStep = options.maxTokensPerStep;
  plan.kvMemoryMib = options.kvMemoryMib;
  pm.addPass(createPlanMemory(plan));
}

std::string KvjitPipelineText(const KvjitPipelineOptions& options) {
  return (options.keepLayers > 0
              ? "keep-first-layers{layers=" + std::to_string(options.keepLayers.getValue()) + "},"
              : std::string()) +
         "fuse-attention," +
         (options.tensorParallelRanks > 1
              ? "shard-tensor-parallel{ranks=" + std::to_string(options.tensorParallelRanks.getValue()) +
                    " rank=" + std::to_string(options.tensorParallelRank.getValue()) + "},"
              : std::string()) +
         (options.fuseProjections ? "fuse-projections," : "") +
         (options.weightLayoutIsa != "none" ? "choose-weight-layouts{isa=" + options.weightLayoutIsa.getValue() +
                                                      " cpu=" + options.weightLayoutCpu.getValue() + "}," : "") +
         "insert-kv-cache{block-size=" + std::to_string(options.blockSize.getValue()) +
         " cache-dtype=" + options.cacheElementType.getValue() +
         (options.keyElementType.empty() ? "" : " cache-dtype-k=" + options.keyElementType.getValue()) +
         (options.valueElementType.empty() ? "" : " cache-dtype-v=" + options.valueElementType.getValue()) +
         (options.cacheRotation.getValue() == "auto" ? "" : " rotation=" + options.cacheRotation.getValue()) +
         "},fuse-elementwise,plan-memory{max-tokens-per-step=" +
         std::to_string(options.maxTokensPerStep.getValue()) +
         " kv-memory-mib=" + std::to_string(options.kvMemoryMib.getValue()) + "}";
}

void RegisterKvjitPipeline() {
  mlir::PassPipelineRegistration<KvjitPipelineOptions>(
      "kvjit-pipeline",
      "keep-first-layers (with keep-layers), fuse-attention, shard-tensor-parallel (with "
      "tensor-parallel-ranks), fuse-projections, choose-weight-layouts "
      "(with weight-layout-isa), insert-kv-cache, fuse-elementwise and plan-memory, in that order",
      BuildKvjitPipeline);
}

llvm::ArrayRef<KvjitStage> KvjitStages() { return kStages; }

mlir::LogicalResult RunKeepFirstLayers(mlir::ModuleOp module, int64_t layers,
                                       llvm::raw_ostream& errors) {
  bool first_error = true;
  mlir::ScopedDiagnosticHandler collect(module.getContext(), [&](mlir::Diagnostic& diagnostic) {
    if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Error) return mlir::failure();
    errors << (first_error ? "" : "\n") << diagnostic.getLocation() << ": " << diagnostic.str();
    first_error = false;
    return mlir::success();
  });
  mlir::PassManager pm(module.getContext());
  pm.addPass(createKeepFirstLayers({layers}));
  return pm.run(module);
}

kv::CacheType StepCache(mlir::ModuleOp module) {
  for (auto function : module.getOps<mlir::func::FuncOp>()) {
    for (mlir::Type type : function.getArgumentTypes()) {
      if (auto cache = mlir::dyn_cast<kv::CacheType>(type)) return cache;
    }
  }
  return nullptr;
}

std::vector<std::string> PassesBehind(mlir::ModuleOp module) {
  std::vector<std::string> behind;
  for (size_t index = std::size(kStages); index-- > 0;) {
    if (!LeftItsMark(module, index)) continue;
    for (size_t earlier = 0; earlier <= index; ++earlier) {
      if (kStages[earlier].behind_when_left_out || LeftItsMark(module, earlier)) {
        behind.push_back(kStages[earlier].pass);
      }
    }
    break;
  }
  return behind;
}

mlir::FailureOr<PipelineForModule> ParsePipelineFor(mlir::ModuleOp module, llvm::StringRef text,
                                                    mlir::OpPassManager& pm,
                                                    llvm::raw_ostream& errors) {
  // A textual pipeline names its passes through the registry; registering
  // a pass again is harmless.
  registerKvjitPasses();
  mlir::OpPassManager parsed(mlir::ModuleOp::getOperationName());
  if (mlir::failed(mlir::parsePassPipeline(text, parsed, errors))) return mlir::failure();

  const std::vector<std::string> behind = PassesBehind(module);
  auto is_behind = [&](llvm::StringRef pass) {
    return std::find(behind.begin(), behind.end(), pass) != behind.end();
  };
  PipelineForModule result;
  if (kv::CacheType cache = StepCache(module)) result.kv_block_size = cache.getBlockSize();
  std::vector<std::string> named;
  std::optional<size_t> previous_stage;
  bool first = true;
  for (mlir::Pass& pass : parsed.getPasses()) {
    std::string element;
    llvm::raw_string_ostream stream(element);
    pass.printAsTextualPipeline(stream);
    if (pass.getArgument() == "keep-first-layers") {
      if (!first) {
        errors << "the pipeline '" << text << "' runs keep-first-layers after another pass; it "
               << "must come first, since --verify's reference is cut before the passes run";
        return mlir::failure();
      }
      first = false;
      result.keep_layers = IntegerOption(element, "layers=");
      continue;
    }
    first = false;
    const std::optional<size_t> stage = StageIndex(pass.getArgument());
    if (stage) {
      if (previous_stage && *stage <= *previous_stage) {
        errors << "the pipeline '" << text << "' runs " << kStages[*stage].pass << " after "
               << kStages[*previous_stage].pass << "; kvjit's passes run once each, in the order "
               << StageOrder();
        return mlir::failure();
      }
      previous_stage = stage;
      named.push_back(kStages[*stage].pass);
      if (is_behind(kStages[*stage].pass)) {
        result.skipped.push_back(kStages[*stage].pass);
        continue;
      }
      if (llvm::StringRef(kStages[*stage].pass) == "insert-kv-cache") {
        result.kv_block_size = IntegerOption(element, "block-size=");
      }
    }
    if (mlir::failed(mlir::parsePassPipeline(element, pm, errors))) return mlir::failure();
  }
  for (const KvjitStage& stage : kStages) {
    if (!stage.required || is_behind(stage.pass) ||
        std::find(named.begin(), named.end(), stage.pass) != named.end()) {
      continue;
    }
    errors << "the pipeline '" << text << "' leaves out " << stage.pass
           << ", which the executable needs, and the IR has not been through it";
    return mlir::failure();
  }
  return result;
}

}  // namespace kvjit
