// --verify: the default pipeline's CPU step program passes against the
// reference evaluator on stories260K and SmolLM2, and a sabotaged pass run in
// the pipeline (through CompileOptions::build_pipeline) fails the compile,
// writes no executable, and is named by --verify_each_pass.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Drops the first residual connection: the first tfm.add gives way to its
// second operand (the attention branch), as a fusion that lost an operand
// would.
class DropFirstResidualAdd
    : public mlir::PassWrapper<DropFirstResidualAdd, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropFirstResidualAdd)
  llvm::StringRef getArgument() const override { return "test-drop-first-residual-add"; }

  void runOnOperation() override {
    getOperation().walk([](tfm::AddOp add) {
      add.getResult().replaceAllUsesWith(add.getRhs());
      add.erase();
      return mlir::WalkResult::interrupt();
    });
  }
};

// Rotates the queries at twice the model's rope base and the keys at it, so
// that a query and a key no longer meet at their relative position: the
// first rope of each layer's pair is the query's, as the builder writes them.
class MismatchQueryRope
    : public mlir::PassWrapper<MismatchQueryRope, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MismatchQueryRope)
  llvm::StringRef getArgument() const override { return "test-mismatch-query-rope"; }

  void runOnOperation() override {
    bool is_query = true;
    getOperation().walk([&](tfm::RopeOp rope) {
      if (is_query) rope.setTheta(llvm::APFloat(2 * rope.getTheta().convertToFloat()));
      is_query = !is_query;
    });
  }
};

// The default pipeline with `sabotage` after fuse-attention.
std::function<void(mlir::OpPassManager&)> PipelineWith(
    std::function<std::unique_ptr<mlir::Pass>()> sabotage) {
  return [sabotage](mlir::OpPassManager& pm) {
    pm.addPass(createFuseAttention());
    pm.addPass(sabotage());
    pm.addPass(createInsertKvCache());
    pm.addPass(createFuseElementwise());
    pm.addPass(createPlanMemory());
  };
}

class EquivalenceCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    output_ = (std::filesystem::temp_directory_path() /
               ("kvjit-verifier-test-" + std::to_string(::getpid()) + ".kvx"))
                  .string();
  }
  void TearDown() override {
    std::filesystem::remove(output_);
    std::filesystem::remove(codegen::SidecarPathFor(output_));
    std::free(progress_text_);
  }

  // Compiles `model` with `options`; the progress lines are in progress().
  absl::Status Compile(const std::string& model, codegen::CompileOptions options) {
    std::FILE* progress = open_memstream(&progress_text_, &progress_size_);
    absl::Status status = codegen::CompileModel(model, output_, options, progress);
    std::fclose(progress);
    return status;
  }
  std::string progress() const { return std::string(progress_text_, progress_size_); }
  // Whether the executable, or a file staged beside it, is there.
  bool Written() const {
    if (std::filesystem::exists(output_)) return true;
    const std::string staged = std::filesystem::path(output_).filename().string() + ".unverified";
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(output_).parent_path())) {
      if (entry.path().filename().string().rfind(staged, 0) == 0) return true;
    }
    return false;
  }

  std::string output_;
  char* progress_text_ = nullptr;
  size_t progress_size_ = 0;
};

std::string Stories() {
  return testing::SharedPath("models/stories260K.gguf");
}

TEST_F(EquivalenceCheckerTest, StoriesDefaultPipelinePassesAfterEveryPass) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  codegen::CompileOptions options;
  options.verify_each_pass = true;
  ASSERT_TRUE(Compile(Stories(), options).ok()) << progress();
  for (const char* subject : {"the IR after fuse-attention: PASS", "the IR after insert-kv-cache: PASS",
                              "the IR after fuse-elementwise: PASS", "the IR after plan-memory: PASS",
                              "the CPU step program: PASS"}) {
    EXPECT_THAT(progress(), HasSubstr(subject));
  }
  EXPECT_TRUE(std::filesystem::exists(output_));
}

TEST_F(EquivalenceCheckerTest, SmolLM2DefaultPipelinePassesByDefault) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  // No --verify: SmolLM2 is under the size that verifies by default.
  ASSERT_TRUE(Compile(path, codegen::CompileOptions()).ok()) << progress();
  EXPECT_THAT(progress(), HasSubstr("the CPU step program: PASS"));
  EXPECT_THAT(progress(), HasSubstr("quantized weights (q4_1, q8_0)"));
}

