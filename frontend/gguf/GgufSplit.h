#ifndef KVJIT_FRONTEND_GGUF_GGUFSPLIT_H_
#define KVJIT_FRONTEND_GGUF_GGUFSPLIT_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/gguf/GgufFile.h"

namespace kvjit::gguf {

// llama.cpp's gguf-split (and gguf-py's writer) keys: a model split into
// split.count files, PREFIX-00001-of-0000N.gguf onwards, the first holding
// the metadata and every file a share of the tensors.
inline constexpr absl::string_view kSplitNumberKey = "split.no";
inline constexpr absl::string_view kSplitCountKey = "split.count";
inline constexpr absl::string_view kSplitTensorsCountKey = "split.tensors.count";

// The paths of every part of a split named like `path`
// (PREFIX-NNNNN-of-MMMMM.gguf), in order; none where the name is not one.
std::optional<std::vector<std::string>> SplitPartPaths(const std::string& path);

// PREFIX (with its directory) of a path named like a split's part; none
// where the name is not one.
std::optional<std::string> SplitPrefix(const std::string& path);

// A model in one GGUF file or in the parts of a split. Any part may be
// named: the others are found beside it by name, and each is checked to
// belong (split.no, split.count, the tensor count) before use.
class GgufModelFiles {
 public:
  static absl::StatusOr<GgufModelFiles> Open(const std::string& path);

  // The file with the model's metadata: the only one, or the split's first.
  const GgufFile& metadata() const { return *parts_.front(); }
  // Every file, in split order; one for an unsplit model.
  const std::vector<std::unique_ptr<GgufFile>>& parts() const { return parts_; }

  struct Located {
    size_t part = 0;
    const GgufTensor* tensor = nullptr;
  };
  std::optional<Located> FindTensor(absl::string_view name) const;

 private:
  std::vector<std::unique_ptr<GgufFile>> parts_;
};

}  // namespace kvjit::gguf

#endif  // KVJIT_FRONTEND_GGUF_GGUFSPLIT_H_
