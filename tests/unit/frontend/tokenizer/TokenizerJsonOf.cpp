#include "tests/unit/frontend/tokenizer/TokenizerJsonOf.h"

namespace kvjit::tokenizer {

std::string TokenizerJsonOf(const Vocabulary& vocabulary, const nlohmann::json& pre_tokenizer) {
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added_tokens = nlohmann::json::array();
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    vocab[vocabulary.tokens[id]] = id;
    const TokenType type = vocabulary.token_types[id];
    if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      added_tokens.push_back({{"id", id},
                              {"content", vocabulary.tokens[id]},
                              {"normalized", false},
                              {"special", type == TokenType::kControl}});
    }
  }
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [left, right] : vocabulary.merges) merges.push_back({left, right});
  const nlohmann::json json = {
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
  return json.dump();
}

}  // namespace kvjit::tokenizer
