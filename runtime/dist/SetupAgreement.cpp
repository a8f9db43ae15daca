#include "runtime/dist/SetupAgreement.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {

absl::Status AgreeOnSetup(Communicator& communicator, const absl::Status& local) {
  std::vector<int> failed;
  for (int rank = 0; rank < communicator.size(); ++rank) {
    uint8_t ready = rank == communicator.rank() && local.ok() ? 1 : 0;
    KVJIT_RETURN_IF_ERROR(
        communicator.Broadcast(absl::MakeSpan(&ready, 1), rank, /*wait_forever=*/true));
    if (ready == 0) failed.push_back(rank);
  }
  if (!local.ok()) {
    return absl::Status(local.code(),
                        absl::StrCat("rank ", communicator.rank(),
                                     " could not set up its step runner: ", local.message()));
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "tensor-parallel setup failed on rank", failed.size() > 1 ? "s " : " ",
      absl::StrJoin(failed, ", "), " of ", communicator.size(), "; its output says why"));
}

}  // namespace kvjit::runtime::dist
