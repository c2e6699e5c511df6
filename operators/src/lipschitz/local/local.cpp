// Everything about ‖J(X)‖ for one self-attention block (see local.hpp;
// docs/math/jacobian.md#matrix-free-norms): the estimate of
// ‖J‖₂, its certified lower and upper ends, and ‖J‖∞ with its certified enclosure.
#include <regatta/operators/lipschitz/local.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>

#include <regatta/operators/lipschitz/fast_jvp.hpp>

#include "local_support.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using namespace detail;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Linearization;
using operators::Prenorm;

void check_interval_precision(unsigned bits) {
  if (bits < 64 || bits > max_precision_bits)
    throw InputError("precision", "must be between 64 and " + std::to_string(max_precision_bits) +
                                      " bits for the interval evaluations, got " + std::to_string(bits));
}

}  // namespace

LocalNormReport local_jacobian_norms(const AttentionLayer& layer, const AttentionOptions& options,
                                     const Matrix<double>& X, const LocalNormOptions& local) {
  check_interval_precision(local.precision_bits);
  check_spectral_options(local.spectral);
  if (local.certify && !local.certified_lower)
    throw InputError("certified_lower", "cannot be switched off when certifying");
  if (local.certify && !local.inf_norm)
    throw InputError("inf_norm", "cannot be switched off when certifying");
  LocalNormReport out;
  const Block<double> block(layer, options);
  const Linearization<double> lin = block.linearize(X);
  const Index nd = X.rows() * X.cols();

  const std::string two_stage = "norm-2 (" + to_string(local.spectral.method) + ")";
  report(local.progress, two_stage, 0, 1);
  out.two = jacobian_norm_2(lin, local.spectral);
  report(local.progress, two_stage, 1, 1);

  const bool structured = !structured_rows_refusal(layer, options).has_value();
  if (local.inf_norm) {
    out.inf_structured = structured;
    out.inf = structured ? block_jacobian_norm_inf<double>(layer, options, X, local.progress)
                         : jacobian_norm_inf<double>(lin, local.progress);
    out.has_inf = true;
  }

  if (!local.certified_lower) {
    out.two_upper_note = "not computed (needs --certify)";
    return out;
  }
  PrecisionGuard guard(local.precision_bits);
  report(local.progress, "certified lower bound (interval JVP)", 0, 1);
  // The MPFI block and linearisation only where they are needed (a non-finite interval64 lower bound, or
  // the MPFI fallbacks below): at BERT size they cost minutes, the interval64 ones seconds.
  std::optional<Block<interval>> iblock;
  std::optional<Linearization<interval>> ilin_storage;
  const auto ilin_get = [&]() -> const Linearization<interval>& {
    if (!ilin_storage) {
      iblock.emplace(layer, options);
      ilin_storage.emplace(iblock->linearize(cast<interval>(X)));
    }
    return *ilin_storage;
  };
  {
    // ‖J w‖_F/‖w‖_F enclosed in interval64 (outward rounded, so its lower end is certified as well).
    // Products by midpoint–radius GEMMs where they apply (fast_jvp.hpp: nothing d×d is formed, seconds at
    // BERT size), the generic Block<interval64> otherwise (it forms W^V_h W^O_h and the values by scalar
    // loops).
    const Matrix<double>& w = out.two.witness;
    const bool nonzero = w.cwiseAbs().maxCoeff() > 0;
    interval64 ratio = interval64::nan();
    if (nonzero && !fast_jvp_refusal(layer, options)) {
      ratio = jacobian_ratio_fast(layer, options, X, w);
      out.two_lower_jvp = "midpoint-radius products";
    } else {
      const Linearization<interval64> flin = Block<interval64>(layer, options).linearize(cast<interval64>(X));
      const Matrix<interval64> wi = cast<interval64>(w);
      ratio = frobenius<interval64>(flin.jvp(wi)) / frobenius<interval64>(wi);
      out.two_lower_jvp = "generic block";
    }
    if (isfinite(ratio) && ratio.lower() >= 0 && nonzero) {
      out.two_lower = std::max(0.0, ratio.lower());
    } else {
      out.two_lower = std::max(0.0, lower_double(jacobian_ratio_enclosure(ilin_get(), w)));
      out.two_lower_jvp = "MPFI block";
    }
  }
  out.has_two_lower = true;
  report(local.progress, "certified lower bound (interval JVP)", 1, 1);

  if (!local.certify) {
    out.two_upper_note = "not computed (needs --certify)";
    return out;
  }
  if (nd <= local.dense_limit) {
    // The dense Jacobian in interval64 first (hardware speed); MPFI at the working precision only when that
    // enclosure is not finite or too wide (dense_jacobian_width_limit). interval64 endpoints convert to MPFI
    // exactly (≥ 64 bits), so the Cholesky below certifies whichever enclosure was kept.
    Matrix<interval> J;
    std::optional<CertifiedNormBound> fast_bound;  // spectral_norm_upper_fast of the interval64 Jacobian
    {
      const Matrix<interval64> fast =
          structured
              ? block_dense_jacobian<interval64>(layer, options, X, local.progress)
              : operators::dense_jacobian(Block<interval64>(layer, options).linearize(cast<interval64>(X)));
      double scale = 1, width = 0;
      bool finite = true;
      for (Index r = 0; r < fast.rows(); ++r)
        for (Index c = 0; c < fast.cols(); ++c) {
          const interval64& e = fast(r, c);
          finite = finite && isfinite(e);
          scale = std::max({scale, std::fabs(e.lower()), std::fabs(e.upper())});
          width = std::max(width, e.upper() - e.lower());
        }
      if (finite && width <= dense_jacobian_width_limit * scale) {
        J = matrix_cast<interval>(fast);
        out.jacobian_scalar = "interval64";
        // The binary64 certificate first; the 106-bit MPFI one below only when it fell back to a norm
        // product (its Cholesky failed), where the MPFI enclosure may still certify a tight θ.
        fast_bound = spectral_norm_upper_fast(fast);
        if (fast_bound->method != "binary64-cholesky") fast_bound.reset();
      } else {
        J = structured ? block_dense_jacobian<interval>(layer, options, X, local.progress)
                       : operators::dense_jacobian(ilin_get());
        out.jacobian_scalar = "interval (MPFI, " + std::to_string(local.precision_bits) + " bits)";
      }
    }
    RunningMax<interval> best;
    for (Index r = 0; r < J.rows(); ++r) best.add(abs_sum<interval>(Matrix<interval>(J.row(r))), r);
    const InducedNorm<interval> inf = best.result();
    out.inf_lower = lower_double(inf.value);
    out.inf_upper = upper_double(inf.value);
    out.has_inf_enclosure = true;
    report(local.progress, "certified upper bound (interval Cholesky)", 0, 1);
    const CertifiedNormBound bound = fast_bound ? *fast_bound : spectral_norm_upper_certified<interval>(J);
    report(local.progress, "certified upper bound (interval Cholesky)", 1, 1);
    out.two_upper = bound.upper;
    out.two_lower = std::max(out.two_lower, bound.lower);
    out.has_two_upper = true;
    out.two_upper_method = bound.method;
  } else {
    const InducedNorm<interval> inf =
        structured ? block_jacobian_norm_inf<interval>(layer, options, X, local.progress)
                   : jacobian_norm_inf<interval>(ilin_get(), local.progress);
    out.inf_lower = lower_double(inf.value);
    out.inf_upper = upper_double(inf.value);
    out.has_inf_enclosure = true;
    out.two_upper_note = "n*d = " + std::to_string(nd) + " exceeds the dense certification limit " +
                         std::to_string(local.dense_limit);
  }
  return out;
}

}  // namespace regatta::lip
