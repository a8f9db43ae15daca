// The KV cache as a compiler transformation, checked by proof: the step
// function that the whole pipeline makes (fused, cached, planned) gives over a
// paged cache the logits of the whole-sequence function recomputed from
// scratch, however the tokens are split into steps and however many
// sequences share a step.

#include <algorithm>
#include <numeric>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "mlir/Pass/PassManager.h"
#include "passes/MemoryPlanChecker.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::Relative;
using reference::RefTensor;

constexpr int64_t kBlockSize = 4;
constexpr int64_t kPoolBlocks = 64;

struct Sequence {
  explicit Sequence(std::vector<int32_t> all_tokens) : tokens(std::move(all_tokens)) {}

  std::vector<int32_t> tokens;
  int64_t cached = 0;
  std::vector<int32_t> blocks;
};

// Hands out pool blocks in a scrambled order, so that no sequence's blocks are
// contiguous and the block tables are really exercised.
class BlockAllocator {
 public:
  BlockAllocator() {
    for (int32_t b = 0; b < kPoolBlocks; ++b) free_.push_back((b * 37) % kPoolBlocks);
  }
  int32_t Allocate() {
    int32_t block = free_.front();
    free_.erase(free_.begin());
    return block;
  }

 private:
  std::vector<int32_t> free_;
};

class StepHarness {
 public:
  StepHarness(mlir::ModuleOp forward_module, mlir::ModuleOp step_module,
              reference::WeightProvider& weights, const model::ModelConfig& config)
      : full_(forward_module, weights),
        step_(step_module, weights),
        cache_(config.num_layers, config.num_kv_heads, config.head_dim, kBlockSize, kPoolBlocks) {
    step_.set_cache(&cache_);
  }

  // Runs one step over `count` new tokens of each listed sequence; returns
  // the logits of every new token, sequence after sequence.
  absl::StatusOr<RefTensor> Step(std::vector<std::pair<Sequence*, int64_t>> work) {
    std::vector<int32_t> tokens, positions, seq_starts = {0}, context_lens, slots, rows;
    int64_t max_blocks = 1;
    for (auto& [sequence, count] : work) {
      const int64_t end = sequence->cached + count;
      while (static_cast<int64_t>(sequence->blocks.size()) * kBlockSize < end) {
        sequence->blocks.push_back(allocator_.Allocate());
      }
      max_blocks = std::max<int64_t>(max_blocks, sequence->blocks.size());
      for (int64_t p = sequence->cached; p < end; ++p) {
        rows.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(sequence->tokens[p]);
        positions.push_back(static_cast<int32_t>(p));
        slots.push_back(sequence->blocks[p / kBlockSize] * kBlockSize + p % kBlockSize);
      }
      seq_starts.push_back(static_cast<int32_t>(tokens.size()));
      context_lens.push_back(static_cast<int32_t>(end));
      sequence->cached = end;
    }
    std::vector<int32_t> tables(work.size() * max_blocks, 0);
    for (size_t s = 0; s < work.size(); ++s) {
      std::copy(work[s].first->blocks.begin(), work[s].first->blocks.end(),
                tables.begin() + s * max_blocks);
    }
    const int64_t t = static_cast<int64_t>(tokens.size());
    const int64_t s = static_cast<int64_t>(work.size());
    std::vector<RefTensor> arguments = {
        RefTensor::Int({t}, tokens),          RefTensor::Int({t}, positions),
        RefTensor::Int({s + 1}, seq_starts),  RefTensor::Int({s}, context_lens),
        RefTensor::Int({t}, slots),           RefTensor::Int({s, max_blocks}, tables),
        RefTensor::Int({t}, rows),            RefTensor()};
    auto results = step_.Run("step", std::move(arguments));
    if (!results.ok()) return results.status();
    return (*results)[0];
  }

  // Checks `logits` rows (from Step) against full recomputation of each
  // sequence's prefix.
  void ExpectMatchesRecomputation(const RefTensor& logits,
                                  const std::vector<std::pair<Sequence*, int64_t>>& work) {
    const int64_t vocab = logits.shape[1];
    int64_t row = 0;
    for (const auto& [sequence, count] : work) {
      std::vector<int32_t> prefix(sequence->tokens.begin(),
                                  sequence->tokens.begin() + sequence->cached);
      auto full = reference::EvaluateLogits(full_, model::kForwardFunctionName, prefix);
      ASSERT_TRUE(full.ok()) << full.status();
      // This step's rows of the sequence: its last `count` positions.
      const int64_t first_position = sequence->cached - count;
      const auto rows = [&](const std::vector<float>& values, int64_t first) {
        return absl::MakeConstSpan(values).subspan(first * vocab, count * vocab);
      };
      ASSERT_TRUE(AllClose(rows(logits.values, row), rows(full->values, first_position),
                           Absolute(1e-4) + Relative(1e-4)))
          << "positions from " << first_position << ", " << vocab << " logits each";
      row += count;
    }
  }

 private:
  reference::ReferenceEvaluator full_;
  reference::ReferenceEvaluator step_;
  reference::RefKvCache cache_;
  BlockAllocator allocator_;
};

