#include "frontend/model/DecoderBuilder.h"

#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/model/ReferenceWeights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "ir/Tfm/TfmOps.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit::model {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::Relative;
using ::testing::HasSubstr;

class DecoderBuilderTest : public ::testing::Test {
 protected:
  DecoderBuilderTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
  }
  mlir::MLIRContext context_;
};

// A direct Llama forward pass with plain loops, independent of the IR: the
// builder's graph, run by the reference evaluator, must agree with it.
std::vector<float> DirectForward(const ModelConfig& c, ReferenceWeights& w,
                                 const std::vector<int32_t>& tokens) {
  auto get = [&](const std::string& name) { return (*w.Load(name))->values; };
  const int64_t T = tokens.size(), D = c.hidden_size, H = c.num_heads, KV = c.num_kv_heads;
  const int64_t Dh = c.head_dim, F = c.intermediate_size, V = c.vocab_size;
  auto rms = [&](const std::vector<float>& x, const std::vector<float>& g) {
    std::vector<float> y(x.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += double(x[t * D + i]) * x[t * D + i];
      double inv = 1 / std::sqrt(ss / D + c.rms_norm_eps);
      for (int64_t i = 0; i < D; ++i) y[t * D + i] = x[t * D + i] * inv * g[i];
    }
    return y;
  };
  auto matvec = [&](const std::vector<float>& x, int64_t in, const std::vector<float>& W,
                    int64_t out, const std::vector<float>* b) {
    std::vector<float> y(T * out);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = b ? (*b)[o] : 0;
        for (int64_t i = 0; i < in; ++i) s += double(x[t * in + i]) * W[o * in + i];
        y[t * out + o] = s;
      }
    return y;
  };
  auto rope = [&](std::vector<float>& x, int64_t heads) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < Dh / 2; ++i) {
          double angle = t * std::pow(c.rope_theta, -2.0 * i / Dh);
          int64_t a = (t * heads + h) * Dh + i, b = a + Dh / 2;  // neox pairs
          double x0 = x[a], x1 = x[b];
          x[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
          x[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
  };
  std::vector<float> embed = get("token_embd.weight");
  std::vector<float> x(T * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) x[t * D + i] = embed[tokens[t] * D + i];
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<float> h = rms(x, get(p + "attn_norm.weight"));
    std::vector<float> bq = get(p + "attn_q.bias"), bk = get(p + "attn_k.bias"),
                       bv = get(p + "attn_v.bias");
    std::vector<float> q = matvec(h, D, get(p + "attn_q.weight"), H * Dh, &bq);
    std::vector<float> k = matvec(h, D, get(p + "attn_k.weight"), KV * Dh, &bk);
    std::vector<float> v = matvec(h, D, get(p + "attn_v.weight"), KV * Dh, &bv);
    rope(q, H);
    rope(k, KV);
    std::vector<float> ctx(T * H * Dh, 0);
    for (int64_t hd = 0; hd < H; ++hd) {
      const int64_t kvh = hd / (H / KV);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < Dh; ++e)
            dot += double(q[(i * H + hd) * Dh + e]) * k[(j * KV + kvh) * Dh + e];
          s[j] = dot / std::sqrt(double(Dh));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t e = 0; e < Dh; ++e)
            ctx[(i * H + hd) * Dh + e] += s[j] / sum * v[(j * KV + kvh) * Dh + e];
      }
    }
    std::vector<float> attn = matvec(ctx, H * Dh, get(p + "attn_output.weight"), D, nullptr);
    for (int64_t i = 0; i < T * D; ++i) x[i] += attn[i];
    std::vector<float> h2 = rms(x, get(p + "ffn_norm.weight"));
    std::vector<float> g = matvec(h2, D, get(p + "ffn_gate.weight"), F, nullptr);
    std::vector<float> u = matvec(h2, D, get(p + "ffn_up.weight"), F, nullptr);
    for (int64_t i = 0; i < T * F; ++i) g[i] = g[i] / (1 + std::exp(-double(g[i]))) * u[i];
    std::vector<float> down = matvec(g, F, get(p + "ffn_down.weight"), D, nullptr);
    for (int64_t i = 0; i < T * D; ++i) x[i] += down[i];
  }
  return matvec(rms(x, get("output_norm.weight")), D, embed, V, nullptr);
}

