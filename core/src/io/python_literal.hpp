#pragma once
// A strict parser for the Python literal that forms an .npy header (what numpy reads with
// ast.literal_eval): strings, integers, True/False/None, tuples, lists and dicts. Anything else (floats,
// expressions, names, unsupported escapes, trailing text) is an error. Private to core/src/io.
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <regatta/core/io/detail/bytes.hpp>

namespace regatta::io::detail {

struct PyLiteral {
  enum class Kind { string, integer, boolean, none, tuple, list, dict };
  Kind kind = Kind::none;
  std::string text;              // string: the decoded characters
  bool negative = false;         // integer: sign
  std::uint64_t magnitude = 0;   // integer: |value| when it fits in 64 bits
  bool too_large = false;        // integer: |value| >= 2^64
  bool flag = false;             // boolean
  std::vector<PyLiteral> items;  // tuple, list; dict: key0, value0, key1, value1, ...

  /// Python's repr, for messages (strings in single quotes, untrusted text made printable).
  std::string repr() const;
};

/// Parses `text` as exactly one literal surrounded by optional whitespace. On failure returns nullopt and
/// sets `problem` to a one-line description with the byte position. `allow_long_suffix` accepts Python 2's
/// "3L" integers (numpy reads such headers in format versions 1.0 and 2.0).
std::optional<PyLiteral> parse_py_literal(std::string_view text, bool allow_long_suffix,
                                          std::string& problem);

namespace literal_impl {

class Parser {
 public:
  Parser(std::string_view text, bool allow_long) : text_(text), allow_long_(allow_long) {}

  std::optional<PyLiteral> parse_all(std::string& problem) {
    PyLiteral value;
    bool ok = value_at(value, 0);
    if (ok) {
      skip_space();
      if (pos_ != text_.size()) ok = fail("unexpected text after the literal");
    }
    if (!ok) {
      problem = problem_;
      return std::nullopt;
    }
    return value;
  }

 private:
  static constexpr int max_depth = 32;
  std::string_view text_;
  bool allow_long_;
  std::size_t pos_ = 0;
  std::string problem_;

  bool fail(std::string_view what) {
    problem_ = std::string(what) + " at byte " + std::to_string(pos_);
    if (pos_ < text_.size()) problem_ += " ('" + printable(text_.substr(pos_, 12)) + "')";
    return false;
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool peek_is(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    const std::size_t end = pos_ + w.size();
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
      return false;
    pos_ = end;
    return true;
  }

  bool value_at(PyLiteral& out, int depth) {
    if (depth > max_depth) return fail("literal nested too deeply");
    skip_space();
    if (pos_ == text_.size()) return fail("unexpected end of header");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') return string_at(out);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer_at(out);
    if (c == '(') return sequence_at(out, PyLiteral::Kind::tuple, ')', depth);
    if (c == '[') return sequence_at(out, PyLiteral::Kind::list, ']', depth);
    if (c == '{') return sequence_at(out, PyLiteral::Kind::dict, '}', depth);
    if (word("True")) {
      out.kind = PyLiteral::Kind::boolean;
      out.flag = true;
      return true;
    }
    if (word("False")) {
      out.kind = PyLiteral::Kind::boolean;
      out.flag = false;
      return true;
    }
    if (word("None")) {
      out.kind = PyLiteral::Kind::none;
      return true;
    }
    return fail("expected a string, integer, True, False, None, tuple, list or dict");
  }

  bool string_at(PyLiteral& out) {
    const char quote = text_[pos_++];
    out.kind = PyLiteral::Kind::string;
    while (true) {
      if (pos_ == text_.size()) return fail("unterminated string");
      const char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        return true;
      }
      if (c == '\n' || c == '\r') return fail("line break inside a string");
      if (c == '\\') {
        if (pos_ + 1 == text_.size()) return fail("unterminated string");
        const char e = text_[pos_ + 1];
        const char decoded = e == '\\'   ? '\\'
                             : e == '\'' ? '\''
                             : e == '"'  ? '"'
                             : e == 'n'  ? '\n'
                             : e == 't'  ? '\t'
                             : e == 'r'  ? '\r'
                                         : '\0';
        if (decoded == '\0') return fail("unsupported escape in string");
        out.text += decoded;
        pos_ += 2;
        continue;
      }
      out.text += c;
      ++pos_;
    }
  }

