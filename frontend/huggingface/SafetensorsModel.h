#ifndef KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSMODEL_H_
#define KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSMODEL_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/huggingface/SafetensorsFile.h"

namespace kvjit::safetensors {

// The weights of a Hugging Face checkpoint directory: either one
// `model.safetensors`, or the shards that `model.safetensors.index.json`'s
// weight_map names. Each shard is mapped once; tensors are looked up by name
// across all shards. Move-only.
class SafetensorsModel {
 public:
  static constexpr absl::string_view kSingleFileName = "model.safetensors";
  static constexpr absl::string_view kIndexFileName = "model.safetensors.index.json";

  // Prefers model.safetensors where both it and the index exist, as
  // transformers does.
  static absl::StatusOr<SafetensorsModel> Open(const std::string& directory);

  const std::string& directory() const { return directory_; }
  const std::vector<SafetensorsFile>& shards() const { return shards_; }
  // Every tensor name, sorted.
  std::vector<std::string> TensorNames() const;

  // nullptr when no shard holds a tensor of that name.
  const Tensor* Find(absl::string_view name) const;
  // As Find, with a NotFound error naming the directory and the tensor.
  absl::StatusOr<const Tensor*> Get(absl::string_view name) const;

 private:
  explicit SafetensorsModel(std::string directory) : directory_(std::move(directory)) {}
  absl::Status OpenShards(const std::vector<std::string>& shard_names);

  std::string directory_;
  std::vector<SafetensorsFile> shards_;
  // Points into the shards' tensor vectors, whose elements stay put when
  // shards_ grows or the model moves (moving a vector keeps its buffer).
  absl::flat_hash_map<std::string, const Tensor*> tensors_by_name_;
};

}  // namespace kvjit::safetensors

#endif  // KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSMODEL_H_
