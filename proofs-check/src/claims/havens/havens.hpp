#pragma once
// Havens et al. (2024) local-sensitivity claims (docs/math/bounds.md#havens-local, reconstructed and derived
// there):
// havens.local_delta, havens.xi_exact, havens.score_identity, havens.naive_ordering,
// havens.gradnorm_comparator, havens.certified_radius, havens.power_iteration.
//
// Setting: F(X) = X W^skip + Σ_h P_h(X) X W^VO_h, one dot-product layer of operators::Block (forward passes,
// JVPs, VJPs; any biases, causal mask, residual W^skip = I). Everything the bounds are made of is formed here
// from its definition, generic over the scalar: the scores and kernels P_h, the explicit Kronecker matrices
// of ξ and κ_h (docs/math/bounds.md#havens-xi, docs/math/bounds.md#havens-kappa), their matrix-free actions
// (docs/math/bounds.md#havens-matrix-free) and the spectral norms (interval:
// certified enclosures tight to about 2^(24−p) relative — a witness at the working-precision top singular
// vector from below, an interval Cholesky certificate from above — so that bounds the search approaches to
// 1e-16 are still certified). The left sides of the inequalities are computed directly —
// ‖F(X + E) − F(X)‖_F by two forward passes at an adversarial E found by projected gradient ascent through
// the library VJP (in double, when the point is drawn) — and the right sides from the bounds' formulas. The
// library's matrix-free Lanczos estimates (lipschitz/local.hpp) are compared with the dense Kronecker norms.
//
// This header is the family's shared machinery (internal to proofs-check): points and their decoding, the
// scalar-generic pieces of docs/math/bounds.md#havens-local (templates, defined here), the certified spectral
// norm and the PGD
// search; the non-template functions are defined in support.cpp. The claims, grouped by concept:
// local_bound.cpp (havens.local_delta, havens.gradnorm_comparator, havens.certified_radius), identities.cpp
// (havens.xi_exact, havens.score_identity), norms.cpp (havens.naive_ordering, havens.power_iteration).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <type_traits>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/havens_operators.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include "../common.hpp"
#include "../layout.hpp"

