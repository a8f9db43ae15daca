// Structured output on SmolLM2 through both engines and beam search: greedy
// and sampled samples, forked samples, n-gram drafts, requests arriving while
// others run and beams all produce text its grammar allows; the engines (and
// one beam) agree token for token, drafts change nothing under greedy
// decoding, and a grammar with nothing left to allow ends its sample.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/driver/Compiler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/BatchScheduler.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/Drafter.h"
#include "runtime/generation/Generator.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/LlamaCppComparison.h"

namespace kvjit {
namespace {

using runtime::FinishReason;

constexpr char kPersonSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 18, "maximum": 99},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2}
  },
  "required": ["name", "age", "role", "tags"],
  "additionalProperties": false
})";

// The reasons `text` is not a person under kPersonSchema; empty when it is.
std::string PersonErrors(const std::string& text) {
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return "not JSON: " + text;
  if (!value.is_object() || value.size() != 4) return "not an object of 4 fields: " + text;
  std::string errors;
  const auto& name = value.value("name", nlohmann::json());
  if (!name.is_string() || name.get<std::string>().empty()) errors += " name;";
  const auto& age = value.value("age", nlohmann::json());
  if (!age.is_number_integer() || age.get<int64_t>() < 18 || age.get<int64_t>() > 99) errors += " age;";
  const auto& role = value.value("role", nlohmann::json());
  if (!role.is_string() || (role != "admin" && role != "editor" && role != "viewer")) {
    errors += " role;";
  }
  const auto& tags = value.value("tags", nlohmann::json());
  if (!tags.is_array() || tags.size() > 2) errors += " tags;";
  return errors.empty() ? "" : errors + " in " + text;
}

class GrammarSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
    auto executable = testing::CompileAndLoad(path, codegen::CompileOptions());
    ASSERT_TRUE(executable.ok()) << executable.status();
    executable_ = *std::move(executable);
    auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/256, /*threads=*/2);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
    auto tokenizer = tokenizer::TokenizerFromExecutable(executable_->root());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    auto compiler = grammar::GrammarCompiler::Create(*tokenizer_, runner_->vocab_size());
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    auto person = (*compiler)->Compile({grammar::GrammarSpec::Kind::kJsonSchema, kPersonSchema, {}});
    ASSERT_TRUE(person.ok()) << person.status();
    person_ = *person;
    compiler_ = *std::move(compiler);
    stops_ = {tokenizer_->eos_id()};
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      if (tokenizer_->IsEndOfGeneration(id) && id != tokenizer_->eos_id()) stops_.push_back(id);
    }
  }

  std::vector<int32_t> Prompt(const std::string& text) {
    auto tokens = tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/false);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    return tokens.ok() ? *tokens : std::vector<int32_t>{};
  }

  // Generated tokens as text, without a final stop token.
  std::string Text(std::vector<int32_t> tokens) {
    if (!tokens.empty() && tokenizer_->IsEndOfGeneration(tokens.back())) tokens.pop_back();
    return tokenizer_->Decode(tokens);
  }

  int64_t context() const { return executable_->config().context_length(); }

  std::unique_ptr<runtime::Executable> executable_;
  std::unique_ptr<runtime::StepRunner> runner_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
  std::shared_ptr<const grammar::CompiledGrammar> person_;
  std::vector<int32_t> stops_;
};

sampling::SamplingParams Greedy() {
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  return greedy;
}

TEST_F(GrammarSchedulerTest, BothEnginesAgreeAndDraftsChangeNothingUnderGreedyDecoding) {
  // A prompt that already holds a person, so that the n-gram lookup drafts.
  const std::vector<int32_t> prompt = Prompt(
      "A user record: {\"name\": \"Ada\", \"age\": 36, \"role\": \"admin\", \"tags\": [\"ops\"]}\n"
      "The same record again, as JSON:\n");
  grammar::GrammarMatcher matcher = person_->NewMatcher(stops_);
  runtime::Generator generator(*runner_, context());
  auto alone = generator.Generate(prompt, Greedy(), 96, [&](int32_t token) {
    return std::find(stops_.begin(), stops_.end(), token) == stops_.end();
  }, nullptr, &matcher);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(PersonErrors(Text(alone->tokens)), "");
  EXPECT_TRUE(matcher.Terminated()) << Text(alone->tokens);

  for (const int64_t draft_tokens : {0, 4}) {
    SCOPED_TRACE(::testing::Message() << draft_tokens << " draft tokens");
    runtime::NgramDrafter drafter(2, 3);
    runtime::BatchSchedulerOptions options;
    options.max_batch_tokens = runner_->max_tokens_per_step();
    options.context_length = context();
    if (draft_tokens > 0) {
      options.drafter = &drafter;
      options.draft_tokens = draft_tokens;
    }
    auto scheduler = runtime::BatchScheduler::Create(*runner_, options);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    auto id = scheduler->Submit(prompt, Greedy(), 96, stops_, 1, person_);
    ASSERT_TRUE(id.ok()) << id.status();
    while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
    auto result = scheduler->TakeResult(*id);
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->samples.front().tokens, alone->tokens);
    EXPECT_EQ(result->samples.front().finish_reason, FinishReason::kEos);
    if (draft_tokens > 0) {
      EXPECT_GT(scheduler->counters().accepted_tokens, 0) << "the prompt was meant to be copied";
    }
  }
}

