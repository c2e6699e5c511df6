// Matrix norms in a scalar type (see matrix_norms.hpp).
#include "matrix_norms.hpp"

#include <mpfi.h>
#include <mpfr.h>

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <regatta/core/detail/interval_gram_cholesky.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/core/spectral_norm.hpp>

namespace regatta::lip::detail {

namespace {

using Eigen::Index;

CertifiedNormBound certified_norm(const Matrix<double>& M, Index limit) {
  CertifiedNormOptions options;
  options.allow_cholesky = std::min(M.rows(), M.cols()) <= limit;
  return spectral_norm_upper_certified<double>(M, options);
}

/// [lo, hi] from doubles (exact).
interval enclosure(double lo, double hi) { return make_interval(mpfr(lo), mpfr(hi)); }

/// The rounding error of a double matrix product with inner dimension k (Higham, Accuracy and Stability,
/// Thm 3.5, with the underflow model fl(a·b) = ab(1+δ) + η, |η| ≤ 2^-1075): for C = fl(AB) and E =
/// fl(|A||B|), |C − AB| ≤ γ_k |A||B| + k·2^-1074 and |A||B| ≤ (E + k·2^-1075)/(1 − γ_k), so for γ_k ≤ ½ (k ≤
/// 2^51) every entry of C − AB is at most 2γ_k E_ij + 2k·2^-1074. Any summation order and fused multiply-adds
/// satisfy it.
class ProductError {
 public:
  explicit ProductError(Index k) {
    mpfr_inits2(bits, gamma2_, tail_, scratch_, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_si_2exp(scratch_, static_cast<long>(k), -53, MPFR_RNDU);  // k·u, exact
    mpfr_ui_sub(gamma2_, 1, scratch_, MPFR_RNDD);
    mpfr_div(gamma2_, scratch_, gamma2_, MPFR_RNDU);  // γ_k, rounded up
    mpfr_mul_ui(gamma2_, gamma2_, 2, MPFR_RNDU);
    mpfr_set_si_2exp(tail_, 2 * static_cast<long>(k), -1074, MPFR_RNDU);
  }
  ~ProductError() { mpfr_clears(gamma2_, tail_, scratch_, static_cast<mpfr_ptr>(nullptr)); }
  ProductError(const ProductError&) = delete;
  ProductError& operator=(const ProductError&) = delete;

  /// out = 2γ_k e + 2k·2^-1074, rounded up (out initialised by the caller).
  void entry(mpfr_ptr out, double e) const {
    mpfr_set_d(out, e, MPFR_RNDU);
    mpfr_mul(out, out, gamma2_, MPFR_RNDU);
    mpfr_add(out, out, tail_, MPFR_RNDU);
  }

  /// An upper bound on ‖C − AB‖₂ ≤ ‖entrywise bound‖_F ≤ 2γ_k‖E‖_F + 2k·2^-1074·√(rows·cols), rounded up.
  mpfr spectral(const Matrix<double>& E) {
    mpfr_t sum;
    mpfr_init2(sum, bits);
    mpfr_set_ui(sum, 0, MPFR_RNDU);
    for (Index i = 0; i < E.rows(); ++i)
      for (Index j = 0; j < E.cols(); ++j) {
        mpfr_set_d(scratch_, E(i, j), MPFR_RNDU);
        mpfr_sqr(scratch_, scratch_, MPFR_RNDU);
        mpfr_add(sum, sum, scratch_, MPFR_RNDU);
      }
    mpfr_sqrt(sum, sum, MPFR_RNDU);
    mpfr_mul(sum, sum, gamma2_, MPFR_RNDU);
    mpfr_set_d(scratch_, double(E.rows()) * double(E.cols()), MPFR_RNDU);
    mpfr_sqrt(scratch_, scratch_, MPFR_RNDU);
    mpfr_mul(scratch_, scratch_, tail_, MPFR_RNDU);
    mpfr_add(sum, sum, scratch_, MPFR_RNDU);
    mpfr result(0);
    mpfr_set(result.backend().data(), sum, MPFR_RNDU);
    mpfr_clear(sum);
    return result;
  }

 private:
  static constexpr mpfr_prec_t bits = 128;
  mpfr_t gamma2_, tail_, scratch_;
};

/// Precision of the interval Gram matrices and Cholesky factors of the low-rank route.
constexpr mpfr_prec_t factor_precision_bits = 106;

/// An enclosure of the Cholesky factor L (G = L Lᵀ, lower triangular, k×k) of the Gram matrix G = XᵀX of
/// the d×k matrix X: G is formed in double and widened by its rounding error bound (ProductError), then
/// factored by the interval Cholesky; the Cholesky factor of every member of the interval Gram, the exact G
/// included, lies inside the result (Alefeld & Mayer 1993). Cost O(k²d) flops + O(k³) interval operations.
/// nullopt when a pivot is not certainly positive (X not certainly of full column rank) or G overflows.
std::optional<Matrix<interval>> gram_cholesky_factor(const Matrix<double>& X) {
  const Matrix<double> G = X.transpose() * X;
  const Matrix<double> E = X.cwiseAbs().transpose() * X.cwiseAbs();
  if (!G.allFinite() || !E.allFinite()) return std::nullopt;
  const std::size_t k = static_cast<std::size_t>(X.cols());
  const ProductError error(X.rows());
  ::regatta::detail::MpfiArray gram(k * k, factor_precision_bits), work(k * k, factor_precision_bits),
      radius(1, factor_precision_bits);
  mpfr_ptr r = &radius[0]->right;
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      error.entry(r, E(Index(i), Index(j)));
      mpfr_neg(&radius[0]->left, r, MPFR_RNDD);  // [−r, r]
      // The shifted routine factors θ²I − G; with θ = 0 and −G in place of G it factors G itself.
      mpfi_set_d(gram[i * k + j], -G(Index(i), Index(j)));
      mpfi_add(gram[i * k + j], gram[i * k + j], radius[0]);
    }
  if (!::regatta::detail::shifted_interval_cholesky_succeeds(gram, k, 0.0, work, factor_precision_bits))
    return std::nullopt;
  Matrix<interval> L = Matrix<interval>::Zero(Index(k), Index(k));
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j <= i; ++j) mpfi_set(L(Index(i), Index(j)).backend().data(), work[i * k + j]);
  return L;
}

/// Certified enclosure of ‖X Yᵀ‖₂ (see spectral_product).
interval certified_product_norm(const Matrix<double>& X, const Matrix<double>& Y, bool* loose) {
  // Low rank (k < d): X = Q_X L_Xᵀ with orthonormal Q_X = X L_X^{-T}, so ‖XYᵀ‖₂ = ‖L_Xᵀ L_Y‖₂ (k×k).
  const Index k = X.cols();
  if (k < X.rows() && k <= matrix_certification_limit) {
    const auto lx = gram_cholesky_factor(X), ly = gram_cholesky_factor(Y);
    if (lx && ly) {
      const Matrix<interval> core = ::regatta::detail::plain_product<interval>(lx->transpose(), *ly);
      const CertifiedNormBound b = spectral_norm_upper_certified<interval>(core);
      if (loose) *loose = b.method != "interval-cholesky";
      return enclosure(b.lower, b.upper);
    }
  }

  const CertifiedNormBound fx = certified_norm(X, matrix_certification_limit);
  const CertifiedNormBound fy = certified_norm(Y, matrix_certification_limit);
  const mpfr factor_hi = upper_bound(interval(fx.upper) * interval(fy.upper));
  const Matrix<double> C = X * Y.transpose();
  const Matrix<double> E = X.cwiseAbs() * Y.cwiseAbs().transpose();
  if (!C.allFinite() || !E.allFinite()) {
    if (loose) *loose = true;
    return make_interval(mpfr(0), factor_hi);
  }
  const bool cholesky = C.rows() <= product_certification_limit;
  const CertifiedNormBound pc = certified_norm(C, cholesky ? product_certification_limit : 0);
  const mpfr err = ProductError(k).spectral(E);
  // ‖C‖ − err ≤ ‖XYᵀ‖ ≤ ‖C‖ + err: lower rounded down, upper rounded up.
  mpfr lo(0), hi(0);
  mpfr_sub(lo.backend().data(), mpfr(pc.lower).backend().data(), err.backend().data(), MPFR_RNDD);
  mpfr_add(hi.backend().data(), mpfr(pc.upper).backend().data(), err.backend().data(), MPFR_RNDU);
  const bool factor = factor_hi < hi;
  if (factor) hi = factor_hi;
  if (loose) *loose = factor || pc.method != "interval-cholesky";
  if (lo < 0 || hi < lo) lo = 0;  // a cheap upper end may undercut the sharp lower end only by the errors
  return make_interval(lo, hi);
}

}  // namespace

