#include "codegen/cuda/NvrtcCache.h"


#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SHA256.h"
#include "runtime/core/AtomicFile.h"

namespace kvjit::codegen::cuda {
namespace {

// An entry: the magic, the cubin's and the PTX's sizes (little-endian 64-bit),
// then their bytes.
constexpr char kMagic[8] = {'K', 'V', 'J', 'N', 'V', 'R', 'C', '1'};

void AppendU64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t ReadU64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

}  // namespace

std::string NvrtcCache::DefaultDirectory() {
  if (const char* directory = std::getenv("KVJIT_NVRTC_CACHE_DIR"); directory && *directory) {
    return directory;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return absl::StrCat(xdg, "/kvjit/nvrtc");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : ".", "/.cache/kvjit/nvrtc");
}

std::string NvrtcCache::Key(const std::string& source, uint32_t arch,
                            const std::vector<std::string>& options, uint32_t nvrtc_version) {
  llvm::SHA256 hash;
  // Each part with its length, so that no two lists of parts hash alike.
  auto add = [&](llvm::StringRef part) {
    const std::string length = absl::StrCat(part.size(), ":");
    hash.update(llvm::StringRef(length));
    hash.update(part);
  };
  add(source);
  add(absl::StrCat("sm_", arch));
  for (const std::string& option : options) add(option);
  add(absl::StrCat("nvrtc ", nvrtc_version));
  const std::array<uint8_t, 32> digest = hash.final();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string NvrtcCache::PathFor(const std::string& key) const {
  return absl::StrCat(directory_, "/", key, ".nvrtc");
}

std::optional<CudaBinary> NvrtcCache::Lookup(const std::string& key) const {
  std::ifstream file(PathFor(key), std::ios::binary);
  if (!file) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic + 16 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return std::nullopt;
  }
  const uint64_t cubin_size = ReadU64(bytes.data() + sizeof kMagic);
  const uint64_t ptx_size = ReadU64(bytes.data() + sizeof kMagic + 8);
  const uint64_t header = sizeof kMagic + 16;
  if (cubin_size > bytes.size() - header || ptx_size != bytes.size() - header - cubin_size) {
    return std::nullopt;
  }
  CudaBinary binary;
  binary.cubin.assign(bytes.begin() + header, bytes.begin() + header + cubin_size);
  binary.ptx = bytes.substr(header + cubin_size);
  return binary;
}

absl::Status NvrtcCache::Store(const std::string& key, const CudaBinary& binary) const {
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("NVRTC cache: cannot create ", directory_, ": ", error.message()));
  }
  std::string bytes(kMagic, sizeof kMagic);
  AppendU64(bytes, binary.cubin.size());
  AppendU64(bytes, binary.ptx.size());
  bytes.append(binary.cubin.begin(), binary.cubin.end());
  bytes.append(binary.ptx);

  const absl::Status written = WriteFileAtomically(
      PathFor(key), absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!written.ok()) {
    return absl::Status(written.code(), absl::StrCat("NVRTC cache: ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::codegen::cuda
