// plan-memory on real and random graphs, each plan proved sound by the
// independent checker; and the checker itself, shown to reject broken plans.

#include <random>
#include <string>
#include <vector>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/MemoryPlanChecker.h"
#include "passes/Passes.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::testing::HasSubstr;

int64_t ArenaBytes(mlir::func::FuncOp func) { return ArenaOf(func) ? ArenaOf(func).getBytes() : -1; }
int64_t NaiveBytes(mlir::func::FuncOp func) {
  return ArenaOf(func) ? ArenaOf(func).getNaiveBytes() : -1;
}

class PlanMemoryTest : public ::testing::Test {
 protected:
  PlanMemoryTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
    context_.loadAllAvailableDialects();
  }

  // Runs plan-memory; what it reports goes to `diagnostics_`.
  mlir::LogicalResult Plan(mlir::ModuleOp module, const PlanMemoryOptions& options) {
    mlir::ScopedDiagnosticHandler capture(&context_, [&](mlir::Diagnostic& diagnostic) {
      diagnostics_ += diagnostic.str() + "\n";
      for (const mlir::Diagnostic& note : diagnostic.getNotes()) diagnostics_ += note.str() + "\n";
    });
    mlir::PassManager passes(&context_);
    passes.addPass(createPlanMemory(options));
    return passes.run(module);
  }

  // The checker's verdict on `func`, its diagnostics in `diagnostics_`.
  mlir::LogicalResult Check(mlir::func::FuncOp func) {
    mlir::ScopedDiagnosticHandler capture(&context_, [&](mlir::Diagnostic& diagnostic) {
      diagnostics_ += diagnostic.str() + "\n";
      for (const mlir::Diagnostic& note : diagnostic.getNotes()) diagnostics_ += note.str() + "\n";
    });
    return VerifyMemoryPlan(func);
  }

  // Every function of a planned module passes the checker, and reuse never
  // makes the arena larger than one buffer per value.
  void ExpectSoundPlans(mlir::ModuleOp module) {
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      EXPECT_TRUE(mlir::succeeded(Check(func))) << diagnostics_;
      EXPECT_LE(ArenaBytes(func), NaiveBytes(func));
    }
  }

  mlir::OwningOpRef<mlir::ModuleOp> Parse(const std::string& source) {
    return mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
  }

  mlir::MLIRContext context_;
  std::string diagnostics_;
};

TEST_F(PlanMemoryTest, Stories260KForwardGetsASoundPlanWithReuse) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = model::BuildDecoderModule(context_, model->config, *model->weights);
  ASSERT_TRUE(module.ok()) << module.status();
  auto forward = (**module).lookupSymbol<mlir::func::FuncOp>(model::kForwardFunctionName);
  ASSERT_TRUE(forward);

  // The cache a step function of this model will take, so the KV layout is
  // planned from the model's real dimensions.
  const model::ModelConfig& config = model->config;
  auto cache = kv::CacheType::get(&context_, config.num_layers, config.num_kv_heads,
                                  config.head_dim, /*block_size=*/16, kv::CacheElement::f16,
                                  kv::CacheElement::f16, /*key_rotation=*/0, /*value_rotation=*/0);
  forward.insertArgument(forward.getNumArguments(), cache, {}, forward.getLoc());

  ASSERT_TRUE(mlir::succeeded(Plan(**module, PlanMemoryOptions{})));
  ExpectSoundPlans(**module);
  // Layers repeat the same shapes, so most buffers are reused many times.
  EXPECT_LT(ArenaBytes(forward) * 10,
            NaiveBytes(forward));
  kv::LayoutAttr layout = KvLayoutOf(forward);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout.getBlockBytes(), static_cast<int64_t>(config.KvCacheBytesPerToken(2) * 16));
  EXPECT_EQ(layout.getBlocks(), (int64_t{1} << 30) / layout.getBlockBytes());
}

