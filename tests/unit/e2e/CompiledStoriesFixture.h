#ifndef KVJIT_TESTS_UNIT_E2E_COMPILEDSTORIESFIXTURE_H_
#define KVJIT_TESTS_UNIT_E2E_COMPILEDSTORIESFIXTURE_H_

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "codegen/ExecutableWriter.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "gtest/gtest.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Pipeline.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/TestPaths.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {

// stories260K compiled into a .kvx (64 tokens per step) and loaded; skips the
// test when the model is not under $KVJIT_SHARED_DIR/models.
class CompiledStoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::SharedPath("models/stories260K.gguf");
    if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
    auto model = model::OpenModelFile(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<model::ModelFile>(*std::move(model));
    auto tokenizer = model::LoadTokenizer(*model_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);

    auto module = model::BuildDecoderModule(context_, model_->config, *model_->weights);
    ASSERT_TRUE(module.ok()) << module.status();
    forward_ = std::move(*module);
    mlir::OwningOpRef<mlir::ModuleOp> step = forward_->clone();
    mlir::PassManager pm(&context_);
    KvjitPipelineOptions options;
    options.maxTokensPerStep = 64;
    BuildKvjitPipeline(pm, options);
    ASSERT_TRUE(mlir::succeeded(pm.run(*step)));
    kvx_path_ = (std::filesystem::temp_directory_path() /
                 ("kvjit-e2e-" + std::to_string(::getpid()) + ".kvx"))
                    .string();
    auto buffer = codegen::WriteExecutable(*step, *model_, tokenizer_->vocabulary(), "",
                                           codegen::SidecarPathFor(kvx_path_));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(codegen::WriteExecutableFile(*buffer, kvx_path_).ok());
    auto executable = runtime::Executable::Load(kvx_path_);
    ASSERT_TRUE(executable.ok()) << executable.status();
    executable_ = std::move(*executable);
  }
  void TearDown() override {
    if (kvx_path_.empty()) return;
    std::filesystem::remove(kvx_path_);
    std::filesystem::remove(codegen::SidecarPathFor(kvx_path_));
  }

  mlir::MLIRContext context_;
  std::unique_ptr<model::ModelFile> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  mlir::OwningOpRef<mlir::ModuleOp> forward_;
  std::string kvx_path_;
  std::unique_ptr<runtime::Executable> executable_;
};

}  // namespace kvjit

#endif  // KVJIT_TESTS_UNIT_E2E_COMPILEDSTORIESFIXTURE_H_
