#include "tools/serve/template/Operations.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"

namespace kvjit::chat_template {
namespace {

char32_t UpperChar(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F)) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t LowerChar(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F)) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool IsCased(char32_t c) { return UpperChar(c) != c || LowerChar(c) != c; }

std::string MapChars(const std::string& text, char32_t (*f)(char32_t)) {
  std::u32string chars = DecodeUtf8(text);
  for (char32_t& c : chars) c = f(c);
  return EncodeUtf8(chars);
}

std::string PythonTitle(const std::string& text) {
  std::u32string chars = DecodeUtf8(text);
  bool previous_cased = false;
  for (char32_t& c : chars) {
    const bool cased = IsCased(c);
    if (cased) c = previous_cased ? LowerChar(c) : UpperChar(c);
    previous_cased = cased;
  }
  return EncodeUtf8(chars);
}

std::string PythonCapitalize(const std::string& text) {
  std::u32string chars = DecodeUtf8(text);
  for (size_t i = 0; i < chars.size(); ++i) chars[i] = i == 0 ? UpperChar(chars[i]) : LowerChar(chars[i]);
  return EncodeUtf8(chars);
}

absl::Status TypeError(const std::string& message) { return absl::InvalidArgumentError(message); }

std::string PythonTypeName(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable: return "function";
  }
  return "object";
}

// Positional argument `index` or keyword `name`, else `fallback`.
Value Argument(const CallArguments& arguments, size_t index, const char* name, Value fallback = Value::None()) {
  if (index < arguments.positional.size()) return arguments.positional[index];
  for (const auto& [keyword, value] : arguments.keyword) {
    if (keyword == name) return value;
  }
  return fallback;
}

