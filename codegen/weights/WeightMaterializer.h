#ifndef KVJIT_CODEGEN_WEIGHTS_WEIGHTMATERIALIZER_H_
#define KVJIT_CODEGEN_WEIGHTS_WEIGHTMATERIALIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/weights/SourceWeights.h"
#include "ir/Tfm/TfmOps.h"

// Makes the weights the compiler derives from the model's (fuse-projections'
// concatenations, shifted norm weights, weights repacked into another
// layout) and writes them into the executable's sidecar weight file.
namespace kvjit::codegen {

// The sidecar an executable names, `path`, and where its bytes are written
// now: at `path`, or at `staged_at` for an executable that must pass --verify
// before it is written, whose sidecar the compiler renames to `path` only
// then, so that a failed compile leaves the sidecar that an earlier
// executable at the same path names as it was.
struct SidecarTarget {
  SidecarTarget(std::string path) : path(std::move(path)) {}  // NOLINT(google-explicit-constructor)
  SidecarTarget(std::string path, std::string staged_at)
      : path(std::move(path)), staged_at(std::move(staged_at)) {}

  const std::string& WritePath() const { return staged_at.empty() ? path : staged_at; }

  std::string path;
  std::string staged_at;
};

// The sidecar of the executable at `executable_path`, beside it: `out.kvx`
// -> `out.kvw`, a name without the .kvx extension gains `.kvw`. The
// executable names it by absolute path, so the two move together only by
// recompiling.
std::string SidecarPathFor(const std::string& executable_path);

// The sidecar's bytes (kvx.fbs says its layout): each derived weight at a
// 64-byte aligned offset, so that an f32 weight is read in place with
// aligned vector loads. The sidecar is the executable's weight file after
// the model's own.
class WeightMaterializer {
 public:
  static constexpr uint64_t kAlignment = 64;

  explicit WeightMaterializer(const SourceWeights& sources) : sources_(sources) {}

  // Whether the weight `param` declares is made by the compiler rather than
  // read where the model stores it (a slice of columns among them).
  static bool Derives(tfm::ParamOp param);

  // Makes the weight `param` declares (Derives holds for it) and appends it
  // to the sidecar: the parts of a `concat` one after the other, each value
  // of a `shifted` weight plus the shift, or the model's weight in the
  // param's layout.
  absl::StatusOr<WeightEntry> Materialize(tfm::ParamOp param);

  // Writes the sidecar at `target.WritePath()` unless the file there holds
  // these very bytes already; the file the executable names. None where no
  // weight was made: a program without derived weights writes no sidecar
  // and may be given an empty path.
  absl::StatusOr<std::optional<WeightFile>> WriteSidecar(const SidecarTarget& target) const;

 private:
  // The bytes of a model weight or of a slice of one, as the model stores
  // its blocks.
  absl::StatusOr<std::vector<uint8_t>> StoredBytes(tfm::ParamOp param) const;
  absl::StatusOr<WeightEntry> Concatenation(tfm::ParamOp param);
  absl::StatusOr<WeightEntry> Shifted(tfm::ParamOp param);
  absl::StatusOr<WeightEntry> Append(tfm::ParamOp param, kvx::StorageType storage,
                                     const std::vector<int64_t>& shape, std::vector<uint8_t> bytes);

  const SourceWeights& sources_;
  std::vector<uint8_t> sidecar_;
};

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_WEIGHTS_WEIGHTMATERIALIZER_H_