namespace regatta::proofs::claims::havens {

using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using Mat = Matrix<double>;

// =========================================================================================================
// Points: the layer
// =========================================================================================================

/// Discrete coordinates of a layer: k = {n, d, heads, d_h, d_v, causal, residual, biases}; biases 0: none,
/// 1: query, value and output biases, 2: also key biases.
struct Shape {
  long n = 1, d = 1, heads = 1, dh = 1, dv = 1;
  bool causal = false, residual = false;
  long biases = 0;
};
inline const Keys shape_keys{"n", "d", "heads", "d_h", "d_v", "causal", "residual", "biases"};

/// The shape from the first shape_keys.size() discrete coordinates (further ones are the claim's own).
Shape read_shape(const Point& p);

/// The discrete coordinates of a shape, in the order of shape_keys.
std::vector<long> shape_k(const Shape& s);

/// The first blocks of x, the weights: per head WQ_h, WK_h (d×d_h), WV_h (d×d_v); WO (H·d_v × d); with
/// biases per head bQ_h (d_h), bV_h (d_v), then bO (d); with key biases per head bK_h (d_h). A claim's
/// layout appends its own blocks to this one.
Layout weights_layout(const Shape& s);

/// The layer of the weight blocks of l (a layout that starts with weights_layout(s)); p has them all.
AttentionLayer read_layer(const Shape& s, const Layout& l, const Point& p);

AttentionOptions options_of(const Shape& s);

struct ShapeRange {
  long n_min = 1, n_max = 5, d_min = 1, d_max = 4, heads_max = 2;
};

Shape sample_shape(Rng& rng, const ShapeRange& range);

/// Writes the weight blocks into x, still empty: W^Q, W^K entries N(0, (qk/√d)²), W^V, W^O entries
/// N(0, (v/√d)²), biases N(0, qk²/4).
void append_weights(Rng& rng, const Shape& s, double qk, double v, std::vector<double>& x);

// =========================================================================================================
// Scalar-generic pieces of docs/math/bounds.md#havens-local
// =========================================================================================================

/// The weights in S (exact lifts of the binary64 layer) and the derived per-head matrices.
template <class S>
struct Weights {
  long heads = 1;
  bool causal = false, residual = false;
  std::vector<Matrix<S>> WQ, WK, WV, WO, WVO, A;  // A_h = W^Q_h W^K_hᵀ/√d_h, W^VO_h = W^V_h W^O_h
  std::vector<Vector<S>> bQ, bK;                  // empty vectors without the bias
  S scale{};                                      // 1/√d_h
};

template <class S>
Weights<S> weights_of(const AttentionLayer& L, const AttentionOptions& o) {
  using std::sqrt;
  Weights<S> w;
  w.heads = L.heads;
  w.causal = o.causal;
  w.residual = o.residual;
  w.scale = S(1) / sqrt(lift<S>(static_cast<double>(L.head_dim)));
  for (int h = 0; h < L.heads; ++h) {
    w.WQ.push_back(num::lift_matrix<S>(L.WQ[h]));
    w.WK.push_back(num::lift_matrix<S>(L.WK[h]));
    w.WV.push_back(num::lift_matrix<S>(L.WV[h]));
    w.WO.push_back(num::lift_matrix<S>(Mat(L.WO.middleRows(h * L.value_dim, L.value_dim))));
    w.WVO.push_back(num::mul<S>(w.WV.back(), w.WO.back()));
    w.A.push_back(Matrix<S>(num::mul<S>(w.WQ.back(), Matrix<S>(w.WK.back().transpose())) * w.scale));
    w.bQ.push_back(L.bQ.empty() ? Vector<S>() : Vector<S>(num::lift_matrix<S>(Mat(L.bQ[h]))));
    w.bK.push_back(L.bK.empty() ? Vector<S>() : Vector<S>(num::lift_matrix<S>(Mat(L.bK[h]))));
  }
  return w;
}

/// S_h(X) = (X W^Q + 1 b_Qᵀ)(X W^K + 1 b_Kᵀ)ᵀ/√d_h, from the definition.
template <class S>
Matrix<S> scores(const Weights<S>& w, long h, const Matrix<S>& X) {
  Matrix<S> Q = num::mul<S>(X, w.WQ[h]), K = num::mul<S>(X, w.WK[h]);
  if (w.bQ[h].size() != 0) Q.rowwise() += w.bQ[h].transpose();
  if (w.bK[h].size() != 0) K.rowwise() += w.bK[h].transpose();
  return num::mul<S>(Q, Matrix<S>(K.transpose())) * w.scale;
}

/// P_h(X) = softmax_row(S_h + M) (causal: key j visible to query i iff j ≤ i).
template <class S>
std::vector<Matrix<S>> kernels(const Weights<S>& w, const Matrix<S>& X) {
  const long n = X.rows();
  std::vector<Matrix<S>> out;
  for (long h = 0; h < w.heads; ++h) {
    const Matrix<S> Sc = scores(w, h, X);
    Matrix<S> P(n, n);
    for (long i = 0; i < n; ++i) {
      std::vector<S> row(static_cast<std::size_t>(n));
      std::vector<bool> visible(static_cast<std::size_t>(n));
      for (long j = 0; j < n; ++j) {
        row[j] = Sc(i, j);
        visible[j] = !w.causal || j <= i;
      }
      const std::vector<S> p = num::softmax(row, visible);
      for (long j = 0; j < n; ++j) P(i, j) = p[j];
    }
    out.push_back(P);
  }
  return out;
}

/// C_h = X A_hᵀ and B_h = X A_h + 1 b_Q,hᵀ(W^K_h)ᵀ/√d_h: 𝓛_h(E) = E C_hᵀ + B_h Eᵀ
/// (docs/math/bounds.md#havens-kappa).
template <class S>
std::pair<Matrix<S>, Matrix<S>> score_factors(const Weights<S>& w, long h, const Matrix<S>& X) {
  Matrix<S> B = num::mul<S>(X, w.A[h]);
  if (w.bQ[h].size() != 0) {
    const Matrix<S> c = num::mul<S>(Matrix<S>(w.bQ[h].transpose()), Matrix<S>(w.WK[h].transpose())) * w.scale;
    B.rowwise() += c.row(0);
  }
  return {num::mul<S>(X, Matrix<S>(w.A[h].transpose())), B};
}

template <class S>
Matrix<S> kron(const Matrix<S>& a, const Matrix<S>& b) {
  Matrix<S> out(a.rows() * b.rows(), a.cols() * b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j)
      out.block(i * b.rows(), j * b.cols(), b.rows(), b.cols()) = a(i, j) * b;
  return out;
}

/// K_{n,d}: vec(Eᵀ) = K_{n,d} vec(E) for E ∈ R^{n×d} (row-major vectorisation,
/// docs/math/README.md#vectorisation).
template <class S>
Matrix<S> commutation(long n, long d) {
  Matrix<S> K = Matrix<S>::Zero(n * d, n * d);
  for (long i = 0; i < n; ++i)
    for (long b = 0; b < d; ++b) K(b * n + i, i * d + b) = S(1);
  return K;
}

template <class S>
Matrix<S> identity(long n) {
  return Matrix<S>::Identity(n, n);
}

/// I_n ⊗ (W^skip)ᵀ + Σ_h P_h ⊗ (W^VO_h)ᵀ (docs/math/bounds.md#havens-xi), W^skip = I with a residual, else 0.
template <class S>
Matrix<S> xi_matrix(const Weights<S>& w, const std::vector<Matrix<S>>& P, long d) {
  const long n = P.front().rows();
  Matrix<S> K = Matrix<S>::Zero(n * d, n * d);
  if (w.residual) K += kron<S>(identity<S>(n), identity<S>(d));
  for (long h = 0; h < w.heads; ++h) K += kron<S>(P[h], Matrix<S>(w.WVO[h].transpose()));
  return K;
}

/// I_n ⊗ C + (B ⊗ I_n) K_{n,d} (docs/math/bounds.md#havens-kappa with C = X Aᵀ, B = X A [+ query bias]).
template <class S>
Matrix<S> kappa_matrix(const Matrix<S>& C, const Matrix<S>& B) {
  const long n = C.rows(), d = C.cols();
  return kron<S>(identity<S>(n), C) + num::mul<S>(kron<S>(B, identity<S>(n)), commutation<S>(n, d));
}

// ---- the matrix-free actions of docs/math/bounds.md#havens-matrix-free ----

// (one definition in the library, lipschitz/havens_operators.hpp; here with the reference-order product)

/// num::mul as a callable, for the operators of havens_operators.hpp.
template <class S>
struct ReferenceProduct {
  Matrix<S> operator()(const Matrix<S>& a, const Matrix<S>& b) const { return num::mul<S>(a, b); }
};

template <class S>
Matrix<S> xi_apply(const Weights<S>& w, const std::vector<Matrix<S>>& P, const Matrix<S>& V) {
  return lip::xi_apply<S>(w.residual, P, w.WVO, V, ReferenceProduct<S>{});
}
template <class S>
Matrix<S> xi_apply_transpose(const Weights<S>& w, const std::vector<Matrix<S>>& P, const Matrix<S>& U) {
  return lip::xi_apply_transpose<S>(w.residual, P, w.WVO, U, ReferenceProduct<S>{});
}
template <class S>
Matrix<S> kappa_apply(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& V) {
  return lip::kappa_apply<S>(C, B, V, ReferenceProduct<S>{});
}
template <class S>
Matrix<S> kappa_apply_transpose(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& G) {
  return lip::kappa_apply_transpose<S>(C, B, G, ReferenceProduct<S>{});
}

/// Row-major vectorisation and its inverse.
template <class S>
Vector<S> vec(const Matrix<S>& M) {
  Vector<S> v(M.size());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) v(i * M.cols() + j) = M(i, j);
  return v;
}
template <class S>
Matrix<S> unvec(const Vector<S>& v, long rows, long cols) {
  Matrix<S> M(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) M(i, j) = v(i * cols + j);
  return M;
}

