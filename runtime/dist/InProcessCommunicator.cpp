#include "runtime/dist/InProcessCommunicator.h"

#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {
namespace {

std::vector<uint8_t> BytesOf(absl::Span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

const float* FloatsOf(const std::vector<uint8_t>& bytes) {
  return reinterpret_cast<const float*>(bytes.data());
}

}  // namespace

absl::StatusOr<std::unique_ptr<InProcessGroup>> InProcessGroup::Create(int ranks,
                                                                       absl::Duration timeout) {
  if (ranks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("an in-process group needs at least one rank, not ", ranks));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an in-process group's collective timeout must be positive, not ",
                     absl::FormatDuration(timeout)));
  }
  return std::unique_ptr<InProcessGroup>(new InProcessGroup(ranks, timeout));
}

InProcessGroup::InProcessGroup(int ranks, absl::Duration timeout)
    : timeout_(timeout), begun_(ranks, 0) {
  for (int rank = 0; rank < ranks; ++rank) {
    communicators_.push_back(
        std::unique_ptr<InProcessCommunicator>(new InProcessCommunicator(*this, rank)));
  }
  rounds_[0].resize(ranks);
  rounds_[1].resize(ranks);
}

void InProcessGroup::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  if (failure_.ok()) failure_ = status;
}

absl::StatusOr<std::vector<const InProcessGroup::Contribution*>> InProcessGroup::Exchange(
    int rank, Contribution contribution, bool wait_forever) {
  absl::MutexLock lock(&mutex_);
  if (!failure_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        contribution.operation, " on rank ", rank,
        ": an earlier collective of this group failed, and the ranks are out of step: ",
        failure_.message()));
  }
  const int64_t collective = begun_[rank];
  std::vector<Contribution>& round = rounds_[collective % 2];
  round[rank] = std::move(contribution);
  ++begun_[rank];

  auto everyone_arrived_or_failed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!failure_.ok()) return true;
    for (int64_t begun : begun_) {
      if (begun <= collective) return false;
    }
    return true;
  };
  const absl::Condition arrived(&everyone_arrived_or_failed);
  if (wait_forever) {
    mutex_.Await(arrived);
  } else if (!mutex_.AwaitWithTimeout(arrived, timeout_)) {
    std::vector<int> missing;
    for (int other = 0; other < size(); ++other) {
      if (begun_[other] <= collective) missing.push_back(other);
    }
    failure_ = absl::DeadlineExceededError(absl::StrCat(
        round[rank].operation, " on rank ", rank, ": rank", missing.size() > 1 ? "s " : " ",
        absl::StrJoin(missing, ", "), " did not arrive within ", absl::FormatDuration(timeout_),
        "; ", missing.size() > 1 ? "they" : "it",
        " may have failed, hung or called another collective"));
    return failure_;
  }
  if (!failure_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        round[rank].operation, " on rank ", rank, ": another rank failed: ", failure_.message()));
  }
  std::vector<const Contribution*> contributions;
  for (const Contribution& each : round) contributions.push_back(&each);
  return contributions;
}

absl::Status InProcessGroup::CheckAgreement(const std::vector<const Contribution*>& contributions) {
  const Contribution& first = *contributions[0];
  for (size_t rank = 1; rank < contributions.size(); ++rank) {
    const Contribution& other = *contributions[rank];
    if (other.operation != first.operation || other.elements != first.elements ||
        other.root != first.root) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ranks called different collectives at the same point: rank 0 called ",
                       first.operation, " (root ", first.root, ") and rank ", rank, " called ",
                       other.operation, " (root ", other.root, ")"));
    }
  }
  return absl::OkStatus();
}

int InProcessCommunicator::size() const { return group_.size(); }

