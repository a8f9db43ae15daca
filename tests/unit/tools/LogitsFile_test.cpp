#include "tools/kvjit/LogitsFile.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/kvjit/Perplexity.h"

namespace kvjit::cli {
namespace {

using ::testing::HasSubstr;

// Two chunks of 6 tokens over a vocabulary of 5: rows after positions 3
// and 4 of each.
constexpr LogitsFileShape kShape{5, 6, 3, 2};
const std::vector<int32_t> kTokens = {1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2};

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

std::vector<float> RowLogits(int64_t row) {
  std::vector<float> logits;
  for (int v = 0; v < kShape.vocab; ++v) logits.push_back(std::sin(1.7f * v + row) * (row + 1));
  return logits;
}

int32_t RowTarget(int64_t row) { return static_cast<int32_t>((row * 3) % kShape.vocab); }

// Writes kShape's rows; returns the file's path.
std::string WriteFile(const std::string& name) {
  const std::string path = TempPath(name);
  absl::StatusOr<LogitsFileWriter> writer = LogitsFileWriter::Create(path, kShape, kTokens);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int64_t row = 0; row < kShape.rows(); ++row) {
    EXPECT_TRUE(writer->AppendRow(RowLogits(row), RowTarget(row)).ok());
  }
  EXPECT_TRUE(writer->Finish().ok());
  return path;
}

std::string Contents(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void Overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(LogitsFileTest, RowsRoundTripWithinHalfAStep) {
  const std::string path = WriteFile("round_trip.logits");
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->shape().vocab, kShape.vocab);
  EXPECT_EQ(reader->shape().ctx, kShape.ctx);
  EXPECT_EQ(reader->shape().first, kShape.first);
  EXPECT_EQ(reader->shape().chunks, kShape.chunks);
  EXPECT_EQ(reader->tokens(), kTokens);
  for (int64_t row = 0; row < kShape.rows(); ++row) {
    absl::StatusOr<SavedRow> saved = reader->Row(row);
    ASSERT_TRUE(saved.ok()) << saved.status();
    const std::vector<float> logits = RowLogits(row);
    const RowScore score = ScoreRow(logits, RowTarget(row));
    EXPECT_EQ(saved->negative_log_likelihood, score.negative_log_likelihood);
    EXPECT_EQ(saved->top_token, score.top_token);
    const std::vector<double> exact = LogSoftmax(logits);
    // These rows span less than 40 nats, so the step is their range / 65535.
    const double range = *std::max_element(exact.begin(), exact.end()) -
                         *std::min_element(exact.begin(), exact.end());
    for (int v = 0; v < kShape.vocab; ++v) {
      EXPECT_NEAR(saved->log_probs[v], exact[v], range / 65535 * 0.51 + 1e-6) << row << " " << v;
    }
  }
  EXPECT_FALSE(reader->Row(kShape.rows()).ok());
  EXPECT_EQ(std::filesystem::file_size(path),
            28u + 4 * kTokens.size() + kShape.rows() * (20u + 2 * kShape.vocab));
}

TEST(LogitsFileTest, LogProbsFarBelowTheTopShareTheFloor) {
  const std::string path = TempPath("floor.logits");
  constexpr LogitsFileShape shape{3, 3, 1, 1};
  absl::StatusOr<LogitsFileWriter> writer = LogitsFileWriter::Create(path, shape, {0, 1, 2});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->AppendRow(std::vector<float>{0, -10, -100}, 0).ok());
  ASSERT_TRUE(writer->Finish().ok());
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  absl::StatusOr<SavedRow> row = reader->Row(0);
  ASSERT_TRUE(row.ok());
  EXPECT_NEAR(row->log_probs[1], -10, 1e-3);
  EXPECT_NEAR(row->log_probs[2], row->log_probs[0] - kLogitsFileSpanNats, 1e-3);
  // The NLL is kept exactly, not at the floor.
  std::vector<float> logits = {0, -10, -100};
  absl::StatusOr<LogitsFileWriter> target_writer = LogitsFileWriter::Create(path, shape, {0, 1, 2});
  ASSERT_TRUE(target_writer->AppendRow(logits, 2).ok());
  ASSERT_TRUE(target_writer->Finish().ok());
  EXPECT_NEAR(LogitsFileReader::Open(path)->Row(0)->negative_log_likelihood, 100, 1e-3);
}

