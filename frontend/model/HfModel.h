#ifndef KVJIT_FRONTEND_MODEL_HFMODEL_H_
#define KVJIT_FRONTEND_MODEL_HFMODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"
#include "frontend/huggingface/HfConfig.h"
#include "frontend/huggingface/SafetensorsModel.h"

namespace kvjit::model {

// kvjit's config of a Hugging Face checkpoint, its layer as its family
// (hf.family) describes it. Its Q and K rows are in rotate-half order, so
// rope is neox style.
absl::StatusOr<ModelConfig> ModelConfigFromHf(const hf::DecoderConfig& hf,
                                              const std::string& source);

// The canonical (GGUF) name of a Hugging Face tensor name, e.g.
// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight";
// the name itself where there is no counterpart. `family`'s own names
// (arch::TensorNames) win over the common ones; nullptr: the common ones alone.
std::string CanonicalWeightName(const std::string& hf_name,
                                const arch::Family* family = nullptr);

// The tensors of a safetensors checkpoint under their canonical names.
// Borrows `model`, which must outlive it.
class SafetensorsWeightSource : public WeightSource {
 public:
  explicit SafetensorsWeightSource(const safetensors::SafetensorsModel& model,
                                   const arch::Family* family = nullptr);

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
