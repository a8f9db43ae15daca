#ifndef KVJIT_FRONTEND_ARCH_ARCHREGISTRY_H_
#define KVJIT_FRONTEND_ARCH_ARCHREGISTRY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/arch/Family.h"

namespace kvjit::arch {

// Every family kvjit builds, in `listed` order: one per file under
// frontend/arch/families/ (the build lists that folder; no other file names
// a family).
const std::vector<const Family*>& Families();

// The family a GGUF's general.architecture names; an Unimplemented error
// naming `source` and the supported architectures where none does.
absl::StatusOr<const Family*> FamilyOfGgufArchitecture(absl::string_view architecture,
                                                       absl::string_view source);

// The family a config.json's model_type names (not a multimodal wrapper's;
// see FindMultimodalModelType); an Unimplemented error naming `field` (where
// model_type sits) and the supported model types where none does.
absl::StatusOr<const Family*> FamilyOfConfigModelType(absl::string_view model_type,
                                                      absl::string_view field);

// nullptr where no family has the name.
const Family* FindConfigArchitecture(absl::string_view architecture);
const Family* FindMultimodalModelType(absl::string_view model_type);

}  // namespace kvjit::arch

#endif  // KVJIT_FRONTEND_ARCH_ARCHREGISTRY_H_
