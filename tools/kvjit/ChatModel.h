#ifndef KVJIT_TOOLS_KVJIT_CHATMODEL_H_
#define KVJIT_TOOLS_KVJIT_CHATMODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "tools/serve/ServeTextCodec.h"

namespace kvjit::cli {

// A model opened for a conversation that goes on (kvjit serve, kvjit chat):
// the executable (compiled on the fly where needed), its tokenizer inside
// the chat codec (--chat_template or the model's template), and a step
// runner over a KV pool sized by --memory_utilization or --kv_pool_mib.
struct ChatModel {
  std::unique_ptr<runtime::Executable> executable;
  std::unique_ptr<serve::ServeTextCodec> codec;
  std::unique_ptr<runtime::StepRunner> runner;
};

absl::StatusOr<ChatModel> OpenChatModel(const std::string& model_or_kvx);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_CHATMODEL_H_
