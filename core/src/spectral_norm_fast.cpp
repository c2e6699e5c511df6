// spectral_norm_upper_fast: the certified upper bound on ‖M‖₂ in binary64 (the proof is in the header).
#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/rounding.hpp>
#include <regatta/core/spectral_norm.hpp>

namespace regatta {

namespace {

using detail::i64::add;
using detail::i64::div;
using detail::i64::mul;
using Eigen::Index;

/// Power steps on RᵀR for the Collatz–Wielandt vector; any x > 0 is valid, these only tighten it.
constexpr int radius_power_steps = 8;
/// Floor of the Collatz–Wielandt vector relative to its largest entry (x must be positive).
constexpr double radius_vector_floor = 0x1.0p-30;
/// Margin steps at most (δ₀ ≥ 2^-52, ×2 per step reaches far beyond the fallback ratio ≤ √N).
constexpr int max_margin_steps = 112;
/// The first shift is this multiple of the a-priori estimate of ε + ω + β; a failed verification retries
/// with this multiple of the measured value.
constexpr double shift_safety = 2.0;

/// γ_k = k u / (1 − k u) rounded up; +∞ when k u ≥ 1/2 (no bound offered).
double gamma_up(double k) {
  const double ku = mul<true>(k, unit_roundoff);
  if (!(ku < 0.5)) return std::numeric_limits<double>::infinity();
  return div<true>(ku, add<false>(1.0, -ku));
}

/// ‖x‖₂ rounded up for a vector given by `at(i)`, i < n (sum of squares with upward rounding, √ up).
template <class At>
double norm_up(Index n, At at) {
  double s = 0;
  for (Index i = 0; i < n; ++i) {
    const double a = std::fabs(at(i));
    s = add<true>(s, mul<true>(a, a));
  }
  return detail::i64::sqrt<true>(s);
}

/// min(√(‖A‖₁‖A‖∞), ‖A‖_F) of the non-negative matrix A, rounded up, and the name of the smaller.
std::pair<double, const char*> fallback_bound(const Matrix<double>& A) {
  std::vector<double> col(static_cast<std::size_t>(A.cols()), 0.0);
  double row_max = 0, frob = 0;
  for (Index i = 0; i < A.rows(); ++i) {
    double row = 0;
    for (Index j = 0; j < A.cols(); ++j) {
      const double a = A(i, j);
      row = add<true>(row, a);
      col[static_cast<std::size_t>(j)] = add<true>(col[static_cast<std::size_t>(j)], a);
      frob = add<true>(frob, mul<true>(a, a));
    }
    row_max = std::max(row_max, row);
  }
  double col_max = 0;
  for (double c : col) col_max = std::max(col_max, c);
  const double prod = detail::i64::sqrt<true>(mul<true>(row_max, col_max));
  frob = detail::i64::sqrt<true>(frob);
  if (frob <= prod) return {frob, "frobenius"};
  return {prod, "sqrt(norm1*norminf)"};
}

/// Upper bound on ‖R‖₂ for a non-negative R (step 2 of the header).
double radius_norm_up(const Matrix<double>& R) {
  if (R.isZero(0)) return 0;
  const Index m = R.rows(), n = R.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Ones(n);
  for (int k = 0; k < radius_power_steps; ++k) {
    Eigen::VectorXd z = R.transpose() * (R * x);
    const double top = z.maxCoeff();
    if (!(top > 0) || !std::isfinite(top)) break;
    x = z / top;
  }
  const double floor = radius_vector_floor * x.maxCoeff();
  for (Index j = 0; j < n; ++j) x(j) = std::max(x(j), floor);
  std::vector<double> y(static_cast<std::size_t>(m), 0.0);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i)
      y[static_cast<std::size_t>(i)] = add<true>(y[static_cast<std::size_t>(i)], mul<true>(R(i, j), x(j)));
  double rho = 0;
  for (Index j = 0; j < n; ++j) {
    double z = 0;
    for (Index i = 0; i < m; ++i) z = add<true>(z, mul<true>(R(i, j), y[static_cast<std::size_t>(i)]));
    rho = std::max(rho, div<true>(z, x(j)));
  }
  const double cw = detail::i64::sqrt<true>(rho);
  return std::min(cw, fallback_bound(R).first);
}

/// Step 4 of the header for one θ and shift c: true when ‖C‖₂ < θ is proved. `needed` is set to ε + ω + β
/// (rounded up) when the factorisation ran, +∞ when it did not.
bool verify_shift(const Eigen::MatrixXd& S, double beta, double theta, double c, double& needed) {
  const Index N = S.rows();
  needed = std::numeric_limits<double>::infinity();
  Eigen::MatrixXd Q = -S;
  const interval64 theta_sq = interval64(theta) * interval64(theta);
  double omega = 0;
  for (Index i = 0; i < N; ++i) {
    const interval64 q = theta_sq - interval64(c) - interval64(S(i, i));
    Q(i, i) = q.lower();
    omega = std::max(omega, add<true>(q.upper(), -q.lower()));
  }
  if (!Q.allFinite()) return false;
  const Eigen::LLT<Eigen::MatrixXd> llt(Q);
  if (llt.info() != Eigen::Success) return false;
  const Eigen::MatrixXd Rh = llt.matrixU();
  if (!Rh.allFinite()) return false;
  const Eigen::MatrixXd W = Rh.transpose() * Rh;
  const double gamma_n = gamma_up(static_cast<double>(N));
  std::vector<double> col_norm(static_cast<std::size_t>(N));
  double col_norm_sum = 0;
  for (Index j = 0; j < N; ++j) {
    col_norm[static_cast<std::size_t>(j)] = norm_up(N, [&](Index i) { return Rh(i, j); });
    col_norm_sum = add<true>(col_norm_sum, col_norm[static_cast<std::size_t>(j)]);
  }
  const double tiny = mul<true>(static_cast<double>(N), underflow_unit);
  double eps = 0;
  for (Index i = 0; i < N; ++i) {
    double row = 0;
    for (Index j = 0; j < N; ++j) {
      const interval64 diff = interval64(Q(i, j)) - interval64(W(i, j));
      row = add<true>(row, std::max(std::fabs(diff.lower()), std::fabs(diff.upper())));
    }
    // Σ_j (γ_N ‖r̂_i‖‖r̂_j‖ + N η) = γ_N ‖r̂_i‖ Σ_j ‖r̂_j‖ + N·N η
    row = add<true>(row, mul<true>(gamma_n, mul<true>(col_norm[static_cast<std::size_t>(i)], col_norm_sum)));
    row = add<true>(row, mul<true>(static_cast<double>(N), tiny));
    eps = std::max(eps, row);
  }
  needed = add<true>(add<true>(eps, omega), beta);
  return needed < c;
}

CertifiedNormBound fast_bound(const Matrix<interval64>& box, const CertifiedNormOptions& options) {
  CertifiedNormBound out;
  out.method = "frobenius";
  const Index m = box.rows(), n = box.cols();
  if (m == 0 || n == 0) return out;

  // 0. Scaling by 2^-e.
  double top = 0;
  for (Index i = 0; i < m; ++i)
    for (Index j = 0; j < n; ++j)
      top = std::max({top, std::fabs(box(i, j).lower()), std::fabs(box(i, j).upper())});
  if (top == 0) return out;  // the zero matrix: 0 exactly
  // e ≥ −1020 keeps 2^-e finite for subnormal tops (entries then scale to ≤ 2^-1, still exactly).
  const int e = std::max(std::ilogb(top), -1020);
  const double down = std::ldexp(1.0, -e);  // exact powers of two (|e| ≤ 1074)
  const double up = std::ldexp(1.0, e);
  // 1. Midpoint C, radius R and the magnitudes A (for the fallback) of the scaled box.
  Matrix<double> C(m, n), R(m, n), A(m, n);
  for (Index i = 0; i < m; ++i)
    for (Index j = 0; j < n; ++j) {
      const double lo = mul<false>(box(i, j).lower(), down);
      const double hi = mul<true>(box(i, j).upper(), down);
      const double c = 0.5 * lo + 0.5 * hi;
      C(i, j) = c;
      R(i, j) = std::max({0.0, add<true>(hi, -c), add<true>(c, -lo)});
      A(i, j) = std::max(std::fabs(lo), std::fabs(hi));
    }
  const auto [fallback, fallback_method] = fallback_bound(A);
  double upper_scaled = fallback;
  out.method = fallback_method;

  const PowerIterationResult<double> power = spectral_norm_power(C, options.power);
  const double sigma = power.estimate;
  out.estimate = sigma * up;  // an estimate (exact unless it leaves the double range)

  // lower: ‖M'v‖/‖v‖ over the scaled box, in interval64, times 2^e rounded down.
  {
    const Vector<double>& v = power.right_vector;
    interval64 mv_sq(0.0), v_sq(0.0);
    for (Index j = 0; j < n; ++j) v_sq += square(interval64(v(j)));
    for (Index i = 0; i < m; ++i) {
      interval64 w(0.0);
      for (Index j = 0; j < n; ++j)
        w += interval64::hull(mul<false>(box(i, j).lower(), down), mul<true>(box(i, j).upper(), down)) *
             interval64(v(j));
      mv_sq += square(w);
    }
    if (v_sq.lower() > 0) {
      const interval64 ratio = sqrt(mv_sq) / sqrt(v_sq);
      out.lower = std::max(0.0, mul<false>(ratio.lower(), up));
    }
  }

  const double radius = radius_norm_up(R);
  if (options.allow_cholesky && sigma > 0 && std::isfinite(sigma) && radius < upper_scaled) {
    // 3. The Gram side and its a-priori error bound β.
    const bool gram_of_rows = m < n;
    const Index N = gram_of_rows ? m : n;
    const Index K = gram_of_rows ? n : m;
    const Eigen::MatrixXd G =
        gram_of_rows ? Eigen::MatrixXd(C * C.transpose()) : Eigen::MatrixXd(C.transpose() * C);
    Eigen::MatrixXd S = G.triangularView<Eigen::Lower>();
    S.triangularView<Eigen::StrictlyUpper>() = G.triangularView<Eigen::StrictlyLower>().transpose();
    std::vector<double> f_norm(static_cast<std::size_t>(N));
    double f_norm_sum = 0, f_norm_max = 0;
    for (Index i = 0; i < N; ++i) {
      f_norm[static_cast<std::size_t>(i)] = gram_of_rows ? norm_up(K, [&](Index k) { return C(i, k); })
                                                         : norm_up(K, [&](Index k) { return C(k, i); });
      f_norm_sum = add<true>(f_norm_sum, f_norm[static_cast<std::size_t>(i)]);
      f_norm_max = std::max(f_norm_max, f_norm[static_cast<std::size_t>(i)]);
    }
    const double gamma_k = gamma_up(static_cast<double>(K));
    // β = max_i Σ_j (γ_K ‖f_i‖‖f_j‖ + K η) = γ_K max‖f_i‖ Σ‖f_j‖ + N K η
    const double beta =
        add<true>(mul<true>(gamma_k, mul<true>(f_norm_max, f_norm_sum)),
                  mul<true>(static_cast<double>(N), mul<true>(static_cast<double>(K), underflow_unit)));
    // 4. Margins.
    double delta = std::max(power.relative_change, 2.0 * static_cast<double>(m + n) * unit_roundoff);
    double measured = 0;  // ε + ω + β of the last verified factorisation that fell short
    for (int step = 0; step < max_margin_steps && out.cholesky_attempts < options.max_cholesky_attempts;
         ++step) {
      const double theta =
          std::max(sigma * (1.0 + delta), std::nextafter(sigma, std::numeric_limits<double>::infinity()));
      if (!(add<true>(theta, radius) < upper_scaled)) break;  // the fallback is already at least as good
      // A-priori ε: γ_N ‖r̂_i‖ Σ‖r̂_j‖ with ‖r̂_j‖² ≈ Q_jj ≤ θ², i.e. ≲ γ_N N θ².
      const double guess =
          shift_safety * (beta + gamma_up(static_cast<double>(N)) * static_cast<double>(N) * theta * theta);
      const double c = std::max(guess, shift_safety * measured);
      if (!(c < theta * theta - sigma * sigma)) {  // no room for the shift at this θ
        delta *= 2;
        continue;
      }
      double needed = 0;
      ++out.cholesky_attempts;
      if (verify_shift(S, beta, theta, c, needed)) {
        const double bound = add<true>(theta, radius);
        if (bound < upper_scaled) {
          upper_scaled = bound;
          out.method = "binary64-cholesky";
        }
        break;
      }
      if (std::isfinite(needed)) {
        measured = needed;  // retry with room for the measured error (δ grows if it does not fit)
      } else {
        // The factorisation broke down: θ is below (or too close to) σ. A breakdown is the screen, not a
        // verification, so it does not use up max_cholesky_attempts (max_margin_steps bounds the loop): with
        // a small spectral gap the power estimate can sit 1e-5 below σ, ~16 doublings of δ away.
        --out.cholesky_attempts;
        delta *= 2;
      }
    }
  }
  out.upper = mul<true>(upper_scaled, up);
  if (out.estimate > 0)
    out.ratio = out.upper / out.estimate;
  else
    out.ratio = out.upper == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return out;
}

void check_fast_options(const CertifiedNormOptions& options) {
  if (options.max_cholesky_attempts < 0) throw InputError("max_cholesky_attempts", "must be >= 0");
  if (options.power.max_iterations < 1)
    throw InputError("max_iterations", "must be >= 1, got " + std::to_string(options.power.max_iterations));
}

}  // namespace

CertifiedNormBound spectral_norm_upper_fast(const Matrix<double>& M, const CertifiedNormOptions& options) {
  check_finite("M", M);
  check_fast_options(options);
  return fast_bound(M.cast<interval64>(), options);
}

CertifiedNormBound spectral_norm_upper_fast(const Matrix<interval64>& M,
                                            const CertifiedNormOptions& options) {
  check_finite("M", M);
  check_fast_options(options);
  return fast_bound(M, options);
}

}  // namespace regatta
