#include "tools/serve/template/Filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/serve/template/Operations.h"

namespace kvjit::chat_template {
namespace {

#define KVJIT_FILTER_ASSIGN(lhs, expr)                   \
  auto KVJIT_FILTER_CAT(_r, __LINE__) = (expr);          \
  if (!KVJIT_FILTER_CAT(_r, __LINE__).ok()) return KVJIT_FILTER_CAT(_r, __LINE__).status(); \
  lhs = std::move(*KVJIT_FILTER_CAT(_r, __LINE__))
#define KVJIT_FILTER_CAT_INNER(a, b) a##b
#define KVJIT_FILTER_CAT(a, b) KVJIT_FILTER_CAT_INNER(a, b)

// Positional argument `index` (after the operand) or keyword `name`.
Value Arg(const CallArguments& arguments, size_t index, const char* name, Value fallback = Value::Undefined()) {
  if (index < arguments.positional.size()) return arguments.positional[index];
  for (const auto& [keyword, value] : arguments.keyword) {
    if (keyword == name) return value;
  }
  return fallback;
}

bool Given(const Value& value) { return !value.is_undefined() && !value.is_none(); }

// jinja2's make_attrgetter: "a.b.0" looked up part by part, item first.
absl::StatusOr<Value> GetPath(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return GetItem(item, attribute);
  Value current = item;
  const std::string path = attribute.Str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int64_t index;
    Value key = absl::SimpleAtoi(part, &index) ? Value::Int(index) : Value::String(part);
    KVJIT_FILTER_ASSIGN(current, GetItem(current, key));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string JinjaTitle(const std::string& text) {
  // re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower().
  const std::u32string chars = DecodeUtf8(text);
  const auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPythonSpace(c);
  };
  std::string out;
  size_t i = 0;
  while (i < chars.size()) {
    size_t j = i;
    const bool sep = separator(chars[i]);
    while (j < chars.size() && separator(chars[j]) == sep) ++j;
    const std::string piece = EncodeUtf8(chars.substr(i, j - i));
    if (sep) {
      out += piece;
    } else {
      const std::u32string p = chars.substr(i, j - i);
      out += AsciiUpper(EncodeUtf8(p.substr(0, 1))) + AsciiLower(EncodeUtf8(p.substr(1)));
    }
    i = j;
  }
  return out;
}

// A sort key: lower-cased strings unless case_sensitive.
Value SortKey(const Value& value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value::String(AsciiLower(value.string_value()));
  return value;
}

absl::Status SortValues(List& items, bool reverse, bool case_sensitive, const Value& attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (Given(attribute)) {
      KVJIT_FILTER_ASSIGN(key, GetPath(item, attribute));
    }
    keyed.emplace_back(SortKey(key, case_sensitive), item);
  }
  absl::Status error = absl::OkStatus();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    absl::StatusOr<bool> less = Compare("<", reverse ? b.first : a.first, reverse ? a.first : b.first);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  if (!error.ok()) return error;
  items.clear();
  for (auto& [key, item] : keyed) items.push_back(std::move(item));
  return absl::OkStatus();
}

absl::StatusOr<Value> SelectOrReject(const Value& operand, CallArguments& arguments, bool by_attribute, bool select) {
  KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
  size_t next = 0;
  Value attribute;
  if (by_attribute) attribute = Arg(arguments, next++, "attribute");
  Value test_name = Arg(arguments, next++, "__test");
  CallArguments test_arguments;
  for (size_t i = next; i < arguments.positional.size(); ++i) test_arguments.positional.push_back(arguments.positional[i]);
  List out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      KVJIT_FILTER_ASSIGN(subject, GetPath(item, attribute));
    }
    bool passed;
    if (test_name.is_undefined()) {
      passed = subject.Truthy();
    } else {
      if (!HasTest(test_name.Str())) return absl::InvalidArgumentError(absl::StrCat("No test named '", test_name.Str(), "'"));
      KVJIT_FILTER_ASSIGN(passed, ApplyTest(test_name.Str(), subject, test_arguments));
    }
    if (passed == select) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Map(const Value& operand, CallArguments& arguments) {
  KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
  List out;
  const Value attribute = Arg(arguments, 99, "attribute");
  if (!attribute.is_undefined()) {
    const Value fallback = Arg(arguments, 99, "default");
    for (const Value& item : items) {
      KVJIT_FILTER_ASSIGN(Value value, GetPath(item, attribute));
      if (value.is_undefined() && !fallback.is_undefined()) value = fallback;
      out.push_back(value);
    }
    return Value::MakeList(std::move(out));
  }
  if (arguments.positional.empty()) return Value::MakeList(std::move(out));
  const std::string filter = arguments.positional[0].Str();
  if (!HasFilter(filter)) return absl::InvalidArgumentError(absl::StrCat("No filter named '", filter, "'"));
  CallArguments rest;
  rest.positional.assign(arguments.positional.begin() + 1, arguments.positional.end());
  rest.keyword = arguments.keyword;
  for (const Value& item : items) {
    CallArguments copy = rest;
    KVJIT_FILTER_ASSIGN(Value value, ApplyFilter(filter, item, copy));
    out.push_back(value);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(const Value& operand, CallArguments& arguments) {
  const Value indent = Arg(arguments, 1, "indent");
  const Value separators = Arg(arguments, 2, "separators");
  const Value sort_keys = Arg(arguments, 3, "sort_keys");
  int indent_width = -1;
  if (Given(indent)) {
    if (!indent.is_int()) return absl::InvalidArgumentError("tojson: indent must be an integer");
    indent_width = static_cast<int>(std::max<int64_t>(0, indent.int_value()));
  }
  std::string item_separator = indent_width >= 0 ? "," : ", ";
  std::string key_separator = ": ";
  if (Given(separators)) {
    if (!separators.is_list() || separators.list().size() != 2) {
      return absl::InvalidArgumentError("tojson: separators must be a pair of strings");
    }
    item_separator = separators.list()[0].Str();
    key_separator = separators.list()[1].Str();
  }
  KVJIT_FILTER_ASSIGN(std::string json, operand.ToJson(indent_width, item_separator, key_separator, sort_keys.Truthy()));
  if (!Arg(arguments, 0, "ensure_ascii").Truthy()) return Value::String(std::move(json));
  // ensure_ascii: every non-ASCII character (only ever inside a string) as
  // \uXXXX, beyond the BMP as a surrogate pair.
  std::string ascii;
  char buffer[16];
  for (char32_t c : DecodeUtf8(json)) {
    if (c < 0x80) {
      ascii += static_cast<char>(c);
    } else if (c < 0x10000) {
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
      ascii += buffer;
    } else {
      const char32_t v = c - 0x10000;
      std::snprintf(buffer, sizeof(buffer), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      ascii += buffer;
    }
  }
  return Value::String(std::move(ascii));
}

std::string Indent(std::string text, const Value& width, bool first, bool blank) {
  const std::string indention = width.is_string() ? width.string_value()
                                                  : std::string(static_cast<size_t>(std::max<int64_t>(0, width.is_undefined() ? 4 : width.int_value())), ' ');
  text += "\n";
  std::vector<std::string> lines;
  {
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') {
        lines.push_back(text.substr(start, i - start));
        start = i + 1;
      }
    }
  }
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (first) out = indention + out;
  return out;
}

double PythonRound(double value, int64_t precision) {
  const double scale = std::pow(10.0, static_cast<double>(precision));
  return std::nearbyint(value * scale) / scale;
}

const std::set<std::string>& FilterNames() {
  static const std::set<std::string> names = {
      "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float",
      "forceescape", "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
      "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string",
      "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};
  return names;
}

const std::set<std::string>& TestNames() {
  static const std::set<std::string> names = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "float",
      "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne",
      "none", "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper", "==", "!=", "<",
      "<=", ">", ">="};
  return names;
}

}  // namespace

bool HasFilter(const std::string& name) { return FilterNames().count(name) > 0; }
bool HasTest(const std::string& name) { return TestNames().count(name) > 0; }

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand, CallArguments& arguments) {
  if (name == "default" || name == "d") {
    const Value fallback = Arg(arguments, 0, "default_value", Value::String(""));
    const bool boolean = Arg(arguments, 1, "boolean").Truthy();
    if (operand.is_undefined() || (boolean && !operand.Truthy())) return fallback;
    return operand;
  }
  if (name == "length" || name == "count") {
    KVJIT_FILTER_ASSIGN(int64_t length, Length(operand));
    return Value::Int(length);
  }
  if (name == "string") return Value::String(operand.Str());
  if (name == "safe") return operand.is_string() ? operand : Value::String(operand.Str());
  if (name == "e" || name == "escape" || name == "forceescape") return Value::String(HtmlEscape(operand.Str()));
  if (name == "trim") return Value::String(PythonStrip(operand.Str(), Arg(arguments, 0, "chars"), true, true));
  if (name == "upper") return Value::String(AsciiUpper(operand.Str()));
  if (name == "lower") return Value::String(AsciiLower(operand.Str()));
  if (name == "capitalize") {
    const std::u32string chars = DecodeUtf8(operand.Str());
    return Value::String(AsciiUpper(EncodeUtf8(chars.substr(0, 1))) + AsciiLower(EncodeUtf8(chars.size() > 1 ? chars.substr(1) : U"")));
  }
  if (name == "title") return Value::String(JinjaTitle(operand.Str()));
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : DecodeUtf8(operand.Str())) {
      const bool word = c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xAA;
      if (word && !in_word) ++words;
      in_word = word;
    }
    return Value::Int(words);
  }
  if (name == "replace") {
    const Value count = Arg(arguments, 2, "count");
    return Value::String(PythonReplace(operand.Str(), Arg(arguments, 0, "old").Str(),
                                       Arg(arguments, 1, "new").Str(),
                                       Given(count) ? count.int_value() : -1));
  }
  if (name == "items") {
    if (operand.is_undefined()) return Value::MakeList();
    if (!operand.is_dict()) return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
    List items;
    for (const auto& [key, value] : operand.dict()) items.push_back(Value::MakeTuple({key, value}));
    return Value::MakeList(std::move(items));
  }
  if (name == "list") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    return Value::MakeList(std::move(items));
  }
  if (name == "first" || name == "last") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    if (items.empty()) {
      return Value::Undefined(name == "first" ? "No first item, sequence was empty." : "No last item, sequence was empty.");
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (operand.is_string()) {
      std::u32string chars = DecodeUtf8(operand.string_value());
      std::reverse(chars.begin(), chars.end());
      return Value::String(EncodeUtf8(chars));
    }
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "join") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    const std::string separator = Arg(arguments, 0, "d", Value::String("")).Str();
    const Value attribute = Arg(arguments, 1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (Given(attribute)) {
        KVJIT_FILTER_ASSIGN(item, GetPath(item, attribute));
      }
      if (i > 0) out += separator;
      out += item.Str();
    }
    return Value::String(out);
  }
  if (name == "tojson") return ToJsonFilter(operand, arguments);
  if (name == "abs") {
    if (operand.is_float()) return Value::Float(std::fabs(operand.number_value()));
    if (operand.is_number()) return Value::Int(std::llabs(operand.int_value()));
    return absl::InvalidArgumentError("bad operand type for abs()");
  }
  if (name == "round") {
    const Value precision_value = Arg(arguments, 0, "precision", Value::Int(0));
    const std::string method = Arg(arguments, 1, "method", Value::String("common")).Str();
    if (!operand.is_number()) return absl::InvalidArgumentError("round: the value is not a number");
    const int64_t precision = precision_value.int_value();
    const double x = operand.number_value();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
    if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
    if (method != "common") return absl::InvalidArgumentError("method must be common, ceil or floor");
    if (!operand.is_float()) return Value::Int(operand.int_value());
    return Value::Float(PythonRound(x, precision));
  }
  if (name == "int") {
    const Value fallback = Arg(arguments, 0, "default", Value::Int(0));
    if (operand.is_float()) return Value::Int(static_cast<int64_t>(operand.number_value()));
    if (operand.is_number()) return Value::Int(operand.int_value());
    if (operand.is_string()) {
      const std::string text = PythonStrip(operand.string_value(), Value::None(), true, true);
      int64_t i;
      if (absl::SimpleAtoi(text, &i)) return Value::Int(i);
      double d;
      if (absl::SimpleAtod(text, &d) && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = Arg(arguments, 0, "default", Value::Float(0.0));
    if (operand.is_number()) return Value::Float(operand.number_value());
    double d;
    if (operand.is_string() && absl::SimpleAtod(operand.string_value(), &d)) return Value::Float(d);
    return fallback;
  }
  if (name == "unique") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    const bool case_sensitive = Arg(arguments, 0, "case_sensitive").Truthy();
    const Value attribute = Arg(arguments, 1, "attribute");
    List out;
    List seen;
    for (const Value& item : items) {
      Value key = item;
      if (Given(attribute)) {
        KVJIT_FILTER_ASSIGN(key, GetPath(item, attribute));
      }
      key = SortKey(key, case_sensitive);
      bool found = false;
      for (const Value& s : seen) found = found || s.Equals(key);
      if (!found) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sort") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    if (absl::Status s = SortValues(items, Arg(arguments, 0, "reverse").Truthy(), Arg(arguments, 1, "case_sensitive").Truthy(),
                                    Arg(arguments, 2, "attribute"));
        !s.ok()) {
      return s;
    }
    return Value::MakeList(std::move(items));
  }
  if (name == "dictsort") {
    if (!operand.is_dict()) return absl::InvalidArgumentError("You can only sort by either 'key' or 'value'");
    const bool case_sensitive = Arg(arguments, 0, "case_sensitive").Truthy();
    const std::string by = Arg(arguments, 1, "by", Value::String("key")).Str();
    const bool reverse = Arg(arguments, 2, "reverse").Truthy();
    List items;
    for (const auto& [key, value] : operand.dict()) items.push_back(Value::MakeTuple({key, value}));
    if (absl::Status s = SortValues(items, reverse, case_sensitive, Value::Int(by == "value" ? 1 : 0)); !s.ok()) return s;
    return Value::MakeList(std::move(items));
  }
  if (name == "min" || name == "max") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    if (items.empty()) return Value::Undefined(absl::StrCat("No aggregated item, sequence was empty."));
    if (absl::Status s = SortValues(items, false, Arg(arguments, 0, "case_sensitive").Truthy(), Arg(arguments, 1, "attribute"));
        !s.ok()) {
      return s;
    }
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    KVJIT_FILTER_ASSIGN(List items, Iterate(operand));
    const Value attribute = Arg(arguments, 0, "attribute");
    Value total = Arg(arguments, 1, "start", Value::Int(0));
    for (const Value& item : items) {
      Value value = item;
      if (Given(attribute)) {
        KVJIT_FILTER_ASSIGN(value, GetPath(item, attribute));
      }
      KVJIT_FILTER_ASSIGN(total, BinaryOperation("+", total, value));
    }
    return total;
  }
  if (name == "selectattr" || name == "rejectattr") return SelectOrReject(operand, arguments, true, name == "selectattr");
  if (name == "select" || name == "reject") return SelectOrReject(operand, arguments, false, name == "select");
  if (name == "map") return Map(operand, arguments);
  if (name == "attr") return GetAttribute(operand, Arg(arguments, 0, "name").Str());
  if (name == "indent") {
    return Value::String(Indent(operand.Str(), Arg(arguments, 0, "width"), Arg(arguments, 1, "first").Truthy(),
                                Arg(arguments, 2, "blank").Truthy()));
  }
  return absl::InvalidArgumentError(absl::StrCat("No filter named '", name, "'."));
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& operand, CallArguments& arguments) {
  const Value other = Arg(arguments, 0, "value");
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "none") return operand.is_none();
  if (name == "boolean") return operand.is_bool();
  if (name == "true") return operand.is_bool() && operand.bool_value();
  if (name == "false") return operand.is_bool() && !operand.bool_value();
  if (name == "integer") return operand.is_int();
  if (name == "float") return operand.is_float();
  if (name == "number") return operand.is_number();
  if (name == "string") return operand.is_string();
  if (name == "mapping") return operand.is_dict();
  if (name == "iterable") return operand.is_undefined() || operand.is_string() || operand.is_list() || operand.is_dict();
  if (name == "sequence") return operand.is_undefined() || operand.is_string() || operand.is_list() || operand.is_dict();
  if (name == "callable") return operand.is_callable();
  if (name == "escaped") return false;
  if (name == "lower") return operand.is_string() && AsciiLower(operand.string_value()) == operand.string_value();
  if (name == "upper") return operand.is_string() && AsciiUpper(operand.string_value()) == operand.string_value();
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (!operand.is_number() || operand.is_float()) {
      if (operand.is_undefined()) return UndefinedError(operand);
      return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for %: '", operand.TypeRepr(), "' and 'int'"));
    }
    const int64_t n = operand.int_value();
    if (name == "even") return n % 2 == 0;
    if (name == "odd") return n % 2 != 0;
    if (other.int_value() == 0) return absl::InvalidArgumentError("integer modulo by zero");
    return n % other.int_value() == 0;
  }
  if (name == "sameas") {
    if (operand.kind() != other.kind()) return false;
    if (operand.is_none() || operand.is_undefined()) return true;
    if (operand.is_bool()) return operand.bool_value() == other.bool_value();
    if (operand.is_list()) return &operand.list() == &other.list();
    if (operand.is_dict() || operand.is_namespace()) return &operand.dict() == &other.dict();
    return operand.Equals(other);
  }
  std::string op;
  if (name == "eq" || name == "equalto" || name == "==") op = "==";
  else if (name == "ne" || name == "!=") op = "!=";
  else if (name == "lt" || name == "lessthan" || name == "<") op = "<";
  else if (name == "le" || name == "<=") op = "<=";
  else if (name == "gt" || name == "greaterthan" || name == ">") op = ">";
  else if (name == "ge" || name == ">=") op = ">=";
  else if (name == "in") op = "in";
  if (!op.empty()) return Compare(op, operand, other);
  return absl::InvalidArgumentError(absl::StrCat("No test named '", name, "'."));
}

}  // namespace kvjit::chat_template