std::vector<std::string> PythonSplit(const std::string& text, const Value& separator, int64_t max_split, bool& error) {
  std::vector<std::string> parts;
  error = false;
  if (separator.is_none() || separator.is_undefined()) {
    const std::u32string chars = DecodeUtf8(text);
    size_t i = 0;
    while (i < chars.size()) {
      while (i < chars.size() && IsPythonSpace(chars[i])) ++i;
      if (i >= chars.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) {
        size_t end = chars.size();
        while (end > i && IsPythonSpace(chars[end - 1])) --end;
        parts.push_back(EncodeUtf8(chars.substr(i, end - i)));
        break;
      }
      size_t j = i;
      while (j < chars.size() && !IsPythonSpace(chars[j])) ++j;
      parts.push_back(EncodeUtf8(chars.substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  const std::string sep = separator.Str();
  if (sep.empty()) {
    error = true;
    return parts;
  }
  size_t start = 0;
  while (true) {
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) break;
    const size_t found = text.find(sep, start);
    if (found == std::string::npos) break;
    parts.push_back(text.substr(start, found - start));
    start = found + sep.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

bool AffixMatches(const std::string& text, const Value& affix, bool prefix) {
  const auto one = [&](const std::string& a) {
    if (a.size() > text.size()) return false;
    return prefix ? text.compare(0, a.size(), a) == 0 : text.compare(text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const Value& item : affix.list()) {
      if (one(item.Str())) return true;
    }
    return false;
  }
  return one(affix.Str());
}

absl::StatusOr<Value> StringMethod(const std::string& text, const std::string& name, CallArguments& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::String(PythonStrip(text, Argument(args, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "upper") return Value::String(MapChars(text, UpperChar));
  if (name == "lower") return Value::String(MapChars(text, LowerChar));
  if (name == "title") return Value::String(PythonTitle(text));
  if (name == "capitalize") return Value::String(PythonCapitalize(text));
  if (name == "split" || name == "rsplit") {
    const Value max_split = Argument(args, 1, "maxsplit", Value::Int(-1));
    bool error = false;
    std::vector<std::string> parts;
    if (name == "rsplit" && max_split.int_value() >= 0) {
      // rsplit with a limit: split all, then rejoin the leftmost parts.
      parts = PythonSplit(text, Argument(args, 0, "sep"), -1, error);
      const Value sep = Argument(args, 0, "sep");
      const size_t keep = static_cast<size_t>(max_split.int_value());
      if (!error && parts.size() > keep + 1 && !sep.is_none()) {
        std::string head = parts[0];
        const size_t joined = parts.size() - keep;
        for (size_t i = 1; i < joined; ++i) head += sep.Str() + parts[i];
        std::vector<std::string> rest(parts.begin() + joined, parts.end());
        parts = {head};
        parts.insert(parts.end(), rest.begin(), rest.end());
      }
    } else {
      parts = PythonSplit(text, Argument(args, 0, "sep"), max_split.int_value(), error);
    }
    if (error) return absl::InvalidArgumentError("empty separator");
    List items;
    for (std::string& part : parts) items.push_back(Value::String(std::move(part)));
    return Value::MakeList(std::move(items));
  }
  if (name == "splitlines") {
    List items;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n' || text[i] == '\r') {
        items.push_back(Value::String(text.substr(start, i - start)));
        if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < text.size()) items.push_back(Value::String(text.substr(start)));
    return Value::MakeList(std::move(items));
  }
  if (name == "startswith" || name == "endswith") {
    return Value::Bool(AffixMatches(text, Argument(args, 0, "prefix"), name == "startswith"));
  }
  if (name == "replace") {
    return Value::String(PythonReplace(text, Argument(args, 0, "old").Str(),
                                       Argument(args, 1, "new").Str(),
                                       Argument(args, 2, "count", Value::Int(-1)).int_value()));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const std::string needle = Argument(args, 0, "sub").Str();
    if (name == "count") {
      if (needle.empty()) return Value::Int(static_cast<int64_t>(DecodeUtf8(text).size()) + 1);
      int64_t n = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
      return Value::Int(n);
    }
    const size_t at = name == "rfind" ? text.rfind(needle) : text.find(needle);
    if (at == std::string::npos) {
      if (name == "index") return absl::InvalidArgumentError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(DecodeUtf8(text.substr(0, at)).size()));
  }
  if (name == "join") {
    const Value items = Argument(args, 0, "iterable");
    absl::StatusOr<List> list = Iterate(items);
    if (!list.ok()) return list.status();
    std::string out;
    for (size_t i = 0; i < list->size(); ++i) {
      if (i > 0) out += text;
      if (!(*list)[i].is_string()) {
        return TypeError(absl::StrCat("sequence item ", i, ": expected str instance, ", PythonTypeName((*list)[i]), " found"));
      }
      out += (*list)[i].string_value();
    }
    return Value::String(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string affix = Argument(args, 0, "prefix").Str();
    if (AffixMatches(text, Value::String(affix), name == "removeprefix")) {
      return Value::String(name == "removeprefix" ? text.substr(affix.size()) : text.substr(0, text.size() - affix.size()));
    }
    return Value::String(text);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    const std::u32string chars = DecodeUtf8(text);
    if (chars.empty()) return Value::Bool(false);
    bool result = true;
    bool any_cased = false;
    for (char32_t c : chars) {
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = IsCased(c);
      if (name == "isdigit") result = result && digit;
      if (name == "isalpha") result = result && alpha;
      if (name == "isalnum") result = result && (alpha || digit);
      if (name == "isspace") result = result && IsPythonSpace(c);
      if (name == "islower") { result = result && !(alpha && LowerChar(c) != c); any_cased = any_cased || alpha; }
      if (name == "isupper") { result = result && !(alpha && UpperChar(c) != c); any_cased = any_cased || alpha; }
    }
    if (name == "islower" || name == "isupper") result = result && any_cased;
    return Value::Bool(result);
  }
  return absl::NotFoundError(name);
}

const std::set<std::string>& StringMethods() {
  static const std::set<std::string> names = {
      "strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize", "split", "rsplit", "splitlines",
      "startswith", "endswith", "replace", "find", "rfind", "index", "count", "join", "removeprefix",
      "removesuffix", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  return names;
}

Value BoundMethod(const Value& object, const std::string& name) {
  return Value::MakeCallable(name, [object, name](CallArguments& args) -> absl::StatusOr<Value> {
    if (object.is_string()) return StringMethod(object.string_value(), name, args);
    if (object.is_dict()) {
      if (name == "items" || name == "keys" || name == "values") {
        List items;
        for (const auto& [key, value] : object.dict()) {
          if (name == "items") items.push_back(Value::MakeTuple({key, value}));
          else items.push_back(name == "keys" ? key : value);
        }
        return Value::MakeList(std::move(items));
      }
      if (name == "get") {
        const Value* found = object.Find(Argument(args, 0, "key"));
        return found != nullptr ? *found : Argument(args, 1, "default");
      }
      if (name == "copy") return Value::MakeDict(object.dict());
    }
    if (object.is_list()) {
      const Value needle = Argument(args, 0, "value");
      if (name == "count") {
        int64_t n = 0;
        for (const Value& item : object.list()) n += item.Equals(needle) ? 1 : 0;
        return Value::Int(n);
      }
      if (name == "index") {
        for (size_t i = 0; i < object.list().size(); ++i) {
          if (object.list()[i].Equals(needle)) return Value::Int(static_cast<int64_t>(i));
        }
        return absl::InvalidArgumentError(absl::StrCat(needle.Repr(), " is not in list"));
      }
      if (name == "copy") return Value::MakeList(object.list());
    }
    return absl::InvalidArgumentError(absl::StrCat("'", PythonTypeName(object), "' object has no method '", name, "'"));
  });
}

// The method `name` of object's type, an unsafe-access undefined for the
// sandbox's mutating methods, or undefined where there is none.
std::optional<Value> Method(const Value& object, const std::string& name) {
  static const std::set<std::string> kDictMethods = {"items", "keys", "values", "get", "copy"};
  static const std::set<std::string> kListMethods = {"count", "index", "copy"};
  static const std::set<std::string> kUnsafeDict = {"update", "pop", "popitem", "setdefault", "clear"};
  static const std::set<std::string> kUnsafeList = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  if (object.is_string() && StringMethods().count(name) > 0) return BoundMethod(object, name);
  if (object.is_dict() && kDictMethods.count(name) > 0) return BoundMethod(object, name);
  if (object.is_list() && kListMethods.count(name) > 0) return BoundMethod(object, name);
  if ((object.is_dict() && kUnsafeDict.count(name) > 0) || (object.is_list() && kUnsafeList.count(name) > 0)) {
    return Value::Undefined(absl::StrCat("access to attribute '", name, "' of '", PythonTypeName(object),
                                         "' object is unsafe."));
  }
  return std::nullopt;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

absl::Status Unsupported(const std::string& op, const Value& left, const Value& right) {
  return TypeError(absl::StrCat("unsupported operand type(s) for ", op, ": '", PythonTypeName(left), "' and '",
                                PythonTypeName(right), "'"));
}

absl::StatusOr<int> Order(const Value& left, const Value& right, const std::string& op) {
  if (left.is_number() && right.is_number()) {
    if (!left.is_float() && !right.is_float()) {
      return left.int_value() < right.int_value() ? -1 : (left.int_value() > right.int_value() ? 1 : 0);
    }
    const double a = left.number_value(), b = right.number_value();
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if (left.is_string() && right.is_string()) {
    const int c = left.string_value().compare(right.string_value());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (left.is_list() && right.is_list()) {
    const List& a = left.list();
    const List& b = right.list();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].Equals(b[i])) continue;
      return Order(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  return TypeError(absl::StrCat("'", op, "' not supported between instances of '", PythonTypeName(left), "' and '",
                                PythonTypeName(right), "'"));
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(undefined.undefined_message().empty() ? "value is undefined"
                                                                          : undefined.undefined_message());
}

bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string PythonReplace(const std::string& text, const std::string& old_text,
                          const std::string& new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` between characters (and at both ends).
    const std::u32string chars = DecodeUtf8(text);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (count != 0) {
        out += new_text;
        --count;
      }
      if (i < chars.size()) out += EncodeUtf8(chars.substr(i, 1));
    }
    return out;
  }
  size_t start = 0;
  while (count != 0) {
    const size_t found = text.find(old_text, start);
    if (found == std::string::npos) break;
    out += text.substr(start, found - start) + new_text;
    start = found + old_text.size();
    --count;
  }
  return out + text.substr(start);
}

std::string PythonStrip(const std::string& text, const Value& chars, bool left, bool right) {
  const std::u32string s = DecodeUtf8(text);
  std::u32string set;
  const bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) set = DecodeUtf8(chars.Str());
  const auto strip = [&](char32_t c) { return whitespace ? IsPythonSpace(c) : set.find(c) != std::u32string::npos; };
  size_t begin = 0, end = s.size();
  if (left) while (begin < end && strip(s[begin])) ++begin;
  if (right) while (end > begin && strip(s[end - 1])) --end;
  return EncodeUtf8(s.substr(begin, end - begin));
}

std::string AsciiUpper(const std::string& text) { return MapChars(text, UpperChar); }
std::string AsciiLower(const std::string& text) { return MapChars(text, LowerChar); }

absl::StatusOr<Value> GetAttribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) return UndefinedError(object);
  if (std::optional<Value> method = Method(object, name)) return *method;
  if (object.is_dict() || object.is_namespace()) {
    if (const Value* found = object.Find(name)) return *found;
  }
  return Value::Undefined(absl::StrCat("'", object.TypeRepr(), "' has no attribute '", name, "'"));
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict()) {
    if (const Value* found = object.Find(key)) return *found;
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    if (object.is_list()) {
      const int64_t size = static_cast<int64_t>(object.list().size());
      int64_t index = key.int_value();
      if (index < 0) index += size;
      if (index >= 0 && index < size) return object.list()[static_cast<size_t>(index)];
    } else {
      const std::u32string chars = DecodeUtf8(object.string_value());
      const int64_t size = static_cast<int64_t>(chars.size());
      int64_t index = key.int_value();
      if (index < 0) index += size;
      if (index >= 0 && index < size) return Value::String(EncodeUtf8(chars.substr(static_cast<size_t>(index), 1)));
    }
    return Value::Undefined(absl::StrCat(object.TypeRepr(), " has no element ", key.Repr()));
  }
  if (key.is_string()) {
    if (std::optional<Value> method = Method(object, key.string_value())) return *method;
    if (object.is_namespace()) {
      if (const Value* found = object.Find(key)) return *found;
    }
    return Value::Undefined(absl::StrCat("'", object.TypeRepr(), "' has no attribute '", key.string_value(), "'"));
  }
  return Value::Undefined(absl::StrCat(object.TypeRepr(), " has no element ", key.Repr()));
}

absl::StatusOr<Value> GetSlice(const Value& object, const Value& start_value, const Value& stop_value,
                               const Value& step_value) {
  if (object.is_undefined()) return UndefinedError(object);
  for (const Value* v : {&start_value, &stop_value, &step_value}) {
    if (!v->is_undefined() && !v->is_none() && !v->is_int() && !v->is_bool()) {
      return TypeError("slice indices must be integers or None or have an __index__ method");
    }
  }
  const bool is_string = object.is_string();
  if (!is_string && !object.is_list()) {
    return TypeError(absl::StrCat("'", PythonTypeName(object), "' object is not subscriptable"));
  }
  const std::u32string chars = is_string ? DecodeUtf8(object.string_value()) : std::u32string();
  const int64_t size = is_string ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(object.list().size());
  const auto given = [](const Value& v) { return !v.is_undefined() && !v.is_none(); };
  const int64_t step = given(step_value) ? step_value.int_value() : 1;
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  const auto clamp = [&](const Value& v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t i = v.int_value();
    if (i < 0) i += size;
    if (step > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  const int64_t start = clamp(start_value, step > 0 ? 0 : size - 1);
  const int64_t stop = clamp(stop_value, step > 0 ? size : -1);
  std::u32string out_chars;
  List out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_string) out_chars.push_back(chars[static_cast<size_t>(i)]);
    else out_items.push_back(object.list()[static_cast<size_t>(i)]);
  }
  if (is_string) return Value::String(EncodeUtf8(out_chars));
  return Value::MakeList(std::move(out_items));
}

absl::StatusOr<Value> BinaryOperation(const std::string& op, const Value& left, const Value& right) {
  if (left.is_undefined()) return UndefinedError(left);
  if (right.is_undefined()) return UndefinedError(right);
  if (left.is_number() && right.is_number()) {
    const bool integers = !left.is_float() && !right.is_float();
    const int64_t a = left.int_value(), b = right.int_value();
    const double x = left.number_value(), y = right.number_value();
    if (op == "+") return integers ? Value::Int(a + b) : Value::Float(x + y);
    if (op == "-") return integers ? Value::Int(a - b) : Value::Float(x - y);
    if (op == "*") return integers ? Value::Int(a * b) : Value::Float(x * y);
    if (op == "/") {
      if (y == 0) return absl::InvalidArgumentError(integers ? "division by zero" : "float division by zero");
      return Value::Float(x / y);
    }
    if (op == "//") {
      if (y == 0) return absl::InvalidArgumentError(integers ? "integer division or modulo by zero" : "float floor division by zero");
      return integers ? Value::Int(FloorDiv(a, b)) : Value::Float(std::floor(x / y));
    }
    if (op == "%") {
      if (y == 0) return absl::InvalidArgumentError(integers ? "integer modulo by zero" : "float modulo");
      if (integers) return Value::Int(FloorMod(a, b));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Float(m);
    }
    if (op == "**") {
      if (integers && b >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < b && i < 64; ++i) result *= a;
        return Value::Int(result);
      }
      return Value::Float(std::pow(x, y));
    }
  }
  if (op == "+") {
    if (left.is_string() && right.is_string()) return Value::String(left.string_value() + right.string_value());
    if (left.is_list() && right.is_list()) {
      List items = left.list();
      items.insert(items.end(), right.list().begin(), right.list().end());
      return Value::MakeList(std::move(items));
    }
    if (left.is_string()) {
      return TypeError(absl::StrCat("can only concatenate str (not \"", PythonTypeName(right), "\") to str"));
    }
    if (left.is_list()) {
      return TypeError(absl::StrCat("can only concatenate list (not \"", PythonTypeName(right), "\") to list"));
    }
  }
  if (op == "*") {
    const Value* sequence = left.is_string() || left.is_list() ? &left : (right.is_string() || right.is_list() ? &right : nullptr);
    const Value* count = sequence == &left ? &right : &left;
    if (sequence != nullptr && (count->is_int() || count->is_bool())) {
      const int64_t n = std::min<int64_t>(count->int_value(), 100000);
      if (sequence->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += sequence->string_value();
        return Value::String(out);
      }
      List items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), sequence->list().begin(), sequence->list().end());
      return Value::MakeList(std::move(items));
    }
  }
  if (op == "%" && left.is_string()) {
    return absl::UnimplementedError("printf-style string formatting (str % value) is not supported");
  }
  return Unsupported(op, left, right);
}

absl::StatusOr<Value> Negate(const Value& operand, bool minus) {
  if (operand.is_undefined()) return UndefinedError(operand);
  if (operand.is_float()) return Value::Float(minus ? -operand.number_value() : operand.number_value());
  if (operand.is_number()) return Value::Int(minus ? -operand.int_value() : operand.int_value());
  return TypeError(absl::StrCat("bad operand type for unary ", minus ? "-" : "+", ": '", PythonTypeName(operand), "'"));
}

absl::StatusOr<bool> Compare(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return left.Equals(right);
  if (op == "!=") return !left.Equals(right);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (right.is_string()) {
      if (!left.is_string()) {
        if (left.is_undefined()) return UndefinedError(left);
        return TypeError(absl::StrCat("'in <string>' requires string as left operand, not ", PythonTypeName(left)));
      }
      found = right.string_value().find(left.string_value()) != std::string::npos;
    } else if (right.is_list()) {
      for (const Value& item : right.list()) found = found || item.Equals(left);
    } else if (right.is_dict()) {
      found = right.Find(left) != nullptr;
    } else if (right.is_undefined()) {
      found = false;
    } else {
      return TypeError(absl::StrCat("argument of type '", PythonTypeName(right), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  absl::StatusOr<int> order = Order(left, right, op);
  if (!order.ok()) return order.status();
  if (op == "<") return *order < 0;
  if (op == ">") return *order > 0;
  if (op == "<=") return *order <= 0;
  return *order >= 0;
}

absl::StatusOr<List> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return List();
    case Value::Kind::kList: return value.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [key, item] : value.dict()) keys.push_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : DecodeUtf8(value.string_value())) chars.push_back(Value::String(EncodeUtf8(std::u32string(1, c))));
      return chars;
    }
    default: return TypeError(absl::StrCat("'", PythonTypeName(value), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(DecodeUtf8(value.string_value()).size());
    case Value::Kind::kList: return static_cast<int64_t>(value.list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(value.dict().size());
    default: return TypeError(absl::StrCat("object of type '", PythonTypeName(value), "' has no len()"));
  }
}

}  // namespace kvjit::chat_template
