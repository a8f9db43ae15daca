#ifndef KVJIT_CODEGEN_COMPILER_H_
#define KVJIT_CODEGEN_COMPILER_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"

namespace kvjit::codegen {

struct CompileOptions {
  std::string target = "cpu";
  int64_t block_size = 16;
  std::string cache_dtype = "f32";
  int64_t max_tokens_per_step = 512;
  int64_t kv_memory_mib = 1024;
  bool dump_ir_after_all = false;  // to stderr
};

// A model file (GGUF, or a Hugging Face directory) through import, the pass
// pipeline and the executable writer into `output_path`. Progress lines go to
// `progress` where it is not null.
absl::Status CompileModel(const std::string& model_path, const std::string& output_path,
                          const CompileOptions& options, std::FILE* progress);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_COMPILER_H_
