#ifndef KVJIT_RUNTIME_CORE_BUILDINFO_H_
#define KVJIT_RUNTIME_CORE_BUILDINFO_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

namespace kvjit {

struct BackendInfo {
  std::string name;    // "cpu", "cuda"
  std::string detail;  // what the backend was built with
};

absl::string_view KvjitVersion();

// The backends compiled into this build, CPU first. A backend listed here may
// still be unusable at run time (CUDA without a driver); the device reports that.
std::vector<BackendInfo> CompiledBackends();

// "kvjit 0.1.0" and one line per backend, for `--version`.
std::string DescribeBuild();

}  // namespace kvjit

#endif  // KVJIT_RUNTIME_CORE_BUILDINFO_H_
