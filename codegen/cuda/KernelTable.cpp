#include "codegen/cuda/KernelTable.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "codegen/cuda/DevicePrelude.h"

namespace kvjit::codegen::cuda {

uint32_t KernelTable::Add(absl::string_view stem, absl::string_view text) {
  auto [entry, inserted] =
      index_of_text_.try_emplace(std::string(text), static_cast<uint32_t>(names_.size()));
  if (inserted) {
    names_.push_back(absl::StrCat("kvjit_", stem, "_", entry->second));
    sources_.push_back(absl::StrReplaceAll(text, {{kNamePlaceholder, names_.back()}}));
  }
  return entry->second;
}

std::string KernelTable::TranslationUnit() const {
  std::string unit = DevicePrelude();
  for (const std::string& source : sources_) absl::StrAppend(&unit, source, "\n");
  return unit;
}

}  // namespace kvjit::codegen::cuda