template <class S>
Matrix<S> apply(const Matrix<S>& K, const Matrix<S>& V) {
  return num::mul<S>(K, Matrix<S>(vec<S>(V)));
}

/// The matrix whose column i·cols + j is vec(f(E_ij)) for the basis E_ij of R^{rows×cols} (a linear map made
/// dense from its action).
template <class S, class F>
Matrix<S> columns(long rows, long cols, F f) {
  Matrix<S> out;
  Matrix<S> E = Matrix<S>::Zero(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) {
      E(i, j) = S(1);
      const Vector<S> c = vec<S>(f(E));
      E(i, j) = S(0);
      if (out.size() == 0) out = Matrix<S>::Zero(c.size(), rows * cols);
      out.col(i * cols + j) = c;
    }
  return out;
}

// ---- top singular vector and spectral norms ----

Vector<mpfr> top_right_vector_mpfr(const Matrix<mpfr>& M);

/// A unit right singular vector of M for σ_max: double from Jacobi SVD, mpfr from the eigenvectors of MᵀM at
/// the working precision, interval: the mpfr vector of the midpoint matrix, as exact points.
template <class S>
Vector<S> top_right_vector(const Matrix<S>& M) {
  if constexpr (std::is_same_v<S, double>) {
    return dense_svd(Eigen::MatrixXd(M), false, true).V.col(0);
  } else if constexpr (std::is_same_v<S, mpfr>) {
    return top_right_vector_mpfr(M);
  } else {
    const Vector<mpfr> v = top_right_vector_mpfr(matrix_cast<mpfr>(M));
    Vector<interval> out(v.size());
    for (Eigen::Index i = 0; i < v.size(); ++i) out(i) = scalar_cast<interval>(v(i));
    return out;
  }
}

