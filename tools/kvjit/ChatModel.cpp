#include "tools/kvjit/ChatModel.h"

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/kv/KvBlockManager.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "tools/kvjit/SharedFlags.h"

ABSL_FLAG(double, memory_utilization, 0,
          "the share of the machine's memory serve or chat may take, as vLLM's "
          "gpu_memory_utilization: the KV pool gets what it leaves after the weights and the "
          "activation arena (its pages resident only once written); 0: --kv_pool_mib decides");

namespace kvjit::cli {
namespace {

// The KV pool's blocks: what --memory_utilization of the machine's memory
// leaves after the weights and the activation arena (vLLM's
// gpu_memory_utilization, for the CPU's memory), else --kv_pool_mib, else
// the budget the executable was compiled for (--kv_memory_mib).
absl::StatusOr<int64_t> PoolBlocks(const runtime::Executable& executable) {
  const kvx::KvLayout& layout = executable.kv_layout();
  const double utilization = absl::GetFlag(FLAGS_memory_utilization);
  if (utilization != 0) {
    if (!(utilization > 0 && utilization <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory_utilization must be in (0, 1], got ", utilization));
    }
    if (DeviceFromFlags(executable) != "cpu") {
      return absl::UnimplementedError(
          "--memory_utilization sizes the pool from the CPU's memory; on a GPU give --kv_pool_mib");
    }
    const double total = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    double weights = 0;
    for (const MappedFile& file : executable.weight_files()) weights += file.bytes().size();
    const double arena = static_cast<double>(executable.program().arena_bytes());
    const double budget = utilization * total - weights - arena;
    if (budget < static_cast<double>(layout.bytes_per_block())) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "--memory_utilization %.2f of %.0f MiB leaves no KV block after the weights (%.0f MiB) "
          "and the activation arena (%.0f MiB)",
          utilization, total / (1 << 20), weights / (1 << 20), arena / (1 << 20)));
    }
    return kv::BlocksForBudget(static_cast<int64_t>(budget), static_cast<int64_t>(layout.bytes_per_block()));
  }
  // 0: the budget the executable was compiled for, since a conversation
  // grows turn by turn and the prefix cache keeps earlier turns' blocks for
  // as long as the pool has room.
  const int64_t mib = absl::GetFlag(FLAGS_kv_pool_mib);
  if (mib < 0) return absl::InvalidArgumentError(absl::StrCat("--kv_pool_mib must be 0 or more, got ", mib));
  if (mib == 0) return static_cast<int64_t>(layout.default_blocks());
  return kv::BlocksForBudget(mib << 20, static_cast<int64_t>(layout.bytes_per_block()));
}

}  // namespace

absl::StatusOr<ChatModel> OpenChatModel(const std::string& model_or_kvx) {
  ChatModel model;
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(model_or_kvx, CompileOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(model.executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                         tokenizer::TokenizerFromExecutable(model.executable->root()));
  KVJIT_ASSIGN_OR_RETURN(std::string override_template, ChatTemplateFromFlags());
  KVJIT_ASSIGN_OR_RETURN(
      model.codec,
      serve::ServeTextCodec::Create(std::move(tokenizer), *model.executable->root().tokenizer(),
                                    override_template));
  KVJIT_ASSIGN_OR_RETURN(int64_t blocks, PoolBlocks(*model.executable));
  KVJIT_ASSIGN_OR_RETURN(model.runner,
                         runtime::CreateStepRunner(*model.executable, blocks,
                                                   absl::GetFlag(FLAGS_threads),
                                                   DeviceFromFlags(*model.executable)));
  return model;
}

}  // namespace kvjit::cli