template <class S>
S max_of(const S& a, const S& b) {
  if constexpr (scalar_traits<S>::is_interval) {
    const auto lo = std::max(lower_bound(a), lower_bound(b));  // mpfr for interval, double for interval64
    const auto hi = std::max(upper_bound(a), upper_bound(b));
    return make_interval(lo, hi);
  } else {
    return a < b ? b : a;
  }
}

template <class S>
S norm_inf(const Matrix<double>& M) {
  S best(0);
  for (Index i = 0; i < M.rows(); ++i) {
    S sum(0);
    for (Index j = 0; j < M.cols(); ++j) sum += S(std::abs(M(i, j)));
    best = max_of(best, sum);
  }
  return best;
}

template <class S>
S norm_one(const Matrix<double>& M) {
  S best(0);
  for (Index j = 0; j < M.cols(); ++j) {
    S sum(0);
    for (Index i = 0; i < M.rows(); ++i) sum += S(std::abs(M(i, j)));
    best = max_of(best, sum);
  }
  return best;
}

template <class S>
S spectral(const Matrix<double>& M, bool* loose) {
  if constexpr (scalar_traits<S>::is_interval) {  // interval64: the MPFI enclosure, rounded outward
    const CertifiedNormBound b = certified_norm(M, matrix_certification_limit);
    if (loose) *loose = std::min(M.rows(), M.cols()) > matrix_certification_limit;
    return enclosure(b.lower, b.upper);
  } else {
    if (loose) *loose = false;
    return spectral_norm_reference<S>(M.cast<S>());
  }
}