TEST_F(PlanMemoryTest, TinyGqaModelGetsASoundPlanForEveryTokenBound) {
  const model::ModelConfig config = model::TinyGqaConfig();
  const model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/7);
  for (int64_t max_tokens : {1, 5, 64, 512}) {
    auto module = model::BuildDecoderModule(context_, config, weights);
    ASSERT_TRUE(module.ok()) << module.status();
    PlanMemoryOptions options;
    options.maxTokensPerStep = max_tokens;
    ASSERT_TRUE(mlir::succeeded(Plan(**module, options))) << diagnostics_;
    ExpectSoundPlans(**module);
    auto forward = (**module).lookupSymbol<mlir::func::FuncOp>(model::kForwardFunctionName);
    EXPECT_EQ(ArenaOf(forward).getMaxTokens(), max_tokens);
    EXPECT_LT(ArenaBytes(forward), NaiveBytes(forward));
  }
}

// A random DAG of tfm.add, mul, silu and linear over [T, width] activations.
// Operands mostly come from the last few values (chains) and sometimes from
// anywhere before (long-lived values with fan-out); a few values are returned.
class RandomGraphBuilder {
 public:
  RandomGraphBuilder(mlir::MLIRContext& context, uint32_t seed)
      : rng_(seed), builder_(&context), loc_(builder_.getUnknownLoc()) {}

  mlir::OwningOpRef<mlir::ModuleOp> Build() {
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc_);
    module_ = *module;
    tokens_ = Chance(0.7) ? mlir::ShapedType::kDynamic : Uniform(1, 9);

    std::vector<mlir::Type> inputs;
    for (int64_t i = 0, count = Uniform(1, 3); i < count; ++i) inputs.push_back(RandomActivation());
    builder_.setInsertionPointToEnd(module_.getBody());
    auto func = builder_.create<mlir::func::FuncOp>(loc_, "graph",
                                                    builder_.getFunctionType(inputs, {}));
    builder_.setInsertionPointToStart(func.addEntryBlock());
    values_.assign(func.getArguments().begin(), func.getArguments().end());

    for (int64_t i = 0, count = Uniform(1, 60); i < count; ++i) values_.push_back(RandomOp());

    std::vector<mlir::Value> outputs = {values_.back()};
    for (int64_t i = 0, extra = Uniform(0, 2); i < extra; ++i) outputs.push_back(AnyValue());
    builder_.create<mlir::func::ReturnOp>(loc_, outputs);
    func.setFunctionType(builder_.getFunctionType(inputs, mlir::ValueRange(outputs).getTypes()));
    return module;
  }

 private:
  int64_t Uniform(int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(rng_);
  }
  bool Chance(double probability) { return std::bernoulli_distribution(probability)(rng_); }

  mlir::RankedTensorType RandomActivation() {
    static constexpr int64_t kWidths[] = {3, 8, 24, 64, 200};
    return mlir::RankedTensorType::get({tokens_, kWidths[Uniform(0, 4)]}, builder_.getF32Type());
  }

  mlir::Value AnyValue() { return values_[Uniform(0, values_.size() - 1)]; }

  mlir::Value RecentOrAnyValue() {
    if (Chance(0.3)) return AnyValue();
    const int64_t recent = std::min<int64_t>(4, values_.size());
    return values_[values_.size() - Uniform(1, recent)];
  }

  mlir::Value SameTypeValue(mlir::Type type) {
    std::vector<mlir::Value> candidates;
    for (mlir::Value value : values_) {
      if (value.getType() == type) candidates.push_back(value);
    }
    return candidates[Uniform(0, candidates.size() - 1)];
  }

  mlir::Value Weight(int64_t out, int64_t in) {
    const std::string name = "w" + std::to_string(out) + "x" + std::to_string(in);
    auto type = mlir::RankedTensorType::get({out, in}, builder_.getF32Type());
    if (!module_.lookupSymbol(name)) {
      mlir::OpBuilder::InsertionGuard guard(builder_);
      builder_.setInsertionPointToStart(module_.getBody());
      builder_.create<tfm::ParamOp>(
          loc_, builder_.getStringAttr(name), mlir::TypeAttr::get(type),
          tfm::StorageTypeAttr::get(builder_.getContext(), tfm::StorageType::f32));
    }
    return builder_.create<tfm::WeightOp>(loc_, type, mlir::FlatSymbolRefAttr::get(
                                                          builder_.getContext(), name));
  }

  mlir::Value RandomOp() {
    mlir::Value input = RecentOrAnyValue();
    auto type = mlir::cast<mlir::RankedTensorType>(input.getType());
    switch (Uniform(0, 3)) {
      case 0:
        return builder_.create<tfm::AddOp>(loc_, type, input, SameTypeValue(type));
      case 1:
        return builder_.create<tfm::MulOp>(loc_, type, input, SameTypeValue(type));
      case 2:
        return builder_.create<tfm::SiluOp>(loc_, type, input);
      default: {
        auto result = RandomActivation();
        mlir::Value weight = Weight(result.getDimSize(1), type.getDimSize(1));
        return builder_.create<tfm::LinearOp>(loc_, result, input, weight, mlir::Value());
      }
    }
  }

  std::mt19937 rng_;
  mlir::OpBuilder builder_;
  mlir::Location loc_;
  mlir::ModuleOp module_;
  int64_t tokens_ = 0;
  std::vector<mlir::Value> values_;
};

