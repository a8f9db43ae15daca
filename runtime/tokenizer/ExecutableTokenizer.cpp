#include "runtime/tokenizer/ExecutableTokenizer.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::tokenizer {

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromExecutable(
    const kvx::Executable& executable) {
  const kvx::Tokenizer* table = executable.tokenizer();
  if (table == nullptr || table->tokens() == nullptr) {
    return absl::InvalidArgumentError("the executable carries no tokenizer");
  }
  tokenizer::Vocabulary vocabulary;
  vocabulary.model = table->kind() == kvx::TokenizerKind::ByteLevelBpe
                         ? tokenizer::TokenizerModel::kByteLevelBpe
                         : tokenizer::TokenizerModel::kSentencePiece;
  if (table->pre_tokenizer() != nullptr && table->pre_tokenizer()->size() > 0) {
    KVJIT_ASSIGN_OR_RETURN(vocabulary.pre_tokenizer,
                           tokenizer::ParsePreTokenizer(table->pre_tokenizer()->string_view()));
  }
  for (const flatbuffers::String* token : *table->tokens()) vocabulary.tokens.push_back(token->str());
  if (table->token_types() != nullptr) {
    for (int32_t type : *table->token_types()) {
      vocabulary.token_types.push_back(static_cast<tokenizer::TokenType>(type));
    }
  }
  if (table->scores() != nullptr) {
    vocabulary.scores.assign(table->scores()->begin(), table->scores()->end());
  }
  if (table->merges() != nullptr) {
    for (const flatbuffers::String* merge : *table->merges()) {
      const std::string pair = merge->str();
      const size_t space = pair.find(' ');
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("the executable's tokenizer has a merge without a space: '", pair, "'"));
      }
      vocabulary.merges.emplace_back(pair.substr(0, space), pair.substr(space + 1));
    }
  }
  vocabulary.bos_id = table->bos_id();
  vocabulary.eos_id = table->eos_id();
  vocabulary.end_of_turn_id = table->eot_id();
  vocabulary.unknown_id = table->unk_id();
  vocabulary.padding_id = table->pad_id();
  vocabulary.add_bos_token = table->add_bos();
  vocabulary.add_eos_token = table->add_eos();
  vocabulary.add_space_prefix = table->add_space_prefix();
  vocabulary.space_prefix_once = table->space_prefix_once();
  return tokenizer::CreateTokenizer(std::move(vocabulary));
}

}  // namespace kvjit::tokenizer
