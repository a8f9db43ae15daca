// Every case of tests/data/chat_templates/cases.json (written by
// tools/scripts/chat_template_cases.py with Python's jinja2, as Hugging
// Face's apply_chat_template renders; among its templates the published ones
// of tests/data/chat_templates/real/) renders byte for byte the same here,
// or fails as jinja2 failed; and mutated templates never crash.

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/TestPaths.h"
#include "tools/serve/template/ChatTemplate.h"

namespace kvjit::chat_template {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

Json LoadCases() {
  const std::string path = testing::TestDataPath("chat_templates/cases.json");
  EXPECT_FALSE(path.empty()) << "tests/data/chat_templates/cases.json is missing";
  if (path.empty()) return Json();
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return Json::parse(text.str());
}

const Json& Cases() {
  static const Json* cases = new Json(LoadCases());
  return *cases;
}

// What jinja2 rendered with: the template's variables (its model's special
// tokens; tools=None and documents=None, as apply_chat_template passes them),
// then the context's own members over them.
Json CaseContext(const Json& document, const std::string& template_name, const std::string& context_name) {
  Json context = Json::object();
  if (document.contains("template_variables") && document["template_variables"].contains(template_name)) {
    context = document["template_variables"][template_name];
  }
  for (const auto& [key, value] : document["contexts"][context_name].items()) context[key] = value;
  return context;
}

TEST(ChatTemplateCases, RenderAsJinja2Does) {
  const Json& document = Cases();
  ASSERT_TRUE(document.is_object());
  RenderOptions options;
  options.now = document["now"].get<std::time_t>();
  int rendered = 0, failed_as_expected = 0;
  for (const Json& test_case : document["cases"]) {
    const std::string name = test_case["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::string template_name = test_case["template"].get<std::string>();
    const std::string source = document["templates"][template_name].get<std::string>();
    const Json context = CaseContext(document, template_name, test_case["context"].get<std::string>());
    absl::StatusOr<std::string> output;
    absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
    if (parsed.ok()) {
      output = parsed->Render(context, options);
    } else {
      output = parsed.status();
    }
    if (test_case.contains("expected")) {
      ASSERT_TRUE(output.ok()) << name << ": " << output.status();
      EXPECT_EQ(*output, test_case["expected"].get<std::string>()) << name;
      ++rendered;
      continue;
    }
    const Json& error = test_case["error"];
    const std::string type = error["type"].get<std::string>();
    const std::string message = error["message"].get<std::string>();
    ASSERT_FALSE(output.ok()) << name << ": rendered '" << *output << "' where jinja2 raised " << type << ": "
                              << message;
    const std::string ours(output.status().message());
    if (type == "TemplateError") {
      // raise_exception: exactly the template's message.
      EXPECT_EQ(ours, message) << name;
      EXPECT_TRUE(IsTemplateException(output.status())) << name;
    } else {
      EXPECT_FALSE(IsTemplateException(output.status())) << name;
      EXPECT_TRUE(absl::StartsWith(ours, "line ")) << name << ": " << ours;
    }
    if (error.contains("line")) {
      EXPECT_TRUE(absl::StartsWith(ours, absl::StrCat("line ", error["line"].get<int>(), ": ")))
          << name << ": jinja2 says line " << error["line"] << " (" << message << "); we say " << ours;
    }
    if (type == "UndefinedError") {
      EXPECT_TRUE(absl::StrContains(ours, message)) << name << ": " << ours;
    }
    ++failed_as_expected;
  }
  EXPECT_GT(rendered, 350);
  EXPECT_GT(failed_as_expected, 100);
}

// The published templates the cases render are the files of
// tests/data/chat_templates/real/ byte for byte (a regenerated cases.json or
// an edited file cannot drift apart unseen), and every file there is used.
TEST(ChatTemplateCases, PublishedTemplatesAreTheFilesBytes) {
  const Json& document = Cases();
  ASSERT_TRUE(document.is_object());
  const std::string readme = testing::TestDataPath("chat_templates/real/README.md");
  ASSERT_FALSE(readme.empty()) << "tests/data/chat_templates/real/ is missing";
  int published = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(readme).parent_path())) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = "real/" + entry.path().stem().string();
    SCOPED_TRACE(name);
    ASSERT_TRUE(document["templates"].contains(name)) << name << " is not in cases.json";
    EXPECT_EQ(document["templates"][name].get<std::string>(), ReadBytes(entry.path().string()));
    EXPECT_TRUE(document["template_variables"].contains(name));
    ++published;
  }
  int in_cases = 0;
  for (const auto& [name, source] : document["templates"].items()) in_cases += absl::StartsWith(name, "real/");
  EXPECT_EQ(published, in_cases);
  EXPECT_GE(published, 10);
}

// Random edits of the corpus's templates (deleting, duplicating and
// inserting characters, especially Jinja's delimiters) parse or fail with an
// error, and render or fail with one: never a crash or a hang.
TEST(ChatTemplateCases, MutatedTemplatesNeverCrash) {
  const Json& document = Cases();
  ASSERT_TRUE(document.is_object());
  std::vector<std::string> sources;
  for (const auto& [name, source] : document["templates"].items()) sources.push_back(source.get<std::string>());
  std::vector<const Json*> contexts;
  for (const auto& [name, context] : document["contexts"].items()) contexts.push_back(&context);
  ASSERT_FALSE(sources.empty());
  const char* const kPieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"", "|",
                                 "endfor", "endif", " if ", " else ", "loop", ".", ":", ",", "~", "\n",
                                 "{% for x in messages %}", "{% endfor %}", "{% set ns.x = 1 %}", "namespace(",
                                 "macro ", "raise_exception(", "[::-1]", " is ", " not ", "\\"};
  std::mt19937 random(1234);
  int parsed = 0, rendered = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string source = sources[random() % sources.size()];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !source.empty(); ++e) {
      const size_t at = random() % source.size();
      switch (random() % 4) {
        case 0: source.erase(at, 1 + random() % 8); break;
        case 1: source.insert(at, kPieces[random() % (sizeof(kPieces) / sizeof(kPieces[0]))]); break;
        case 2: source.insert(at, source.substr(random() % source.size(), random() % 16)); break;
        default: source[at] = static_cast<char>(random() % 128); break;
      }
    }
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse(source);
    if (!chat.ok()) {
      EXPECT_FALSE(chat.status().message().empty());
      continue;
    }
    ++parsed;
    RenderOptions options;
    options.now = 0;
    absl::StatusOr<std::string> output = chat->Render(*contexts[random() % contexts.size()], options);
    if (output.ok()) ++rendered;
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rendered, 0);
}

}  // namespace
}  // namespace kvjit::chat_template
