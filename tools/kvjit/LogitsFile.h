#ifndef KVJIT_TOOLS_KVJIT_LOGITSFILE_H_
#define KVJIT_TOOLS_KVJIT_LOGITSFILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/core/MappedFile.h"

namespace kvjit::cli {

// The file `kvjit perplexity --save_logits` writes and `--kl_divergence`
// reads: a run's next-token distribution at every scored token, so that
// another run over the same tokens (another cache type, another build) can
// be compared with it. All numbers little-endian:
//
//   header   "kvjitlgp", u32 version (1), u32 vocab, u32 ctx, u32 first,
//            u32 chunks                                         (28 bytes)
//   tokens   i32 x chunks*ctx: the text's tokens as split into chunks, before
//            BOS replaces each chunk's first
//   rows     chunks * (ctx - first - 1) of 20 + 2*vocab bytes, chunk after
//            chunk, the distribution after each position first..ctx-2:
//              f64 the negative log-likelihood of the token that followed
//              i32 the most likely token (the lowest id among equals)
//              f32 floor, f32 step: log-probability = floor + step * code
//              u16 code per token of the vocabulary
//
// A row's codes span its log-probabilities from the largest down to 40
// nats below it (or to the smallest, where that is nearer) in 65,535 equal
// steps, so each is within step/2 of the exact value (at most 0.00031
// nats); tokens further below share code 0. Together with the exact NLL
// and top token (so that a run compared with itself shows no difference at
// all), that is what KL divergence, perplexity and top-token agreement
// need, at half the bytes of f32 log-probabilities.
inline constexpr double kLogitsFileSpanNats = 40;

struct LogitsFileShape {
  int32_t vocab = 0;
  int64_t ctx = 0;
  int64_t first = 0;  // the first position whose distribution is saved
  int64_t chunks = 0;

  int64_t rows_per_chunk() const { return ctx - first - 1; }
  int64_t rows() const { return chunks * rows_per_chunk(); }
};

// One saved distribution.
struct SavedRow {
  double negative_log_likelihood = 0;
  int32_t top_token = 0;
  std::vector<double> log_probs;  // one per token of the vocabulary
};

// Writes a logits file as a run goes, into PATH.partial, renamed to PATH
// once every row is in; a writer dropped before that removes the partial
// file.
class LogitsFileWriter {
 public:
  // `tokens` holds shape.chunks * shape.ctx tokens.
  static absl::StatusOr<LogitsFileWriter> Create(const std::string& path,
                                                 const LogitsFileShape& shape,
                                                 absl::Span<const int32_t> tokens);

  LogitsFileWriter(LogitsFileWriter&&) = default;
  LogitsFileWriter& operator=(LogitsFileWriter&&) = default;
  ~LogitsFileWriter();

  // The next row: the distribution `logits` give and the token that followed.
  absl::Status AppendRow(absl::Span<const float> logits, int32_t target);

  // Checks that every row was written and puts the file in place.
  absl::Status Finish();

 private:
  struct FileCloser {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };

  LogitsFileWriter(std::string path, LogitsFileShape shape, std::FILE* file)
      : path_(std::move(path)), shape_(shape), file_(file) {}
  std::string PartialPath() const { return path_ + ".partial"; }
  absl::Status WriteBytes(const void* data, size_t size);

  std::string path_;
  LogitsFileShape shape_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  int64_t rows_written_ = 0;
  std::vector<uint8_t> row_bytes_;
};

// A logits file, mapped; the header and size are checked on opening, each
// row as it is read. Errors name the file.
class LogitsFileReader {
 public:
  static absl::StatusOr<LogitsFileReader> Open(const std::string& path);

  const LogitsFileShape& shape() const { return shape_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Whether a run of `shape` over `tokens` evaluates what the file saved,
  // or its first chunks; the error names the file and the first difference.
  absl::Status CheckSameRun(const LogitsFileShape& shape, absl::Span<const int32_t> tokens) const;

  absl::StatusOr<SavedRow> Row(int64_t index) const;

 private:
  LogitsFileReader(std::string path, MappedFile file, LogitsFileShape shape,
                   std::vector<int32_t> tokens, size_t rows_offset)
      : path_(std::move(path)),
        file_(std::move(file)),
        shape_(shape),
        tokens_(std::move(tokens)),
        rows_offset_(rows_offset) {}

  std::string path_;
  MappedFile file_;
  LogitsFileShape shape_;
  std::vector<int32_t> tokens_;
  size_t rows_offset_;
};

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_LOGITSFILE_H_