TEST_F(PlanMemoryTest, RandomGraphsGetSoundPlans) {
  constexpr int kGraphs = 300;
  int reused = 0;
  for (uint32_t seed = 0; seed < kGraphs; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    mlir::OwningOpRef<mlir::ModuleOp> module = RandomGraphBuilder(context_, seed).Build();
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
    PlanMemoryOptions options;
    options.maxTokensPerStep = std::vector<int64_t>{1, 7, 64, 512}[seed % 4];
    options.alignment = std::vector<int64_t>{1, 64, 256}[seed % 3];
    ASSERT_TRUE(mlir::succeeded(Plan(*module, options))) << diagnostics_;
    ExpectSoundPlans(*module);
    auto graph = module->lookupSymbol<mlir::func::FuncOp>("graph");
    if (ArenaBytes(graph) < NaiveBytes(graph)) {
      ++reused;
    }
  }
  // Most graphs have values that die early; a planner that never reused
  // bytes would pass the checker too, so ask for reuse.
  EXPECT_GT(reused, kGraphs / 2);
}

// A linear and three chained silus over 1 KiB values: offsets 0, 1024, 0, 1024.
constexpr char kChain[] = R"mlir(
  tfm.param @w : tensor<64x64xf32> storage <f32>
  func.func @chain(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
    %w = tfm.weight @w : tensor<64x64xf32>
    %a = tfm.linear %x, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
    %b = tfm.silu %a : tensor<4x64xf32>
    %c = tfm.silu %b : tensor<4x64xf32>
    %d = tfm.silu %c : tensor<4x64xf32>
    return %d : tensor<4x64xf32>
  }
)mlir";

class BrokenPlanTest : public PlanMemoryTest {
 protected:
  void SetUp() override {
    module_ = Parse(kChain);
    ASSERT_TRUE(module_);
    ASSERT_TRUE(mlir::succeeded(Plan(*module_, PlanMemoryOptions{})));
    chain_ = module_->lookupSymbol<mlir::func::FuncOp>("chain");
    for (mlir::Operation& op : chain_.front()) ops_.push_back(&op);
    ASSERT_TRUE(mlir::succeeded(Check(chain_))) << diagnostics_;
  }

