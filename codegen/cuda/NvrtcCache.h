#ifndef KVJIT_CODEGEN_CUDA_NVRTCCACHE_H_
#define KVJIT_CODEGEN_CUDA_NVRTCCACHE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/cuda/CudaModuleSpec.h"

namespace kvjit::codegen::cuda {

// NVRTC's output on disk, one file per compilation, named by a SHA-256 of
// everything that determines it: the source, the architecture, the options
// and NVRTC's version. Entries are written to a temporary file and renamed
// into place, so concurrent compilers never see half an entry; an entry that
// does not parse is a miss (and is replaced on the next store).
class NvrtcCache {
 public:
  // $KVJIT_NVRTC_CACHE_DIR where set, else $XDG_CACHE_HOME/kvjit/nvrtc, else
  // ~/.cache/kvjit/nvrtc.
  static std::string DefaultDirectory();

  explicit NvrtcCache(std::string directory) : directory_(std::move(directory)) {}

  static std::string Key(const std::string& source, uint32_t arch,
                         const std::vector<std::string>& options, uint32_t nvrtc_version);

  const std::string& directory() const { return directory_; }
  std::string PathFor(const std::string& key) const;

  // The cubin and PTX stored under `key`, or nothing.
  std::optional<CudaBinary> Lookup(const std::string& key) const;

  // Stores `binary`'s cubin and PTX under `key`; errors name the path.
  absl::Status Store(const std::string& key, const CudaBinary& binary) const;

 private:
  std::string directory_;
};

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_NVRTCCACHE_H_
