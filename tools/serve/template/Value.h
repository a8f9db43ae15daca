#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_VALUE_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

// The dynamic value a chat template computes with: Jinja's (that is,
// Python's) None, bool, int, float, str, list, dict, jinja2's Undefined and
// namespace, and callables (macros, globals, bound methods). Lists, dicts and
// namespaces are shared by reference, as in Python.
namespace kvjit::chat_template {

class Value;

// The arguments of a call: positional, then keyword in the order written.
struct CallArguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Callable = std::function<absl::StatusOr<Value>(CallArguments& arguments)>;
using List = std::vector<Value>;
// Insertion-ordered, as Python's dict; looked up linearly (templates' dicts
// are small).
using Dict = std::vector<std::pair<Value, Value>>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() : kind_(Kind::kUndefined) {}
  static Value Undefined(std::string message = "");
  static Value None();
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Float(double value);
  static Value String(std::string value);
  static Value MakeList(List items = {});
  // A list that prints as Python's tuple: (1, 2).
  static Value MakeTuple(List items = {});
  static Value MakeDict(Dict items = {});
  static Value MakeNamespace(Dict items = {});
  static Value MakeCallable(std::string name, Callable callable);
  static Value FromJson(const nlohmann::json& json);
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // bool counts, as in Python (True + 1 == 2).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  // Dicts and namespaces: what has keys.
  bool is_mapping() const { return kind_ == Kind::kDict; }

  bool bool_value() const { return bool_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }
  double number_value() const;
  const std::string& string_value() const { return *string_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Callable& callable() const { return *callable_; }
  // For an undefined value: why it is undefined, as jinja2 words it
  // ("'foo' is undefined").
  const std::string& undefined_message() const { return *string_; }
  // The callable's name, for messages.
  const std::string& callable_name() const { return *string_; }

  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // Jinja's str(): None -> "None", True -> "True", 1.0 -> "1.0", lists and
  // dicts as Python's repr, undefined -> "".
  std::string Str() const;
  // Python's repr().
  std::string Repr() const;
  // Python's == (1 == 1.0 == True).
  bool Equals(const Value& other) const;
  // json.dumps(value, ensure_ascii=False, indent=indent, separators=...,
  // sort_keys=...); indent < 0 is None.
  absl::StatusOr<std::string> ToJson(int indent, const std::string& item_separator,
                                     const std::string& key_separator, bool sort_keys) const;

  // A dict's or namespace's entry, or null.
  Value* Find(const Value& key) const;
  Value* Find(const std::string& key) const { return Find(Value::String(key)); }
  void Set(const Value& key, Value value) const;
  // What jinja2 calls object_type_repr: "dict object", "None", ...
  std::string TypeRepr() const;

 private:
  Kind kind_;
  bool bool_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> callable_;
};

// Python's repr() of a float (the shortest text that reads back the same).
std::string PythonFloatRepr(double value);

// UTF-8 helpers: code points of `text`, and back.
std::u32string DecodeUtf8(const std::string& text);
std::string EncodeUtf8(const std::u32string& text);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_VALUE_H_
