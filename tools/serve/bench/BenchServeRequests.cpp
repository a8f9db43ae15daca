#include "tools/serve/bench/BenchServeRequests.h"

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "frontend/gguf/GgufSplit.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::bench_serve {
namespace {

int64_t CountTokens(const tokenizer::Tokenizer& tokenizer, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> tokens =
      tokenizer.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  return tokens.ok() ? static_cast<int64_t>(tokens->size()) : -1;
}

// A prompt of about `length` tokens: random plain tokens decoded to text.
// BOS is one of them where the model adds it. Only tokens that are whole
// UTF-8 characters are drawn, so that the text is valid UTF-8 as JSON needs.
std::string RandomPrompt(const tokenizer::Tokenizer& tokenizer, int64_t length,
                         std::mt19937_64& random) {
  const tokenizer::Vocabulary& vocabulary = tokenizer.vocabulary();
  std::uniform_int_distribution<int32_t> pick(0, tokenizer.vocab_size() - 1);
  std::vector<int32_t> ids;
  const int64_t wanted = length - (vocabulary.add_bos_token ? 1 : 0);
  while (static_cast<int64_t>(ids.size()) < wanted) {
    const int32_t id = pick(random);
    if (id < static_cast<int32_t>(vocabulary.token_types.size()) &&
        vocabulary.token_types[id] != tokenizer::TokenType::kNormal) {
      continue;
    }
    const std::string piece = tokenizer.TokenToPiece(id);
    if (piece.empty() || !tokenizer::CheckUtf8(piece).ok()) continue;
    ids.push_back(id);
  }
  return tokenizer.Decode(ids);
}

}  // namespace

absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  // A split's tokenizer is in its first part, whichever part is named.
  KVJIT_ASSIGN_OR_RETURN(gguf::GgufModelFiles files, gguf::GgufModelFiles::Open(path));
  return tokenizer::LoadTokenizerFromGguf(files.metadata());
}

std::vector<BenchServeRequest> RandomRequests(const tokenizer::Tokenizer& tokenizer, int64_t count,
                                              int64_t input_len, int64_t output_len,
                                              uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<BenchServeRequest> requests;
  for (int64_t i = 0; i < count; ++i) {
    BenchServeRequest request;
    request.prompt = RandomPrompt(tokenizer, input_len, random);
    request.max_tokens = output_len;
    request.prompt_tokens = CountTokens(tokenizer, request.prompt);
    requests.push_back(std::move(request));
  }
  return requests;
}

absl::StatusOr<std::vector<BenchServeRequest>> ReadBenchServeRequests(
    const std::string& path, const tokenizer::Tokenizer* tokenizer, uint64_t seed) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON array of requests"));
  }
  std::mt19937_64 random(seed);
  std::vector<BenchServeRequest> requests;
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& entry = json[i];
    const std::string where = absl::StrCat(path, ": request ", i);
    if (!entry.is_object() || !entry.contains("max_new_tokens") ||
        !entry["max_new_tokens"].is_number_integer() || entry["max_new_tokens"].get<int64_t>() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs \"max_new_tokens\", a positive integer"));
    }
    BenchServeRequest request;
    request.max_tokens = entry["max_new_tokens"].get<int64_t>();
    if (entry.contains("prompt") && entry["prompt"].is_string()) {
      request.prompt = entry["prompt"].get<std::string>();
    } else if (entry.contains("prompt_tokens") && entry["prompt_tokens"].is_number_integer() &&
               entry["prompt_tokens"].get<int64_t>() > 0) {
      if (tokenizer == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"prompt_tokens\" needs --tokenizer to make the prompt"));
      }
      request.prompt = RandomPrompt(*tokenizer, entry["prompt_tokens"].get<int64_t>(), random);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs \"prompt\" (text) or \"prompt_tokens\" (a positive count)"));
    }
    if (tokenizer != nullptr) request.prompt_tokens = CountTokens(*tokenizer, request.prompt);
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace kvjit::bench_serve
