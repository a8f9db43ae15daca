#include "tools/serve/template/Lexer.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "tools/serve/template/Value.h"

namespace kvjit::chat_template {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

absl::Status LineError(int line, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string Unescape(const std::string& body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    const auto hex = [&](size_t digits) {
      if (i + digits >= body.size()) return false;
      char32_t code = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = body[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
        code = code * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      out += EncodeUtf8(std::u32string(1, code));
      i += digits;
      return true;
    };
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\n': break;
      case 'x': if (!hex(2)) out += "\\x"; break;
      case 'u': if (!hex(4)) out += "\\u"; break;
      case 'U': if (!hex(8)) out += "\\U"; break;
      default: out += '\\'; out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : source_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < source_.size()) {
      size_t tag = source_.find('{', pos_);
      while (tag != std::string::npos && tag + 1 < source_.size() &&
             source_[tag + 1] != '{' && source_[tag + 1] != '%' && source_[tag + 1] != '#') {
        tag = source_.find('{', tag + 1);
      }
      if (tag == std::string::npos || tag + 1 >= source_.size()) {
        EmitText(source_.substr(pos_), line_);
        break;
      }
      std::string text = source_.substr(pos_, tag - pos_);
      const int text_line = line_;
      Advance(tag);
      const char kind = source_[tag + 1];
      const char sign = tag + 2 < source_.size() ? source_[tag + 2] : '\0';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && IsSpace(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          bool only_space = line_start < text.size();
          for (size_t k = line_start; k < text.size(); ++k) only_space = only_space && IsSpace(text[k]);
          if (only_space) text.resize(line_start);
        }
      }
      EmitText(text, text_line);
      const size_t body = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      const int tag_line = line_;
      if (kind == '#') {
        size_t close = source_.find("#}", body);
        if (close == std::string::npos) return LineError(tag_line, "Missing end of comment tag");
        const char before = close > body ? source_[close - 1] : '\0';
        Advance(close + 2);
        line_starting = SkipAfterTag(before, true);
        continue;
      }
      tokens_.push_back({kind == '{' ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, "", tag_line});
      Advance(body);
      if (auto status = LexTag(kind == '{'); !status.ok()) return status;
      // pos_ is just past the closing delimiter; source_[pos_ - 3] is its sign.
      const char before = source_[pos_ - 3];
      line_starting = SkipAfterTag(before, kind == '%');
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  void Advance(size_t to) {
    line_ += static_cast<int>(std::count(source_.begin() + pos_, source_.begin() + to, '\n'));
    pos_ = to;
  }

  // After a closing delimiter whose preceding character is `before`: strips
  // all whitespace after "-%}", else one newline after a block or comment
  // tag (trim_blocks). Returns whether what it skipped ended a line.
  bool SkipAfterTag(char before, bool is_block) {
    size_t end = pos_;
    if (before == '-') {
      while (end < source_.size() && IsSpace(source_[end])) ++end;
    } else if (before != '+' && is_block && end < source_.size() && source_[end] == '\n') {
      ++end;
    }
    const bool newline = end > pos_ && source_[end - 1] == '\n';
    Advance(end);
    return newline;
  }

  void EmitText(const std::string& text, int line) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, text, line});
  }

  absl::Status LexTag(bool is_variable) {
    const std::string close = is_variable ? "}}" : "%}";
    const int start_line = line_;
    int depth = 0;
    while (true) {
      while (pos_ < source_.size() && IsSpace(source_[pos_])) Advance(pos_ + 1);
      if (pos_ >= source_.size()) {
        return LineError(start_line, is_variable ? "unexpected end of template, expected 'end of print statement'"
                                                 : "unexpected end of template, expected 'end of statement block'");
      }
      if (depth == 0) {
        for (const char* sign : {"-", "+", ""}) {
          const std::string closing = sign + close;
          if (source_.compare(pos_, closing.size(), closing) == 0) {
            tokens_.push_back({is_variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, "", line_});
            Advance(pos_ + closing.size());
            return absl::OkStatus();
          }
        }
      }
      const char c = source_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos_;
        while (end < source_.size() && (std::isalnum(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) ++end;
        tokens_.push_back({TokenKind::kName, source_.substr(pos_, end - pos_), line_});
        Advance(end);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t end = pos_;
        bool is_float = false;
        while (end < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) ++end;
        if (end + 1 < source_.size() && source_[end] == '.' && std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
          is_float = true;
          ++end;
          while (end < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) ++end;
        }
        if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
          size_t exp = end + 1;
          if (exp < source_.size() && (source_[exp] == '+' || source_[exp] == '-')) ++exp;
          if (exp < source_.size() && std::isdigit(static_cast<unsigned char>(source_[exp]))) {
            is_float = true;
            end = exp;
            while (end < source_.size() && std::isdigit(static_cast<unsigned char>(source_[end]))) ++end;
          }
        }
        std::string text = source_.substr(pos_, end - pos_);
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line_});
        Advance(end);
      } else if (c == '\'' || c == '"') {
        size_t end = pos_ + 1;
        while (end < source_.size() && source_[end] != c) end += source_[end] == '\\' ? 2 : 1;
        if (end >= source_.size()) return LineError(line_, "unexpected char '" + std::string(1, c) + "'");
        tokens_.push_back({TokenKind::kString, Unescape(source_.substr(pos_ + 1, end - pos_ - 1)), line_});
        Advance(end + 1);
      } else {
        static const char* const kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                                 "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".",
                                                 ":", "|", ";"};
        bool matched = false;
        for (const char* op : kOperators) {
          const std::string text = op;
          if (source_.compare(pos_, text.size(), text) == 0) {
            if (text == "(" || text == "[" || text == "{") ++depth;
            if (text == ")" || text == "]" || text == "}") {
              if (depth == 0) return LineError(line_, "unexpected '" + text + "'");
              --depth;
            }
            tokens_.push_back({TokenKind::kOperator, text, line_});
            Advance(pos_ + text.size());
            matched = true;
            break;
          }
        }
        if (!matched) return LineError(line_, std::string("unexpected char '") + c + "'");
      }
    }
  }

  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::string DescribeToken(const Token& token) {
  switch (token.kind) {
    case TokenKind::kText: return "template data";
    case TokenKind::kVariableBegin: return "begin of print statement";
    case TokenKind::kVariableEnd: return "end of print statement";
    case TokenKind::kBlockBegin: return "begin of statement block";
    case TokenKind::kBlockEnd: return "end of statement block";
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kString: return "string";
    case TokenKind::kInteger: return "integer";
    case TokenKind::kFloat: return "float";
    default: return "'" + token.value + "'";
  }
}

absl::StatusOr<std::vector<Token>> Tokenize(const std::string& source) {
  // jinja2 normalizes newlines and drops one trailing newline
  // (keep_trailing_newline=False).
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).Run();
}

}  // namespace kvjit::chat_template
