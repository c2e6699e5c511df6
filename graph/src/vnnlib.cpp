// The VNNLIB reader (docs/verify.md, "Properties"): tokens with line numbers, s-expressions with a depth
// limit, then the commands declare-const and assert, classified into input bounds and output constraints.
#include <regatta/graph/vnnlib.hpp>

#include <mpfr.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>

namespace regatta::graph {

namespace {

struct Sexp {
  bool list = false;
  std::string atom;
  std::size_t line = 0;
  std::vector<Sexp> items;
};

class Reader {
 public:
  Reader(std::string_view text, const std::string& source, const VnnlibLimits& limits)
      : text_(text), source_(source), limits_(limits) {}

  [[noreturn]] void fail(std::size_t line, const std::string& problem) const {
    throw InputError(source_, "line " + std::to_string(line) + ": " + problem);
  }

  // The next top-level expression, or nullopt at the end of the text.
  std::optional<Sexp> next() {
    skip();
    if (pos_ >= text_.size()) return std::nullopt;
    if (text_[pos_] == ')') fail(line_, "unbalanced parentheses: ')' without a matching '('");
    if (text_[pos_] != '(') fail(line_, "expected '(' to open a command, found " + regatta::quoted(word()));
    return expression(0);
  }

 private:
  void skip() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == ';') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  std::string word() {
    const std::size_t begin = pos_;
    while (pos_ < text_.size() &&
           std::string_view(" \t\r\n\f\v();").find(text_[pos_]) == std::string_view::npos)
      ++pos_;
    if (pos_ == begin) ++pos_;  // a lone character that cannot start a word
    std::string w(text_.substr(begin, pos_ - begin));
    if (w.size() > 200) w = w.substr(0, 200) + "...";
    return w;
  }
  Sexp expression(std::size_t depth) {
    Sexp e;
    e.line = line_;
    if (text_[pos_] == ')') fail(line_, "unbalanced parentheses: ')' without a matching '('");
    if (text_[pos_] != '(') {
      e.atom = word();
      return e;
    }
    if (depth >= limits_.max_depth)
      fail(line_, "parentheses nested deeper than " + std::to_string(limits_.max_depth));
    ++pos_;
    e.list = true;
    for (;;) {
      skip();
      if (pos_ >= text_.size()) fail(e.line, "unbalanced parentheses: this '(' is never closed");
      if (text_[pos_] == ')') {
        ++pos_;
        return e;
      }
      e.items.push_back(expression(depth + 1));
    }
  }

  std::string_view text_;
  const std::string& source_;
  const VnnlibLimits& limits_;
  std::size_t pos_ = 0, line_ = 1;
};

// A decimal constant of SMT-LIB (digits, optional fraction and exponent, optional leading '-'), enclosed by
// the two doubles MPFR rounds it to downwards and upwards. nullopt when the text is not such a number.
std::optional<RealConstant> parse_number(const std::string& s) {
  std::size_t k = 0;
  if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
  const std::size_t digits_begin = k;
  while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
  std::size_t digits = k - digits_begin;
  if (k < s.size() && s[k] == '.') {
    ++k;
    const std::size_t f = k;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
    digits += k - f;
  }
  if (digits == 0) return std::nullopt;
  if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
    ++k;
    if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
    const std::size_t e = k;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
    if (k == e) return std::nullopt;
  }
  if (k != s.size()) return std::nullopt;
  RealConstant c;
  mpfr_t x;
  mpfr_init2(x, 64);
  // Rounded to 53 bits in MPFR's range, then to a double in the same direction (subnormals, overflow).
  mpfr_set_prec(x, 53);
  mpfr_strtofr(x, s.c_str(), nullptr, 10, MPFR_RNDD);
  c.lower = mpfr_get_d(x, MPFR_RNDD);
  mpfr_strtofr(x, s.c_str(), nullptr, 10, MPFR_RNDU);
  c.upper = mpfr_get_d(x, MPFR_RNDU);
  mpfr_clear(x);
  return c;
}

struct Variable {
  bool output = false;
  std::size_t index = 0;
};

class Builder {
 public:
  Builder(Reader& reader, const std::string& source, const VnnlibLimits& limits)
      : r_(reader), limits_(limits) {
    p_.source = source;
    p_.disjuncts.emplace_back();  // "true"
  }

