#ifndef KVJIT_TESTS_UNIT_COMMON_TESTPATHS_H_
#define KVJIT_TESTS_UNIT_COMMON_TESTPATHS_H_

#include <string>

// Where tests find material that is not in the repository. Each returns the
// full path of an existing file, or "" where it is absent, so that a test can
// GTEST_SKIP() with a message in a user's clone.
namespace kvjit::testing {

// `relative` under the shared folder: $KVJIT_SHARED_DIR, else ../shared
// beside the checkout.
std::string SharedPath(const std::string& relative);

// `relative` under tests/data: $KVJIT_TEST_DATA_DIR, else the checkout's.
std::string TestDataPath(const std::string& relative);

// A model fetched by tools/scripts/fetch_model.sh: under $KVJIT_MODEL_DIR,
// else ~/.cache/kvjit/models.
std::string DownloadedModelPath(const std::string& file_name);

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_COMMON_TESTPATHS_H_