TEST_F(EquivalenceCheckerTest, ADroppedResidualFailsTheCompileAndWritesNothing) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  codegen::CompileOptions options;
  options.verification = codegen::Verification::kOn;
  options.build_pipeline = PipelineWith([] { return std::make_unique<DropFirstResidualAdd>(); });
  const absl::Status status = Compile(Stories(), options);
  ASSERT_FALSE(status.ok()) << progress();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the CPU step program: step 1 (prefill of A (13 tokens)), logit row 0 "
                        "(sequence A, position 0): max |diff|"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("was not written"));
  EXPECT_FALSE(Written());
}

// A compile that fails --verify leaves the sidecar already at its path as
// it was: an executable compiled there before names it and reads it. The
// sabotaged program has a sidecar of its own (fuse-projections'
// concatenations), staged beside it and removed with it.
TEST_F(EquivalenceCheckerTest, AFailedCompileLeavesTheSidecarAtItsPathAsItWas) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  const std::string sidecar = codegen::SidecarPathFor(output_);
  const std::string earlier = "the sidecar of an earlier executable";
  {
    std::FILE* file = std::fopen(sidecar.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fputs(earlier.c_str(), file);
    std::fclose(file);
  }
  codegen::CompileOptions options;
  options.verification = codegen::Verification::kOn;
  options.build_pipeline = [](mlir::OpPassManager& pm) {
    pm.addPass(createFuseAttention());
    pm.addPass(createFuseProjections());
    pm.addPass(std::make_unique<DropFirstResidualAdd>());
    pm.addPass(createInsertKvCache());
    pm.addPass(createFuseElementwise());
    pm.addPass(createPlanMemory());
  };
  const absl::Status status = Compile(Stories(), options);
  ASSERT_FALSE(status.ok()) << progress();
  EXPECT_THAT(std::string(status.message()), HasSubstr("was not written"));
  EXPECT_FALSE(Written());
  std::ifstream kept(sidecar, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(kept), {});
  EXPECT_TRUE(bytes == earlier) << sidecar << " was replaced by " << bytes.size() << " bytes";
}

// A compile that passes --verify moves its staged sidecar into place: the
// executable loads and reads it there.
TEST_F(EquivalenceCheckerTest, AVerifiedCompilePutsItsSidecarBesideTheExecutable) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  codegen::CompileOptions options;
  options.verification = codegen::Verification::kOn;
  ASSERT_TRUE(Compile(Stories(), options).ok()) << progress();
  EXPECT_TRUE(std::filesystem::exists(codegen::SidecarPathFor(output_)));
  auto executable = runtime::Executable::Load(output_);
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ((*executable)->root().weight_files()->size(), 2u);
  std::error_code ignored;
  std::filesystem::remove(output_, ignored);
  EXPECT_FALSE(Written());
}

TEST_F(EquivalenceCheckerTest, VerifyEachPassNamesTheSabotagedPass) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  codegen::CompileOptions options;
  options.verify_each_pass = true;
  options.build_pipeline = PipelineWith([] { return std::make_unique<DropFirstResidualAdd>(); });
  const absl::Status status = Compile(Stories(), options);
  ASSERT_FALSE(status.ok()) << progress();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the IR after test-drop-first-residual-add: step 1"));
  EXPECT_THAT(progress(), HasSubstr("the IR after fuse-attention: PASS"));
  // The passes after the first that fails are not evaluated.
  EXPECT_THAT(progress(), Not(HasSubstr("the IR after insert-kv-cache")));
  EXPECT_FALSE(Written());
}

// A subtle sabotage on float weights, whose tolerance is tight.
TEST_F(EquivalenceCheckerTest, MismatchedQueryAndKeyRopesFailOnStories) {
  if (Stories().empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
  codegen::CompileOptions options;
  options.build_pipeline = PipelineWith([] { return std::make_unique<MismatchQueryRope>(); });
  const absl::Status status = Compile(Stories(), options);
  ASSERT_FALSE(status.ok()) << progress();
  EXPECT_THAT(std::string(status.message()), HasSubstr("the CPU step program: step 1"))
      << progress();
  EXPECT_FALSE(Written());
}

// On a quantized model, whose tolerance is wide (8-bit activations), a
// dropped residual is still far outside it.
TEST_F(EquivalenceCheckerTest, ADroppedResidualFailsOnSmolLM2) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  codegen::CompileOptions options;
  options.build_pipeline = PipelineWith([] { return std::make_unique<DropFirstResidualAdd>(); });
  const absl::Status status = Compile(path, options);
  ASSERT_FALSE(status.ok()) << progress();
  EXPECT_THAT(std::string(status.message()), HasSubstr("the CPU step program: step 1"))
      << progress();
  EXPECT_FALSE(Written());
}

}  // namespace
}  // namespace kvjit