  void command(const Sexp& e) {
    if (e.items.empty() || e.items[0].list) r_.fail(e.line, "expected a command name after '('");
    const std::string& name = e.items[0].atom;
    if (name == "declare-const") return declare(e);
    if (name == "assert") {
      if (e.items.size() != 2) r_.fail(e.line, "assert takes one expression");
      return assertion(e.items[1]);
    }
    r_.fail(e.line, "unsupported command " + regatta::quoted(name) + " (supported: declare-const, assert)");
  }

  Property finish() {
    auto check_declared = [&](const std::vector<bool>& seen, const char* prefix) {
      for (std::size_t k = 0; k < seen.size(); ++k)
        if (!seen[k])
          r_.fail(std::max(p_.input_declaration_line, p_.output_declaration_line),
                  std::string(prefix) + std::to_string(k) + " is never declared (the " + prefix +
                      " variables must be numbered from 0 without gaps)");
    };
    check_declared(seen_x_, "X_");
    check_declared(seen_y_, "Y_");
    p_.input_count = seen_x_.size();
    p_.output_count = seen_y_.size();
    if (p_.input_count == 0) r_.fail(1, "no input variable X_0 is declared");
    if (p_.output_count == 0) r_.fail(1, "no output variable Y_0 is declared");
    p_.outer_lower.assign(p_.input_count, 0);
    p_.outer_upper.assign(p_.input_count, 0);
    p_.inner_lower.assign(p_.input_count, 0);
    p_.inner_upper.assign(p_.input_count, 0);
    for (std::size_t k = 0; k < p_.input_count; ++k) {
      if (!lower_[k])
        r_.fail(x_line_[k], "X_" + std::to_string(k) + " has no lower bound (assert (>= X_i c))");
      if (!upper_[k])
        r_.fail(x_line_[k], "X_" + std::to_string(k) + " has no upper bound (assert (<= X_i c))");
      const RealConstant lo = lower_[k]->first, hi = upper_[k]->first;
      if (lo.lower > hi.upper)
        r_.fail(std::max(lower_[k]->second, upper_[k]->second),
                "the box is empty: X_" + std::to_string(k) + " has lower bound above its upper bound");
      p_.outer_lower[k] = lo.lower;
      p_.outer_upper[k] = hi.upper;
      p_.inner_lower[k] = lo.upper;
      p_.inner_upper[k] = hi.lower;
    }
    return std::move(p_);
  }

 private:
  void declare(const Sexp& e) {
    if (e.items.size() != 3 || e.items[1].list || e.items[2].list)
      r_.fail(e.line, "expected (declare-const NAME Real)");
    if (e.items[2].atom != "Real")
      r_.fail(e.line, "variable " + regatta::quoted(e.items[1].atom) + " must have sort Real");
    const std::string& name = e.items[1].atom;
    const auto v = variable_name(name);
    if (!v)
      r_.fail(e.line,
              "variable " + regatta::quoted(name) + " is not named X_<index> (input) or Y_<index> (output)");
    if (vars_.size() >= limits_.max_variables)
      r_.fail(e.line, "more than " + std::to_string(limits_.max_variables) + " variables");
    if (v->index >= limits_.max_variables)
      r_.fail(e.line, "variable index of " + regatta::quoted(name) + " is over the limit");
    auto& seen = v->output ? seen_y_ : seen_x_;
    if (v->index >= seen.size()) seen.resize(v->index + 1, false);
    if (seen[v->index]) r_.fail(e.line, "variable " + regatta::quoted(name) + " is declared twice");
    seen[v->index] = true;
    vars_.emplace(name, *v);
    if (v->output) {
      p_.output_declaration_line = e.line;
    } else {
      p_.input_declaration_line = e.line;
      if (v->index >= x_line_.size()) {
        x_line_.resize(v->index + 1, 0);
        lower_.resize(v->index + 1);
        upper_.resize(v->index + 1);
      }
      x_line_[v->index] = e.line;
    }
  }

  static std::optional<Variable> variable_name(const std::string& name) {
    if (name.size() < 3 || (name[0] != 'X' && name[0] != 'Y') || name[1] != '_') return std::nullopt;
    std::size_t index = 0;
    const char* b = name.data() + 2;
    const char* end = name.data() + name.size();
    const auto [ptr, ec] = std::from_chars(b, end, index);
    if (ec != std::errc() || ptr != end || (name.size() > 3 && name[2] == '0')) return std::nullopt;
    return Variable{name[0] == 'Y', index};
  }