TEST(LogitsFileTest, ATruncatedFileIsRefusedByName) {
  const std::string path = WriteFile("truncated.logits");
  const std::string bytes = Contents(path);
  Overwrite(path, bytes.substr(0, bytes.size() - 1));
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
  EXPECT_THAT(reader.status().message(), HasSubstr("truncated"));
}

TEST(LogitsFileTest, AFileOfAnotherKindIsRefusedByName) {
  const std::string path = TempPath("other.logits");
  Overwrite(path, "_logits_ from somewhere else, long enough for a header");
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(), HasSubstr(path + ": not a logits file"));
}

TEST(LogitsFileTest, ACorruptHeaderIsRefused) {
  const std::string path = WriteFile("corrupt_header.logits");
  std::string bytes = Contents(path);
  bytes[12] = 0;  // the vocabulary's low byte: a vocabulary of 0
  Overwrite(path, bytes);
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(), HasSubstr(path + ": corrupt logits file header"));
}

TEST(LogitsFileTest, ACorruptRowIsRefusedWhenRead) {
  const std::string path = WriteFile("corrupt_row.logits");
  std::string bytes = Contents(path);
  const size_t second_row = 28 + 4 * kTokens.size() + 20 + 2 * kShape.vocab;
  bytes[second_row + 8 + 3] = 0x7f;  // the top token: far outside the vocabulary
  Overwrite(path, bytes);
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(reader->Row(0).ok());
  absl::StatusOr<SavedRow> row = reader->Row(1);
  ASSERT_FALSE(row.ok());
  EXPECT_THAT(row.status().message(), HasSubstr(path + ": corrupt row 1"));
}

TEST(LogitsFileTest, AMissingFileIsRefusedByName) {
  const std::string path = TempPath("absent.logits");
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
}

TEST(LogitsFileTest, AnotherRunIsRefusedNamingTheDifference) {
  const std::string path = WriteFile("same_run.logits");
  absl::StatusOr<LogitsFileReader> reader = LogitsFileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(reader->CheckSameRun(kShape, kTokens).ok());

  LogitsFileShape other_vocab = kShape;
  other_vocab.vocab = 7;
  EXPECT_THAT(reader->CheckSameRun(other_vocab, kTokens).message(),
              HasSubstr(path + " was saved with a vocabulary of 5; this model has 7"));
  // A run of the first chunks compares with theirs.
  LogitsFileShape fewer_chunks = kShape;
  fewer_chunks.chunks = 1;
  EXPECT_TRUE(reader->CheckSameRun(fewer_chunks, absl::MakeConstSpan(kTokens).subspan(0, 6)).ok());
  LogitsFileShape more_chunks = kShape;
  more_chunks.chunks = 3;
  std::vector<int32_t> longer = kTokens;
  longer.insert(longer.end(), kTokens.begin(), kTokens.begin() + 6);
  EXPECT_THAT(reader->CheckSameRun(more_chunks, longer).message(),
              HasSubstr(path + " was saved over 2 chunks; this run evaluates 3"));
  LogitsFileShape other_ctx = kShape;
  other_ctx.ctx = 4;
  other_ctx.first = 2;
  other_ctx.chunks = 3;
  EXPECT_THAT(reader->CheckSameRun(other_ctx, kTokens).message(),
              HasSubstr(path + " was saved with --ctx 6 (scored from position 3); this run has "
                               "--ctx 4 (from 2)"));
  std::vector<int32_t> other_tokens = kTokens;
  other_tokens[7] = 4;
  EXPECT_THAT(reader->CheckSameRun(kShape, other_tokens).message(),
              HasSubstr(path + " was saved over other tokens: token 7 is 3 there and 4 here"));
}

TEST(LogitsFileTest, AnUnfinishedWriterLeavesNoFile) {
  const std::string path = TempPath("unfinished.logits");
  std::filesystem::remove(path);
  {
    absl::StatusOr<LogitsFileWriter> writer = LogitsFileWriter::Create(path, kShape, kTokens);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AppendRow(RowLogits(0), 0).ok());
    EXPECT_FALSE(writer->Finish().ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

}  // namespace
}  // namespace kvjit::cli
