// NcclApi.h declares NCCL's types and values itself, so that builds need no
// NCCL; where a build machine has nccl.h, this checks the declarations
// against it: a value that differs would make every call mean something
// else, silently.

#include <nccl.h>

#include "gtest/gtest.h"
#include "runtime/dist/NcclApi.h"

namespace kvjit::runtime::dist {
namespace {

TEST(NcclApiHeaderTest, TheUniqueIdHasNcclsSize) {
  EXPECT_EQ(nccl::kUniqueIdBytes, static_cast<size_t>(NCCL_UNIQUE_ID_BYTES));
  EXPECT_EQ(sizeof(nccl::ncclUniqueId), sizeof(::ncclUniqueId));
}

TEST(NcclApiHeaderTest, TheEnumsHaveNcclsSizes) {
  EXPECT_EQ(sizeof(nccl::ncclResult_t), sizeof(::ncclResult_t));
  EXPECT_EQ(sizeof(nccl::ncclDataType_t), sizeof(::ncclDataType_t));
  EXPECT_EQ(sizeof(nccl::ncclRedOp_t), sizeof(::ncclRedOp_t));
}

TEST(NcclApiHeaderTest, TheResultCodesAreNccls) {
  EXPECT_EQ(static_cast<int>(nccl::ncclSuccess), static_cast<int>(::ncclSuccess));
  EXPECT_EQ(static_cast<int>(nccl::ncclUnhandledCudaError),
            static_cast<int>(::ncclUnhandledCudaError));
  EXPECT_EQ(static_cast<int>(nccl::ncclSystemError), static_cast<int>(::ncclSystemError));
  EXPECT_EQ(static_cast<int>(nccl::ncclInternalError), static_cast<int>(::ncclInternalError));
  EXPECT_EQ(static_cast<int>(nccl::ncclInvalidArgument), static_cast<int>(::ncclInvalidArgument));
  EXPECT_EQ(static_cast<int>(nccl::ncclInvalidUsage), static_cast<int>(::ncclInvalidUsage));
  EXPECT_EQ(static_cast<int>(nccl::ncclRemoteError), static_cast<int>(::ncclRemoteError));
  EXPECT_EQ(static_cast<int>(nccl::ncclInProgress), static_cast<int>(::ncclInProgress));
}

TEST(NcclApiHeaderTest, TheTypesAndTheOperationAreNccls) {
  EXPECT_EQ(static_cast<int>(nccl::ncclUint8), static_cast<int>(::ncclUint8));
  EXPECT_EQ(static_cast<int>(nccl::ncclFloat32), static_cast<int>(::ncclFloat32));
  EXPECT_EQ(static_cast<int>(nccl::ncclSum), static_cast<int>(::ncclSum));
}

}  // namespace
}  // namespace kvjit::runtime::dist
