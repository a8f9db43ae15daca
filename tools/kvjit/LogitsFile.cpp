#include "tools/kvjit/LogitsFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/Perplexity.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "logits files are little-endian and written as the host stores numbers");

namespace kvjit::cli {
namespace {

constexpr char kMagic[8] = {'k', 'v', 'j', 'i', 't', 'l', 'g', 'p'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 5 * sizeof(uint32_t);
constexpr size_t kRowHeaderBytes = sizeof(double) + 3 * sizeof(uint32_t);
constexpr double kMaxCode = std::numeric_limits<uint16_t>::max();
// Bounds that keep every size computed from a header within 64 bits.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxTokens = int64_t{1} << 31;

size_t RowBytes(int32_t vocab) { return kRowHeaderBytes + sizeof(uint16_t) * vocab; }

template <typename T>
void Put(uint8_t*& out, T value) {
  std::memcpy(out, &value, sizeof(T));
  out += sizeof(T);
}

template <typename T>
T Get(const uint8_t*& in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  in += sizeof(T);
  return value;
}

}  // namespace

absl::StatusOr<LogitsFileWriter> LogitsFileWriter::Create(const std::string& path,
                                                          const LogitsFileShape& shape,
                                                          absl::Span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) != shape.chunks * shape.ctx) {
    return absl::InternalError(absl::StrCat(path, ": ", tokens.size(), " tokens for ", shape.chunks,
                                            " chunks of ", shape.ctx));
  }
  std::FILE* file = std::fopen((path + ".partial").c_str(), "wb");
  if (file == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ".partial: cannot create the logits file: ", std::strerror(errno)));
  }
  LogitsFileWriter writer(path, shape, file);
  uint8_t header[kHeaderBytes];
  uint8_t* out = header;
  std::memcpy(out, kMagic, sizeof(kMagic));
  out += sizeof(kMagic);
  for (int64_t field : {int64_t{kVersion}, int64_t{shape.vocab}, shape.ctx, shape.first, shape.chunks}) {
    Put(out, static_cast<uint32_t>(field));
  }
  KVJIT_RETURN_IF_ERROR(writer.WriteBytes(header, sizeof(header)));
  KVJIT_RETURN_IF_ERROR(writer.WriteBytes(tokens.data(), tokens.size() * sizeof(int32_t)));
  writer.row_bytes_.resize(RowBytes(shape.vocab));
  return writer;
}

LogitsFileWriter::~LogitsFileWriter() {
  if (file_ == nullptr) return;
  file_.reset();
  std::remove(PartialPath().c_str());
}

