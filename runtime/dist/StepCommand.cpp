#include "runtime/dist/StepCommand.h"

#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {
namespace {

// Raised whenever a command's bytes change meaning.
constexpr uint8_t kWireVersion = 1;

enum class CommandTag : uint8_t { kSetup = 1, kRun = 2, kCopyBlock = 3, kStop = 4 };

class ByteWriter {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void PutString(const std::string& text) {
    Put<uint64_t>(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void PutValues(const StepInputs::Values& values) {
    Put<uint64_t>(values.size());
    const size_t at = bytes_.size();
    bytes_.resize(at + values.size() * sizeof(kvx::StepInputElement));
    if (!values.empty()) {
      std::memcpy(bytes_.data() + at, values.data(), values.size() * sizeof(kvx::StepInputElement));
    }
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  absl::StatusOr<T> Get(const char* what) {
    KVJIT_RETURN_IF_ERROR(Need(sizeof(T), what));
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  absl::StatusOr<std::string> GetString(const char* what) {
    KVJIT_ASSIGN_OR_RETURN(const uint64_t size, Get<uint64_t>(what));
    KVJIT_RETURN_IF_ERROR(Need(size, what));
    std::string text(reinterpret_cast<const char*>(bytes_.data() + offset_), size);
    offset_ += size;
    return text;
  }
  absl::Status GetValues(const char* what, StepInputs::Values& values) {
    KVJIT_ASSIGN_OR_RETURN(const uint64_t count, Get<uint64_t>(what));
    if (count > (bytes_.size() - offset_) / sizeof(kvx::StepInputElement)) {
      return Truncated(what, count * sizeof(kvx::StepInputElement));
    }
    values.resize(count);
    if (count > 0) {
      std::memcpy(values.data(), bytes_.data() + offset_, count * sizeof(kvx::StepInputElement));
    }
    offset_ += count * sizeof(kvx::StepInputElement);
    return absl::OkStatus();
  }
  absl::Status CheckAllRead(const char* command) const {
    if (offset_ == bytes_.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("a ", command, " step command of ",
                                                   bytes_.size(), " bytes ends at byte ", offset_,
                                                   ", with bytes left over"));
  }

 private:
  absl::Status Need(uint64_t size, const char* what) const {
    if (size <= bytes_.size() - offset_) return absl::OkStatus();
    return Truncated(what, size);
  }
  absl::Status Truncated(const char* what, uint64_t size) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "a step command of ", bytes_.size(), " bytes is cut short: ", what, " needs ", size,
        " bytes at byte ", offset_, ", and ", bytes_.size() - offset_, " remain"));
  }

  absl::Span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

absl::StatusOr<StepCommand> DecodeSetup(ByteReader& reader) {
  RankSetup setup;
  KVJIT_ASSIGN_OR_RETURN(setup.executable_path, reader.GetString("the setup's executable path"));
  KVJIT_ASSIGN_OR_RETURN(setup.num_blocks, reader.Get<int64_t>("the setup's KV blocks"));
  KVJIT_ASSIGN_OR_RETURN(setup.threads, reader.Get<int32_t>("the setup's threads"));
  KVJIT_ASSIGN_OR_RETURN(setup.device, reader.GetString("the setup's device"));
  KVJIT_RETURN_IF_ERROR(reader.CheckAllRead("setup"));
  return setup;
}

absl::StatusOr<StepCommand> DecodeRun(ByteReader& reader) {
  StepInputs inputs;
  KVJIT_ASSIGN_OR_RETURN(inputs.max_blocks, reader.Get<int64_t>("the step's block-table columns"));
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    KVJIT_RETURN_IF_ERROR(reader.GetValues(spec.name, inputs[spec.input]));
  }
  KVJIT_RETURN_IF_ERROR(reader.CheckAllRead("run"));
  return inputs;
}

absl::StatusOr<StepCommand> DecodeCopyBlock(ByteReader& reader) {
  CopyBlockCommand copy;
  KVJIT_ASSIGN_OR_RETURN(copy.source, reader.Get<int64_t>("the copy's source block"));
  KVJIT_ASSIGN_OR_RETURN(copy.destination, reader.Get<int64_t>("the copy's destination block"));
  KVJIT_RETURN_IF_ERROR(reader.CheckAllRead("copy-block"));
  return copy;
}

}  // namespace

bool RankSetup::operator==(const RankSetup& other) const {
  return executable_path == other.executable_path && num_blocks == other.num_blocks &&
         threads == other.threads && device == other.device;
}

std::vector<uint8_t> EncodeStepCommand(const StepCommand& command) {
  ByteWriter writer;
  writer.Put(kWireVersion);
  if (const auto* setup = std::get_if<RankSetup>(&command)) {
    writer.Put(CommandTag::kSetup);
    writer.PutString(setup->executable_path);
    writer.Put<int64_t>(setup->num_blocks);
    writer.Put<int32_t>(setup->threads);
    writer.PutString(setup->device);
  } else if (const auto* inputs = std::get_if<StepInputs>(&command)) {
    writer.Put(CommandTag::kRun);
    writer.Put<int64_t>(inputs->max_blocks);
    for (const kvx::StepInputSpec& spec : kvx::kStepInputs) writer.PutValues((*inputs)[spec.input]);
  } else if (const auto* copy = std::get_if<CopyBlockCommand>(&command)) {
    writer.Put(CommandTag::kCopyBlock);
    writer.Put<int64_t>(copy->source);
    writer.Put<int64_t>(copy->destination);
  } else {
    writer.Put(CommandTag::kStop);
  }
  return writer.Take();
}

absl::StatusOr<StepCommand> DecodeStepCommand(absl::Span<const uint8_t> bytes) {
  ByteReader reader(bytes);
  KVJIT_ASSIGN_OR_RETURN(const uint8_t version, reader.Get<uint8_t>("the format's version"));
  if (version != kWireVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a step command in format version ", int{version}, " where this build reads version ",
        int{kWireVersion}, ": every rank must run the same build of kvjit"));
  }
  KVJIT_ASSIGN_OR_RETURN(const uint8_t tag, reader.Get<uint8_t>("the command's kind"));
  switch (static_cast<CommandTag>(tag)) {
    case CommandTag::kSetup:
      return DecodeSetup(reader);
    case CommandTag::kRun:
      return DecodeRun(reader);
    case CommandTag::kCopyBlock:
      return DecodeCopyBlock(reader);
    case CommandTag::kStop:
      KVJIT_RETURN_IF_ERROR(reader.CheckAllRead("stop"));
      return StopCommand{};
  }
  return absl::InvalidArgumentError(absl::StrCat("a step command of unknown kind ", int{tag},
                                                 " (known: 1 setup, 2 run, 3 copy-block, 4 stop)"));
}

}  // namespace kvjit::runtime::dist
