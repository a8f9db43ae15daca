// shard-tensor-parallel proven as the other passes are: the reference
// evaluator runs every rank's program, each in its own thread with the
// collectives between them simulated in the process (InProcessGroup), and
// every rank's logits match the unsplit model's. The tolerance is the
// reordered sums': a row-parallel linear's dot products are added per rank
// in f32 and then across ranks, 1e-4 of max(1, |logit|).

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/time/time.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "passes/registration/KvjitRegistration.h"
#include "runtime/dist/InProcessCommunicator.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"

namespace kvjit {
namespace {

using ::kvjit::testing::AllWithin;

class ShardTensorParallelTest : public ::testing::Test {
 protected:
  ShardTensorParallelTest() : context_(Registry()) {}

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  // Rank `rank`'s program of `module` (which stays as it was).
  mlir::OwningOpRef<mlir::ModuleOp> Shard(mlir::ModuleOp module, int64_t ranks, int64_t rank) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    mlir::PassManager passes(&context_);
    passes.addPass(createFuseAttention());
    passes.addPass(createShardTensorParallel({ranks, rank}));
    EXPECT_TRUE(mlir::succeeded(passes.run(*copy)));
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*copy)));
    return copy;
  }

  // Splits the model over `ranks`, evaluates the ranks' programs together
  // and compares each rank's logits with the unsplit model's.
  void CheckModel(const model::ModelConfig& config, const model::WeightSource& source,
                  absl::Span<const int32_t> tokens, int ranks) {
    auto module = model::BuildDecoderModule(context_, config, source);
    ASSERT_TRUE(module.ok()) << module.status();
    model::ReferenceWeights weights(source);
    reference::ReferenceEvaluator whole_evaluator(**module, weights);
    auto whole = reference::EvaluateLogits(whole_evaluator, model::kForwardFunctionName, tokens);
    ASSERT_TRUE(whole.ok()) << whole.status();

    std::vector<mlir::OwningOpRef<mlir::ModuleOp>> programs;
    for (int rank = 0; rank < ranks; ++rank) programs.push_back(Shard(**module, ranks, rank));
    auto group = runtime::dist::InProcessGroup::Create(ranks, absl::Seconds(60));
    ASSERT_TRUE(group.ok()) << group.status();
    std::vector<std::unique_ptr<model::ReferenceWeights>> rank_weights;
    std::vector<std::unique_ptr<reference::ReferenceEvaluator>> evaluators;
    for (int rank = 0; rank < ranks; ++rank) {
      rank_weights.push_back(std::make_unique<model::ReferenceWeights>(source));
      evaluators.push_back(
          std::make_unique<reference::ReferenceEvaluator>(*programs[rank], *rank_weights[rank]));
      evaluators.back()->set_communicator(&(*group)->communicator(rank));
    }
    std::vector<absl::StatusOr<reference::RefTensor>> logits(
        ranks, absl::UnknownError("not evaluated"));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank) {
      threads.emplace_back([&, rank] {
        logits[rank] =
            reference::EvaluateLogits(*evaluators[rank], model::kForwardFunctionName, tokens);
      });
    }
    for (std::thread& thread : threads) thread.join();

    std::vector<double> tolerances;
    for (float logit : whole->values) tolerances.push_back(1e-4 * std::max(1.0f, std::abs(logit)));
    for (int rank = 0; rank < ranks; ++rank) {
      ASSERT_TRUE(logits[rank].ok()) << "rank " << rank << ": " << logits[rank].status();
      ASSERT_EQ(logits[rank]->shape, whole->shape) << "rank " << rank;
      EXPECT_TRUE(AllWithin(logits[rank]->values, whole->values, tolerances)) << "rank " << rank;
      // The collectives give every rank the same bits.
      EXPECT_EQ(logits[rank]->values, logits[0]->values) << "rank " << rank;
    }
  }

  mlir::MLIRContext context_;
};

// Four query heads over two KV heads, Q, K and V with biases.
TEST_F(ShardTensorParallelTest, TinyGqaModelOverTwoRanksKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/7);
  CheckModel(config, weights, {1, 17, 4, 33, 9, 25, 2}, /*ranks=*/2);
}

// Three ranks: one with a KV head of its own, uneven feed-forward columns
// (24 over 3) and vocabulary rows (40 over 3).
TEST_F(ShardTensorParallelTest, TinyGqaModelOverThreeRanksKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  config.num_kv_heads = 4;
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/8);
  CheckModel(config, weights, {3, 8, 21, 5, 39, 0}, /*ranks=*/3);
}

// Four ranks over two KV heads: each KV head on two ranks, each with two of
// its query heads.
TEST_F(ShardTensorParallelTest, TinyGqaModelReplicatesKvHeadsOverFourRanks) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/9);
  CheckModel(config, weights, {2, 11, 30, 7}, /*ranks=*/4);
}

TEST_F(ShardTensorParallelTest, Stories260KOverTwoAndFourRanksKeepsItsLogits) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 10, 200, 31};
  CheckModel(model->config, *model->weights, tokens, /*ranks=*/2);
  CheckModel(model->config, *model->weights, tokens, /*ranks=*/4);
}

// After insert-kv-cache, each rank's cache holds its KV heads alone: half
// the bytes per token of the unsplit model's on each of two ranks.
TEST_F(ShardTensorParallelTest, EachRankCachesItsOwnKvHeads) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/7);
  auto module = model::BuildDecoderModule(context_, config, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  for (int64_t rank = 0; rank < 2; ++rank) {
    mlir::OwningOpRef<mlir::ModuleOp> program = Shard(**module, 2, rank);
    mlir::PassManager passes(&context_);
    passes.addPass(createInsertKvCache());
    ASSERT_TRUE(mlir::succeeded(passes.run(*program)));
    kv::CacheType cache = StepCache(*program);
    ASSERT_TRUE(cache);
    EXPECT_EQ(cache.getKvHeads(), config.num_kv_heads / 2) << "rank " << rank;
    EXPECT_EQ(cache.getHeadDim(), config.head_dim);
  }
}

// Rank 0 and 1 of 1 rank: a program of one process is the model itself.
TEST_F(ShardTensorParallelTest, OneRankLeavesTheModelAsItIs) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/7);
  auto module = model::BuildDecoderModule(context_, config, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  mlir::OwningOpRef<mlir::ModuleOp> program = Shard(**module, 1, 0);
  EXPECT_FALSE((*program)->hasAttr("dist.ranks"));
  int64_t collectives = 0;
  program->walk([&](mlir::Operation* op) {
    if (op->getDialect()->getNamespace() == "dist") ++collectives;
  });
  EXPECT_EQ(collectives, 0);
}

}  // namespace
}  // namespace kvjit
