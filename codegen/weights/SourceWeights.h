#ifndef KVJIT_CODEGEN_WEIGHTS_SOURCEWEIGHTS_H_
#define KVJIT_CODEGEN_WEIGHTS_SOURCEWEIGHTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model/ModelFile.h"
#include "ir/Tfm/TfmOps.h"
#include "runtime/schema/kvx_generated.h"

// Locates the model's own weights in its files (the GGUF file, or each
// safetensors shard), which an executable references by path and offset.
namespace kvjit::codegen {

// A file an executable's weights lie in (kvx.fbs WeightFile).
struct WeightFile {
  std::string path;  // absolute
  uint64_t size_bytes;
};

// Where one weight of an executable lies and what it holds (kvx.fbs Weight,
// less the name, which its tfm.param gives).
struct WeightEntry {
  kvx::StorageType storage;
  std::vector<int64_t> shape;
  uint32_t file_index;  // into the executable's weight files
  uint64_t offset;
  uint64_t size_bytes;
  uint64_t checksum;  // runtime::Fnv1a64 of its bytes
  kvx::WeightLayout layout = kvx::WeightLayout::Gguf;
};

// The model's files, in the order the executable names them, and each
// weight's place within them.
class SourceWeights {
 public:
  // A model whose weights are in no file (an in-memory WeightSource) has
  // no files; locating its weights is a FailedPrecondition error.
  static absl::StatusOr<SourceWeights> ForModel(const model::ModelFile& model);

  const std::vector<WeightFile>& files() const { return files_; }

  // The model's weight that `param` declares, checked against the
  // declaration: its shape, its storage type and its bytes' count.
  absl::StatusOr<const model::WeightInfo*> Declared(tfm::ParamOp param) const;

  // The model's weights, to read those that Declared returned.
  const model::WeightSource& weights() const { return *model_->weights; }

  // The weight `param` declares, where it lies in the model's files, stored
  // as the model stores it: a model weight, or rows of one (a slice of
  // axis 0 of a matrix, ReadsRowsInPlace).
  absl::StatusOr<WeightEntry> Locate(tfm::ParamOp param) const;

  // Whether `param` is a slice of a model weight's rows, which lie one after
  // the other in the model's file, so that the executable reads them there.
  static bool ReadsRowsInPlace(tfm::ParamOp param);

  // The source of a slice, which must be a model weight (Declared).
  absl::StatusOr<tfm::ParamOp> SliceSource(tfm::ParamOp slice) const;

 private:
  struct Location {
    uint32_t file_index;
    uint64_t offset;
  };

  explicit SourceWeights(const model::ModelFile& model) : model_(&model) {}

  absl::StatusOr<Location> LocationOf(const model::WeightInfo& weight) const;
  std::optional<Location> InShard(absl::Span<const uint8_t> bytes) const;

  const model::ModelFile* model_;
  std::vector<WeightFile> files_;
};

// The form in which an executable names a weight file at `path`: absolute
// and lexically normal.
std::string WeightFilePathAsNamed(const std::string& path);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_WEIGHTS_SOURCEWEIGHTS_H_