/// A certified upper bound on ‖M'‖₂ for every M' in the interval matrix M: θ = ‖M̃ v‖(1 + 2^(24−p)), else
/// ‖M̃ v‖(1 + 2^(−p/2)), for the midpoint M̃ and its working-precision top singular vector v, accepted when the
/// interval Cholesky factorisation of θ²I − MᵀM has pivots with positive lower ends — then every symmetric
/// matrix of the box is positive definite (Alefeld & Mayer 1993, as in spectral_norm_upper_certified), so θ²
/// > λ_max(M'ᵀM'). Tight to about 2^(24−p) relative, where the library's certificate at 106 bits stops near
/// 1e-12; nullopt when a pivot is not certified positive (e.g. M = 0).
std::optional<mpfr> cholesky_upper(const Matrix<interval>& M, const Vector<mpfr>& v);

/// ‖M‖₂: double Jacobi SVD, mpfr the working-precision reference (num::norm_2); interval the certified
/// enclosure of num::norm_2 narrowed to [certified ‖M v‖/‖v‖ at the working-precision top singular vector v,
/// cholesky_upper] — tight to about 2^(24−p) relative, so that bounds approached to a relative 1e-16 by the
/// search are still certified.
template <class S>
S spec(const Matrix<S>& M) {
  if constexpr (num::is_interval_v<S>) {
    const interval base = num::norm_2<interval>(M);
    if (M.size() == 0) return base;
    const Vector<mpfr> v = top_right_vector_mpfr(matrix_cast<mpfr>(M));
    Vector<interval> vi(v.size());
    for (Eigen::Index i = 0; i < v.size(); ++i) vi(i) = scalar_cast<interval>(v(i));
    const interval witness = certified_lower_bound_from_vector<interval>(M, vi);
    mpfr lo = lower_bound(base), hi = upper_bound(base);
    if (lower_bound(witness) > lo) lo = lower_bound(witness);
    if (const std::optional<mpfr> theta = cholesky_upper(M, v); theta && *theta < hi) hi = *theta;
    if (lo > hi) hi = lo;  // cannot happen for valid enclosures; keeps the interval well formed
    return make_interval(lo, hi);
  } else {
    return num::norm_2<S>(M);
  }
}

/// The ingredients of δ at X (docs/math/bounds.md#havens-delta).
template <class S>
struct Sensitivity {
  S xi{};
  std::vector<S> kappa, score, values, input_values;  // κ_h, ‖A_h‖₂, ‖W^VO_h‖₂, ‖X W^VO_h‖₂
};

template <class S>
Sensitivity<S> sensitivity(const Weights<S>& w, const Matrix<S>& X) {
  Sensitivity<S> q;
  q.xi = spec<S>(xi_matrix<S>(w, kernels<S>(w, X), X.cols()));
  for (long h = 0; h < w.heads; ++h) {
    const auto [C, B] = score_factors<S>(w, h, X);
    q.kappa.push_back(spec<S>(kappa_matrix<S>(C, B)));
    q.score.push_back(spec<S>(w.A[h]));
    q.values.push_back(spec<S>(w.WVO[h]));
    q.input_values.push_back(spec<S>(num::mul<S>(X, w.WVO[h])));
  }
  return q;
}

/// δ(X, ε) = ε ξ + ½ Σ_h (ε κ_h + ε² ‖A_h‖₂)(‖X W^VO_h‖₂ + ε ‖W^VO_h‖₂) (docs/math/bounds.md#havens-delta,
/// the boxed formula).
template <class S>
S delta_of(const Sensitivity<S>& q, const S& eps) {
  S sum(0);
  for (std::size_t h = 0; h < q.kappa.size(); ++h)
    sum += (eps * q.kappa[h] + eps * eps * q.score[h]) * (q.input_values[h] + eps * q.values[h]);
  return eps * q.xi + sum / S(2);
}

/// c₁, c₂, c₃ of δ = c₁ε + c₂ε² + c₃ε³ (docs/math/bounds.md#havens-delta).
template <class S>
std::array<S, 3> coefficients(const Sensitivity<S>& q) {
  S c1 = q.xi, c2(0), c3(0);
  for (std::size_t h = 0; h < q.kappa.size(); ++h) {
    c1 += q.kappa[h] * q.input_values[h] / S(2);
    c2 += (q.kappa[h] * q.values[h] + q.score[h] * q.input_values[h]) / S(2);
    c3 += q.score[h] * q.values[h] / S(2);
  }
  return {c1, c2, c3};
}

