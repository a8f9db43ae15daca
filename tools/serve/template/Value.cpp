#include "tools/serve/template/Value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace kvjit::chat_template {

Value Value::Undefined(std::string message) {
  Value value;
  value.kind_ = Kind::kUndefined;
  value.string_ = std::make_shared<std::string>(std::move(message));
  return value;
}

Value Value::None() {
  Value value;
  value.kind_ = Kind::kNone;
  return value;
}

Value Value::Bool(bool b) {
  Value value;
  value.kind_ = Kind::kBool;
  value.bool_ = b;
  return value;
}

Value Value::Int(int64_t i) {
  Value value;
  value.kind_ = Kind::kInt;
  value.int_ = i;
  return value;
}

Value Value::Float(double f) {
  Value value;
  value.kind_ = Kind::kFloat;
  value.float_ = f;
  return value;
}

Value Value::String(std::string s) {
  Value value;
  value.kind_ = Kind::kString;
  value.string_ = std::make_shared<std::string>(std::move(s));
  return value;
}

Value Value::MakeList(List items) {
  Value value;
  value.kind_ = Kind::kList;
  value.list_ = std::make_shared<List>(std::move(items));
  return value;
}

Value Value::MakeTuple(List items) {
  Value value = MakeList(std::move(items));
  value.tuple_ = true;
  return value;
}

Value Value::MakeDict(Dict items) {
  Value value;
  value.kind_ = Kind::kDict;
  value.dict_ = std::make_shared<Dict>(std::move(items));
  return value;
}

Value Value::MakeNamespace(Dict items) {
  Value value = MakeDict(std::move(items));
  value.kind_ = Kind::kNamespace;
  return value;
}

Value Value::MakeCallable(std::string name, Callable callable) {
  Value value;
  value.kind_ = Kind::kCallable;
  value.string_ = std::make_shared<std::string>(std::move(name));
  value.callable_ = std::make_shared<Callable>(std::move(callable));
  return value;
}

namespace {

template <typename Json>
Value ValueFromJson(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::None();
    case nlohmann::json::value_t::boolean: return Value::Bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::Int(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(json.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value::Float(json.template get<double>());
    case nlohmann::json::value_t::string: return Value::String(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      for (const auto& item : json) items.push_back(ValueFromJson(item));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      for (auto it = json.begin(); it != json.end(); ++it) {
        items.emplace_back(Value::String(it.key()), ValueFromJson(it.value()));
      }
      return Value::MakeDict(std::move(items));
    }
    default: return Value::None();
  }
}

void AppendPythonStringRepr(const std::string& text, std::string& out) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (unsigned char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
}

void AppendJsonString(const std::string& text, std::string& out) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

absl::Status AppendJson(const Value& value, int indent, int depth, const std::string& item_separator,
                        const std::string& key_separator, bool sort_keys, std::string& out) {
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * level, ' ');
  };
  switch (value.kind()) {
    case Value::Kind::kNone: out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: out += value.bool_value() ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: out += std::to_string(value.int_value()); return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double f = value.number_value();
      if (std::isnan(f)) out += "NaN";
      else if (std::isinf(f)) out += f > 0 ? "Infinity" : "-Infinity";
      else out += PythonFloatRepr(f);
      return absl::OkStatus();
    }
    case Value::Kind::kString: AppendJsonString(value.string_value(), out); return absl::OkStatus();
    case Value::Kind::kList: {
      if (value.list().empty()) { out += "[]"; return absl::OkStatus(); }
      out += '[';
      bool first = true;
      for (const Value& item : value.list()) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        if (auto status = AppendJson(item, indent, depth + 1, item_separator, key_separator, sort_keys, out);
            !status.ok()) {
          return status;
        }
      }
      newline(depth);
      out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (value.dict().empty()) { out += "{}"; return absl::OkStatus(); }
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [key, item] : value.dict()) {
        std::string name;
        if (key.is_string()) name = key.string_value();
        else if (key.is_bool()) name = key.bool_value() ? "true" : "false";
        else if (key.is_none()) name = "null";
        else if (key.is_int()) name = std::to_string(key.int_value());
        else if (key.is_float()) name = PythonFloatRepr(key.number_value());
        else return absl::InvalidArgumentError(absl::StrCat("keys must be str, int, float, bool or None, not ", key.TypeRepr()));
        entries.emplace_back(std::move(name), &item);
      }
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      bool first = true;
      for (const auto& [name, item] : entries) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        AppendJsonString(name, out);
        out += key_separator;
        if (auto status = AppendJson(*item, indent, depth + 1, item_separator, key_separator, sort_keys, out);
            !status.ok()) {
          return status;
        }
      }
      newline(depth);
      out += '}';
      return absl::OkStatus();
    }
    case Value::Kind::kUndefined:
      return absl::InvalidArgumentError("Object of type Undefined is not JSON serializable");
    case Value::Kind::kNamespace:
      return absl::InvalidArgumentError("Object of type Namespace is not JSON serializable");
    case Value::Kind::kCallable:
      return absl::InvalidArgumentError("Object of type function is not JSON serializable");
  }
  return absl::OkStatus();
}

}  // namespace