class InsertKvCacheTest : public ::testing::Test {
 protected:
  InsertKvCacheTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
  }

  // Builds the whole-sequence module and its step-function twin.
  void Compile(const model::ModelConfig& config, const model::WeightSource& weights) {
    config_ = config;
    auto module = model::BuildDecoderModule(context_, config, weights);
    ASSERT_TRUE(module.ok()) << module.status();
    forward_ = std::move(*module);
    step_ = forward_->clone();
    // The whole pipeline: the step function is checked after fusion and
    // memory planning too, not only after insert-kv-cache.
    mlir::PassManager pm(&context_);
    KvjitPipelineOptions options;
    options.blockSize = kBlockSize;
    options.maxTokensPerStep = 64;
    BuildKvjitPipeline(pm, options);
    ASSERT_TRUE(mlir::succeeded(pm.run(*step_)));
    auto step = step_->lookupSymbol<mlir::func::FuncOp>("step");
    ASSERT_TRUE(step);
    ASSERT_TRUE(mlir::succeeded(VerifyMemoryPlan(step)));
    provider_ = std::make_unique<model::ReferenceWeights>(weights);
    harness_ = std::make_unique<StepHarness>(*forward_, *step_, *provider_, config_);
  }

  void RunInChunks(std::vector<int32_t> tokens, int64_t chunk) {
    Sequence sequence{std::move(tokens)};
    while (sequence.cached < static_cast<int64_t>(sequence.tokens.size())) {
      const int64_t count =
          std::min<int64_t>(chunk, sequence.tokens.size() - sequence.cached);
      auto logits = harness_->Step({{&sequence, count}});
      ASSERT_TRUE(logits.ok()) << logits.status();
      harness_->ExpectMatchesRecomputation(*logits, {{&sequence, count}});
    }
  }

  void RunTwoSequencesPerStep(std::vector<int32_t> a_tokens, std::vector<int32_t> b_tokens) {
    Sequence a{std::move(a_tokens)};
    Sequence b{std::move(b_tokens)};
    // Prefill of different lengths together, then a decode of a beside a
    // prefill chunk of b, then decodes of both.
    for (auto work : std::vector<std::vector<std::pair<Sequence*, int64_t>>>{
             {{&a, 5}, {&b, 2}}, {{&a, 1}, {&b, 6}}, {{&b, 1}, {&a, 1}}, {{&a, 1}, {&b, 1}}}) {
      auto logits = harness_->Step(work);
      ASSERT_TRUE(logits.ok()) << logits.status();
      harness_->ExpectMatchesRecomputation(*logits, work);
    }
  }

  mlir::MLIRContext context_;
  model::ModelConfig config_;
  mlir::OwningOpRef<mlir::ModuleOp> forward_;
  mlir::OwningOpRef<mlir::ModuleOp> step_;
  std::unique_ptr<model::ReferenceWeights> provider_;
  std::unique_ptr<StepHarness> harness_;
};

const std::vector<int32_t> kRandomTokens = {3, 17, 5, 39, 0, 22, 8, 8, 31, 12, 1, 27, 36, 4};

TEST_F(InsertKvCacheTest, GqaWithBiasOneTokenAtATime) {
  model::InMemoryWeights weights = model::RandomWeightsFor(model::TinyGqaConfig(), 5);
  Compile(model::TinyGqaConfig(), weights);
  RunInChunks(kRandomTokens, 1);
}

TEST_F(InsertKvCacheTest, GqaWithBiasInChunksOfThreeAndSeven) {
  model::InMemoryWeights weights = model::RandomWeightsFor(model::TinyGqaConfig(), 5);
  Compile(model::TinyGqaConfig(), weights);
  RunInChunks(kRandomTokens, 3);
  Compile(model::TinyGqaConfig(), weights);
  RunInChunks(kRandomTokens, 7);
}

TEST_F(InsertKvCacheTest, GqaWithBiasTwoSequencesPerStep) {
  model::InMemoryWeights weights = model::RandomWeightsFor(model::TinyGqaConfig(), 9);
  Compile(model::TinyGqaConfig(), weights);
  RunTwoSequencesPerStep({1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16, 17, 18});
}

class StoriesKvCacheTest : public InsertKvCacheTest {
 protected:
  void SetUp() override {
    const std::string path = testing::SharedPath("models/stories260K.gguf");
    if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
    auto model = model::OpenModelFile(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<model::ModelFile>(*std::move(model));
    Compile(model_->config, *model_->weights);
  }
  std::unique_ptr<model::ModelFile> model_;
  // BOS + "Once upon a time, there was a little girl named Lily."
  const std::vector<int32_t> prompt_ = {1, 403, 407, 261, 378, 432, 439, 363, 358, 391,
                                        379, 276, 414, 30};
};

TEST_F(StoriesKvCacheTest, OneTokenAtATime) { RunInChunks(prompt_, 1); }
TEST_F(StoriesKvCacheTest, ChunksOfThree) { RunInChunks(prompt_, 3); }
TEST_F(StoriesKvCacheTest, ChunksOfSeven) { RunInChunks(prompt_, 7); }
TEST_F(StoriesKvCacheTest, TwoSequencesPerStep) {
  RunTwoSequencesPerStep(prompt_, {1, 403, 407, 261, 378, 30, 99, 120, 7, 300});
}

}  // namespace
}  // namespace kvjit
