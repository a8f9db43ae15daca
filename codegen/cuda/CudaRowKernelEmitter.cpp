#include "codegen/cuda/CudaRowKernelEmitter.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace kvjit::codegen::cuda {

std::string Fill(absl::string_view text,
                 std::initializer_list<std::pair<absl::string_view, std::string>> values) {
  std::vector<std::pair<std::string, std::string>> replacements;
  for (const auto& [key, value] : values)
    replacements.push_back({absl::StrCat("@", key, "@"), value});
  return absl::StrReplaceAll(text, replacements);
}

std::string FloatLiteral(float value) { return absl::StrFormat("%af", value); }

absl::StatusOr<int64_t> StaticDim(const kvx::TensorRef& ref, size_t dim, absl::string_view what) {
  if (dim >= ref.shape()->size() || ref.shape()->Get(dim)->kind() != kvx::DimKind::Static) {
    return absl::InvalidArgumentError(absl::StrCat(what, " (dimension ", dim, ") is not static"));
  }
  return ref.shape()->Get(dim)->size();
}

uint32_t RowThreads(int64_t width) {
  const int64_t rounded = (std::max<int64_t>(width, 1) + 31) / 32 * 32;
  return static_cast<uint32_t>(std::min<int64_t>(rounded, 256));
}

}  // namespace kvjit::codegen::cuda
