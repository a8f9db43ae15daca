#include "runtime/grammar/GrammarCompiler.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/grammar/CompiledGrammarState.h"
#include "xgrammar/xgrammar.h"

namespace kvjit::grammar {
namespace {

// The longest run of whitespace between two JSON tokens, as llama.cpp's
// json_schema_to_grammar allows (a newline and indentation): unbounded, a
// sampled small model can spend its whole budget on blank lines.
constexpr int kMaxWhitespace = 20;

// An EBNF string literal of `text`: xgrammar reads C escapes in literals.
std::string EbnfLiteral(absl::string_view text) {
  std::string literal = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      literal += '\\';
      literal += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      literal += absl::StrFormat("\\x%02x", byte);
    } else {
      literal += c;
    }
  }
  return literal + "\"";
}

// xgrammar's messages open with the time and where in its sources the
// check failed ("[hh:mm:ss] path/file.cc:123: Check failed: (...) is
// false: "); users need only what follows, on one line.
std::string WithoutSourceLocation(std::string message) {
  const size_t source = message.find(".cc:");
  if (source != std::string::npos) {
    const size_t colon = message.find(": ", source);
    if (colon != std::string::npos) message.erase(0, colon + 2);
  }
  constexpr absl::string_view kCheck = "Check failed: ";
  if (absl::StartsWith(message, kCheck)) {
    const size_t colon = message.find("is false: ");
    if (colon != std::string::npos) message.erase(0, colon + 10);
  }
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  return message;
}

xgrammar::Grammar Literal(absl::string_view text) {
  return xgrammar::Grammar::FromEBNF(absl::StrCat("root ::= ", EbnfLiteral(text)));
}

// Alternatives of 1 to max_repeats items: xgrammar composes grammars by
// concatenation and union only.
xgrammar::Grammar TaggedJson(const GrammarSpec& spec) {
  std::vector<xgrammar::Grammar> parts;
  if (!spec.prefix.empty()) parts.push_back(Literal(spec.prefix));
  parts.push_back(xgrammar::Grammar::FromJSONSchema(spec.text, /*any_whitespace=*/true,
                                                    std::nullopt, std::nullopt,
                                                    /*strict_mode=*/true, kMaxWhitespace));
  if (!spec.suffix.empty()) parts.push_back(Literal(spec.suffix));
  const xgrammar::Grammar item = xgrammar::Grammar::Concat(parts);
  std::vector<xgrammar::Grammar> alternatives;
  std::vector<xgrammar::Grammar> sequence = {item};
  for (int count = 1; count <= spec.max_repeats; ++count) {
    if (count > 1) {
      if (!spec.separator.empty()) sequence.push_back(Literal(spec.separator));
      sequence.push_back(item);
    }
    alternatives.push_back(sequence.size() == 1 ? item : xgrammar::Grammar::Concat(sequence));
  }
  return alternatives.size() == 1 ? alternatives.front() : xgrammar::Grammar::Union(alternatives);
}

}  // namespace

struct GrammarCompiler::Compiler {
  xgrammar::GrammarCompiler compiler;
  int32_t vocab_size;
};

GrammarCompiler::GrammarCompiler(std::unique_ptr<Compiler> compiler)
    : compiler_(std::move(compiler)) {}
GrammarCompiler::~GrammarCompiler() = default;

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(
    const tokenizer::Tokenizer& tokenizer, int64_t logits_vocab_size) {
  if (logits_vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar: the model's vocabulary size is ", logits_vocab_size));
  }
  // Each token as the bytes it decodes to; control tokens decode to nothing,
  // which xgrammar takes as a token no grammar allows (but a stop token).
  const int32_t tokens = std::min<int32_t>(tokenizer.vocab_size(), logits_vocab_size);
  std::vector<std::string> pieces;
  pieces.reserve(tokens);
  std::vector<int32_t> stop_tokens;
  for (int32_t id = 0; id < tokens; ++id) {
    pieces.push_back(tokenizer.TokenToPiece(id));
    if (tokenizer.IsEndOfGeneration(id)) stop_tokens.push_back(id);
  }
  try {
    xgrammar::TokenizerInfo info(pieces, xgrammar::VocabType::RAW,
                                 static_cast<int>(logits_vocab_size), stop_tokens);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::unique_ptr<GrammarCompiler>(new GrammarCompiler(std::make_unique<Compiler>(
        Compiler{xgrammar::GrammarCompiler(info, threads), static_cast<int32_t>(logits_vocab_size)})));
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat("grammar: xgrammar refused the vocabulary: ", WithoutSourceLocation(error.what())));
  }
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(
    const GrammarSpec& spec) {
  const std::string kind(GrammarKindName(spec.kind));
  if (spec.kind == GrammarSpec::Kind::kChoice && spec.choices.empty()) {
    return absl::InvalidArgumentError("choice: the list of choices is empty");
  }
  if ((spec.kind == GrammarSpec::Kind::kRegex || spec.kind == GrammarSpec::Kind::kEbnf ||
       spec.kind == GrammarSpec::Kind::kJsonSchema || spec.kind == GrammarSpec::Kind::kTaggedJson) &&
      spec.text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kind, ": it is empty"));
  }
  if (spec.kind == GrammarSpec::Kind::kTaggedJson && spec.max_repeats < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, ": max_repeats must be at least 1, got ", spec.max_repeats));
  }
  try {
    xgrammar::GrammarCompiler& compiler = compiler_->compiler;
    std::optional<xgrammar::CompiledGrammar> compiled;
    switch (spec.kind) {
      case GrammarSpec::Kind::kJsonObject:
        // An object, as OpenAI's json_object promises (xgrammar's built-in
        // JSON grammar takes any value).
        compiled = compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/true,
                                              std::nullopt, std::nullopt, /*strict_mode=*/true,
                                              kMaxWhitespace);
        break;
      case GrammarSpec::Kind::kJsonSchema:
        compiled = compiler.CompileJSONSchema(spec.text, /*any_whitespace=*/true, std::nullopt,
                                              std::nullopt, /*strict_mode=*/true, kMaxWhitespace);
        break;
      case GrammarSpec::Kind::kRegex:
        compiled = compiler.CompileRegex(spec.text);
        break;
      case GrammarSpec::Kind::kEbnf:
        compiled = compiler.CompileGrammar(spec.text);
        break;
      case GrammarSpec::Kind::kChoice: {
        std::string ebnf = "root ::= ";
        for (size_t i = 0; i < spec.choices.size(); ++i) {
          if (i > 0) ebnf += " | ";
          ebnf += EbnfLiteral(spec.choices[i]);
        }
        compiled = compiler.CompileGrammar(ebnf);
        break;
      }
      case GrammarSpec::Kind::kTaggedJson:
        compiled = compiler.CompileGrammar(TaggedJson(spec));
        break;
    }
    return std::shared_ptr<const CompiledGrammar>(new CompiledGrammar(
        std::make_unique<CompiledGrammar::Compiled>(std::move(*compiled), compiler_->vocab_size)));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, ": ", WithoutSourceLocation(error.what())));
  }
}

}  // namespace kvjit::grammar
