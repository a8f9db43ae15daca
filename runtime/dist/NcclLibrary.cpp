#include "runtime/dist/NcclLibrary.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kvjit::runtime::dist {
namespace {

// Where NCCL comes from, for the messages of a failed load.
constexpr const char kInstallHint[] =
    "install NCCL: `pip install nvidia-nccl-cu13` and set KVJIT_NCCL_LIBRARY to its "
    "site-packages/nvidia/nccl/lib/libnccl.so.2, or the system package (libnccl2), or set "
    "KVJIT_NCCL_LIBRARY to the libnccl.so.2 to use";

// 2.14.0: NcclApi.h's values are those of NCCL 2.14 and later.
constexpr int kOldestVersionCode = 21400;

absl::StatusCode CodeFor(nccl::ncclResult_t result) {
  switch (result) {
    case nccl::ncclInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case nccl::ncclInvalidUsage:
      return absl::StatusCode::kFailedPrecondition;
    case nccl::ncclSystemError:
    case nccl::ncclRemoteError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

std::string NcclVersionText(int version_code) {
  const int scale = version_code >= 10000 ? 10000 : 1000;
  return absl::StrCat(version_code / scale, ".", version_code % scale / 100, ".",
                      version_code % 100);
}

absl::Status NcclResultToStatus(nccl::ncclResult_t result, const char* description,
                                absl::string_view call) {
  if (result == nccl::ncclSuccess) return absl::OkStatus();
  std::string what = absl::StrCat("ncclResult_t ", static_cast<int>(result));
  if (description != nullptr) absl::StrAppend(&what, " (", description, ")");
  return absl::Status(CodeFor(result), absl::StrCat(call, " failed: ", what));
}

absl::Status NcclLibrary::Check(nccl::ncclResult_t result, absl::string_view call) const {
  if (result == nccl::ncclSuccess) return absl::OkStatus();
  return NcclResultToStatus(result, ncclGetErrorString(result), call);
}

absl::StatusOr<std::unique_ptr<NcclLibrary>> NcclLibrary::LoadConfigured() {
  const char* named = std::getenv(kNcclLibraryVariable);
  if (named == nullptr || *named == '\0') return Load(kDefaultNcclLibrary);
  absl::StatusOr<std::unique_ptr<NcclLibrary>> library = Load(named);
  if (!library.ok()) {
    return absl::Status(library.status().code(), absl::StrCat(library.status().message(), " (",
                                                              kNcclLibraryVariable, " names it)"));
  }
  return library;
}

absl::StatusOr<std::unique_ptr<NcclLibrary>> NcclLibrary::Load(const std::string& library) {
  // Never unloaded (RTLD_NODELETE): NCCL starts threads that outlive its
  // calls (ncclGetUniqueId's bootstrap root, a communicator's proxy), and
  // unmapping their code under them crashes the process, as the tests saw.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("no NCCL for multi-GPU tensor parallelism: ", library, " not found (",
                     reason != nullptr ? reason : "dlopen failed", "); ", kInstallHint));
  }
  std::unique_ptr<NcclLibrary> loaded(new NcclLibrary(library));
#define KVJIT_NCCL_RESOLVE(name)                                                                   \
  loaded->name = reinterpret_cast<nccl::name##_t>(::dlsym(handle, #name));                         \
  if (loaded->name == nullptr) {                                                                   \
    return absl::FailedPreconditionError(absl::StrCat(                                             \
        library, " has no " #name ": it is not libnccl, or too old an NCCL; ", kInstallHint));     \
  }
  KVJIT_NCCL_FUNCTIONS(KVJIT_NCCL_RESOLVE)
#undef KVJIT_NCCL_RESOLVE
  int version_code = 0;
  absl::Status version = loaded->Check(loaded->ncclGetVersion(&version_code), "ncclGetVersion");
  if (!version.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(library, " does not work: ", version.message()));
  }
  loaded->version_ = NcclVersionText(version_code);
  if (version_code < kOldestVersionCode) {
    return absl::FailedPreconditionError(absl::StrCat(
        library, " is NCCL ", loaded->version_, ", older than 2.14, the oldest whose API ",
        "runtime/dist/NcclApi.h declares; ", kInstallHint));
  }
  return loaded;
}

}  // namespace kvjit::runtime::dist
