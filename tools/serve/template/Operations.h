#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_OPERATIONS_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_OPERATIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/serve/template/Value.h"

// What jinja2 (in Hugging Face's ImmutableSandboxedEnvironment) does with
// values: attribute and item lookup, Python's str/dict/list methods,
// operators, comparison and iteration. Errors carry Python's or jinja2's
// message, without a line (the evaluator adds it).
namespace kvjit::chat_template {

// The error an undefined value raises when used: its message.
absl::Status UndefinedError(const Value& undefined);

// obj.name: a method of obj's type first, then obj[name]; an undefined value
// (not an error) where neither exists.
absl::StatusOr<Value> GetAttribute(const Value& object, const std::string& name);
// obj[key]: the item first, then for a string key the attribute.
absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
// obj[start:stop:step] (each undefined where omitted).
absl::StatusOr<Value> GetSlice(const Value& object, const Value& start, const Value& stop, const Value& step);

// + - * / // % ** on numbers, strings and lists, as Python.
absl::StatusOr<Value> BinaryOperation(const std::string& op, const Value& left, const Value& right);
absl::StatusOr<Value> Negate(const Value& operand, bool minus);
// == != < > <= >= in, "not in".
absl::StatusOr<bool> Compare(const std::string& op, const Value& left, const Value& right);
// What a for loop iterates: a list's items, a dict's keys, a string's
// characters, nothing for an undefined value.
absl::StatusOr<List> Iterate(const Value& value);
// len(): code points of a string, items of a list or dict.
absl::StatusOr<int64_t> Length(const Value& value);

// Python's string helpers over UTF-8.
bool IsPythonSpace(char32_t c);
std::string PythonStrip(const std::string& text, const Value& chars, bool left, bool right);
// Python's str.replace: at most `count` replacements (all when negative).
std::string PythonReplace(const std::string& text, const std::string& old_text,
                          const std::string& new_text, int64_t count);
std::string AsciiUpper(const std::string& text);
std::string AsciiLower(const std::string& text);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_OPERATIONS_H_
