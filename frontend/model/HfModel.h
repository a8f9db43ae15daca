#ifndef KVJIT_FRONTEND_MODEL_HFMODEL_H_
#define KVJIT_FRONTEND_MODEL_HFMODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"
#include "frontend/safetensors/HfConfig.h"
#include "frontend/safetensors/SafetensorsModel.h"

namespace kvjit::model {

// kvjit's config of a Hugging Face Llama-family checkpoint. Its Q and K rows
// are in rotate-half order, so rope is neox style.
absl::StatusOr<ModelConfig> ModelConfigFromHf(const hf::LlamaConfig& hf, const std::string& source);

// The canonical (GGUF) name of a Hugging Face tensor name, e.g.
// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight";
// the name itself where there is no counterpart. Gemma's
// post_attention_layernorm normalizes the attention's output
// (post_attention_norm), not the MLP's input as Llama's does; a multimodal
// Gemma 3's decoder sits under language_model.
std::string CanonicalWeightName(const std::string& hf_name,
                                hf::ModelType type = hf::ModelType::kLlama);

// The tensors of a safetensors checkpoint under their canonical names.
// Borrows `model`, which must outlive it.
class SafetensorsWeightSource : public WeightSource {
 public:
  explicit SafetensorsWeightSource(const safetensors::SafetensorsModel& model,
                                   hf::ModelType type = hf::ModelType::kLlama);

  const std::string& origin() const override { return model_.directory(); }
  const std::vector<WeightInfo>& weights() const override { return weights_; }
  absl::Span<const uint8_t> Bytes(const WeightInfo& weight) const override;

 private:
  const safetensors::SafetensorsModel& model_;
  std::vector<WeightInfo> weights_;
  std::vector<const safetensors::Tensor*> tensors_;  // parallel to weights_
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_HFMODEL_H_
