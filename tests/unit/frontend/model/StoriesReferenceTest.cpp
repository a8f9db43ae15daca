// The frontend end to end on a real model: stories260K (../shared/models),
// imported, tokenized and run greedily by the reference evaluator.

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "tests/unit/common/TestPaths.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit::model {
namespace {

TEST(StoriesReferenceTest, GreedyTextMatchesTheKnownContinuation) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model = OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = LoadTokenizer(*model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto prompt = (*tokenizer)->Encode("Once upon a time", /*add_special=*/true,
                                     /*parse_special=*/false);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  ASSERT_EQ(prompt->front(), (*tokenizer)->bos_id());

  mlir::DialectRegistry registry;
  RegisterKvjitDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = BuildDecoderModule(context, model->config, *model->weights);
  ASSERT_TRUE(module.ok()) << module.status();
  ReferenceWeights weights(*model->weights);
  reference::ReferenceEvaluator evaluator(**module, weights);
  reference::GreedyOptions options;
  options.max_new_tokens = 64;
  auto generated =
      reference::GenerateGreedy(evaluator, kForwardFunctionName, *prompt, options);
  ASSERT_TRUE(generated.ok()) << generated.status();

  std::vector<int32_t> all = *prompt;
  all.insert(all.end(), generated->begin(), generated->end());
  const std::string expected =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.";
  EXPECT_EQ((*tokenizer)->Decode(all).substr(0, expected.size()), expected);
}

}  // namespace
}  // namespace kvjit::model
