#include "tests/unit/common/TestPaths.h"

#include <cstdlib>
#include <filesystem>

namespace kvjit::testing {
namespace {

std::string ExistingUnder(const char* variable, const std::string& fallback_root,
                          const std::string& relative) {
  const char* root = std::getenv(variable);
  std::string base = root && *root ? root : fallback_root;
  if (base.empty()) return "";
  std::filesystem::path path = std::filesystem::path(base) / relative;
  std::error_code error;
  return std::filesystem::exists(path, error) ? path.string() : "";
}

}  // namespace

std::string SharedPath(const std::string& relative) {
  return ExistingUnder("KVJIT_SHARED_DIR", KVJIT_DEFAULT_SHARED_DIR, relative);
}

std::string TestDataPath(const std::string& relative) {
  return ExistingUnder("KVJIT_TEST_DATA_DIR", KVJIT_DEFAULT_TEST_DATA_DIR, relative);
}

std::string DownloadedModelPath(const std::string& file_name) {
  const char* home = std::getenv("HOME");
  std::string cache = home ? std::string(home) + "/.cache/kvjit/models" : "";
  return ExistingUnder("KVJIT_MODEL_DIR", cache, file_name);
}

}  // namespace kvjit::testing
