#pragma once
// VNNLIB properties (docs/verify.md, "Properties"): the SMT-LIB subset that VNN-COMP uses to state a
// local-robustness query on a model with inputs X_0..X_{n-1} and outputs Y_0..Y_{m-1}.
//
// A property is an input box (bounds on every X_i) and an output condition (a disjunction of conjunctions
// of inequalities between outputs and constants). The query is "is there an input in the box whose outputs
// satisfy the condition?": `sat` (yes, with a counterexample) or `unsat` (no: the model is verified).
//
// Decimal constants are generally not binary64 numbers, so every constant is kept as its enclosure
// [lower, upper] by the two neighbouring doubles (rounded by MPFR in each direction). The box is kept twice:
// `outer` encloses the real box (for proofs over it) and `inner` is contained in it (a counterexample drawn
// from it is in the real box).
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace regatta::graph {

struct VnnlibLimits {
  std::size_t max_file_bytes = std::size_t{256} << 20;  // 256 MiB
  std::size_t max_variables = std::size_t{1} << 24;     // X's and Y's together
  std::size_t max_depth = 64;                           // parenthesis nesting
  std::size_t max_disjuncts = std::size_t{1} << 16;     // of the output condition, after distribution
  std::size_t max_atoms = std::size_t{1} << 22;         // inequalities in the output condition, in all
};

/// A real constant c enclosed by binary64: lower <= c <= upper (equal when c is a double).
struct RealConstant {
  double lower = 0, upper = 0;
};

/// One side of an output inequality: an output Y_index, or a constant (index < 0).
struct Term {
  int output = -1;
  RealConstant constant;
};

/// greater >= smaller (strict: greater > smaller), from the source line `line`.
struct Atom {
  Term greater, smaller;
  bool strict = false;
  std::size_t line = 0;
};

struct Property {
  std::string source;
  std::size_t input_count = 0, output_count = 0;
  std::size_t input_declaration_line = 0, output_declaration_line = 0;  // the last declare-const of each
  std::vector<double> outer_lower, outer_upper;                         // encloses the real box
  std::vector<double> inner_lower,
      inner_upper;  // inside the real box (may be empty where a bound is not a double)
  /// The output condition in disjunctive normal form: it holds when every atom of some disjunct holds.
  /// One empty disjunct means "true" (no output constraint).
  std::vector<std::vector<Atom>> disjuncts;
};

/// Parses VNNLIB text. Every problem is an InputError whose message names `source` and the line.
Property parse_vnnlib(std::string_view text, const std::string& source, const VnnlibLimits& limits = {});
/// Reads and parses a file (size-limited).
Property read_vnnlib(const std::filesystem::path& file, const VnnlibLimits& limits = {});

/// Throws InputError naming the property's file and its declaration line when its variable counts are not
/// the model's input and output element counts.
void check_property_size(const Property& property, std::size_t model_inputs, std::size_t model_outputs);

}  // namespace regatta::graph