TEST_F(DecoderBuilderTest, GqaModelWithBiasMatchesDirectComputation) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 7);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_TRUE(module.ok()) << module.status();

  ReferenceWeights provider(weights);
  reference::ReferenceEvaluator evaluator(**module, provider);
  std::vector<int32_t> tokens = {3, 17, 5, 39, 0, 22, 8};
  auto logits = reference::EvaluateLogits(evaluator, kForwardFunctionName, tokens);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->shape, (std::vector<int64_t>{7, 40}));

  std::vector<float> expected = DirectForward(config, provider, tokens);
  EXPECT_TRUE(AllClose(logits->values, expected, Absolute(1e-4) + Relative(1e-4)));
}

TEST_F(DecoderBuilderTest, EarlierPositionsIgnoreLaterTokens) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 11);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  ReferenceWeights provider(weights);
  reference::ReferenceEvaluator evaluator(**module, provider);
  auto full = reference::EvaluateLogits(evaluator, kForwardFunctionName, {1, 2, 3, 4, 5});
  auto prefix = reference::EvaluateLogits(evaluator, kForwardFunctionName, {1, 2, 3});
  ASSERT_TRUE(full.ok() && prefix.ok());
  EXPECT_TRUE(AllClose(prefix->values,
                       absl::MakeConstSpan(full->values).subspan(0, prefix->values.size()),
                       Absolute(1e-5) + Relative(1e-5)));
}

TEST_F(DecoderBuilderTest, DeclaresEachWeightOnceWithItsStorage) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 1);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  int params = 0;
  (*module)->walk([&](tfm::ParamOp param) {
    ++params;
    EXPECT_EQ(param.getStorage(), tfm::StorageType::f32);
  });
  EXPECT_EQ(params, static_cast<int>(weights.weights().size()));
}

TEST_F(DecoderBuilderTest, MissingTensorIsNamed) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 1);
  weights.Remove("blk.1.ffn_up.weight");
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()), HasSubstr("tensor 'blk.1.ffn_up.weight' is missing"));
}

TEST_F(DecoderBuilderTest, MisshapenTensorIsNamedWithBothShapes) {
  ModelConfig config = TinyGqaConfig();
  config.num_kv_heads = 4;  // the weights were made for 2 KV heads
  InMemoryWeights weights = RandomWeightsFor(TinyGqaConfig(), 1);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("tensor 'blk.0.attn_k.weight' has shape [8, 16] but the qwen2 model's "
                        "hyper-parameters need [16, 16]"));
}

TEST_F(DecoderBuilderTest, UntiedModelNeedsOutputWeight) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 1);
  config.tied_embeddings = false;
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()), HasSubstr("'output.weight' is missing"));
}

TEST_F(DecoderBuilderTest, InvalidConfigIsRefused) {
  ModelConfig config = TinyGqaConfig();
  config.num_kv_heads = 3;
  InMemoryWeights weights = RandomWeightsFor(TinyGqaConfig(), 1);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("num_heads (4) is not a multiple of num_kv_heads (3)"));
}

