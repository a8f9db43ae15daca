#include "runtime/core/AtomicFile.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("kvjit-atomic-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  static std::string Read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static absl::Span<const uint8_t> Bytes(const std::string& text) {
    return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
  }
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(directory_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  std::filesystem::path directory_;
};

TEST_F(AtomicFileTest, WritesAndReplacesTheWholeFileLeavingNoTemporary) {
  const std::string path = (directory_ / "out.bin").string();
  ASSERT_TRUE(WriteFileAtomically(path, Bytes(std::string("first version, longer"))).ok());
  ASSERT_TRUE(WriteFileAtomically(path, Bytes(std::string("second"))).ok());
  EXPECT_EQ(Read(path), "second");
  EXPECT_EQ(Entries(), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFileTest, WritesAnEmptyFile) {
  const std::string path = (directory_ / "empty").string();
  ASSERT_TRUE(WriteFileAtomically(path, {}).ok());
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
}

TEST_F(AtomicFileTest, AMissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = (directory_ / "no-such-directory" / "out.bin").string();
  const absl::Status status = WriteFileAtomically(path, Bytes(std::string("x")));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find(path), absl::string_view::npos) << status;
  EXPECT_EQ(Entries(), std::vector<std::string>{});
}

TEST_F(AtomicFileTest, ADirectoryInTheWayLeavesNoTemporaryBehind) {
  const std::filesystem::path path = directory_ / "taken";
  std::filesystem::create_directories(path / "child");
  const absl::Status status = WriteFileAtomically(path.string(), Bytes(std::string("x")));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cannot rename into place"), absl::string_view::npos) << status;
  EXPECT_EQ(Entries(), std::vector<std::string>{"taken"});
}

}  // namespace
}  // namespace kvjit
