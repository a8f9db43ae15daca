#ifndef KVJIT_CODEGEN_DRIVER_COMPILER_H_
#define KVJIT_CODEGEN_DRIVER_COMPILER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace mlir {
class OpPassManager;
}  // namespace mlir

namespace kvjit::codegen {

// --verify is on by default for models of at most this many parameters: its
// cost grows with the model (the reference evaluator dequantizes every
// weight and evaluates in double), 3.6 s on SmolLM2's 135M at 2 threads, so
// about 5 s at this limit (README, Tools).
inline constexpr int64_t kVerifyByDefaultMaxParameters = 200'000'000;

enum class Verification {
  kBySize,  // on for models of at most kVerifyByDefaultMaxParameters parameters
  kOn,
  kOff,
};

struct CompileOptions {
  std::string target = "cpu";  // or "cuda": the CPU program plus its CUDA kernels
  // The decoder layers to keep, counted from the first (keep-first-layers):
  // the model's layer-skipping self-draft, whose KV cache is the first
  // keep_layers layers of the whole model's. 0: every layer.
  int64_t keep_layers = 0;
  // The processes the model is split over (shard-tensor-parallel, one
  // executable holding every rank's program, docs/scale-out.md); 1: none.
  int64_t tensor_parallel = 1;
  int64_t block_size = 16;
  // How the KV cache stores keys and values (runtime/schema/KvCacheFormat.h);
  // cache_dtype_k and cache_dtype_v, where not empty, choose keys' and
  // values' apart.
  std::string cache_dtype = "f32";
  std::string cache_dtype_k;
  std::string cache_dtype_v;
  // "auto": quantized keys and values stored rotated (insert-kv-cache's
  // rotation option); "none".
  std::string cache_rotation = "auto";
  // The CPU ISA the default pipeline's choose-weight-layouts chooses layouts
  // for: "host" (this machine's best, as the runtime picks it), avx512vnni,
  // avx2, portable, or "none" to leave the pass out; the CUDA target never
  // runs it.
  std::string weight_layout_isa = "host";
  // The microarchitecture those layouts' measurements are for: "host" (this
  // machine's, cpu::HostCpuModel), generic, zen4 or zen5.
  std::string weight_layout_cpu = "host";
  int64_t max_tokens_per_step = 512;
  int64_t kv_memory_mib = 1024;
  bool dump_ir_after_all = false;  // to stderr
  // For --target cuda: the GPU architecture of the cubin (compute capability
  // × 10; the PTX beside it serves newer GPUs) and NVRTC's --use_fast_math.
  int64_t cuda_arch = 90;
  bool cuda_fast_math = false;
  // Where set, the generated CUDA C++ is also written to this file.
  std::string cuda_source_path;
  // Whether the CPU step program is checked against the reference evaluator
  // before the executable is written (codegen/equivalence/EquivalenceChecker.h); one outside
  // tolerance fails the compile and nothing is written.
  Verification verification = Verification::kBySize;
  // Also evaluates the IR after each pass, naming the first pass whose
  // logits leave tolerance; implies verification.
  bool verify_each_pass = false;
  int verify_threads = 2;
  // The passes to run, in MLIR's textual pass-pipeline syntax with pass
  // options; empty: the default one, KvjitPipelineText of the options above.
  // The kvjit passes the input IR is past are left out; a required one
  // neither in it nor behind the IR fails the compile, naming it.
  std::string pipeline;
  // Where set, builds the pass pipeline in place of `pipeline`: the hook
  // through which tests check that verification names a broken pass.
  std::function<void(mlir::OpPassManager&)> build_pipeline;
};

// A model file (GGUF, or a Hugging Face directory) through import, the pass
// pipeline and the executable writer into `output_path`. Progress lines go to
// `progress` where it is not null. For the CUDA target the kernels are
// generated and compiled with NVRTC (no GPU needed), through the cache in
// NvrtcCache::DefaultDirectory(); a build without the CUDA toolkit refuses
// the target with FailedPrecondition.
absl::Status CompileModel(const std::string& model_path, const std::string& output_path,
                          const CompileOptions& options, std::FILE* progress);

// IR in MLIR text at any level the pipeline accepts (`kvjit import`'s tfm IR,
// edited or not, or kvjit-opt's output after some of its passes) compiled
// as CompileModel compiles a model: each tfm.param is bound to the weight of
// its name in `model_path` (GGUF or Hugging Face directory), whose config,
// tokenizer and chat template the executable takes, and only the passes the
// IR is not yet past are run. --verify evaluates the reference on this IR
// where it is still a whole-sequence function, else on the model's IR as
// imported.
absl::Status CompileIrFile(const std::string& ir_path, const std::string& model_path,
                           const std::string& output_path, const CompileOptions& options,
                           std::FILE* progress);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_DRIVER_COMPILER_H_