std::vector<float> ValuesOf(const InMemoryWeights& weights, const std::string& name) {
  for (const WeightInfo& info : weights.weights()) {
    if (info.name != name) continue;
    absl::Span<const uint8_t> bytes = weights.Bytes(info);
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  return {};
}

// `names`' rows one after another, as a checkpoint that stores them fused.
std::vector<float> Rows(const InMemoryWeights& weights, const std::vector<std::string>& names) {
  std::vector<float> rows;
  for (const std::string& name : names) {
    std::vector<float> part = ValuesOf(weights, name);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

absl::StatusOr<std::vector<float>> LogitsOf(mlir::MLIRContext& context, const ModelConfig& config,
                                            const InMemoryWeights& weights) {
  auto module = BuildDecoderModule(context, config, weights);
  if (!module.ok()) return module.status();
  ReferenceWeights provider(weights);
  reference::ReferenceEvaluator evaluator(**module, provider);
  auto logits = reference::EvaluateLogits(evaluator, kForwardFunctionName, {3, 17, 5, 39, 0, 22});
  if (!logits.ok()) return logits.status();
  return logits->values;
}

// Phi-3's attn_qkv and gate-first ffn_up, read as column views, compute what
// the separate projections do.
TEST_F(DecoderBuilderTest, FusedProjectionsMatchSeparateOnes) {
  ModelConfig separate = TinyGqaConfig();
  separate.qkv_bias = false;
  const InMemoryWeights weights = RandomWeightsFor(separate, 5);
  InMemoryWeights fused_weights = weights;
  const int64_t d = separate.hidden_size;
  const int64_t qkv_rows = (separate.num_heads + 2 * separate.num_kv_heads) * separate.head_dim;
  for (int64_t layer = 0; layer < separate.num_layers; ++layer) {
    const std::string p = absl::StrCat("blk.", layer, ".");
    const std::vector<std::string> qkv = {p + "attn_q.weight", p + "attn_k.weight",
                                          p + "attn_v.weight"};
    const std::vector<std::string> gate_up = {p + "ffn_gate.weight", p + "ffn_up.weight"};
    for (const auto* parts : {&qkv, &gate_up}) {
      for (const std::string& name : *parts) fused_weights.Remove(name);
    }
    fused_weights.Add(p + "attn_qkv.weight", {qkv_rows, d}, Rows(weights, qkv));
    fused_weights.Add(p + "ffn_up.weight", {2 * separate.intermediate_size, d},
                      Rows(weights, gate_up));
  }
  ModelConfig fused = separate;
  fused.fused_projections = true;

  auto expected = LogitsOf(context_, separate, weights);
  auto got = LogitsOf(context_, fused, fused_weights);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(AllClose(*got, *expected, Absolute(1e-5) + Relative(1e-5)));
}

TEST_F(DecoderBuilderTest, FusedProjectionsNeedTheFusedTensors) {
  ModelConfig config = TinyGqaConfig();
  config.qkv_bias = false;
  config.fused_projections = true;
  InMemoryWeights weights = RandomWeightsFor(config, 1);
  auto module = BuildDecoderModule(context_, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("tensor 'blk.0.attn_qkv.weight' is missing"));
}

// LongRoPE's attention factor a multiplies rope's output for q and k: the
// logits of q and k weights scaled by a, without the factor.
TEST_F(DecoderBuilderTest, RopeAttentionFactorScalesQueriesAndKeys) {
  ModelConfig config = TinyGqaConfig();
  config.qkv_bias = false;
  const InMemoryWeights weights = RandomWeightsFor(config, 9);
  const float factor = 1.3f;
  InMemoryWeights scaled;
  for (const WeightInfo& info : weights.weights()) {
    std::vector<float> values = ValuesOf(weights, info.name);
    if (absl::StrContains(info.name, "attn_q.") || absl::StrContains(info.name, "attn_k.")) {
      for (float& value : values) value *= factor;
    }
    scaled.Add(info.name, info.shape, values);
  }
  ModelConfig with_factor = config;
  with_factor.rope_attention_factor = factor;

  auto expected = LogitsOf(context_, config, scaled);
  auto got = LogitsOf(context_, with_factor, weights);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(AllClose(*got, *expected, Absolute(1e-4) + Relative(1e-4)));
}

}  // namespace
}  // namespace kvjit::model
