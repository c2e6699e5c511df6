#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/spectral_norm.hpp>

#include <mpfi.h>
#include <mpfr.h>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <regatta/core/checks.hpp>
#include <regatta/core/detail/interval_gram_cholesky.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>

namespace regatta {

namespace {

using Eigen::Index;

/// Precision of every interval evaluation here: binary64 inputs are exact from 53 bits on.
constexpr unsigned min_interval_bits = 53;
/// δ₀ ≥ power_margin_factor · Δ: the error after a stop at change Δ is Δ/(1 − r⁴) (r the gap ratio, unknown
/// here); 1 assumes r⁴ ≤ 1/2 and the fine margin steps below make up for smaller gaps at no interval cost.
constexpr double power_margin_factor = 1.0;
/// Margin growth after a failed interval Cholesky whose double screen passed. That failure means the widths
/// of G (an interval input, or entries rounded to gram_precision_bits) need more margin than the midpoint:
/// 8 reaches a width-driven margin within few interval attempts (8 attempts span a factor 8^7 ≈ 2e6).
constexpr double interval_failure_growth = 8.0;
/// Margin steps at most: δ₀ ≥ 2^-52 and growth 2 reach δ = 2^60, far beyond the
/// fallback/σ̃ ratio (≤ √min(m, n) for an accurate σ̃), where the loop stops anyway.
constexpr int max_margin_steps = 112;

template <class S>
bool is_zero_matrix(const Matrix<S>& M) {
  for (Index i = 0; i < M.rows(); ++i)
    for (Index j = 0; j < M.cols(); ++j)
      if (M(i, j) != 0) return false;
  return true;
}

/// ‖x‖₂ as max|x_i| · ‖x / max|x_i|‖₂: no intermediate overflows or underflows to zero.
template <class S>
S scaled_norm(const Vector<S>& x) {
  using std::abs;
  using std::sqrt;
  S scale(0);
  for (Index i = 0; i < x.size(); ++i) {
    S a = abs(x(i));
    if (a > scale) scale = a;
  }
  if (scale == 0) return S(0);
  S sum(0);
  for (Index i = 0; i < x.size(); ++i) {
    S t = x(i) / scale;
    sum += t * t;
  }
  return scale * sqrt(sum);
}

/// Entries uniform in [−1, 1), built from the top 53 bits of each mt19937_64 output (portable, unlike the
/// standard distributions whose algorithms differ between libraries).
template <class S>
Vector<S> random_start(Index n, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  Vector<S> v(n);
  for (Index i = 0; i < n; ++i) {
    const double u = static_cast<double>(generator() >> 11) * 0x1.0p-53;
    v(i) = S(2.0 * u - 1.0);
  }
  return v;
}

void check_power_options(const PowerIterationOptions& options) {
  if (options.max_iterations < 1)
    throw InputError("max_iterations", "must be >= 1, got " + std::to_string(options.max_iterations));
  if (options.relative_tolerance &&
      !(std::isfinite(*options.relative_tolerance) && *options.relative_tolerance >= 0))
    throw InputError("relative_tolerance", "must be finite and >= 0");
}

/// Encloses ‖Mv‖/‖v‖ in interval arithmetic at max(working precision, 53) bits.
template <class S, class T>
interval norm_ratio_enclosure(const Matrix<S>& M, const Vector<T>& v) {
  if (v.size() != M.cols())
    throw InputError(
        "v", "has " + std::to_string(v.size()) + " entries, M has " + std::to_string(M.cols()) + " columns");
  check_finite("M", M);
  check_finite("v", v);
  std::optional<PrecisionGuard> guard;
  if (working_precision_bits() < min_interval_bits) guard.emplace(min_interval_bits);
  if (M.cols() == 0) return interval(0);
  std::vector<interval> vi(static_cast<std::size_t>(v.size()));
  interval v_sq(0);
  for (Index j = 0; j < v.size(); ++j) {
    vi[static_cast<std::size_t>(j)] = scalar_cast<interval>(v(j));
    v_sq += regatta::detail::square(vi[static_cast<std::size_t>(j)]);
  }
  if (upper_bound(v_sq) == 0) throw InputError("v", "is the zero vector");
  interval mv_sq(0);
  for (Index i = 0; i < M.rows(); ++i) {
    interval w(0);
    for (Index j = 0; j < M.cols(); ++j)
      w += scalar_cast<interval>(M(i, j)) * vi[static_cast<std::size_t>(j)];
    mv_sq += regatta::detail::square(w);
  }
  return sqrt(mv_sq) / sqrt(v_sq);
}

void check_certified_options(const CertifiedNormOptions& options) {
  check_power_options(options.power);
  if (options.gram_precision_bits < min_interval_bits || options.gram_precision_bits > max_precision_bits)
    throw InputError("gram_precision_bits", "must lie in [53, " + std::to_string(max_precision_bits) +
                                                "], got " + std::to_string(options.gram_precision_bits));
  if (options.max_cholesky_attempts < 0) throw InputError("max_cholesky_attempts", "must be >= 0");
}

/// Sets `out` to an interval enclosing the entry x (outward rounding at out's precision).
template <class S>
void set_entry(mpfi_ptr out, const S& x) {
  if constexpr (std::is_floating_point_v<S>)
    mpfi_set_d(out, static_cast<double>(x));
  else if constexpr (std::is_same_v<S, mpfr>)
    mpfi_set_fr(out, x.backend().data());
  else if constexpr (std::is_same_v<S, interval64>)
    mpfi_interv_d(out, x.lower(), x.upper());  // NaN endpoints stay NaN (check_finite rejects them first)
  else
    mpfi_set(out, x.backend().data());
}

/// min(√(‖M‖₁‖M‖∞), ‖M‖_F) over the magnitudes of the entries of `factor` (M or Mᵀ, N vectors of length K),
/// summed with upward rounding: an upper bound on ‖M'‖₂ for every M' in the box. Returns the bound rounded
/// up to a double and the method that gave it.
std::pair<double, const char*> fallback_upper_bound(const detail::MpfiArray& factor, std::size_t n,
                                                    std::size_t k_len, mpfr_prec_t precision) {
  mpfr_t mag, sum, max_outer, frob, prod;
  for (mpfr_ptr x : {mag, sum, max_outer, frob, prod}) mpfr_init2(x, precision);
  std::vector<__mpfr_struct> inner_sums(k_len);  // Σ over the N vectors, one per position k
  for (auto& s : inner_sums) {
    mpfr_init2(&s, precision);
    mpfr_set_ui(&s, 0, MPFR_RNDU);
  }
  mpfr_set_ui(max_outer, 0, MPFR_RNDU);
  mpfr_set_ui(frob, 0, MPFR_RNDU);
  for (std::size_t i = 0; i < n; ++i) {
    mpfr_set_ui(sum, 0, MPFR_RNDU);
    for (std::size_t k = 0; k < k_len; ++k) {
      mpfi_mag(mag, factor[i * k_len + k]);  // rounded up
      mpfr_add(sum, sum, mag, MPFR_RNDU);
      mpfr_add(&inner_sums[k], &inner_sums[k], mag, MPFR_RNDU);
      mpfr_sqr(mag, mag, MPFR_RNDU);
      mpfr_add(frob, frob, mag, MPFR_RNDU);
    }
    mpfr_max(max_outer, max_outer, sum, MPFR_RNDU);
  }
  mpfr_set_ui(sum, 0, MPFR_RNDU);
  for (auto& s : inner_sums) mpfr_max(sum, sum, &s, MPFR_RNDU);
  mpfr_mul(prod, max_outer, sum, MPFR_RNDU);
  mpfr_sqrt(prod, prod, MPFR_RNDU);
  mpfr_sqrt(frob, frob, MPFR_RNDU);
  // Frobenius on ties: it is the sharper statement for rank one and exactly 0 for the zero matrix.
  const bool use_frobenius = mpfr_lessequal_p(frob, prod) != 0;
  const double bound = mpfr_get_d(use_frobenius ? frob : prod, MPFR_RNDU);
  for (mpfr_ptr x : {mag, sum, max_outer, frob, prod}) mpfr_clear(x);
  for (auto& s : inner_sums) mpfr_clear(&s);
  return {bound, use_frobenius ? "frobenius" : "sqrt(norm1*norminf)"};
}

}  // namespace

// ---- power iteration ----

template <class S>
PowerIterationResult<S> spectral_norm_power(const Matrix<S>& M, const PowerIterationOptions& options) {
  static_assert(!scalar_traits<S>::is_interval, "run power iteration on the midpoint matrix");
  using std::abs;
  check_finite("M", M);
  check_power_options(options);
  const Index m = M.rows();
  const Index n = M.cols();
  PowerIterationResult<S> result;
  result.estimate = S(0);
  result.relative_change = S(0);
  result.right_vector = random_start<S>(n, options.seed);
  if (n > 0) result.right_vector /= scaled_norm(result.right_vector);
  if (m == 0 || n == 0 || is_zero_matrix(M)) {
    result.converged = true;
    return result;
  }
  const S tolerance =
      options.relative_tolerance ? S(*options.relative_tolerance) : default_power_tolerance<S>(m, n);

  Vector<S>& v = result.right_vector;
  Vector<S> w = M * v;
  S rho = scaled_norm(w) / scaled_norm(v);
  if (rho == 0) {
    // The start lies in the null space of M ≠ 0 (probability 0 for a random start, possible for structured
    // M): restart from the coordinate vector of a nonzero column, which M does not annihilate.
    Index j = 0;
    while (j < n && M.col(j).isZero(0)) ++j;
    v = Vector<S>::Zero(n);
    v(j) = S(1);
    w = M * v;
    rho = scaled_norm(w);
  }
  for (int k = 1; k <= options.max_iterations; ++k) {
    // z = Mᵀ(Mv/‖Mv‖) = MᵀMv/‖Mv‖ has norm ≤ ‖M‖₂: no overflow where ‖M‖₂ is representable.
    const Vector<S> u = w / scaled_norm(w);
    Vector<S> z = M.transpose() * u;
    const S z_norm = scaled_norm(z);
    if (z_norm == 0) break;  // vᵀz = ‖Mv‖ > 0 excludes this in exact arithmetic
    Vector<S> v_next = z / z_norm;
    Vector<S> w_next = M * v_next;
    const S rho_next = scaled_norm(w_next) / scaled_norm(v_next);
    if (rho_next == 0) break;
    result.relative_change = abs(rho_next - rho) / rho_next;
    v = std::move(v_next);
    w = std::move(w_next);
    rho = rho_next;
    result.iterations = k;
    if (result.relative_change <= tolerance) {
      result.converged = true;
      break;
    }
  }
  result.estimate = rho;
  return result;
}

// ---- certified lower bound ----

template <class S>
interval certified_lower_bound_from_vector(const Matrix<S>& M, const Vector<S>& v) {
  return norm_ratio_enclosure(M, v);
}

interval certified_lower_bound_from_vector(const Matrix<interval>& M, const Vector<double>& v) {
  return norm_ratio_enclosure(M, v);
}

// ---- certified upper bound ----

template <class S>
CertifiedNormBound spectral_norm_upper_certified(const Matrix<S>& M, const CertifiedNormOptions& options) {
  check_finite("M", M);
  check_certified_options(options);
  CertifiedNormBound out;
  out.method = "frobenius";
  const Index m = M.rows();
  const Index n = M.cols();
  if (m == 0 || n == 0) return out;  // ‖·‖ of an empty matrix is 0

  // The Gram side: G = FᵀF with F = M (G = MᵀM, N = n) or F = Mᵀ (G = MMᵀ, N = m), N = min(m, n).
  const bool gram_of_rows = m < n;
  const auto N = static_cast<std::size_t>(gram_of_rows ? m : n);
  const auto K = static_cast<std::size_t>(gram_of_rows ? n : m);
  const auto precision = static_cast<mpfr_prec_t>(options.gram_precision_bits);
  detail::MpfiArray factor(N * K, precision);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      const auto r = static_cast<Index>(gram_of_rows ? i : k);
      const auto c = static_cast<Index>(gram_of_rows ? k : i);
      set_entry(factor[i * K + k], M(r, c));
    }
  const auto [fallback, fallback_method] = fallback_upper_bound(factor, N, K, precision);
  out.upper = fallback;
  out.method = fallback_method;

