#include "frontend/gguf/GgufSplit.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"

namespace kvjit::gguf {
namespace {

using ::testing::HasSubstr;
using test::ByteWriter;
using test::GgufWriter;

constexpr uint32_t kGgmlF32 = 0;

// One part as gguf-split writes it: split.no and split.count as uint16,
// split.tensors.count as int32; the metadata in the first part only.
std::vector<uint8_t> Part(uint16_t number, uint16_t count, int32_t total_tensors,
                          const std::vector<std::string>& tensors) {
  GgufWriter writer;
  if (number == 0) writer.AddString("general.name", "split model");
  writer.AddRaw("split.no", test::kUint16, ByteWriter().U16(number));
  writer.AddRaw("split.count", test::kUint16, ByteWriter().U16(count));
  writer.AddRaw("split.tensors.count", test::kInt32, ByteWriter().U32(total_tensors));
  for (size_t i = 0; i < tensors.size(); ++i) {
    writer.AddTensor({tensors[i], {1}, kGgmlF32, {1, 2, 3, static_cast<uint8_t>(number)},
                      std::nullopt});
  }
  return writer.Build();
}

class GgufSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ctest runs each test as its own process, side by side: each writes
    // its own directory.
    directory_ = ::testing::TempDir() + "/kvjit_gguf_split_test." +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = directory_ + "/" + name;
    std::FILE* out = std::fopen(path.c_str(), "wb");
    EXPECT_NE(out, nullptr);
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), out), bytes.size());
    std::fclose(out);
    return path;
  }

  // A model split in three: a, b | c | d.
  void WriteThreeParts() {
    Write("m-00001-of-00003.gguf", Part(0, 3, 4, {"a", "b"}));
    Write("m-00002-of-00003.gguf", Part(1, 3, 4, {"c"}));
    Write("m-00003-of-00003.gguf", Part(2, 3, 4, {"d"}));
  }

  std::string directory_;
};

TEST_F(GgufSplitTest, AnyPartFindsTheOthersInOrder) {
  WriteThreeParts();
  for (int number = 1; number <= 3; ++number) {
    const std::string named = directory_ + "/m-0000" + std::to_string(number) + "-of-00003.gguf";
    absl::StatusOr<GgufModelFiles> files = GgufModelFiles::Open(named);
    ASSERT_TRUE(files.ok()) << files.status();
    ASSERT_EQ(files->parts().size(), 3u);
    EXPECT_EQ(files->metadata().path(), directory_ + "/m-00001-of-00003.gguf");
    EXPECT_EQ(*files->metadata().GetString("general.name"), "split model");
    const std::vector<std::pair<std::string, size_t>> expected = {
        {"a", 0}, {"b", 0}, {"c", 1}, {"d", 2}};
    for (const auto& [name, part] : expected) {
      std::optional<GgufModelFiles::Located> located = files->FindTensor(name);
      ASSERT_TRUE(located.has_value()) << name;
      EXPECT_EQ(located->part, part) << name;
      EXPECT_EQ(located->tensor->data[3], part) << name;
    }
    EXPECT_FALSE(files->FindTensor("e").has_value());
  }
}

TEST_F(GgufSplitTest, AFileWithoutSplitKeysIsOnePart) {
  const std::string path =
      Write("whole.gguf", GgufWriter().AddTensor({"a", {1}, kGgmlF32, {0, 0, 0, 0}, std::nullopt})
                              .Build());
  absl::StatusOr<GgufModelFiles> files = GgufModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->parts().size(), 1u);
  EXPECT_EQ(files->FindTensor("a")->part, 0u);
}

TEST_F(GgufSplitTest, ASplitOfOneIsOnePart) {
  const std::string path = Write("m-00001-of-00001.gguf", Part(0, 1, 1, {"a"}));
  absl::StatusOr<GgufModelFiles> files = GgufModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->parts().size(), 1u);
}

TEST_F(GgufSplitTest, AMissingPartIsNamed) {
  WriteThreeParts();
  std::filesystem::remove(directory_ + "/m-00002-of-00003.gguf");
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00003-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(files.status().message(),
              HasSubstr("m-00002-of-00003.gguf: part 2 of 3 of the split " + directory_ +
                        "/m-00003-of-00003.gguf is missing"));
}

