#ifndef KVJIT_TOOLS_KVJIT_SHAREDFLAGS_H_
#define KVJIT_TOOLS_KVJIT_SHAREDFLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "codegen/driver/Compiler.h"
#include "runtime/exec/Executable.h"
#include "runtime/sampling/Sampler.h"

// Flags that more than one subcommand reads (absl flags are process-wide).
ABSL_DECLARE_FLAG(std::string, o);
ABSL_DECLARE_FLAG(std::string, p);
ABSL_DECLARE_FLAG(int, n);
ABSL_DECLARE_FLAG(int64_t, keep_layers);
ABSL_DECLARE_FLAG(int64_t, tp);
ABSL_DECLARE_FLAG(int64_t, block_size);
ABSL_DECLARE_FLAG(std::string, cache_dtype);
ABSL_DECLARE_FLAG(std::string, cache_dtype_k);
ABSL_DECLARE_FLAG(std::string, cache_dtype_v);
ABSL_DECLARE_FLAG(std::string, cache_rotation);
ABSL_DECLARE_FLAG(int64_t, max_tokens_per_step);
ABSL_DECLARE_FLAG(int64_t, kv_memory_mib);
ABSL_DECLARE_FLAG(int64_t, max_batch_tokens);
ABSL_DECLARE_FLAG(int64_t, samples);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int64_t, kv_pool_mib);
ABSL_DECLARE_FLAG(std::string, chat_template);
ABSL_DECLARE_FLAG(bool, verify_weights);
ABSL_DECLARE_FLAG(std::string, device);
// Sampling, for `kvjit run` and `kvjit chat`.
ABSL_DECLARE_FLAG(double, temperature);
ABSL_DECLARE_FLAG(int, top_k);
ABSL_DECLARE_FLAG(double, top_p);
ABSL_DECLARE_FLAG(double, min_p);
ABSL_DECLARE_FLAG(double, repeat_penalty);
ABSL_DECLARE_FLAG(int64_t, seed);
ABSL_DECLARE_FLAG(std::vector<std::string>, stop);
ABSL_DECLARE_FLAG(bool, stats);

namespace kvjit::cli {

// The compile options `kvjit compile` and the on-the-fly compile of
// `kvjit run` / `kvjit bench` share.
codegen::CompileOptions CompileOptionsFromFlags();

// The source of --chat_template's file, "" when the flag is not given; an
// error names an unreadable file.
absl::StatusOr<std::string> ChatTemplateFromFlags();

// How --verify_weights asks executables to be loaded.
runtime::LoadOptions LoadOptionsFromFlags();

// The device --device names, or the executable's default where it is empty.
std::string DeviceFromFlags(const runtime::Executable& executable);

// The sampling parameters --temperature, --top_k, --top_p, --min_p,
// --repeat_penalty and --seed give; a --seed of -1 draws a random seed.
sampling::SamplingParams SamplingParamsFromFlags();

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_SHAREDFLAGS_H_