  // σ̃ and the witness: power iteration in double on the midpoint matrix.
  Matrix<double> mid(m, n);
  for (Index i = 0; i < m; ++i)
    for (Index j = 0; j < n; ++j) mid(i, j) = scalar_traits<S>::to_double(M(i, j));
  if (!mid.allFinite()) {  // entries beyond the double range: the fallback is all we offer
    out.estimate = std::numeric_limits<double>::quiet_NaN();
    out.ratio = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  const PowerIterationResult<double> power = spectral_norm_power(mid, options.power);
  out.estimate = power.estimate;
  {
    const interval witness = norm_ratio_enclosure(M, power.right_vector);
    const double lower = mpfr_get_d(lower_bound(witness).backend().data(), MPFR_RNDD);
    out.lower = std::max(lower, 0.0);
  }

  const double sigma = power.estimate;
  if (options.allow_cholesky && sigma > 0 && std::isfinite(sigma)) {
    // Screen: the double Cholesky of (θ/σ̃)²I − (M/σ̃)ᵀ(M/σ̃) on the midpoint costs O(N³) flops and predicts the
    // interval one, so the margin can grow in fine steps and only promising θ pay for an interval attempt.
    const Matrix<double> scaled = mid / sigma;
    const Eigen::MatrixXd gram_mid = gram_of_rows ? Eigen::MatrixXd(scaled * scaled.transpose())
                                                  : Eigen::MatrixXd(scaled.transpose() * scaled);
    const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(gram_mid.rows(), gram_mid.cols());
    std::optional<detail::MpfiArray> gram;
    std::optional<detail::MpfiArray> work;
    const double unit_roundoff = 0x1.0p-53;
    double delta = std::max(power_margin_factor * power.relative_change,
                            2.0 * static_cast<double>(m + n) * unit_roundoff);
    for (int step = 0; step < max_margin_steps && out.cholesky_attempts < options.max_cholesky_attempts;
         ++step) {
      const double theta =
          std::max(sigma * (1.0 + delta), std::nextafter(sigma, std::numeric_limits<double>::infinity()));
      if (!(theta < out.upper)) break;  // the fallback is already at least as good
      const double shift = (1.0 + delta) * (1.0 + delta);
      if (Eigen::LLT<Eigen::MatrixXd>(shift * identity - gram_mid).info() != Eigen::Success) {
        delta *= cholesky_margin_growth;
        continue;
      }
      if (!gram) {
        gram.emplace(N * N, precision);
        work.emplace(N * N, precision);
        detail::interval_gram_lower(factor, N, K, *gram, precision);
      }
      ++out.cholesky_attempts;
      if (detail::shifted_interval_cholesky_succeeds(*gram, N, theta, *work, precision)) {
        out.upper = theta;  // an exact double with ‖M'‖₂ < θ
        out.method = "interval-cholesky";
        break;
      }
      // The screen passed but the enclosure did not: the widths of G (interval input) need the margin.
      delta *= interval_failure_growth;
    }
  }
  if (out.estimate > 0)
    out.ratio = out.upper / out.estimate;
  else
    out.ratio = out.upper == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return out;
}

// ---- reference ----

template <class S>
S spectral_norm_reference(const Matrix<S>& M) {
  using std::sqrt;
  check_finite("M", M);
  if (M.rows() == 0 || M.cols() == 0) return S(0);
  using Dense = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const Dense gram = M.rows() < M.cols() ? Dense(M * M.transpose()) : Dense(M.transpose() * M);
  Eigen::SelfAdjointEigenSolver<Dense> solver(gram, Eigen::EigenvaluesOnly);
  if (solver.info() != Eigen::Success) return scalar_traits<S>::quiet_nan();
  S top = solver.eigenvalues().maxCoeff();
  if (top < 0) top = S(0);
  return sqrt(top);
}

// ---- explicit instantiations ----
#define REGATTA_SPECTRAL_NORM_POINT(S)                                                                     \
  template PowerIterationResult<S> spectral_norm_power<S>(const Matrix<S>&, const PowerIterationOptions&); \
  template S spectral_norm_reference<S>(const Matrix<S>&);
#define REGATTA_SPECTRAL_NORM_ALL(S)                                                          \
  template interval certified_lower_bound_from_vector<S>(const Matrix<S>&, const Vector<S>&); \
  template CertifiedNormBound spectral_norm_upper_certified<S>(const Matrix<S>&, const CertifiedNormOptions&);
REGATTA_FOR_EACH_POINT_SCALAR(REGATTA_SPECTRAL_NORM_POINT)
REGATTA_FOR_EACH_SCALAR(REGATTA_SPECTRAL_NORM_ALL)

}  // namespace regatta