  void SetOffset(int op_index, int64_t offset) {
    ops_[op_index]->setAttr(kArenaOffsetsAttrName,
                            mlir::DenseI64ArrayAttr::get(&context_, {offset}));
  }
  int64_t OffsetOf(int op_index) {
    return ArenaOffsetsOf(ops_[op_index])[0];
  }

  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp chain_;
  std::vector<mlir::Operation*> ops_;  // weight, linear, silu, silu, silu, return
};

TEST_F(BrokenPlanTest, RejectsAValueOverlappingOneLiveWithIt) {
  // The second silu reads the first: both live at once, they may not share.
  SetOffset(3, OffsetOf(2));
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("result #0 at arena bytes [1024, 2048), live over ops 3..4, "
                                      "overlaps a value at bytes [1024, 2048), live over ops 2..3"));
  EXPECT_THAT(diagnostics_, HasSubstr("the overlapped value is result #0 of this op"));
}

TEST_F(BrokenPlanTest, RejectsAPartialOverlap) {
  SetOffset(3, 512);
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("[512, 1536), live over ops 3..4, overlaps a value at bytes "
                                      "[1024, 2048)"));
}

TEST_F(BrokenPlanTest, AcceptsSharingBetweenValuesThatAreNeverLiveTogether) {
  // The linear's result dies at the first silu, before the second is made.
  EXPECT_EQ(OffsetOf(1), OffsetOf(3));
  EXPECT_TRUE(mlir::succeeded(Check(chain_))) << diagnostics_;
}

TEST_F(BrokenPlanTest, RejectsAValuePastTheArena) {
  SetOffset(4, ArenaBytes(chain_));
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("does not fit in the arena of 2048 bytes"));
}

TEST_F(BrokenPlanTest, RejectsAMisalignedOffset) {
  SetOffset(4, 4096 + 4);
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("not a non-negative multiple of 256"));
}

TEST_F(BrokenPlanTest, RejectsAnActivationLeftOutOfTheArena) {
  SetOffset(2, kNotInArena);
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("result #0 has offset -1"));
}

TEST_F(BrokenPlanTest, RejectsAWeightPlacedInTheArena) {
  SetOffset(0, 0);
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("is not an activation but has arena offset 0"));
}

TEST_F(BrokenPlanTest, RejectsAFunctionThatWasNeverPlanned) {
  chain_->removeAttr(kArenaAttrName);
  EXPECT_TRUE(mlir::failed(Check(chain_)));
  EXPECT_THAT(diagnostics_, HasSubstr("has no 'kernel.arena' attribute; run plan-memory first"));
}

TEST_F(PlanMemoryTest, ReportStatesReuseAndKvBlocks) {
  auto module = Parse(R"mlir(
    !cache = !kv.cache<layers = 2, kv_heads = 2, head_dim = 4, block_size = 16, key_type = f32, value_type = f32>
    func.func @step(%x: tensor<?x8xf32>, %cache: !cache) -> tensor<?x8xf32> {
      %a = tfm.silu %x : tensor<?x8xf32>
      %b = tfm.silu %a : tensor<?x8xf32>
      %c = tfm.silu %b : tensor<?x8xf32>
      return %c : tensor<?x8xf32>
    }
  )mlir");
  ASSERT_TRUE(module);
  PlanMemoryOptions options;
  options.maxTokensPerStep = 32;
  options.kvMemoryMib = 1;
  options.report = true;
  ASSERT_TRUE(mlir::succeeded(Plan(*module, options))) << diagnostics_;
  // 32 tokens × 8 × 4 bytes = 1024 per value; 2 × 2 × 2 × 4 × 16 × 4 = 2048 per block.
  EXPECT_THAT(diagnostics_, HasSubstr("3 values in an arena of 2048 bytes, naive sum 3072 bytes, "
                                      "reuse 1.50x, for 32 tokens per step"));
  EXPECT_THAT(diagnostics_, HasSubstr("2048 bytes per block of 16 tokens, 512 blocks (8192 "
                                      "tokens) in 1 MiB"));
}

}  // namespace
}  // namespace kvjit
