#include "frontend/arch/ArchRegistry.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvjit::arch {

// Each family file defines `const Family& <FileName>Family()`; the build
// writes Families.inc, one KVJIT_FAMILY(<FileName>) line per file.
namespace families {
#define KVJIT_FAMILY(file_name) const Family& file_name##Family();
#include "frontend/arch/Families.inc"
#undef KVJIT_FAMILY
}  // namespace families

namespace {

template <typename Names>
const Family* FindByName(absl::string_view name, Names Family::*names) {
  for (const Family* family : Families()) {
    const auto& listed = family->*names;
    if (std::find(listed.begin(), listed.end(), name) != listed.end()) return family;
  }
  return nullptr;
}

}  // namespace

const std::vector<const Family*>& Families() {
  static const std::vector<const Family*> kFamilies = [] {
    std::vector<const Family*> families = {
#define KVJIT_FAMILY(file_name) &families::file_name##Family(),
#include "frontend/arch/Families.inc"
#undef KVJIT_FAMILY
    };
    std::stable_sort(families.begin(), families.end(),
                     [](const Family* a, const Family* b) { return a->listed < b->listed; });
    return families;
  }();
  return kFamilies;
}

absl::StatusOr<const Family*> FamilyOfGgufArchitecture(absl::string_view architecture,
                                                       absl::string_view source) {
  if (const Family* family = FindByName(architecture, &Family::gguf_architectures)) return family;
  std::vector<absl::string_view> known;
  for (const Family* family : Families()) {
    known.insert(known.end(), family->gguf_architectures.begin(), family->gguf_architectures.end());
  }
  return absl::UnimplementedError(absl::StrCat(source, ": general.architecture '", architecture,
                                               "' is not supported (", absl::StrJoin(known, ", "),
                                               ")"));
}

absl::StatusOr<const Family*> FamilyOfConfigModelType(absl::string_view model_type,
                                                      absl::string_view field) {
  if (const Family* family = FindByName(model_type, &Family::config_model_types)) return family;
  std::vector<absl::string_view> known;
  for (const Family* family : Families()) {
    known.insert(known.end(), family->config_model_types.begin(),
                 family->config_model_types.end());
    if (!family->multimodal_model_type.empty()) known.push_back(family->multimodal_model_type);
  }
  return absl::UnimplementedError(absl::StrCat(field, " '", model_type, "' is not supported (",
                                               absl::StrJoin(known, ", "), " are)"));
}

const Family* FindConfigArchitecture(absl::string_view architecture) {
  return FindByName(architecture, &Family::config_architectures);
}

const Family* FindMultimodalModelType(absl::string_view model_type) {
  if (model_type.empty()) return nullptr;
  for (const Family* family : Families()) {
    if (family->multimodal_model_type == model_type) return family;
  }
  return nullptr;
}

}  // namespace kvjit::arch
