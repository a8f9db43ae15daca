#ifndef KVJIT_TESTS_UNIT_FRONTEND_MODEL_INMEMORYWEIGHTS_H_
#define KVJIT_TESTS_UNIT_FRONTEND_MODEL_INMEMORYWEIGHTS_H_

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"

namespace kvjit::model {

// f32 weights held in memory, for building models in tests.
class InMemoryWeights : public WeightSource {
 public:
  const std::string& origin() const override { return origin_; }
  const std::vector<WeightInfo>& weights() const override { return weights_; }
  absl::Span<const uint8_t> Bytes(const WeightInfo& weight) const override {
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (weights_[i].name == weight.name) return data_[i];
    }
    return {};
  }

  void Add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
    WeightInfo info;
    info.name = name;
    info.shape = std::move(shape);
    info.size_bytes = values.size() * sizeof(float);
    weights_.push_back(info);
    std::vector<uint8_t> bytes(info.size_bytes);
    std::memcpy(bytes.data(), values.data(), info.size_bytes);
    data_.push_back(std::move(bytes));
  }

  void AddRandom(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng,
                 float scale) {
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> values(count);
    for (float& v : values) v = normal(rng);
    Add(name, std::move(shape), values);
  }

  void Remove(const std::string& name) {
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (weights_[i].name == name) {
        weights_.erase(weights_.begin() + i);
        data_.erase(data_.begin() + i);
        return;
      }
    }
  }

 private:
  std::string origin_ = "in-memory";
  std::vector<WeightInfo> weights_;
  std::vector<std::vector<uint8_t>> data_;
};

// A tiny Llama-family config: GQA (4 heads over 2 KV heads), q/k/v bias.
inline ModelConfig TinyGqaConfig() {
  ModelConfig config;
  config.architecture = "qwen2";
  config.vocab_size = 40;
  config.hidden_size = 16;
  config.intermediate_size = 24;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 4;
  config.context_length = 64;
  config.rope_style = RopeStyle::kNeox;
  config.qkv_bias = true;
  config.tied_embeddings = true;
  return config;
}

// Random weights of every tensor `config` needs, named as in GGUF.
inline InMemoryWeights RandomWeightsFor(const ModelConfig& config, uint32_t seed) {
  std::mt19937 rng(seed);
  InMemoryWeights weights;
  const int64_t d = config.hidden_size;
  const int64_t q = config.num_heads * config.head_dim;
  const int64_t kv = config.num_kv_heads * config.head_dim;
  const int64_t f = config.intermediate_size;
  weights.AddRandom("token_embd.weight", {config.vocab_size, d}, rng, 1.0f);
  weights.AddRandom("output_norm.weight", {d}, rng, 1.0f);
  if (!config.tied_embeddings) weights.AddRandom("output.weight", {config.vocab_size, d}, rng, 0.3f);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    weights.AddRandom(p + "attn_norm.weight", {d}, rng, 1.0f);
    weights.AddRandom(p + "attn_q.weight", {q, d}, rng, 0.3f);
    weights.AddRandom(p + "attn_k.weight", {kv, d}, rng, 0.3f);
    weights.AddRandom(p + "attn_v.weight", {kv, d}, rng, 0.3f);
    if (config.qkv_bias) {
      weights.AddRandom(p + "attn_q.bias", {q}, rng, 0.1f);
      weights.AddRandom(p + "attn_k.bias", {kv}, rng, 0.1f);
      weights.AddRandom(p + "attn_v.bias", {kv}, rng, 0.1f);
    }
    weights.AddRandom(p + "attn_output.weight", {d, q}, rng, 0.3f);
    weights.AddRandom(p + "ffn_norm.weight", {d}, rng, 1.0f);
    weights.AddRandom(p + "ffn_gate.weight", {f, d}, rng, 0.3f);
    weights.AddRandom(p + "ffn_up.weight", {f, d}, rng, 0.3f);
    weights.AddRandom(p + "ffn_down.weight", {d, f}, rng, 0.3f);
  }
  return weights;
}

}  // namespace kvjit::model

#endif  // KVJIT_TESTS_UNIT_FRONTEND_MODEL_INMEMORYWEIGHTS_H_
