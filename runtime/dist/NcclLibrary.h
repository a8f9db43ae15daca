#ifndef KVJIT_RUNTIME_DIST_NCCLLIBRARY_H_
#define KVJIT_RUNTIME_DIST_NCCLLIBRARY_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/dist/NcclApi.h"

namespace kvjit::runtime::dist {

// The environment variable that names the libnccl file to load, for a
// library outside the loader's search path (the nvidia-nccl-cu13 wheel's
// site-packages/nvidia/nccl/lib/libnccl.so.2) or a stand-in for tests.
inline constexpr const char kNcclLibraryVariable[] = "KVJIT_NCCL_LIBRARY";

// The name dlopen searches for when the variable is unset: the soname the
// system packages (libnccl2) and the wheels install.
inline constexpr const char kDefaultNcclLibrary[] = "libnccl.so.2";

#define KVJIT_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)             \
  X(ncclGetUniqueId)            \
  X(ncclCommInitRank)           \
  X(ncclCommDestroy)            \
  X(ncclCommAbort)              \
  X(ncclCommGetAsyncError)      \
  X(ncclCommCuDevice)           \
  X(ncclAllReduce)              \
  X(ncclAllGather)              \
  X(ncclBroadcast)              \
  X(ncclGetErrorString)

// libnccl's entry points, resolved once with dlopen and dlsym: nothing in
// kvjit links NCCL, so a build, and every run that is not a multi-GPU one,
// works without it. The library stays loaded for the rest of the process,
// after this object too (NcclLibrary.cpp says why).
class NcclLibrary {
 public:
  // Loads the library $KVJIT_NCCL_LIBRARY names, or libnccl.so.2 from the
  // loader's search path when the variable is unset or empty.
  static absl::StatusOr<std::unique_ptr<NcclLibrary>> LoadConfigured();

  // Loads `library` (a file path or a name for dlopen to search), resolves
  // every entry point and reads the version. A missing library or entry
  // point is FAILED_PRECONDITION naming the file and what to install.
  static absl::StatusOr<std::unique_ptr<NcclLibrary>> Load(const std::string& library);

  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  // What was loaded, as Load was given it.
  const std::string& library() const { return library_; }
  // "2.28.3": the version ncclGetVersion reported, for messages.
  const std::string& version() const { return version_; }

  // OK for ncclSuccess, otherwise an error naming `call` (what was
  // attempted, as the message should say it) and NCCL's description.
  absl::Status Check(nccl::ncclResult_t result, absl::string_view call) const;

#define KVJIT_NCCL_MEMBER(name) nccl::name##_t name = nullptr;
  KVJIT_NCCL_FUNCTIONS(KVJIT_NCCL_MEMBER)
#undef KVJIT_NCCL_MEMBER

 private:
  explicit NcclLibrary(std::string library) : library_(std::move(library)) {}

  std::string library_;
  std::string version_;
};

// "2.28.3" for NCCL's version code: major*10000 + minor*100 + patch from
// NCCL 2.9 on, major*1000 + minor*100 + patch before.
std::string NcclVersionText(int version_code);

// The status for `result` returned by `call`, given NCCL's description of
// it (null when unknown). ncclSuccess is OK; a bad argument is
// INVALID_ARGUMENT; misuse is FAILED_PRECONDITION; a failed peer or system
// call is UNAVAILABLE; anything else INTERNAL.
absl::Status NcclResultToStatus(nccl::ncclResult_t result, const char* description,
                                absl::string_view call);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_NCCLLIBRARY_H_