TEST_F(GgufSplitTest, APartOfAnotherSplitIsRefused) {
  WriteThreeParts();
  Write("m-00002-of-00003.gguf", Part(1, 4, 4, {"c"}));
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00001-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("m-00002-of-00003.gguf: split.count is 4 but the split has 3 parts"));
}

TEST_F(GgufSplitTest, AFileWithoutSplitKeysAmongThePartsIsRefused) {
  WriteThreeParts();
  Write("m-00002-of-00003.gguf",
        GgufWriter().AddTensor({"c", {1}, kGgmlF32, {0, 0, 0, 0}, std::nullopt}).Build());
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00001-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("m-00002-of-00003.gguf: has no split.count, so it is not part 2 of 3 of "
                        "a split"));
}

TEST_F(GgufSplitTest, APartUnderAnotherNumbersNameIsRefused) {
  WriteThreeParts();
  Write("m-00003-of-00003.gguf", Part(1, 3, 4, {"d"}));
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00001-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("m-00003-of-00003.gguf: split.no is 1 but its name makes it part 3 of 3"));
}

TEST_F(GgufSplitTest, ATensorCountOtherThanTheFirstPartsIsRefused) {
  WriteThreeParts();
  Write("m-00001-of-00003.gguf", Part(0, 3, 5, {"a", "b"}));
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00002-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("split.tensors.count is 5 but the 3 parts hold 4 tensors"));
}

TEST_F(GgufSplitTest, ATensorInTwoPartsIsRefused) {
  WriteThreeParts();
  Write("m-00003-of-00003.gguf", Part(2, 3, 4, {"a"}));
  absl::StatusOr<GgufModelFiles> files =
      GgufModelFiles::Open(directory_ + "/m-00001-of-00003.gguf");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("m-00003-of-00003.gguf: tensor 'a' is also in " + directory_ +
                        "/m-00001-of-00003.gguf"));
}

TEST_F(GgufSplitTest, ARenamedPartCannotFindTheOthers) {
  const std::string path = Write("renamed.gguf", Part(0, 3, 4, {"a", "b"}));
  absl::StatusOr<GgufModelFiles> files = GgufModelFiles::Open(path);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("renamed.gguf: part of a split of 3 files, but not named "
                        "PREFIX-NNNNN-of-00003.gguf"));
}

TEST_F(GgufSplitTest, ANameAndAFileOfDifferentCountsAreRefused) {
  const std::string path = Write("m-00001-of-00002.gguf", Part(0, 3, 4, {"a", "b"}));
  absl::StatusOr<GgufModelFiles> files = GgufModelFiles::Open(path);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(), HasSubstr("part of a split of 3 files"));
}

TEST(SplitPartPaths, ListsEveryPartOfAGgufSplitName) {
  EXPECT_EQ(SplitPartPaths("/d/Model-Q4_K_M-00002-of-00003.gguf"),
            (std::vector<std::string>{"/d/Model-Q4_K_M-00001-of-00003.gguf",
                                      "/d/Model-Q4_K_M-00002-of-00003.gguf",
                                      "/d/Model-Q4_K_M-00003-of-00003.gguf"}));
  EXPECT_EQ(SplitPartPaths("m-00001-of-00001.gguf"),
            (std::vector<std::string>{"m-00001-of-00001.gguf"}));
  EXPECT_FALSE(SplitPartPaths("model.gguf").has_value());
  EXPECT_FALSE(SplitPartPaths("m-00004-of-00003.gguf").has_value());
  EXPECT_FALSE(SplitPartPaths("m-00000-of-00003.gguf").has_value());
  EXPECT_FALSE(SplitPartPaths("m-0001-of-0003.gguf").has_value());
}

// What `kvjit serve` names a split model, whichever part it is given.
TEST(SplitPrefix, IsTheNameBeforeThePartNumber) {
  EXPECT_EQ(SplitPrefix("/d/Model-Q4_K_M-00003-of-00003.gguf"), "/d/Model-Q4_K_M");
  EXPECT_EQ(SplitPrefix("m-00001-of-00001.gguf"), "m");
  EXPECT_FALSE(SplitPrefix("model.gguf").has_value());
  EXPECT_FALSE(SplitPrefix("m-00004-of-00003.gguf").has_value());
}

}  // namespace
}  // namespace kvjit::gguf
