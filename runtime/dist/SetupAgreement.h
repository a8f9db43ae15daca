#ifndef KVJIT_RUNTIME_DIST_SETUPAGREEMENT_H_
#define KVJIT_RUNTIME_DIST_SETUPAGREEMENT_H_

#include "absl/status/status.h"
#include "runtime/dist/Communicator.h"

namespace kvjit::runtime::dist {

// Tells every rank whether every rank made its step runner: each rank
// passes its own outcome, and gets OK only where every rank's was. A rank
// that failed gets its own error back; the others get one naming the ranks
// that failed (whose own output says why). No deadline applies: loading a
// large model may take any rank minutes.
absl::Status AgreeOnSetup(Communicator& communicator, const absl::Status& local);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_SETUPAGREEMENT_H_
