// midrad_product: interval64 matrix products by binary64 GEMMs and an a-priori rounding bound (the proof is
// in core/interval64_product.hpp).
#include <cassert>
#include <cmath>
#include <limits>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/interval64_product.hpp>

namespace regatta {

namespace {

using detail::i64::add;
using detail::i64::div;
using detail::i64::mul;
using Eigen::Index;

constexpr double unit_roundoff = 0x1.0p-53;
/// η: the smallest subnormal (spectral_norm.hpp, step 3: each underflowing product or fma errs by ≤ η/2).
constexpr double underflow_unit = 0x1.0p-1074;
/// GEMM factors whose nonzero entries all reach this magnitude cannot underflow (docs/numerics.md): an entry
/// ≥ 2^-480 is a multiple of 2^-532, so every product, partial sum and fma of two such factors is a multiple
/// of q = 2^-1064 ≥ η; a multiple of q below 2^-1022 < 2^53·q is representable, so no result is rounded in
/// the subnormal range and the k·η term is not needed (it would otherwise turn exact zeros into tiny
/// subnormal radii, which are slow).
constexpr double no_underflow_floor = 0x1.0p-480;

/// Whether every nonzero entry of M has magnitude ≥ no_underflow_floor.
bool clear_of_underflow(const Matrix<double>& M) {
  for (Index i = 0; i < M.size(); ++i) {
    const double a = std::fabs(M(i));
    if (a != 0 && a < no_underflow_floor) return false;
  }
  return true;
}

/// γ_k = k u / (1 − k u) rounded up; +∞ when k u ≥ 1/2 (no bound offered).
double gamma_up(double k) {
  const double ku = mul<true>(k, unit_roundoff);
  if (!(ku < 0.5)) return std::numeric_limits<double>::infinity();
  return div<true>(ku, add<false>(1.0, -ku));
}

/// A box as midpoint and radius, [lo, hi] ⊆ [m − r, m + r]; `finite` is false when any endpoint is not.
struct MidRad {
  Matrix<double> mid, rad;
  bool finite = true;
  bool point = true;  ///< every radius is 0
};

MidRad split(const Matrix<interval64>& A) {
  MidRad s;
  s.mid.resize(A.rows(), A.cols());
  s.rad.resize(A.rows(), A.cols());
  for (Index i = 0; i < A.size(); ++i) {
    const double lo = A(i).lower(), hi = A(i).upper();
    if (!std::isfinite(lo) || !std::isfinite(hi)) {
      s.finite = false;
      return s;
    }
    const double m = lo == hi ? lo : 0.5 * lo + 0.5 * hi;
    const double r = lo == hi ? 0.0 : std::fmax(add<true>(hi, -m), add<true>(m, -lo));
    s.mid(i) = m;
    s.rad(i) = r;
    if (r != 0) s.point = false;
  }
  return s;
}

MidRad point(const Matrix<double>& A) {
  MidRad s;
  s.finite = A.allFinite();
  s.mid = A;
  s.rad = Matrix<double>::Zero(A.rows(), A.cols());
  return s;
}

Matrix<double> gemm(const Matrix<double>& a, const Matrix<double>& b) {
  Matrix<double> c(a.rows(), b.cols());
  c.noalias() = a * b;
  return c;
}

/// An upper bound on the exact non-negative product behind fl(s) = `computed` (inner length k):
/// (fl(s) + k·η)/(1 − γ_k), rounded up.
double exact_upper(double computed, double k_eta, double inv_one_minus_gamma) {
  return mul<true>(add<true>(computed, k_eta), inv_one_minus_gamma);
}

/// The product of two boxes given as midpoint and radius (both finite); empty optional-like flag on overflow.
bool product(const MidRad& a, const MidRad& b, Matrix<interval64>& C) {
  const double k = static_cast<double>(a.mid.cols());
  const double gamma = gamma_up(k);
  if (!std::isfinite(gamma)) return false;
  const double inv_one_minus_gamma = div<true>(1.0, add<false>(1.0, -gamma));

  const Matrix<double> M = gemm(a.mid, b.mid);
  Matrix<double> P, Q;
  const Matrix<double> abs_mid_b = b.mid.cwiseAbs();
  if (b.point) {
    // |A′B − M̃| ≤ (γ_k|m_A| + r_A)·|m_B| + k·η: one non-negative GEMM.
    Matrix<double> L(a.mid.rows(), a.mid.cols());
    for (Index i = 0; i < L.size(); ++i) L(i) = add<true>(mul<true>(gamma, std::fabs(a.mid(i))), a.rad(i));
    P = gemm(L, abs_mid_b);
  } else {
    Matrix<double> U(b.mid.rows(), b.mid.cols());
    for (Index i = 0; i < U.size(); ++i) U(i) = add<true>(b.rad(i), mul<true>(gamma, abs_mid_b(i)));
    P = gemm(a.mid.cwiseAbs(), U);
    if (!a.point) {
      Matrix<double> V(b.mid.rows(), b.mid.cols());
      for (Index i = 0; i < V.size(); ++i) V(i) = add<true>(abs_mid_b(i), b.rad(i));
      Q = gemm(a.rad, V);
    }
  }
  // The factors of every GEMM above are among m_A, r_A, L (≥ r_A, ≥ γ|m_A| entrywise, zero where both
  // are), m_B, U, V; the k·η term is dropped only when none of them can underflow.
  bool underflow = !clear_of_underflow(a.mid) || !clear_of_underflow(a.rad) || !clear_of_underflow(b.mid) ||
                   !clear_of_underflow(b.rad);
  if (!underflow)
    underflow = gamma != 0 && (!clear_of_underflow(gamma * a.mid) || !clear_of_underflow(gamma * b.mid));
  const double k_eta = underflow ? mul<true>(k, underflow_unit) : 0.0;
  C.resize(M.rows(), M.cols());
  for (Index i = 0; i < M.size(); ++i) {
    double rho = exact_upper(P(i), k_eta, inv_one_minus_gamma);
    if (Q.size() != 0) rho = add<true>(rho, exact_upper(Q(i), k_eta, inv_one_minus_gamma));
    rho = add<true>(rho, k_eta);
    const double m = M(i);
    if (!std::isfinite(m) || !std::isfinite(rho)) return false;  // an overflow somewhere: no a-priori bound
    C(i) = interval64::hull(add<false>(m, -rho), add<true>(m, rho));
  }
  return true;
}

Matrix<interval64> to_interval(const Matrix<double>& A) { return A.cast<interval64>(); }

Matrix<interval64> combine(const MidRad& a, const MidRad& b, const Matrix<interval64>& A,
                           const Matrix<interval64>& B) {
  Matrix<interval64> C;
  if (a.finite && b.finite && product(a, b, C)) return C;
  return detail::plain_product<interval64>(A, B);
}

}  // namespace

Matrix<interval64> midrad_product(const Matrix<interval64>& A, const Matrix<interval64>& B) {
  assert(A.cols() == B.rows());
  return combine(split(A), split(B), A, B);
}

Matrix<interval64> midrad_product(const Matrix<interval64>& A, const Matrix<double>& B) {
  assert(A.cols() == B.rows());
  const MidRad b = point(B);
  const MidRad a = b.finite ? split(A) : MidRad{};
  if (!b.finite) return detail::plain_product<interval64>(A, to_interval(B));
  Matrix<interval64> C;
  if (a.finite && product(a, b, C)) return C;
  return detail::plain_product<interval64>(A, to_interval(B));
}

Matrix<interval64> midrad_product(const Matrix<double>& A, const Matrix<interval64>& B) {
  assert(A.cols() == B.rows());
  const MidRad a = point(A), b = split(B);
  Matrix<interval64> C;
  if (a.finite && b.finite && product(a, b, C)) return C;
  return detail::plain_product<interval64>(to_interval(A), B);
}

}  // namespace regatta