  // A variable (declared), a number, or (- number).
  struct Operand {
    std::optional<Variable> var;
    RealConstant constant;
  };
  Operand operand(const Sexp& e) {
    if (e.list) {
      if (e.items.size() == 2 && !e.items[0].list && e.items[0].atom == "-" && !e.items[1].list) {
        if (const auto c = parse_number(e.items[1].atom))
          return Operand{std::nullopt, finite(RealConstant{-c->upper, -c->lower}, e)};
      }
      r_.fail(e.line, "expected a variable or a number, found an expression (only (- c) is supported)");
    }
    if (const auto c = parse_number(e.atom)) return Operand{std::nullopt, finite(*c, e)};
    const auto it = vars_.find(e.atom);
    if (it == vars_.end())
      r_.fail(e.line, "unknown variable " + regatta::quoted(e.atom) + " (not declared before use)");
    return Operand{it->second, {}};
  }
  RealConstant finite(RealConstant c, const Sexp& e) {
    if (!std::isfinite(c.lower) || !std::isfinite(c.upper))
      r_.fail(e.line, "the constant " + regatta::quoted(e.list ? "-" + e.items[1].atom : e.atom) +
                          " is not a finite double");
    return c;
  }

  // (<= a b), (>= a b), (< a b), (> a b) as greater/smaller operands.
  bool comparison(const Sexp& e, Operand& greater, Operand& smaller, bool& strict) {
    if (!e.list || e.items.empty() || e.items[0].list) return false;
    const std::string& op = e.items[0].atom;
    if (op != "<=" && op != ">=" && op != "<" && op != ">") return false;
    if (e.items.size() != 3) r_.fail(e.line, regatta::quoted(op) + " takes two operands");
    Operand a = operand(e.items[1]), b = operand(e.items[2]);
    strict = op.size() == 1;
    const bool a_greater = op[0] == '>';
    greater = a_greater ? a : b;
    smaller = a_greater ? b : a;
    return true;
  }

  bool mentions_input(const Sexp& e) const {
    if (!e.list) {
      const auto it = vars_.find(e.atom);
      return it != vars_.end() && !it->second.output;
    }
    return std::any_of(e.items.begin(), e.items.end(), [&](const Sexp& s) { return mentions_input(s); });
  }

  void assertion(const Sexp& e) {
    if (mentions_input(e)) return input_constraint(e);
    std::vector<std::vector<Atom>> dnf = output_dnf(e);
    // Conjunction with what earlier asserts said: distribute, within the limits.
    if (p_.disjuncts.size() * dnf.size() > limits_.max_disjuncts)
      r_.fail(e.line,
              "the output condition has more than " + std::to_string(limits_.max_disjuncts) + " disjuncts");
    std::vector<std::vector<Atom>> product;
    for (const auto& a : p_.disjuncts)
      for (const auto& b : dnf) {
        product.push_back(a);
        product.back().insert(product.back().end(), b.begin(), b.end());
        atoms_ += product.back().size();
        if (atoms_ > limits_.max_atoms)
          r_.fail(e.line, "the output condition has more than " + std::to_string(limits_.max_atoms) +
                              " inequalities");
      }
    p_.disjuncts = std::move(product);
  }

  void input_constraint(const Sexp& e) {
    if (e.list && !e.items.empty() && !e.items[0].list && e.items[0].atom == "and") {
      for (std::size_t k = 1; k < e.items.size(); ++k) input_constraint(e.items[k]);
      return;
    }
    Operand g, s;
    bool strict = false;
    if (!comparison(e, g, s, strict))
      r_.fail(e.line,
              "an input constraint must be a bound (<= X_i c) or (>= X_i c), or an (and ...) of bounds "
              "(disjunctions over inputs are not supported)");
    if (g.var && s.var)
      r_.fail(e.line, "an input constraint compares two variables (only constant bounds are supported)");
    const bool x_is_greater = g.var.has_value();
    const Operand& x = x_is_greater ? g : s;
    const Operand& c = x_is_greater ? s : g;
    if (x.var->output) r_.fail(e.line, "a constraint mixes inputs and outputs");
    const std::size_t k = x.var->index;
    // A strict bound: its closure encloses the set (outer), and the inner side steps one double inside, so
    // that a counterexample never lies on the excluded boundary (docs/verify.md).
    RealConstant b = c.constant;
    if (strict && x_is_greater) b.upper = std::nextafter(b.upper, std::numeric_limits<double>::infinity());
    if (strict && !x_is_greater) b.lower = std::nextafter(b.lower, -std::numeric_limits<double>::infinity());
    auto& slot = x_is_greater ? lower_[k] : upper_[k];
    if (!slot || (x_is_greater ? b.upper > slot->first.upper : b.lower < slot->first.lower)) {
      if (slot)
        b = x_is_greater ? RealConstant{std::max(b.lower, slot->first.lower), b.upper}
                         : RealConstant{b.lower, std::min(b.upper, slot->first.upper)};
      slot = std::make_pair(b, e.line);  // the tighter of two bounds
    }
  }

