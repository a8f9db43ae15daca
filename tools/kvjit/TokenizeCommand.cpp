// kvjit tokenize MODEL TEXT: the token ids the model's tokenizer gives TEXT.

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "frontend/model/ModelFile.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/CompilerCommands.h"

ABSL_FLAG(bool, no_bos, false, "do not add BOS (or EOS) even where the model adds them");
ABSL_FLAG(bool, parse_special, false,
          "read the text of control tokens (such as <|im_start|>) in TEXT as those tokens");

namespace kvjit::cli {
namespace {

absl::Status RunTokenize(const std::vector<std::string>& arguments) {
  if (arguments.size() != 2) return absl::InvalidArgumentError("expected MODEL and TEXT");
  KVJIT_ASSIGN_OR_RETURN(model::ModelFile model, model::OpenModelFile(arguments[0]));
  KVJIT_ASSIGN_OR_RETURN(auto tokenizer, model::LoadTokenizer(model));
  KVJIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         tokenizer->Encode(arguments[1], !absl::GetFlag(FLAGS_no_bos),
                                           absl::GetFlag(FLAGS_parse_special)));
  std::printf("%s\n", absl::StrJoin(ids, " ").c_str());
  return absl::OkStatus();
}

}  // namespace

Subcommand TokenizeCommand() { return CompilerCommand("tokenize", RunTokenize); }

}  // namespace kvjit::cli
