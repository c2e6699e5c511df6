// midrad_product: interval64 matrix products by binary64 GEMMs and an a-priori rounding bound (the proof is
// in core/interval64_product.hpp).
#include <cassert>
#include <cmath>
#include <limits>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/interval64_product.hpp>
#include <regatta/core/rounding.hpp>

namespace regatta {

namespace {

using detail::i64::add;
using detail::i64::div;
using detail::i64::mul;
using Eigen::Index;

/// GEMM factors whose nonzero entries all reach this magnitude cannot underflow (docs/numerics.md): an entry
/// ≥ 2^-480 is a multiple of 2^-532, so every product, partial sum and fma of two such factors is a multiple
/// of q = 2^-1064 ≥ η; a multiple of q below 2^-1022 < 2^53·q is representable, so no result is rounded in
/// the subnormal range and the k·η term is not needed (it would otherwise turn exact zeros into tiny
/// subnormal radii, which are slow).
constexpr double no_underflow_floor = 0x1.0p-480;

/// γ_k = k u / (1 − k u) rounded up; +∞ when k u ≥ 1/2 (no bound offered).
double gamma_up(double k) {
  const double ku = mul<true>(k, unit_roundoff);
  if (!(ku < 0.5)) return std::numeric_limits<double>::infinity();
  return div<true>(ku, add<false>(1.0, -ku));
}

/// A box as midpoint and radius computed in round-to-nearest: m = fl(lo/2 + hi/2) (lo itself for a point),
/// r̃ = fl(max(hi − m, m − lo)). A subtraction's relative error is at most u even for subnormal results, so
/// [lo, hi] ⊆ [m − r, m + r] for r = r̃/(1 − u); point entries have r̃ = 0 exactly. `finite` is false when
/// any endpoint is not finite.
struct MidRad {
  Matrix<double> mid, rad;
  bool finite = true;
  bool point = true;  ///< every radius is 0
  bool tiny = false;  ///< some nonzero midpoint or radius is below no_underflow_floor
};

/// Whether x is nonzero and below no_underflow_floor in magnitude.
inline bool tiny(double x) { return x != 0 && std::fabs(x) < no_underflow_floor; }

MidRad split(const Matrix<interval64>& A) {
  MidRad s;
  s.mid.resize(A.rows(), A.cols());
  s.rad.resize(A.rows(), A.cols());
  bool finite = true, point = true, small = false;
  for (Index i = 0; i < A.size(); ++i) {
    const double lo = A(i).lower(), hi = A(i).upper();
    const double m = lo == hi ? lo : 0.5 * lo + 0.5 * hi, r = std::fmax(hi - m, m - lo);
    finite &= std::isfinite(lo) && std::isfinite(hi);
    point &= r == 0;
    small |= tiny(m) || tiny(r);
    s.mid(i) = m;
    s.rad(i) = r;
  }
  s.finite = finite;
  s.point = point;
  s.tiny = small;
  return s;
}

MidRad point(const Matrix<double>& A) {
  MidRad s;
  s.finite = A.allFinite();
  s.mid = A;
  s.rad = Matrix<double>::Zero(A.rows(), A.cols());
  for (Index i = 0; i < A.size() && !s.tiny; ++i) s.tiny = tiny(A(i));
  return s;
}

/// Inner lengths up to this take Eigen's coefficient-wise (lazy) product: one short vectorised dot product
/// per entry, without the blocking, packing and OpenMP threads of the GEMM kernel, whose start-up dominates
/// thin products (a sum over heads) and whose idle threads spin on a shared machine.
constexpr Index lazy_inner_limit = 16;

Matrix<double> gemm(const Matrix<double>& a, const Matrix<double>& b) {
  Matrix<double> c(a.rows(), b.cols());
  if (a.cols() <= lazy_inner_limit)
    c.noalias() = a.lazyProduct(b);  // the same error bound: any order of summation, with or without fma
  else
    c.noalias() = a * b;
  return c;
}

/// Whether some nonzero entry of M is below no_underflow_floor in magnitude.
bool may_underflow(const Matrix<double>& M) {
  bool small = false;
  for (Index i = 0; i < M.size(); ++i) small |= tiny(M(i));
  return small;
}

/// A step e ≥ 0 with fl(h + e) ≥ succ(h) and fl(h − e) ≤ pred(h): 2^-52·|h| + η bounds the gap from h to
/// either neighbour. For |h| ≥ 2^-969 the product 2^-52·|h| is exact, normal and already at least ulp(h),
/// so η is left out there: a subnormal operand costs a microcode assist per instruction on x86.
inline double successor_gap(double h) {
  const double a = std::fabs(h);
  return a >= 0x1p-969 ? 0x1p-52 * a : 0x1p-52 * a + underflow_unit;
}

/// The fast path (docs/numerics.md, step 8): every elementwise step in round-to-nearest, their relative
/// errors (at most u each, all values normal or exact) folded into one constant c ≥ 1/((1 − γ_k)(1 − u)^5)
/// on the radius; endpoints widened by one successor step. False when a GEMM factor may
/// underflow or a value overflows (C may then be partly written): the caller then takes the directed path.
bool product_nearest(const MidRad& a, const MidRad& b, Matrix<interval64>& C) {
  const double k = static_cast<double>(a.mid.cols());
  const double gamma = gamma_up(k);
  if (!std::isfinite(gamma)) return false;
  double denominator = add<false>(1.0, -gamma);
  for (int i = 0; i < 5; ++i) denominator = mul<false>(denominator, 1.0 - unit_roundoff);  // 1 − u exact
  const double c = div<true>(1.0, denominator);
  if (a.tiny || b.tiny) return false;  // (m and r̃ of both; L, U, V are checked below)

  const Matrix<double> M = gemm(a.mid, b.mid);
  const Matrix<double> abs_mid_b = b.mid.cwiseAbs();
  Matrix<double> S;  // fl(P̃ + Q̃)
  if (b.point) {
    const Matrix<double> L = gamma * a.mid.cwiseAbs() + a.rad;  // ≥ (γ|m_A| + r_A)(1 − u)²
    if (may_underflow(L)) return false;
    S = gemm(L, abs_mid_b);
  } else {
    const Matrix<double> U = b.rad + gamma * abs_mid_b;  // ≥ (r_B + γ|m_B|)(1 − u)²
    if (may_underflow(U)) return false;
    S = gemm(a.mid.cwiseAbs(), U);
    if (!a.point) {
      const Matrix<double> V = abs_mid_b + b.rad;  // ≥ (|m_B| + r_B)(1 − u)²
      if (may_underflow(V)) return false;
      S += gemm(a.rad, V);
    }
  }
  // t = fl(c·s), endpoints h = fl(M̃ ± t) and one successor step e = successor_gap(h) (at least the gap from
  // h to its neighbour), so fl(h + e) ≥ succ(h) and fl(h − e) ≤ pred(h) (monotone rounding). One fused pass
  // over row-major operands; a non-finite endpoint anywhere sends the caller to the directed path.
  C.resize(M.rows(), M.cols());
  bool finite = true;
  for (Index i = 0; i < M.size(); ++i) {
    const double t = c * S(i), up = M(i) + t, down = M(i) - t;
    const double hi = up + successor_gap(up), lo = down - successor_gap(down);
    finite &= std::isfinite(up) & std::isfinite(down);
    C(i) = t == 0 ? interval64(M(i)) : interval64::hull(lo, hi);  // t = 0: every product is 0
  }
  return finite;
}

/// An upper bound on the exact non-negative product behind fl(s) = `computed` (inner length k):
/// (fl(s) + k·η)/(1 − γ_k), rounded up.
double exact_upper(double computed, double k_eta, double inv_one_minus_gamma) {
  return mul<true>(add<true>(computed, k_eta), inv_one_minus_gamma);
}

/// The directed path: every elementwise step rounded outward with interval64's endpoint operations, and
/// the k·η underflow terms. False on overflow.
bool product_directed(const MidRad& a_nearest, const MidRad& b_nearest, Matrix<interval64>& C) {
  const double k = static_cast<double>(a_nearest.mid.cols());
  const double gamma = gamma_up(k);
  if (!std::isfinite(gamma)) return false;
  const double inv_one_minus_gamma = div<true>(1.0, add<false>(1.0, -gamma));
  // r = r̃/(1 − u) rounded up bounds each radius (see split).
  const double inv_one_minus_u = div<true>(1.0, 1.0 - unit_roundoff);
  MidRad a = a_nearest, b = b_nearest;
  for (Index i = 0; i < a.rad.size(); ++i) a.rad(i) = mul<true>(a.rad(i), inv_one_minus_u);
  for (Index i = 0; i < b.rad.size(); ++i) b.rad(i) = mul<true>(b.rad(i), inv_one_minus_u);

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
  const double k_eta = mul<true>(k, underflow_unit);
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

bool product(const MidRad& a, const MidRad& b, Matrix<interval64>& C) {
  return product_nearest(a, b, C) || product_directed(a, b, C);
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
