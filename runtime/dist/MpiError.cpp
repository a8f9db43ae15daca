#include "runtime/dist/MpiError.h"

#include <mpi.h>

#include "absl/strings/str_cat.h"

namespace kvjit::runtime::dist {

absl::Status MpiStatus(int code, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return absl::InternalError(absl::StrCat(what, " failed with MPI error code ", code));
  }
  return absl::InternalError(absl::StrCat(what, " failed: ", absl::string_view(text, length)));
}

}  // namespace kvjit::runtime::dist