  Atom atom(const Sexp& e) {
    Operand g, s;
    bool strict = false;
    if (!comparison(e, g, s, strict))
      r_.fail(e.line, "expected an inequality (<=, >=, <, >), (and ...) or (or ...) in an output constraint");
    if (!g.var && !s.var) r_.fail(e.line, "an inequality between two constants");
    auto term = [](const Operand& o) {
      return o.var ? Term{static_cast<int>(o.var->index), {}} : Term{-1, o.constant};
    };
    return Atom{term(g), term(s), strict, e.line};
  }

  std::vector<std::vector<Atom>> output_dnf(const Sexp& e) {
    const std::string head = e.list && !e.items.empty() && !e.items[0].list ? e.items[0].atom : "";
    if (head == "or") {
      std::vector<std::vector<Atom>> out;
      for (std::size_t k = 1; k < e.items.size(); ++k) {
        auto part = output_dnf(e.items[k]);
        if (out.size() + part.size() > limits_.max_disjuncts)
          r_.fail(e.line, "the output condition has more than " + std::to_string(limits_.max_disjuncts) +
                              " disjuncts");
        out.insert(out.end(), part.begin(), part.end());
      }
      if (out.empty()) r_.fail(e.line, "an empty (or) is false: the property could never hold");
      return out;
    }
    if (head == "and") {
      std::vector<std::vector<Atom>> out(1);
      for (std::size_t k = 1; k < e.items.size(); ++k) {
        const auto part = output_dnf(e.items[k]);
        if (out.size() * part.size() > limits_.max_disjuncts)
          r_.fail(e.line, "the output condition has more than " + std::to_string(limits_.max_disjuncts) +
                              " disjuncts");
        std::vector<std::vector<Atom>> product;
        for (const auto& a : out)
          for (const auto& b : part) {
            product.push_back(a);
            product.back().insert(product.back().end(), b.begin(), b.end());
          }
        out = std::move(product);
      }
      return out;
    }
    return {{atom(e)}};
  }

  Reader& r_;
  const VnnlibLimits& limits_;
  Property p_;
  std::unordered_map<std::string, Variable> vars_;
  std::vector<bool> seen_x_, seen_y_;
  std::vector<std::size_t> x_line_;
  std::vector<std::optional<std::pair<RealConstant, std::size_t>>> lower_, upper_;
  std::size_t atoms_ = 0;
};

}  // namespace

Property parse_vnnlib(std::string_view text, const std::string& source, const VnnlibLimits& limits) {
  if (text.size() > limits.max_file_bytes)
    throw InputError(source, "the property has " + std::to_string(text.size()) +
                                 " bytes, over the limit of " + std::to_string(limits.max_file_bytes));
  Reader reader(text, source, limits);
  Builder builder(reader, source, limits);
  while (const auto e = reader.next()) builder.command(*e);
  Property p = builder.finish();
  for (const auto& d : p.disjuncts)
    for (const Atom& a : d)
      for (const Term* t : {&a.greater, &a.smaller})
        if (t->output >= static_cast<int>(p.output_count))
          reader.fail(a.line, "Y_" + std::to_string(t->output) + " is out of range");
  return p;
}

Property read_vnnlib(const std::filesystem::path& file, const VnnlibLimits& limits) {
  const std::vector<std::byte> bytes = io::read_file_bytes(file, limits.max_file_bytes);
  return parse_vnnlib(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                      file.string(), limits);
}

void check_property_size(const Property& p, std::size_t model_inputs, std::size_t model_outputs) {
  if (p.input_count != model_inputs)
    throw InputError(p.source, "line " + std::to_string(p.input_declaration_line) + ": declares " +
                                   std::to_string(p.input_count) + " input variables X_i, the model has " +
                                   std::to_string(model_inputs) + " inputs");
  if (p.output_count != model_outputs)
    throw InputError(p.source, "line " + std::to_string(p.output_declaration_line) + ": declares " +
                                   std::to_string(p.output_count) + " output variables Y_i, the model has " +
                                   std::to_string(model_outputs) + " outputs");
}

}  // namespace regatta::graph
