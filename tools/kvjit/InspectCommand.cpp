// kvjit inspect MODEL: what a model file holds and what it will cost to run.

#include <cstdio>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/model/ModelFile.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/KvCacheFormat.h"
#include "tools/kvjit/CompilerCommands.h"

ABSL_FLAG(bool, metadata, false, "also list every metadata key and value of the file");

namespace kvjit::cli {
namespace {

std::string RopeDescription(const model::ModelConfig& config) {
  std::string text = absl::StrCat(
      config.rope_style == model::RopeStyle::kNeox ? "neox" : "interleaved", ", theta ",
      config.rope_theta);
  switch (config.rope_scaling.kind) {
    case model::RopeScalingKind::kNone:
      break;
    case model::RopeScalingKind::kLinear:
      absl::StrAppend(&text, ", linear scaling x", config.rope_scaling.factor);
      break;
    case model::RopeScalingKind::kLlama3:
      absl::StrAppend(&text, ", llama3 scaling x", config.rope_scaling.factor);
      break;
  }
  return text;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", bytes, units[unit]);
}

absl::Status RunInspect(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL argument");
  KVJIT_ASSIGN_OR_RETURN(model::ModelFile model, model::OpenModelFile(arguments[0]));
  const model::ModelConfig& c = model.config;

  std::printf("model         %s\nformat        %s\narchitecture  %s\n", model.path.c_str(),
              model.format.c_str(), c.architecture.c_str());
  if (!c.name.empty()) std::printf("name          %s\n", c.name.c_str());
  std::printf("layers        %lld\nhidden        %lld\nffn           %lld\n"
              "heads         %lld\nkv_heads      %lld\nhead_dim      %lld\n"
              "vocab         %lld\ncontext       %lld\nrms_norm_eps  %g\nrope          %s\n"
              "tied_embed    %s\nqkv_bias      %s\n",
              static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.intermediate_size), static_cast<long long>(c.num_heads),
              static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
              static_cast<long long>(c.vocab_size), static_cast<long long>(c.context_length),
              c.rms_norm_eps, RopeDescription(c).c_str(), c.tied_embeddings ? "yes" : "no",
              c.qkv_bias ? "yes" : "no");

  int64_t parameters = 0;
  uint64_t weight_bytes = 0;
  std::map<std::string, int> storage_counts;
  for (const model::WeightInfo& w : model.weights->weights()) {
    parameters += w.element_count();
    weight_bytes += w.size_bytes;
    ++storage_counts[std::string(quant::StorageTypeName(w.storage))];
  }
  std::vector<std::string> storage_summary;
  for (const auto& [name, count] : storage_counts) {
    storage_summary.push_back(absl::StrCat(name, " x", count));
  }
  std::printf("parameters    %lld (%.1fM)\nweight bytes  %llu (%s)\nstorage       %s\n",
              static_cast<long long>(parameters), parameters / 1e6,
              static_cast<unsigned long long>(weight_bytes), HumanBytes(weight_bytes).c_str(),
              absl::StrJoin(storage_summary, ", ").c_str());

  // The seed formula, 2 x layers x kv_heads x head_dim x bytes per element,
  // for each cache type (--cache_dtype); the blocked ones' bytes per element
  // count their scales.
  for (const kvx::KvCacheFormat& format : kvx::kKvCacheFormats) {
    const std::optional<uint64_t> slot = kvx::KvSlotBytes(format, c.num_kv_heads, c.head_dim);
    if (!slot) {
      std::printf("kv cache %-7s n/a: head_dim %lld is not a multiple of its %lld-element blocks\n",
                  format.name, static_cast<long long>(c.head_dim),
                  static_cast<long long>(format.elements_per_block));
      continue;
    }
    const uint64_t per_token = 2 * static_cast<uint64_t>(c.num_layers) * *slot;
    std::printf("kv cache %-7s %llu bytes/token = 2 x %lld layers x %lld kv_heads x %lld head_dim x "
                "%.4g B; 2048 tokens: %s\n",
                format.name, static_cast<unsigned long long>(per_token), static_cast<long long>(c.num_layers),
                static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
                static_cast<double>(format.bytes_per_block) / static_cast<double>(format.elements_per_block),
                HumanBytes(static_cast<double>(per_token) * 2048).c_str());
  }

  std::printf("\ntensors (%zu)\n", model.weights->weights().size());
  for (const model::WeightInfo& w : model.weights->weights()) {
    std::printf("  %-32s %-5s [%s] %llu bytes\n", w.name.c_str(),
                std::string(quant::StorageTypeName(w.storage)).c_str(),
                absl::StrJoin(w.shape, ", ").c_str(),
                static_cast<unsigned long long>(w.size_bytes));
  }
  if (absl::GetFlag(FLAGS_metadata) && model.gguf() != nullptr) {
    std::printf("\nmetadata (%zu)\n", model.gguf()->metadata().size());
    for (const gguf::GgufMetadataEntry& entry : model.gguf()->metadata()) {
      std::printf("  %s = %s\n", std::string(entry.key).c_str(), entry.value.ToString().c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

Subcommand InspectCommand() { return CompilerCommand("inspect", RunInspect); }

}  // namespace kvjit::cli