  bool integer_at(PyLiteral& out) {
    out.kind = PyLiteral::Kind::integer;
    if (text_[pos_] == '-' || text_[pos_] == '+') {
      out.negative = text_[pos_] == '-';
      ++pos_;
      skip_space();  // Python allows "- 3"
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (out.magnitude > (UINT64_MAX - digit) / 10) out.too_large = true;
      if (!out.too_large) out.magnitude = out.magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return fail("expected digits");
    if (text_[start] == '0' && pos_ - start > 1 && text_.find_first_not_of('0', start) < pos_)
      return fail("integer with a leading zero");
    if (allow_long_ && (peek_is('L') || peek_is('l'))) ++pos_;
    if (pos_ < text_.size() &&
        (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' || text_[pos_] == '_'))
      return fail("malformed integer (only decimal integers are allowed)");
    return true;
  }

  // Tuples, lists and dicts: items separated by commas, optional trailing comma. "(x)" is x itself, as in
  // Python; "(x,)" is a one-element tuple.
  bool sequence_at(PyLiteral& out, PyLiteral::Kind kind, char close, int depth) {
    ++pos_;
    out.kind = kind;
    bool saw_comma = false;
    while (true) {
      skip_space();
      if (peek_is(close)) break;
      PyLiteral item;
      if (!value_at(item, depth + 1)) return false;
      out.items.push_back(std::move(item));
      skip_space();
      if (kind == PyLiteral::Kind::dict) {
        if (!peek_is(':')) return fail("expected ':' in dict");
        ++pos_;
        PyLiteral value;
        if (!value_at(value, depth + 1)) return false;
        out.items.push_back(std::move(value));
        skip_space();
      }
      if (peek_is(close)) break;
      if (!peek_is(',')) return fail(std::string("expected ',' or '") + close + "'");
      ++pos_;
      saw_comma = true;
    }
    ++pos_;
    if (kind == PyLiteral::Kind::tuple && out.items.size() == 1 && !saw_comma) {
      PyLiteral inner = std::move(out.items.front());
      out = std::move(inner);
    }
    return true;
  }
};

}  // namespace literal_impl

inline std::optional<PyLiteral> parse_py_literal(std::string_view text, bool allow_long_suffix,
                                                 std::string& problem) {
  return literal_impl::Parser(text, allow_long_suffix).parse_all(problem);
}

inline std::string PyLiteral::repr() const {
  switch (kind) {
    case Kind::string:
      return "'" + printable(text, 60) + "'";
    case Kind::integer:
      return too_large ? std::string(negative ? "-" : "") + "<integer of 20+ digits>"
                       : (negative && magnitude != 0 ? "-" : "") + std::to_string(magnitude);
    case Kind::boolean:
      return flag ? "True" : "False";
    case Kind::none:
      return "None";
    case Kind::tuple:
    case Kind::list:
    case Kind::dict: {
      std::string out(1, kind == Kind::tuple ? '(' : kind == Kind::list ? '[' : '{');
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += kind == Kind::dict && i % 2 == 1 ? ": " : ", ";
        if (out.size() > 120) {
          out += "...";
          break;
        }
        out += items[i].repr();
      }
      if (kind == Kind::tuple && items.size() == 1) out += ",";
      return out + (kind == Kind::tuple ? ')' : kind == Kind::list ? ']' : '}');
    }
  }
  return "?";
}

}  // namespace regatta::io::detail
