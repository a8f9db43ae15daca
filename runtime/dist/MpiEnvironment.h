#ifndef KVJIT_RUNTIME_DIST_MPIENVIRONMENT_H_
#define KVJIT_RUNTIME_DIST_MPIENVIRONMENT_H_

#include <memory>

#include "absl/status/statusor.h"

// MPI's life in one process: started once, by the first and only
// MpiEnvironment, and ended when it is destroyed. Only a process that mpirun
// started starts MPI, so that a plain `kvjit run` neither needs nor touches
// it.
namespace kvjit::runtime::dist {

class MpiEnvironment {
 public:
  // Whether an MPI launcher (mpirun, mpiexec, or a PMI/PMIx-aware one such
  // as srun) started this process, by the variables it sets.
  static bool LaunchedByMpi();

  // Starts MPI with calls allowed from any thread, one at a time
  // (MPI_THREAD_SERIALIZED: the server calls the collectives from its
  // scheduler's thread, not from the one that started MPI). An error where
  // MPI was started or ended before in this process, or where the library
  // cannot give that thread support.
  static absl::StatusOr<std::unique_ptr<MpiEnvironment>> Initialize();

  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  // Ends MPI (MPI_Finalize); every communicator must be destroyed first.
  ~MpiEnvironment();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MpiEnvironment(int rank, int size) : rank_(rank), size_(size) {}

  int rank_;
  int size_;
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_MPIENVIRONMENT_H_
