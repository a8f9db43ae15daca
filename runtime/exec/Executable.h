#ifndef KVJIT_RUNTIME_EXEC_EXECUTABLE_H_
#define KVJIT_RUNTIME_EXEC_EXECUTABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/core/MappedFile.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::runtime {

// A step's sizes, as the per-step kinds of kvx::Dim name them.
struct StepSizes {
  int64_t tokens = 0;       // T
  int64_t logits_rows = 0;  // L
  int64_t sequences = 0;    // S
  int64_t max_blocks = 0;   // block-table columns
};

// The extent of a dimension of `kind` in a step of `sizes`: `static_size`
// for Static, else the step's size of that kind.
int64_t DimExtent(kvx::DimKind kind, int64_t static_size, const StepSizes& sizes);

// The product of `factors` (CUDA grid extents, scratch bytes, GEMM rows) for
// a step of `sizes`: each factor is ceil(extent / divisor). Null or empty is
// 1. Factors come from a loaded Executable, whose divisors are at least 1.
int64_t SizeProduct(const flatbuffers::Vector<const kvx::SizeFactor*>* factors,
                    const StepSizes& sizes);

// The scratch bytes a CUDA path needs for a step of `sizes`.
uint64_t ScratchBytes(const kvx::CudaPath& path, const StepSizes& sizes);

struct LoadOptions {
  // Hash every weight and compare it with the checksum the compiler recorded
  // (reads every byte of the weights: ~0.1 s per 100 MB). Off, a weight file
  // is checked by its size, which catches a file that was replaced by another
  // model or quantization but not one edited in place.
  bool verify_weight_checksums = false;
  // Weight files read from another path than the one the executable names,
  // by that name: the compiler's staged sidecar, which it renames to its
  // name only once the executable passes --verify.
  absl::flat_hash_map<std::string, std::string> staged_weight_files;
  // The rank whose program to load from an executable split over
  // tensor-parallel ranks (`kvjit compile --tp N`); 0 for any other.
  int tensor_parallel_rank = 0;
};

// A .kvx file, verified once on load so that every later access is in
// bounds: the FlatBuffer, its identifier and schema version, every tensor
// reference of the program against the arena and the weight table, and every
// weight against the file it lives in (memory-mapped here).
class Executable {
 public:
  static absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path,
                                                          const LoadOptions& options = {});

  const std::string& path() const { return path_; }
  const kvx::Executable& root() const { return *root_; }
  const kvx::Program& program() const { return *root_->program(); }
  const kvx::KvLayout& kv_layout() const { return *root_->kv_layout(); }
  const kvx::ModelConfig& config() const { return *root_->config(); }

  // The bytes of weights[index], inside its mapped file.
  absl::Span<const uint8_t> WeightBytes(uint32_t index) const { return weight_bytes_[index]; }

  // The .kvx file's bytes, mapped.
  absl::Span<const uint8_t> file_bytes() const { return file_->bytes(); }

  // The mapped weight files, whole (for what is resident of them).
  const std::vector<MappedFile>& weight_files() const { return weight_files_; }

  // The CUDA kernels and their launches, or null for an executable compiled
  // for the CPU alone. Loading leaves them unchecked: their reader checks
  // them (cuda::VerifyCudaModule, runtime/cuda/CudaModuleVerifier.h).
  const kvx::CudaModule* cuda() const { return root_->cuda(); }

  // The widest sliding window over the program's KvAttention instructions, or
  // 0 where one of them reads its sequence's whole context: the query at
  // position p reads no cached position before p - window + 1 in any layer.
  int64_t AttentionWindow() const;
  // How many tensor-parallel ranks the model is split over (1: none), and
  // which of them this program is.
  int tensor_parallel_ranks() const {
    return root_->tensor_parallel() ? static_cast<int>(root_->tensor_parallel()->ranks()) : 1;
  }
  int tensor_parallel_rank() const {
    return root_->tensor_parallel() ? static_cast<int>(root_->tensor_parallel()->rank()) : 0;
  }

 private:
  explicit Executable(std::string path) : path_(std::move(path)) {}
  absl::Status Verify(int tensor_parallel_rank);
  absl::Status SelectRank(int rank);
  absl::Status MapWeights(const LoadOptions& options);
  absl::Status VerifyProgram() const;
  absl::Status VerifyInstruction(const kvx::Instruction& instruction, size_t index) const;
  absl::Status VerifyTensorRef(const kvx::TensorRef* ref, size_t instruction,
                               const char* role) const;

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  const kvx::Executable* root_ = nullptr;
  std::vector<MappedFile> weight_files_;
  std::vector<absl::Span<const uint8_t>> weight_bytes_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_EXECUTABLE_H_