absl::Status InProcessCommunicator::AllReduceSum(absl::Span<float> values) {
  InProcessGroup::Contribution mine;
  mine.operation = absl::StrCat("all_reduce of ", values.size(), " floats");
  mine.elements = static_cast<int64_t>(values.size());
  mine.bytes = BytesOf(values);
  KVJIT_ASSIGN_OR_RETURN(auto contributions, group_.Exchange(rank_, std::move(mine), false));
  KVJIT_RETURN_IF_ERROR(InProcessGroup::CheckAgreement(contributions));
  // Rank 0's values, then rank 1's added, and so on: the same additions in
  // the same order on every rank.
  for (size_t i = 0; i < values.size(); ++i) {
    float sum = FloatsOf(contributions[0]->bytes)[i];
    for (size_t rank = 1; rank < contributions.size(); ++rank) {
      sum += FloatsOf(contributions[rank]->bytes)[i];
    }
    values[i] = sum;
  }
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::AllGather(absl::Span<const float> local,
                                              absl::Span<const int64_t> counts,
                                              absl::Span<float> gathered) {
  const std::string operation = absl::StrCat("all_gather of ", local.size(), " floats");
  absl::Status arguments = absl::OkStatus();
  if (counts.size() != static_cast<size_t>(size())) {
    arguments = absl::InvalidArgumentError(absl::StrCat(
        operation, " on rank ", rank_, ": ", counts.size(), " counts for ", size(), " ranks"));
  } else if (counts[rank_] != static_cast<int64_t>(local.size())) {
    arguments = absl::InvalidArgumentError(
        absl::StrCat(operation, " on rank ", rank_, ": its count says ", counts[rank_], " floats"));
  } else if (std::accumulate(counts.begin(), counts.end(), int64_t{0}) !=
             static_cast<int64_t>(gathered.size())) {
    arguments = absl::InvalidArgumentError(
        absl::StrCat(operation, " on rank ", rank_, ": the counts sum to ",
                     std::accumulate(counts.begin(), counts.end(), int64_t{0}),
                     " floats, and the output holds ", gathered.size()));
  }
  if (!arguments.ok()) {
    // The other ranks would otherwise wait for this one until their deadline.
    group_.Abort(arguments);
    return arguments;
  }
  InProcessGroup::Contribution mine;
  mine.operation = absl::StrCat("all_gather of ", gathered.size(), " floats in all");
  mine.elements = static_cast<int64_t>(gathered.size());
  mine.bytes = BytesOf(local);
  KVJIT_ASSIGN_OR_RETURN(auto contributions, group_.Exchange(rank_, std::move(mine), false));
  KVJIT_RETURN_IF_ERROR(InProcessGroup::CheckAgreement(contributions));
  size_t offset = 0;
  for (size_t rank = 0; rank < contributions.size(); ++rank) {
    const std::vector<uint8_t>& bytes = contributions[rank]->bytes;
    if (bytes.size() != static_cast<size_t>(counts[rank]) * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          operation, " on rank ", rank_, ": rank ", rank, " gave ", bytes.size() / sizeof(float),
          " floats where the counts say ", counts[rank]));
    }
    if (!bytes.empty()) std::memcpy(gathered.data() + offset, bytes.data(), bytes.size());
    offset += bytes.size() / sizeof(float);
  }
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::Broadcast(absl::Span<uint8_t> bytes, int root,
                                              bool wait_forever) {
  if (root < 0 || root >= size()) {
    absl::Status bad_root = absl::InvalidArgumentError(
        absl::StrCat("broadcast on rank ", rank_, ": root ", root, " is not a rank of ", size()));
    group_.Abort(bad_root);
    return bad_root;
  }
  InProcessGroup::Contribution mine;
  mine.operation = absl::StrCat("broadcast of ", bytes.size(), " bytes");
  mine.elements = static_cast<int64_t>(bytes.size());
  mine.root = root;
  if (rank_ == root) mine.bytes.assign(bytes.begin(), bytes.end());
  KVJIT_ASSIGN_OR_RETURN(auto contributions, group_.Exchange(rank_, std::move(mine), wait_forever));
  KVJIT_RETURN_IF_ERROR(InProcessGroup::CheckAgreement(contributions));
  if (rank_ != root && !bytes.empty()) {
    std::memcpy(bytes.data(), contributions[root]->bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::Barrier() {
  InProcessGroup::Contribution mine;
  mine.operation = "barrier";
  KVJIT_ASSIGN_OR_RETURN(auto contributions, group_.Exchange(rank_, std::move(mine), false));
  return InProcessGroup::CheckAgreement(contributions);
}

}  // namespace kvjit::runtime::dist