template <class S>
S spectral_product(const Matrix<double>& X, const Matrix<double>& Y, bool* loose) {
  if constexpr (scalar_traits<S>::is_interval) {
    return certified_product_norm(X, Y, loose);
  } else {
    if (loose) *loose = false;
    if constexpr (std::is_same_v<S, double>) {
      if (X.cols() < X.rows()) {
        // X = Q_X R_X, Y = Q_Y R_Y with orthonormal Q: ‖XYᵀ‖₂ = ‖R_X R_Yᵀ‖₂ (k×k).
        const Index k = X.cols();
        const Eigen::HouseholderQR<Matrix<double>> qx(X), qy(Y);
        const Matrix<double> rx = qx.matrixQR().topRows(k).triangularView<Eigen::Upper>();
        const Matrix<double> ry = qy.matrixQR().topRows(k).triangularView<Eigen::Upper>();
        return spectral_norm_reference<double>(Matrix<double>(rx * ry.transpose()));
      }
      return spectral_norm_reference<double>(Matrix<double>(X * Y.transpose()));
    } else {
      const Matrix<S> xs = X.cast<S>(), ys = Y.cast<S>();
      return spectral_norm_reference<S>(Matrix<S>(xs * ys.transpose()));
    }
  }
}

template <class S>
double upper_as_double(const S& x) {
  if constexpr (std::is_same_v<S, interval>) {
    return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU);
  } else if constexpr (std::is_same_v<S, interval64>) {
    return x.upper();
  } else {
    return scalar_traits<S>::to_double(x);
  }
}

#define REGATTA_LIP_MATRIX_NORMS(S)                                                    \
  template S max_of<S>(const S&, const S&);                                            \
  template S norm_inf<S>(const Matrix<double>&);                                       \
  template S norm_one<S>(const Matrix<double>&);                                       \
  template S spectral<S>(const Matrix<double>&, bool*);                                \
  template S spectral_product<S>(const Matrix<double>&, const Matrix<double>&, bool*); \
  template double upper_as_double<S>(const S&);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_LIP_MATRIX_NORMS)
#undef REGATTA_LIP_MATRIX_NORMS

}  // namespace regatta::lip::detail
