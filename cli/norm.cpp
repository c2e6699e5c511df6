// regatta norm (MATRIX | --random SPEC): the spectral norm ‖M‖₂ of a matrix as a power-iteration estimate and
// a certified bracket [lower, upper] (interval arithmetic). Every bound on attention built later multiplies
// spectral norms of weight matrices; this command exposes the certified building block on its own.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "json_output.hpp"
#include "numbers.hpp"
#include "spec.hpp"

namespace regatta::cli {

namespace {

struct NormArgs {
  std::string matrix;
  std::string random;
  unsigned precision = 106;
  long long cholesky_limit = 512;
  bool json = false;
};

constexpr long long max_random_matrix_dim = 8192;

RandomMatrixSpec parse_random(const std::string& text) {
  const Spec spec("--random", text, {"kind", "rank", "cond", "seed"});
  if (!spec.positional()) throw InputError("--random", "expected ROWSxCOLS first, e.g. 64x64,seed=1");
  const auto [rows, cols] = parse_dimensions("--random", *spec.positional(), max_random_matrix_dim);
  RandomMatrixSpec r;
  r.rows = rows;
  r.cols = cols;
  r.seed = spec.get_seed("seed", 0);
  const std::string kind = spec.get_string("kind", "gaussian");
  if (kind == "gaussian") {
    r.kind = RandomMatrixKind::gaussian;
  } else if (kind == "lowrank") {
    r.kind = RandomMatrixKind::low_rank;
    r.rank = spec.get_int("rank", 1, 1, std::min(rows, cols));
  } else if (kind == "illcond") {
    r.kind = RandomMatrixKind::ill_conditioned;
    r.condition = spec.get_double("cond", 1e12, 1, 1e300);
  } else {
    throw InputError("--random", "kind must be gaussian, lowrank or illcond, got '" + kind + "'");
  }
  if (r.kind != RandomMatrixKind::low_rank && spec.has("rank"))
    throw InputError("--random", "'rank' applies to kind=lowrank only");
  if (r.kind != RandomMatrixKind::ill_conditioned && spec.has("cond"))
    throw InputError("--random", "'cond' applies to kind=illcond only");
  return r;
}

std::string describe(const RandomMatrixSpec& r) {
  std::ostringstream os;
  os << "random " << to_string(r.kind) << " " << r.rows << "x" << r.cols;
  if (r.kind == RandomMatrixKind::low_rank) os << " rank=" << r.rank;
  if (r.kind == RandomMatrixKind::ill_conditioned) os << " cond=" << r.condition;
  os << " seed=" << r.seed;
  return os.str();
}

void run(const NormArgs& args, int& result) {
  if (args.matrix.empty() == args.random.empty())
    throw InputError("norm", "give exactly one of MATRIX (a .npy/.npz/.safetensors array) or --random SPEC");
  Matrix<double> m;
  std::string source;
  if (!args.random.empty()) {
    const RandomMatrixSpec r = parse_random(args.random);
    m = random_matrix(r);
    source = describe(r);
  } else {
    const io::Array a = load_array(args.matrix);
    if (a.shape.size() != 2)
      throw InputError(a.source,
                       "expected a 2-D matrix, got " + std::to_string(a.shape.size()) + " dimensions");
    io::require_finite(a);
    m = a.matrix();
    check_nonempty(a.source, m.size());
    source = a.source;
  }

  CertifiedNormOptions options;
  options.gram_precision_bits = args.precision;
  const bool cholesky_allowed = std::min(m.rows(), m.cols()) <= args.cholesky_limit;
  options.allow_cholesky = cholesky_allowed;
  const PowerIterationResult<double> power = spectral_norm_power<double>(m, options.power);
  const auto overflow = [&] {
    return InputError(source, "the spectral norm is not a finite double (max |entry| = " +
                                  number(m.cwiseAbs().maxCoeff(), 17) + "): rescale the matrix");
  };
  // A power vector that overflowed is no point to certify at (its NaN was reported as the vector's).
  if (!std::isfinite(power.estimate) || !power.right_vector.allFinite()) throw overflow();
  const CertifiedNormBound bound = spectral_norm_upper_certified<double>(m, options);
  CertifiedNormOptions cheap = options;
  cheap.allow_cholesky = false;
  const CertifiedNormBound cheap_bound = spectral_norm_upper_certified<double>(m, cheap);
  const double relative_width = bound.lower > 0 ? (bound.upper - bound.lower) / bound.lower : INFINITY;
  // The estimate and the certified lower end are finite for every finite matrix whose norm is a double;
  // otherwise the entries are too large for the double range: bad input, nothing printed as a result.
  if (!std::isfinite(bound.lower)) throw overflow();
  // Power iteration approaches ‖M‖₂ from below in exact arithmetic; its rounding can put the double just
  // above the certified upper end, so the printed estimate is kept inside the certified bracket.
  const double estimate = std::clamp(power.estimate, bound.lower, bound.upper);

  if (args.json) {
    nlohmann::json out{{"source", source},
                       {"rows", m.rows()},
                       {"cols", m.cols()},
                       {"estimate", estimate},
                       {"estimate_kind", "estimate (power iteration, from below up to rounding)"},
                       {"power_iterations", power.iterations},
                       {"power_converged", power.converged},
                       {"certified_lower", bound.lower},
                       {"certified_upper", bound.upper},
                       {"certified", true},
                       {"upper_method", bound.method},
                       {"cheap_certified_upper", cheap_bound.upper},
                       {"cheap_method", cheap_bound.method},
                       {"relative_width", std::isfinite(relative_width) ? nlohmann::json(relative_width)
                                                                        : nlohmann::json(nullptr)},
                       {"gram_precision_bits", args.precision},
                       {"cholesky_attempts", bound.cholesky_attempts}};
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << std::setprecision(17);
    std::cout << "matrix            " << source << " (" << m.rows() << " x " << m.cols() << ")\n"
              << "estimate          " << estimate
              << "   [estimate: power iteration from below up to rounding, " << power.iterations
              << " iterations" << (power.converged ? ", converged" : ", NOT converged") << "]\n"
              << "certified lower   " << lower_decimal(bound.lower, 17)
              << "   [certified: interval ‖Mv‖/‖v‖ at the power vector]\n"
              << "certified upper   " << upper_decimal(bound.upper, 17) << "   [certified: " << bound.method
              << (cholesky_allowed ? "" : ", Cholesky skipped: min(rows, cols) > --cholesky-limit") << "]\n"
              << std::setprecision(3) << "relative width    " << relative_width
              << "   (upper - lower) / lower\n"
              << std::setprecision(17) << "cheap upper       " << upper_decimal(cheap_bound.upper, 17)
              << "   [certified: " << cheap_bound.method << ", for comparison]\n";
  }
  // A certified upper end beyond the double range bounds nothing: exit 1 with the reason.
  if (!std::isfinite(bound.upper)) {
    std::cerr << "regatta: norm: the certified upper bound is not a finite double (the Gram matrix of "
              << printable(source) << " leaves the double range)\n";
    result = exit_check_failed;
    return;
  }
  result = exit_ok;
}

}  // namespace

void add_norm_command(CLI::App& app, int& result) {
  auto args = std::make_shared<NormArgs>();
  auto* cmd = app.add_subcommand("norm", "Spectral norm of a matrix: estimate and certified bracket");
  cmd->add_option("matrix", args->matrix,
                  "Matrix file: FILE.npy, FILE.npz[:NAME] or FILE.safetensors[:NAME]");
  cmd->add_option(
      "--random", args->random,
      "Built-in random matrix: ROWSxCOLS[,kind=gaussian|lowrank|illcond][,rank=R][,cond=C][,seed=S]");
  cmd->add_option("--precision", args->precision, "Bits of the interval Gram matrix and Cholesky (>= 53)")
      ->check(CLI::Range(53u, 4096u));
  cmd->add_option("--cholesky-limit", args->cholesky_limit,
                  "Largest min(rows, cols) for the Cholesky certificate (cost ~N^3/6 interval operations)")
      ->check(CLI::Range(1ll, 8192ll));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