absl::Status LogitsFileWriter::WriteBytes(const void* data, size_t size) {
  if (std::fwrite(data, 1, size, file_.get()) != size) {
    return absl::DataLossError(
        absl::StrCat(PartialPath(), ": cannot write the logits file: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status LogitsFileWriter::AppendRow(absl::Span<const float> logits, int32_t target) {
  if (rows_written_ == shape_.rows() || static_cast<int64_t>(logits.size()) != shape_.vocab) {
    return absl::InternalError(absl::StrCat(path_, ": row ", rows_written_, " of ", logits.size(),
                                            " logits, past the file's ", shape_.rows(), " rows of ",
                                            shape_.vocab));
  }
  const RowScore score = ScoreRow(logits, target);
  const std::vector<double> log_probs = LogSoftmax(logits);
  const auto [smallest, largest] = std::minmax_element(log_probs.begin(), log_probs.end());
  const double span = std::min(*largest - *smallest, kLogitsFileSpanNats);
  const double floor = *largest - span;
  const double step = span / kMaxCode;
  uint8_t* out = row_bytes_.data();
  Put(out, score.negative_log_likelihood);
  Put(out, score.top_token);
  Put(out, static_cast<float>(floor));
  Put(out, static_cast<float>(step));
  for (double log_prob : log_probs) {
    const double code = step > 0 ? std::round((log_prob - floor) / step) : 0;
    Put(out, static_cast<uint16_t>(std::clamp(code, 0.0, kMaxCode)));
  }
  KVJIT_RETURN_IF_ERROR(WriteBytes(row_bytes_.data(), row_bytes_.size()));
  ++rows_written_;
  return absl::OkStatus();
}

absl::Status LogitsFileWriter::Finish() {
  if (rows_written_ != shape_.rows()) {
    return absl::InternalError(absl::StrCat(path_, ": ", rows_written_, " rows written of ",
                                            shape_.rows()));
  }
  if (std::fclose(file_.release()) != 0) {
    return absl::DataLossError(
        absl::StrCat(PartialPath(), ": cannot write the logits file: ", std::strerror(errno)));
  }
  if (std::rename(PartialPath().c_str(), path_.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename ", PartialPath(), " to ",
                                                    path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<LogitsFileReader> LogitsFileReader::Open(const std::string& path) {
  KVJIT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  const absl::Span<const uint8_t> bytes = file.bytes();
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a logits file (kvjit perplexity --save_logits writes them)"));
  }
  const uint8_t* in = bytes.data() + sizeof(kMagic);
  const uint32_t version = Get<uint32_t>(in);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a logits file of version ", version,
                                                   "; this kvjit reads version ", kVersion));
  }
  const uint32_t vocab = Get<uint32_t>(in);
  LogitsFileShape shape;
  shape.vocab = static_cast<int32_t>(std::min<int64_t>(vocab, kMaxVocab));
  shape.ctx = Get<uint32_t>(in);
  shape.first = Get<uint32_t>(in);
  shape.chunks = Get<uint32_t>(in);
  if (vocab < 1 || vocab >= kMaxVocab || shape.first < 1 || shape.first + 2 > shape.ctx ||
      shape.chunks < 1 || shape.chunks >= kMaxTokens / shape.ctx) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": corrupt logits file header (vocab ", vocab, ", ctx ", shape.ctx,
        ", first scored position ", shape.first, ", chunks ", shape.chunks, ")"));
  }
  const size_t token_count = static_cast<size_t>(shape.chunks * shape.ctx);
  const size_t rows_offset = kHeaderBytes + token_count * sizeof(int32_t);
  const size_t expected = rows_offset + static_cast<size_t>(shape.rows()) * RowBytes(shape.vocab);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", bytes.size() < expected ? "truncated" : "corrupt", ": ", bytes.size(),
        " bytes where its header (", shape.chunks, " chunks of ", shape.ctx, " tokens, vocab ",
        shape.vocab, ") needs ", expected));
  }
  std::vector<int32_t> tokens(token_count);
  std::memcpy(tokens.data(), bytes.data() + kHeaderBytes, token_count * sizeof(int32_t));
  return LogitsFileReader(path, std::move(file), shape, std::move(tokens), rows_offset);
}

absl::Status LogitsFileReader::CheckSameRun(const LogitsFileShape& shape,
                                            absl::Span<const int32_t> tokens) const {
  const auto differ = [&](const std::string& difference) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, " was saved ", difference,
        ": compare runs of the same model over the same text with the same --ctx, and no more "
        "--chunks"));
  };
  if (shape.vocab != shape_.vocab) {
    return differ(absl::StrCat("with a vocabulary of ", shape_.vocab, "; this model has ", shape.vocab));
  }
  if (shape.ctx != shape_.ctx || shape.first != shape_.first) {
    return differ(absl::StrCat("with --ctx ", shape_.ctx, " (scored from position ", shape_.first,
                               "); this run has --ctx ", shape.ctx, " (from ", shape.first, ")"));
  }
  if (shape.chunks > shape_.chunks) {
    return differ(absl::StrCat("over ", shape_.chunks, " chunks; this run evaluates ", shape.chunks));
  }
  const auto mismatch =
      std::mismatch(tokens.begin(), tokens.end(), tokens_.begin(), tokens_.end());
  if (mismatch.first != tokens.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, " was saved over other tokens: token ", mismatch.first - tokens.begin(), " is ",
        *mismatch.second, " there and ", *mismatch.first,
        " here (another text, or another tokenizer)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SavedRow> LogitsFileReader::Row(int64_t index) const {
  if (index < 0 || index >= shape_.rows()) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": no row ", index, " among its ", shape_.rows()));
  }
  const uint8_t* in =
      file_.bytes().data() + rows_offset_ + static_cast<size_t>(index) * RowBytes(shape_.vocab);
  SavedRow row;
  row.negative_log_likelihood = Get<double>(in);
  row.top_token = Get<int32_t>(in);
  const double floor = Get<float>(in);
  const double step = Get<float>(in);
  if (!std::isfinite(row.negative_log_likelihood) || row.negative_log_likelihood < 0 ||
      row.top_token < 0 || row.top_token >= shape_.vocab || !std::isfinite(floor) ||
      !std::isfinite(step) || step < 0) {
    return absl::DataLossError(absl::StrCat(
        path_, ": corrupt row ", index, " (NLL ", row.negative_log_likelihood, ", top token ",
        row.top_token, ", floor ", floor, ", step ", step, ")"));
  }
  row.log_probs.resize(shape_.vocab);
  for (double& log_prob : row.log_probs) log_prob = floor + step * Get<uint16_t>(in);
  return row;
}

}  // namespace kvjit::cli