Value Value::FromJson(const nlohmann::json& json) { return ValueFromJson(json); }
Value Value::FromJson(const nlohmann::ordered_json& json) { return ValueFromJson(json); }

double Value::number_value() const {
  switch (kind_) {
    case Kind::kBool: return bool_ ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(int_);
    case Kind::kFloat: return float_;
    default: return 0;
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !string_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *string_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return bool_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return PythonFloatRepr(float_);
    case Kind::kString: {
      std::string out;
      AppendPythonStringRepr(*string_, out);
      return out;
    }
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, item] : *dict_) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, key.Repr(), ": ", item.Repr());
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kCallable: return absl::StrCat("<function ", *string_, ">");
  }
  return "";
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ != Kind::kFloat && other.kind_ != Kind::kFloat) return int_value() == other.int_value();
    return number_value() == other.number_value();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *string_ == *other.string_;
    case Kind::kList: {
      if (tuple_ != other.tuple_ || list_->size() != other.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*other.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->size() != other.dict_->size()) return false;
      for (const auto& [key, item] : *dict_) {
        const Value* found = other.Find(key);
        if (found == nullptr || !found->Equals(item)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return dict_ == other.dict_;
    case Kind::kCallable: return callable_ == other.callable_;
    default: return false;
  }
}

absl::StatusOr<std::string> Value::ToJson(int indent, const std::string& item_separator,
                                          const std::string& key_separator, bool sort_keys) const {
  std::string out;
  if (auto status = AppendJson(*this, indent, 0, item_separator, key_separator, sort_keys, out); !status.ok()) {
    return status;
  }
  return out;
}

Value* Value::Find(const Value& key) const {
  if (kind_ != Kind::kDict && kind_ != Kind::kNamespace) return nullptr;
  for (auto& [entry_key, item] : *dict_) {
    if (entry_key.Equals(key)) return &item;
  }
  return nullptr;
}

void Value::Set(const Value& key, Value value) const {
  if (Value* found = Find(key)) {
    *found = std::move(value);
    return;
  }
  dict_->emplace_back(key, std::move(value));
}

std::string Value::TypeRepr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool object";
    case Kind::kInt: return "int object";
    case Kind::kFloat: return "float object";
    case Kind::kString: return "str object";
    case Kind::kList: return "list object";
    case Kind::kDict: return "dict object";
    case Kind::kNamespace: return "jinja2.utils.Namespace object";
    case Kind::kCallable: return "function object";
  }
  return "object";
}

std::string PythonFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  // text: [-]d[.ddd]e[+-]XX
  std::string sign;
  if (!text.empty() && text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  std::string mantissa = text.substr(0, e);
  const int exponent = std::stoi(text.substr(e + 1));
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t integer_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= integer_digits) {
      out = digits + std::string(integer_digits - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
    }
  }
  return sign + out;
}

std::u32string DecodeUtf8(const std::string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    int length = 1;
    char32_t code = c;
    if (c >= 0xF0 && c < 0xF8) { length = 4; code = c & 0x07; }
    else if (c >= 0xE0) { length = c < 0xF0 ? 3 : 1; code = c < 0xF0 ? (c & 0x0F) : c; }
    else if (c >= 0xC0) { length = 2; code = c & 0x1F; }
    if (i + length > text.size()) length = 1, code = c;
    for (int k = 1; k < length; ++k) code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(code);
    i += length;
  }
  return out;
}

std::string EncodeUtf8(const std::u32string& text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace kvjit::chat_template
