#include "frontend/gguf/GgufSplit.h"

#include <filesystem>
#include <regex>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::gguf {
namespace {

struct SplitName {
  std::string prefix;  // with its directory
  uint64_t number = 0;  // 1-based, as in the name
  uint64_t count = 0;
};

std::optional<SplitName> ParseSplitName(const std::string& path) {
  static const std::regex kPattern(R"(^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
  std::smatch match;
  if (!std::regex_match(path, match, kPattern)) return std::nullopt;
  SplitName name{match[1].str(), 0, 0};
  if (!absl::SimpleAtoi(match[2].str(), &name.number) ||
      !absl::SimpleAtoi(match[3].str(), &name.count) || name.number == 0 ||
      name.number > name.count) {
    return std::nullopt;
  }
  return name;
}

std::string PartPath(const SplitName& name, uint64_t number) {
  return absl::StrFormat("%s-%05d-of-%05d.gguf", name.prefix, number, name.count);
}

// split.count of a file, 1 where it is not part of a split.
absl::StatusOr<uint64_t> SplitCount(const GgufFile& file) {
  if (!file.Has(kSplitCountKey)) return 1;
  KVJIT_ASSIGN_OR_RETURN(uint64_t count, file.GetUint(kSplitCountKey));
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": ", kSplitCountKey, " is 0; a split has at least one part"));
  }
  return count;
}

// Checks that `part` is part `index` (0-based) of a split of `count`.
absl::Status CheckPart(const GgufFile& part, uint64_t index, uint64_t count) {
  if (!part.Has(kSplitCountKey)) {
    return absl::InvalidArgumentError(absl::StrCat(
        part.path(), ": has no ", kSplitCountKey, ", so it is not part ", index + 1, " of ",
        count, " of a split"));
  }
  KVJIT_ASSIGN_OR_RETURN(uint64_t part_count, SplitCount(part));
  if (part_count != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        part.path(), ": ", kSplitCountKey, " is ", part_count, " but the split has ", count,
        " parts: it belongs to another split"));
  }
  if (!part.Has(kSplitNumberKey)) {
    return absl::InvalidArgumentError(
        absl::StrCat(part.path(), ": part of a split but without ", kSplitNumberKey));
  }
  KVJIT_ASSIGN_OR_RETURN(uint64_t number, part.GetUint(kSplitNumberKey));
  if (number != index) {
    return absl::InvalidArgumentError(absl::StrCat(
        part.path(), ": ", kSplitNumberKey, " is ", number, " but its name makes it part ",
        index + 1, " of ", count, " (", kSplitNumberKey, " ", index, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string> SplitPrefix(const std::string& path) {
  std::optional<SplitName> name = ParseSplitName(path);
  if (!name.has_value()) return std::nullopt;
  return name->prefix;
}

std::optional<std::vector<std::string>> SplitPartPaths(const std::string& path) {
  std::optional<SplitName> name = ParseSplitName(path);
  if (!name) return std::nullopt;
  std::vector<std::string> paths;
  for (uint64_t number = 1; number <= name->count; ++number) {
    paths.push_back(PartPath(*name, number));
  }
  return paths;
}

absl::StatusOr<GgufModelFiles> GgufModelFiles::Open(const std::string& path) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> named, GgufFile::Open(path));
  KVJIT_ASSIGN_OR_RETURN(uint64_t count, SplitCount(*named));
  GgufModelFiles files;
  if (count == 1) {
    files.parts_.push_back(std::move(named));
    return files;
  }
  std::optional<SplitName> name = ParseSplitName(path);
  if (!name || name->count != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": part of a split of ", count, " files, but not named PREFIX-NNNNN-of-",
        absl::StrFormat("%05d", count), ".gguf as gguf-split names them, so the other parts "
        "cannot be found; keep the names gguf-split gave"));
  }
  KVJIT_RETURN_IF_ERROR(CheckPart(*named, name->number - 1, count));
  for (uint64_t number = 1; number <= count; ++number) {
    if (number == name->number) {
      files.parts_.push_back(std::move(named));
      continue;
    }
    const std::string part_path = PartPath(*name, number);
    std::error_code error;
    if (!std::filesystem::exists(part_path, error)) {
      return absl::NotFoundError(absl::StrCat(part_path, ": part ", number, " of ", count,
                                              " of the split ", path, " is missing"));
    }
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> part, GgufFile::Open(part_path));
    KVJIT_RETURN_IF_ERROR(CheckPart(*part, number - 1, count));
    files.parts_.push_back(std::move(part));
  }
  absl::flat_hash_map<absl::string_view, size_t> owner;
  size_t tensors = 0;
  for (size_t i = 0; i < files.parts_.size(); ++i) {
    for (const GgufTensor& tensor : files.parts_[i]->tensors()) {
      auto [at, inserted] = owner.emplace(tensor.name, i);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            files.parts_[i]->path(), ": tensor '", tensor.name, "' is also in ",
            files.parts_[at->second]->path()));
      }
      ++tensors;
    }
  }
  const GgufFile& first = files.metadata();
  if (first.Has(kSplitTensorsCountKey)) {
    KVJIT_ASSIGN_OR_RETURN(uint64_t declared, first.GetUint(kSplitTensorsCountKey));
    if (declared != tensors) {
      return absl::InvalidArgumentError(absl::StrCat(
          first.path(), ": ", kSplitTensorsCountKey, " is ", declared, " but the ", count,
          " parts hold ", tensors, " tensors"));
    }
  }
  return files;
}

std::optional<GgufModelFiles::Located> GgufModelFiles::FindTensor(absl::string_view name) const {
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (const GgufTensor* tensor = parts_[i]->FindTensor(name)) return Located{i, tensor};
  }
  return std::nullopt;
}

}  // namespace kvjit::gguf
