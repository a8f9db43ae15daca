#include "tools/kvjit/GrammarFlags.h"

#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

ABSL_FLAG(std::string, json_schema, "",
          "constrain the output to JSON valid under the JSON schema in this file (xgrammar)");
ABSL_FLAG(bool, json, false, "constrain the output to a JSON object");
ABSL_FLAG(std::string, grammar, "",
          "constrain the output to the GBNF/EBNF grammar in this file (its `root` rule)");
ABSL_FLAG(std::string, regex, "", "constrain the output to match this regular expression");

namespace kvjit::cli {
namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& flag, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read ", path));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> WithGrammarFlags(std::vector<std::string> names) {
  for (const char* flag : {"json_schema", "json", "grammar", "regex"}) names.push_back(flag);
  return names;
}

absl::StatusOr<std::optional<grammar::GrammarSpec>> GrammarFromFlags() {
  using Kind = grammar::GrammarSpec::Kind;
  std::vector<std::string> given;
  std::optional<grammar::GrammarSpec> spec;
  if (const std::string path = absl::GetFlag(FLAGS_json_schema); !path.empty()) {
    given.push_back("--json_schema");
    auto text = ReadWhole("json_schema", path);
    if (!text.ok()) return text.status();
    spec = grammar::GrammarSpec{Kind::kJsonSchema, *std::move(text), {}};
  }
  if (absl::GetFlag(FLAGS_json)) {
    given.push_back("--json");
    spec = grammar::GrammarSpec{Kind::kJsonObject, "", {}};
  }
  if (const std::string path = absl::GetFlag(FLAGS_grammar); !path.empty()) {
    given.push_back("--grammar");
    auto text = ReadWhole("grammar", path);
    if (!text.ok()) return text.status();
    spec = grammar::GrammarSpec{Kind::kEbnf, *std::move(text), {}};
  }
  if (const std::string regex = absl::GetFlag(FLAGS_regex); !regex.empty()) {
    given.push_back("--regex");
    spec = grammar::GrammarSpec{Kind::kRegex, regex, {}};
  }
  if (given.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(given, ", "), " each constrain the output; give one of them"));
  }
  return spec;
}

}  // namespace kvjit::cli
