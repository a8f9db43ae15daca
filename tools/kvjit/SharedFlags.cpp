#include "tools/kvjit/SharedFlags.h"

#include <fstream>
#include <random>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "runtime/generation/RunnerFactory.h"

ABSL_FLAG(std::string, o, "-", "the output file ('-' for stdout where the command allows it)");
ABSL_FLAG(std::string, p, "", "the prompt");
ABSL_FLAG(int, n, 32, "the most tokens to generate");
ABSL_FLAG(int64_t, keep_layers, 0,
          "compile only the model's first K decoder layers, then its final norm and output "
          "projection: the layer-skipping self-draft, whose KV cache is the first K layers of "
          "the whole model's (0: every layer)");
ABSL_FLAG(int64_t, block_size, 16, "tokens per KV-cache block");
ABSL_FLAG(int64_t, tp, 1,
          "tensor parallelism: the processes to split the model over (shard-tensor-parallel, "
          "docs/scale-out.md). kvjit compile writes one executable with every rank's program; "
          "kvjit run, chat, serve and bench of a model (not a .kvx) start mpirun with that many "
          "processes on this machine");
ABSL_FLAG(std::string, cache_dtype, "f32",
          "how the KV cache stores keys and values: f32, f16, bf16, q8_0, q4_0 or f8_e4m3");
ABSL_FLAG(std::string, cache_dtype_k, "", "how the KV cache stores keys, where not as --cache_dtype says");
ABSL_FLAG(std::string, cache_dtype_v, "", "how the KV cache stores values, where not as --cache_dtype says");
ABSL_FLAG(std::string, cache_rotation, "auto",
          "auto: quantized keys and values stored rotated by a Walsh-Hadamard matrix where head_dim is "
          "a multiple of 64, as llama.cpp does; none: as they are");
ABSL_FLAG(int64_t, max_tokens_per_step, 512,
          "tokens one step may carry; sizes the activation arena");
ABSL_FLAG(int64_t, kv_memory_mib, 1024,
          "the KV budget the compiler plans for, in MiB (kvjit run sizes its pool anew)");
ABSL_FLAG(int64_t, max_batch_tokens, 256,
          "new tokens one batched step may carry, decodes and prefill chunks together (at most "
          "the executable's tokens per step, to which it is cut)");

ABSL_FLAG(int64_t, samples, 1,
          "samples per prompt (parallel sampling; sample i uses seed + i): the prompt is computed "
          "once and its KV blocks shared by all");
ABSL_FLAG(int, threads, 0, "CPU threads (0: all cores)");
ABSL_FLAG(int64_t, kv_pool_mib, 0,
          "memory for the paged KV pool, in MiB, resident only where written; a run needing more "
          "is refused (0: kvjit run holds as much as its prompt, new tokens and sequences can "
          "fill; kvjit serve and kvjit chat the budget the executable was compiled for)");
ABSL_FLAG(std::string, chat_template, "",
          "a Jinja chat template file to render chat with instead of the model's own");
ABSL_FLAG(bool, verify_weights, false,
          "hash every weight on load and compare it with the checksum recorded when compiling "
          "(~0.1 s per 100 MB); without it, weight files are checked by their sizes");
ABSL_FLAG(std::string, device, "",
          "where steps run: cpu, cuda (the first GPU) or cuda:N; empty: cuda for an executable "
          "compiled with --target cuda, else cpu");

ABSL_FLAG(double, temperature, 0.8, "sampling temperature; 0 is greedy");
ABSL_FLAG(int, top_k, 40, "keep the k most likely tokens (0: all)");
ABSL_FLAG(double, top_p, 0.95, "keep the most likely tokens whose probabilities sum to p");
ABSL_FLAG(double, min_p, 0.05, "drop tokens less likely than min_p times the most likely");
ABSL_FLAG(double, repeat_penalty, 1.0, "above 1 discourages tokens already in the text");
ABSL_FLAG(int64_t, seed, -1, "the sampling seed; the same seed gives the same text (-1: random)");
ABSL_FLAG(std::vector<std::string>, stop, {}, "stop strings, comma-separated");
ABSL_FLAG(bool, stats, false,
          "write figures to stderr: kvjit run its TTFT, TPOT, tokens/s, KV blocks, start-up "
          "phases and where the memory is; kvjit chat each reply's prompt tokens (and those the "
          "prefix cache held), generated tokens, TTFT and TPOT");

namespace kvjit::cli {

codegen::CompileOptions CompileOptionsFromFlags() {
  codegen::CompileOptions options;
  options.keep_layers = absl::GetFlag(FLAGS_keep_layers);
  options.tensor_parallel = absl::GetFlag(FLAGS_tp);
  options.block_size = absl::GetFlag(FLAGS_block_size);
  options.cache_dtype = absl::GetFlag(FLAGS_cache_dtype);
  options.cache_dtype_k = absl::GetFlag(FLAGS_cache_dtype_k);
  options.cache_dtype_v = absl::GetFlag(FLAGS_cache_dtype_v);
  options.cache_rotation = absl::GetFlag(FLAGS_cache_rotation);
  options.max_tokens_per_step = absl::GetFlag(FLAGS_max_tokens_per_step);
  options.kv_memory_mib = absl::GetFlag(FLAGS_kv_memory_mib);
  // A model compiled on the fly for --device cuda needs its kernels.
  if (absl::StartsWith(absl::GetFlag(FLAGS_device), "cuda")) options.target = "cuda";
  return options;
}

absl::StatusOr<std::string> ChatTemplateFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_chat_template);
  if (path.empty()) return std::string();
  std::ifstream file(path, std::ios::binary);
  std::stringstream source;
  source << file.rdbuf();
  if (!file || source.str().empty()) {
    return absl::NotFoundError(absl::StrCat("--chat_template ", path, ": cannot read the file, or it is empty"));
  }
  return source.str();
}

runtime::LoadOptions LoadOptionsFromFlags() {
  runtime::LoadOptions options;
  options.verify_weight_checksums = absl::GetFlag(FLAGS_verify_weights);
  return options;
}

std::string DeviceFromFlags(const runtime::Executable& executable) {
  const std::string device = absl::GetFlag(FLAGS_device);
  return device.empty() ? runtime::DefaultDevice(executable) : device;
}

sampling::SamplingParams SamplingParamsFromFlags() {
  sampling::SamplingParams params;
  params.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  params.top_k = absl::GetFlag(FLAGS_top_k);
  params.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  params.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  params.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repeat_penalty));
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  params.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device()();
  return params;
}

}  // namespace kvjit::cli
