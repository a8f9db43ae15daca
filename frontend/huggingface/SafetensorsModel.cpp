#include "frontend/huggingface/SafetensorsModel.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/huggingface/JsonFile.h"

namespace kvjit::safetensors {
namespace {

std::string JoinPath(const std::string& directory, absl::string_view name) {
  return (std::filesystem::path(directory) / std::string(name)).string();
}

bool IsRegularFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

// The index's weight_map: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  absl::StatusOr<nlohmann::json> index = hf::ReadJsonFile(index_path);
  if (!index.ok()) return index.status();
  const nlohmann::json* weight_map = hf::FindField(*index, "weight_map");
  if (weight_map == nullptr || !weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": missing object field 'weight_map'"));
  }
  std::map<std::string, std::string> shard_by_tensor;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map entry '", tensor, "' must be a file name string"));
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    // Shards sit beside the index; a path would let the index reach elsewhere.
    if (shard_name.empty() || absl::StrContains(shard_name, '/') || shard_name == "." ||
        shard_name == "..") {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map entry '", tensor,
                                                     "' names shard '", shard_name,
                                                     "', which is not a plain file name"));
    }
    shard_by_tensor.emplace(tensor, shard_name);
  }
  if (shard_by_tensor.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map is empty"));
  }
  return shard_by_tensor;
}

}  // namespace

absl::StatusOr<SafetensorsModel> SafetensorsModel::Open(const std::string& directory) {
  SafetensorsModel model(directory);
  std::string single_path = JoinPath(directory, kSingleFileName);
  if (IsRegularFile(single_path)) {
    if (absl::Status status = model.OpenShards({std::string(kSingleFileName)}); !status.ok()) {
      return status;
    }
    return model;
  }

  std::string index_path = JoinPath(directory, kIndexFileName);
  if (!IsRegularFile(index_path)) {
    return absl::NotFoundError(
        absl::StrCat(directory, ": holds neither ", kSingleFileName, " nor ", kIndexFileName));
  }
  absl::StatusOr<std::map<std::string, std::string>> shard_by_tensor = ReadWeightMap(index_path);
  if (!shard_by_tensor.ok()) return shard_by_tensor.status();

  std::vector<std::string> shard_names;
  for (const auto& [tensor, shard] : *shard_by_tensor) shard_names.push_back(shard);
  std::sort(shard_names.begin(), shard_names.end());
  shard_names.erase(std::unique(shard_names.begin(), shard_names.end()), shard_names.end());
  if (absl::Status status = model.OpenShards(shard_names); !status.ok()) return status;

  for (const auto& [tensor, shard] : *shard_by_tensor) {
    size_t shard_index =
        std::lower_bound(shard_names.begin(), shard_names.end(), shard) - shard_names.begin();
    if (model.shards_[shard_index].Find(tensor) == nullptr) {
      return absl::NotFoundError(absl::StrCat(index_path, ": weight_map places tensor '", tensor,
                                              "' in ", shard, ", which does not hold it"));
    }
  }
  return model;
}

absl::Status SafetensorsModel::OpenShards(const std::vector<std::string>& shard_names) {
  for (const std::string& shard_name : shard_names) {
    std::string shard_path = JoinPath(directory_, shard_name);
    absl::StatusOr<SafetensorsFile> shard = SafetensorsFile::Open(shard_path);
    if (!shard.ok()) return shard.status();
    shards_.push_back(*std::move(shard));
  }
  for (const SafetensorsFile& shard : shards_) {
    for (const Tensor& tensor : shard.tensors()) {
      auto [existing, inserted] = tensors_by_name_.emplace(tensor.name, &tensor);
      if (inserted) continue;
      const SafetensorsFile* first_holder = nullptr;
      for (const SafetensorsFile& other : shards_) {
        if (other.Find(tensor.name) == existing->second) first_holder = &other;
      }
      return absl::InvalidArgumentError(absl::StrCat(directory_, ": tensor '", tensor.name,
                                                     "' appears in both ", first_holder->path(),
                                                     " and ", shard.path()));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> SafetensorsModel::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_by_name_.size());
  for (const auto& [name, tensor] : tensors_by_name_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const Tensor* SafetensorsModel::Find(absl::string_view name) const {
  auto found = tensors_by_name_.find(name);
  return found == tensors_by_name_.end() ? nullptr : found->second;
}

absl::StatusOr<const Tensor*> SafetensorsModel::Get(absl::string_view name) const {
  if (const Tensor* tensor = Find(name)) return tensor;
  return absl::NotFoundError(
      absl::StrCat(directory_, ": no tensor named '", name, "' in any safetensors shard"));
}

}  // namespace kvjit::safetensors
