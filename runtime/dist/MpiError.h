#ifndef KVJIT_RUNTIME_DIST_MPIERROR_H_
#define KVJIT_RUNTIME_DIST_MPIERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvjit::runtime::dist {

// OK for MPI_SUCCESS; else an error naming `what` failed with MPI's own
// text for `code` (MPI_Error_string).
absl::Status MpiStatus(int code, absl::string_view what);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_MPIERROR_H_