/// U/‖U‖_F in S (a unit direction; U ≠ 0).
template <class S>
Matrix<S> unit(const Mat& U) {
  const Matrix<S> u = num::lift_matrix<S>(U);
  return u / num::frobenius<S>(u);
}

// =========================================================================================================
// Adversarial directions (double)
// =========================================================================================================

/// An objective of a perturbation E: its value and its gradient in E.
using Objective = std::function<std::pair<double, Mat>(const Mat&)>;

/// Projected gradient ascent on the sphere ‖E‖_F = ε (docs/math/bounds.md#havens-pgd): normalised steps of
/// length η·ε (η = 0.5, shrinking by 0.92 per step), E rescaled back to the sphere, from every start; returns
/// the best E seen (a direction; the claims rescale it exactly).
Mat ascend(const Objective& f, const std::vector<Mat>& starts, double eps, int steps);

Mat gaussian(Rng& rng, long rows, long cols);

/// The top right singular vector of the ξ Kronecker matrix at X, as an n×d matrix (the PGD start of
/// docs/math/bounds.md#havens-pgd).
Mat xi_direction(const AttentionLayer& L, const AttentionOptions& o, const Mat& X);

/// argmax over E on the ε-sphere of ‖F(X + E) − F(X)‖_F: φ(Y) = ⟨G, F(Y)⟩ with G = F(X + E) − F(X) has the
/// gradient DF(Y)ᵀG (the library VJP). Starts: the top singular vector of ξ and `randoms` Gaussian matrices.
Mat output_attack(const AttentionLayer& L, const AttentionOptions& o, const Mat& X, double eps, Rng& rng,
                  int randoms, int steps);

// =========================================================================================================
// Perturbed points: layer weights | X (n×d) | ε | U (n×d), E = ε U/‖U‖_F (on the sphere: δ increases with ε,
// so the spheres of all radii cover the balls)
// =========================================================================================================

/// weights_layout(s), then the blocks X (n×d), eps (1) and U (n×d).
Layout perturbed_layout(const Shape& s);

struct Perturbed {
  Shape shape;
  AttentionLayer layer;
  AttentionOptions options;
  Mat X, U;
  double eps = 0;
};

/// Decodes the blocks of perturbed_layout; x may have further coordinates after U (a claim's own).
Perturbed decode(const Point& p);

inline constexpr double max_coordinate = 1e4;
inline constexpr double min_eps = 0x1.0p-12, max_eps = 4.0;

/// Clamps every coordinate to [−1e4, 1e4] and ε to [2^-12, 4], and gives U a non-zero entry if it has none.
void repair_perturbed(Point& p);

struct Draw {
  double qk = 1, v = 1, x = 1;  // scales of W^Q/W^K, W^V/W^O and X
  bool corner = true;           // X entries Rng::corner(x) (zeros, tiny and huge values), else N(0, x²)
};

Draw sample_scales(Rng& rng);

double sample_eps(Rng& rng);

/// A perturbed point with E from `attack` (the PGD output attack when true, else a Gaussian direction).
Point make_perturbed(Rng& rng, const Shape& s, const Draw& scale, double eps, bool attack, int randoms,
                     int steps);

/// Family "pgd" (docs/math/bounds.md#havens-pgd): PGD with restarts plus the top singular vector of ξ, ε ∈
/// {0.01, 0.1, 0.5},
/// H ∈ {1, 8}, moderate and large score scales, with and without residual (n = d = 4, Gaussian X).
std::vector<Point> pgd_family();

nlohmann::json describe_layer(const Point& p, const Shape& s);

nlohmann::json describe_perturbed(const Point& p);

extern const std::vector<std::string> layer_hypotheses;

/// ClaimInfo::evaluated_at of the family: how the spectral norms (spec) and the PGD directions enter.
inline const std::string havens_norms_evaluation =
    "Spectral norms (xi, kappa_h, weight norms) are enclosures: lower end ||M v||/||v|| in interval "
    "arithmetic at the working-precision top singular vector v of the midpoint matrix (an mpfr eigenvector, "
    "lifted exactly; any v is valid), upper end an interval Cholesky certificate of theta^2 I - M^T M.";
inline const std::string havens_pgd_evaluation =
    " The perturbation E = eps U/||U||_F is a coordinate of the point (U found by projected gradient ascent "
    "in double): the left side is evaluated exactly at that E and the bound must hold at every E, so the "
    "ascent's iterate needs no error term.";

}  // namespace regatta::proofs::claims::havens