TEST_F(GrammarSchedulerTest, SampledForkedAndDraftingSamplesOfStaggeredRequestsAllFollowTheSchema) {
  runtime::NgramDrafter drafter(2, 3);
  runtime::BatchSchedulerOptions options;
  options.max_batch_tokens = runner_->max_tokens_per_step();
  options.context_length = context();
  options.drafter = &drafter;
  options.draft_tokens = 3;
  auto scheduler = runtime::BatchScheduler::Create(*runner_, options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<std::string> prompts = {"Invent a person.\n", "A JSON user:\n",
                                            "Describe someone you know.\n", "{\"name\": "};
  std::vector<runtime::RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sampling::SamplingParams params;
    params.temperature = 1.0f;
    params.seed = 100 + i;
    auto id = scheduler->Submit(Prompt(prompts[i]), params, 160, stops_, /*num_samples=*/3, person_);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
    ASSERT_TRUE(scheduler->Step().ok());
  }
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  for (const runtime::RequestId id : ids) {
    auto result = scheduler->TakeResult(id);
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->samples.size(), 3u);
    for (const runtime::SampleResult& sample : result->samples) {
      EXPECT_EQ(sample.finish_reason, FinishReason::kEos) << Text(sample.tokens);
      EXPECT_EQ(PersonErrors(Text(sample.tokens)), "");
    }
  }
  EXPECT_EQ(scheduler->kv_blocks().counters().blocks_in_use, 0);
}

TEST_F(GrammarSchedulerTest, AGrammarWithoutStopTokensEndsItsSample) {
  auto choice = compiler_->Compile({grammar::GrammarSpec::Kind::kChoice, "", {"yes", "no"}});
  ASSERT_TRUE(choice.ok()) << choice.status();
  runtime::BatchSchedulerOptions options;
  options.max_batch_tokens = runner_->max_tokens_per_step();
  options.context_length = context();
  auto scheduler = runtime::BatchScheduler::Create(*runner_, options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto id = scheduler->Submit(Prompt("Is the sky blue?"), Greedy(), 32, /*stop_token_ids=*/{}, 2,
                              *choice);
  ASSERT_TRUE(id.ok()) << id.status();
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  auto result = scheduler->TakeResult(*id);
  ASSERT_TRUE(result.ok());
  for (const runtime::SampleResult& sample : result->samples) {
    EXPECT_EQ(sample.finish_reason, FinishReason::kGrammarEnded);
    const std::string text = tokenizer_->Decode(sample.tokens);
    EXPECT_TRUE(text == "yes" || text == "no") << text;
  }
  EXPECT_EQ(runtime::FinishReasonName(FinishReason::kGrammarEnded), "grammar");

  runtime::Generator generator(*runner_, context());
  grammar::GrammarMatcher matcher = (*choice)->NewMatcher({});
  auto alone = generator.Generate(Prompt("Is the sky blue?"), Greedy(), 32,
                                  [](int32_t) { return true; }, nullptr, &matcher);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->grammar_ended);
  EXPECT_EQ(alone->tokens, result->samples.front().tokens);
}

TEST_F(GrammarSchedulerTest, BeamsFollowTheSchemaAndOneBeamIsGreedy) {
  const std::vector<int32_t> prompt = Prompt("A user record as JSON:\n");
  runtime::BeamSearchParams params;
  params.num_beams = 3;
  params.num_return_sequences = 3;
  params.max_new_tokens = 96;
  params.eos_token_ids = stops_;
  params.grammar = person_;
  runtime::BeamSearch search(*runner_, context());
  auto beams = search.Search(prompt, params);
  ASSERT_TRUE(beams.ok()) << beams.status();
  ASSERT_EQ(beams->hypotheses.size(), 3u);
  for (const runtime::BeamHypothesis& hypothesis : beams->hypotheses) {
    EXPECT_EQ(hypothesis.finish_reason, sampling::StopReason::kEos) << Text(hypothesis.tokens);
    EXPECT_EQ(PersonErrors(Text(hypothesis.tokens)), "");
  }

  params.num_beams = 1;
  params.num_return_sequences = 1;
  auto one = search.Search(prompt, params);
  ASSERT_TRUE(one.ok()) << one.status();
  grammar::GrammarMatcher matcher = person_->NewMatcher(stops_);
  runtime::Generator generator(*runner_, context());
  auto greedy = generator.Generate(prompt, Greedy(), 96, [&](int32_t token) {
    return std::find(stops_.begin(), stops_.end(), token) == stops_.end();
  }, nullptr, &matcher);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(one->hypotheses.front().tokens, greedy->tokens);

  params.eos_token_ids.clear();
  EXPECT_EQ(search.Search(prompt, params).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvjit
