#ifndef KVJIT_CODEGEN_CUDA_KERNELTABLE_H_
#define KVJIT_CODEGEN_CUDA_KERNELTABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace kvjit::codegen::cuda {

// The kernels of one translation unit. Kernels are specialised per
// instruction (shapes and constants baked in), so layers repeat the same
// text: each distinct text is kept once and shared.
class KernelTable {
 public:
  // What a kernel's text writes where its entry's name goes.
  static constexpr absl::string_view kNamePlaceholder = "KVJIT_KERNEL";

  // The index of the kernel written as `text`; a new text becomes kernel
  // "kvjit_<stem>_<index>".
  uint32_t Add(absl::string_view stem, absl::string_view text);

  const std::vector<std::string>& names() const { return names_; }

  // The device prelude, then every kernel in index order.
  std::string TranslationUnit() const;

 private:
  absl::flat_hash_map<std::string, uint32_t> index_of_text_;
  std::vector<std::string> names_;
  std::vector<std::string> sources_;
};

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_KERNELTABLE_H_
