#ifndef KVJIT_FRONTEND_MODEL_GGUFMODEL_H_
#define KVJIT_FRONTEND_MODEL_GGUFMODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/gguf/GgufSplit.h"
#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"

namespace kvjit::model {

// Reads the hyper-parameters of a GGUF whose general.architecture names a
// family of the architecture registry (frontend/arch), which says which keys
// hold them and their defaults.
// Missing or inconsistent keys are errors that name the file and the key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const gguf::GgufFile& file);
// The same for a model whose tensors may be spread over a split's parts.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const gguf::GgufModelFiles& files);

// The tensors of a GGUF file, or of every part of a split, as weights,
// shapes turned row-major (GGUF lists dimensions fastest first). Borrows
// `files`, which must outlive it.
class GgufWeightSource : public WeightSource {
 public:
  explicit GgufWeightSource(const gguf::GgufModelFiles& files);

  const std::string& origin() const override { return files_.metadata().path(); }
  const std::vector<WeightInfo>& weights() const override { return weights_; }
  absl::Span<const uint8_t> Bytes(const WeightInfo& weight) const override;

 private:
  const gguf::GgufModelFiles& files_;
  std::vector<WeightInfo> weights_;
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_GGUFMODEL_H_
