// Local regularity at one input: matrix-free Jacobian norms and the Havens et al. local sensitivity (see
// local.hpp; mathematics in shared/math/attention.md §4.8 and shared/math/bounds.md §6).
#include <regatta/operators/lipschitz/local.hpp>

#include <mpfi.h>
#include <mpfr.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>

#include <regatta/core/checks.hpp>
#include <regatta/core/convert.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Linearization;
using operators::Prenorm;

// ---------------------------------------------------------------------------------------------------------
// Scalar helpers (double and interval share the code below)
// ---------------------------------------------------------------------------------------------------------

template <class S>
constexpr bool is_interval_v = scalar_traits<S>::is_interval;

/// acc += a·b; for interval in place (no temporaries beyond `tmp`).
template <class S>
inline void add_product(S& acc, const S& a, const S& b, S& tmp) {
  if constexpr (std::is_same_v<S, interval>) {
    mpfi_mul(tmp.backend().data(), a.backend().data(), b.backend().data());
    mpfi_add(acc.backend().data(), acc.backend().data(), tmp.backend().data());
  } else {
    (void)tmp;
    acc += a * b;
  }
}

/// Σ |entries| (an enclosure for interval: |x| is enclosed by [mig x, mag x]).
template <class S>
S abs_sum(const Matrix<S>& G) {
  using std::abs;
  S sum(0);
  for (Index i = 0; i < G.rows(); ++i)
    for (Index j = 0; j < G.cols(); ++j) sum += abs(G(i, j));
  return sum;
}

/// ‖G‖_F (for interval the tight squares, then the square root of the enclosure).
template <class S>
S frobenius(const Matrix<S>& G) {
  using std::sqrt;
  S sum(0);
  for (Index i = 0; i < G.rows(); ++i)
    for (Index j = 0; j < G.cols(); ++j) sum += regatta::detail::square<S>(G(i, j));
  return sqrt(sum);
}

double lower_double(const interval& x) { return mpfr_get_d(lower_bound(x).backend().data(), MPFR_RNDD); }
double upper_double(const interval& x) { return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU); }

/// [lo, hi] from doubles (exact).
interval enclosure(double lo, double hi) { return make_interval(mpfr(lo), mpfr(hi)); }

/// The running maximum of a family of values with the index of the largest one (interval: the enclosure
/// [max of lower ends, max of upper ends] of the maximum, index of the largest upper end).
template <class S>
class RunningMax {
 public:
  void add(const S& value, Index index) {
    if constexpr (is_interval_v<S>) {
      const mpfr lo = lower_bound(value), hi = upper_bound(value);
      if (!seen_ || lo > lo_) lo_ = lo;
      if (!seen_ || hi > hi_) {
        hi_ = hi;
        index_ = index;
      }
    } else {
      if (!seen_ || value > value_) {
        value_ = value;
        index_ = index;
      }
    }
    seen_ = true;
  }
  InducedNorm<S> result() const {
    InducedNorm<S> r;
    r.index = index_;
    if constexpr (is_interval_v<S>) {
      r.value = seen_ ? make_interval(lo_, hi_) : S(0);
    } else {
      r.value = seen_ ? value_ : S(0);
    }
    return r;
  }

 private:
  bool seen_ = false;
  Index index_ = 0;
  S value_{};
  mpfr lo_, hi_;
};

/// A·B: Eigen's product for double, the plain triple loop for multiprecision types.
template <class S>
Matrix<S> mul(const Matrix<S>& a, const Matrix<S>& b) {
  if constexpr (std::is_floating_point_v<S>) {
    return a * b;
  } else {
    return regatta::detail::plain_product<S>(a, b);
  }
}

template <class S>
Matrix<S> cast(const Matrix<double>& m) {
  return matrix_cast<S>(m);
}

template <class S>
Vector<S> cast(const Vector<double>& v) {
  Vector<S> r(v.size());
  for (Index i = 0; i < v.size(); ++i) r(i) = scalar_cast<S>(v(i));
  return r;
}

Vector<double> flat(const Matrix<double>& M) { return Eigen::Map<const Vector<double>>(M.data(), M.size()); }
Matrix<double> shaped(const Vector<double>& v, Index rows, Index cols) {
  return Eigen::Map<const Matrix<double>>(v.data(), rows, cols);
}

void report(const Progress& progress, std::string_view stage, Index done, Index total) {
  if (progress) progress(stage, done, total);
}

/// The name of a progress stage, prefixed with "certified " for interval evaluations.
template <class S>
std::string stage_name(const char* what) {
  return is_interval_v<S> ? std::string("certified ") + what : std::string(what);
}

/// Calls `progress` about every 1/200 of `total`.
bool due(Index done, Index total) {
  const Index step = std::max<Index>(1, total / 200);
  return done % step == 0 || done == total;
}

// ---------------------------------------------------------------------------------------------------------
// Lanczos and power iteration on MᵀM
// ---------------------------------------------------------------------------------------------------------

Vector<double> start_vector(Index size, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  Vector<double> v(size);
  for (Index i = 0; i < size; ++i) v(i) = 2.0 * std::ldexp(double(gen() >> 11), -53) - 1.0;
  const double norm = v.norm();
  if (norm > 0) v /= norm;
  return v;
}

void check_spectral_options(const SpectralOptions& options) {
  if (!(options.relative_tolerance > 0 && options.relative_tolerance < 1))
    throw InputError("relative_tolerance",
                     "must lie in (0, 1), got " + std::to_string(options.relative_tolerance));
  if (options.max_iterations < 1)
    throw InputError("max_iterations", "must be at least 1, got " + std::to_string(options.max_iterations));
}

/// Lanczos on MᵀM with full reorthogonalisation (twice, "twice is enough"; Parlett). T_k is the
/// tridiagonal matrix of the α's and β's; its largest eigenvalue θ with unit eigenvector s gives the Ritz
/// pair (θ, y = Q_k s) and the residual ‖MᵀMy − θy‖ = β_k|s_k| in exact arithmetic.
SpectralEstimate lanczos(const std::function<Vector<double>(const Vector<double>&)>& gram,
                         const std::function<double(const Vector<double>&)>& image_norm, Index size,
                         const SpectralOptions& options) {
  SpectralEstimate out;
  out.method = SpectralMethod::lanczos;
  std::vector<Vector<double>> basis;
  std::vector<double> alpha, beta;
  Vector<double> q = start_vector(size, options.seed);
  Vector<double> ritz_coefficients;
  double theta = 0;
  const double unit_roundoff = std::ldexp(1.0, -53);
  for (int k = 0; k < options.max_iterations; ++k) {
    basis.push_back(q);
    Vector<double> w = gram(q);
    ++out.iterations;
    const double a = q.dot(w);
    w -= a * q;
    if (k > 0) w -= beta.back() * basis[basis.size() - 2];
    for (int pass = 0; pass < 2; ++pass)
      for (const Vector<double>& qj : basis) w -= qj.dot(w) * qj;
    alpha.push_back(a);
    const double b = w.norm();

    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig;
    const Eigen::VectorXd diag = Eigen::Map<const Eigen::VectorXd>(alpha.data(), Index(alpha.size()));
    const Eigen::VectorXd sub = Eigen::Map<const Eigen::VectorXd>(beta.data(), Index(beta.size()));
    eig.computeFromTridiagonal(diag, sub, Eigen::ComputeEigenvectors);
    const Index top = Index(alpha.size()) - 1;
    theta = std::max(0.0, eig.eigenvalues()(top));
    ritz_coefficients = eig.eigenvectors().col(top);
    const double residual = b * std::abs(ritz_coefficients(top));
    out.relative_error = theta > 0 ? residual / (2 * theta) : 0.0;
    // An invariant subspace (β ≈ 0 relative to the spectrum seen so far) makes the Ritz values exact.
    const double scale = std::max({theta, std::abs(a), eig.eigenvalues().cwiseAbs().maxCoeff()});
    const bool breakdown = b <= double(size) * unit_roundoff * scale;
    if (breakdown || residual <= 2 * options.relative_tolerance * theta || Index(basis.size()) == size) {
      out.converged = true;
      break;
    }
    beta.push_back(b);
    q = w / b;
  }
  Vector<double> y = Vector<double>::Zero(size);
  for (std::size_t j = 0; j < basis.size(); ++j) y += ritz_coefficients(Index(j)) * basis[j];
  const double ny = y.norm();
  if (ny > 0) {
    y /= ny;
  } else {
    y = basis.front();
  }
  out.witness = y;  // reshaped by the caller
  out.estimate = image_norm(y);
  return out;
}

/// Power iteration v ← MᵀMv/‖MᵀMv‖; the estimate is ‖Mv‖ for the returned v.
SpectralEstimate power(const LinearMap& apply, const LinearMap& apply_transpose, Index rows, Index cols,
                       const SpectralOptions& options) {
  SpectralEstimate out;
  out.method = SpectralMethod::power;
  Matrix<double> v = shaped(start_vector(rows * cols, options.seed), rows, cols);
  double previous = 0;
  for (int k = 0; k < options.max_iterations; ++k) {
    const Matrix<double> u = apply(v);
    const double rho = u.norm();
    ++out.iterations;
    out.estimate = rho;
    out.witness = v;
    if (rho == 0) {
      out.converged = true;
      out.relative_error = 0;
      break;
    }
    out.relative_error = std::abs(rho - previous) / rho;
    if (k > 0 && out.relative_error <= options.relative_tolerance) {
      out.converged = true;
      break;
    }
    previous = rho;
    Matrix<double> w = apply_transpose(u);
    const double nw = w.norm();
    if (nw == 0) {
      out.converged = true;
      break;
    }
    v = w / nw;
  }
  return out;
}

}  // namespace

std::string to_string(SpectralMethod method) {
  return method == SpectralMethod::lanczos ? "lanczos" : "power";
}

SpectralMethod parse_spectral_method(const std::string& text, const std::string& subject) {
  if (text == "lanczos") return SpectralMethod::lanczos;
  if (text == "power") return SpectralMethod::power;
  throw InputError(subject, "unknown method '" + text + "' (expected lanczos or power)");
}

SpectralEstimate matrix_free_norm_2(const LinearMap& apply, const LinearMap& apply_transpose, Index rows,
                                    Index cols, const SpectralOptions& options) {
  check_spectral_options(options);
  if (rows * cols <= 0) throw InputError("matrix_free_norm_2", "the input space is empty");
  if (options.method == SpectralMethod::power) return power(apply, apply_transpose, rows, cols, options);
  const auto gram = [&](const Vector<double>& v) {
    return flat(apply_transpose(apply(shaped(v, rows, cols))));
  };
  const auto image_norm = [&](const Vector<double>& v) { return apply(shaped(v, rows, cols)).norm(); };
  SpectralEstimate out = lanczos(gram, image_norm, rows * cols, options);
  out.witness = shaped(Vector<double>(out.witness), rows, cols);
  return out;
}

SpectralEstimate jacobian_norm_2(const Linearization<double>& lin, const SpectralOptions& options) {
  return matrix_free_norm_2([&](const Matrix<double>& V) { return lin.jvp(V); },
                            [&](const Matrix<double>& U) { return lin.vjp(U); }, lin.rows(), lin.input_cols(),
                            options);
}

interval jacobian_ratio_enclosure(const Linearization<interval>& lin, const Matrix<double>& w) {
  check_shape("witness", w.rows(), w.cols(), lin.rows(), lin.input_cols());
  check_finite("witness", w);
  if (w.cwiseAbs().maxCoeff() == 0) throw InputError("witness", "is zero");
  const Matrix<interval> wi = cast<interval>(w);
  const Matrix<interval> image = lin.jvp(wi);
  return frobenius<interval>(image) / frobenius<interval>(wi);
}

// ---------------------------------------------------------------------------------------------------------
// ‖J‖∞ and ‖J‖₁ from VJPs / JVPs
// ---------------------------------------------------------------------------------------------------------

template <class S>
InducedNorm<S> jacobian_norm_inf(const Linearization<S>& lin, const Progress& progress) {
  const Index n = lin.rows(), e = lin.value().cols();
  RunningMax<S> best;
  Matrix<S> E = Matrix<S>::Zero(n, e);
  const Index total = n * e;
  const std::string stage = stage_name<S>("norm-inf rows (VJPs)");
  report(progress, stage, 0, total);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < e; ++a) {
      E(i, a) = S(1);
      best.add(abs_sum<S>(lin.vjp(E)), i * e + a);
      E(i, a) = S(0);
      if (due(i * e + a + 1, total)) report(progress, stage, i * e + a + 1, total);
    }
  return best.result();
}

template <class S>
InducedNorm<S> jacobian_norm_one(const Linearization<S>& lin, const Progress& progress) {
  const Index n = lin.rows(), d = lin.input_cols();
  RunningMax<S> best;
  Matrix<S> E = Matrix<S>::Zero(n, d);
  const Index total = n * d;
  const std::string stage = stage_name<S>("norm-1 columns (JVPs)");
  report(progress, stage, 0, total);
  for (Index j = 0; j < n; ++j)
    for (Index b = 0; b < d; ++b) {
      E(j, b) = S(1);
      best.add(abs_sum<S>(lin.jvp(E)), j * d + b);
      E(j, b) = S(0);
      if (due(j * d + b + 1, total)) report(progress, stage, j * d + b + 1, total);
    }
  return best.result();
}

// ---------------------------------------------------------------------------------------------------------
// Structured rows of the Jacobian of one softmax block
// ---------------------------------------------------------------------------------------------------------

namespace {

/// Row (i, a) of J = DF(X) for F(X) = [X] + Σ_h P_h·V_h + const, P_h = softmax_row(S_h + M), V_h = Xn W^VO_h
/// + 1 c_hᵀ, Xn = N(X) (attention.md §4.1–§4.6). With F̄ = E_ia (only row i):
///   value path    Xn̄ += P_h,i·ᵀ ⊗ W^VO_h[:, a]ᵀ
///   kernel path   S̄_h = e_i s̄ᵀ with s̄_j = P_h,ij (V_h,ja − (P_h V_h)_ia)
///     dot:  Q̄_i = s̄ᵀK_h/√d_h (row i),  K̄ = s̄ q_iᵀ/√d_h            → Xn̄ += e_i Q̄_i W^Qᵀ + s̄ (q_i W^Kᵀ)/√d_h
///     l2:   Q̄_i = −c Σ_j s̄_j (q_i − k_j),  K̄_j = c s̄_j (q_i − k_j),  c = 2/√d_h
///           → Xn̄ += e_i Q̄_i W^Qᵀ + c s̄ ⊙ (q_i W^Kᵀ − k_j W^Kᵀ)_j
/// then X̄ = N'(X)ᵀ[Xn̄] row-wise, plus E_ia when residual. Each row costs O(H·n·d).
template <class S>
class StructuredRows {
 public:
  /// The rows of J at Xs; for an interval matrix Xs each entry of a row encloses that entry of J(X') for
  /// every X' in Xs (inclusion isotonicity of the formulas below).
  StructuredRows(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<S>& Xs)
      : options_(options), kind_(layer.kind), n_(Xs.rows()), d_(layer.d) {
    if (const auto why = structured_rows_refusal(layer, options)) throw InputError("structured rows", *why);
    const Block<S> block(layer, options);
    const std::vector<Matrix<S>> kernels = block.kernels(Xs);  // validates X
    using std::sqrt;
    const S inv_sqrt_dh = S(1) / sqrt(scalar_cast<S>(double(layer.head_dim)));
    const Vector<S> gamma = cast<S>(layer.norm_gamma), beta = cast<S>(layer.norm_beta);
    const S eps = scalar_cast<S>(layer.norm_eps);
    const Matrix<S> Xn = operators::normalize_rows<S>(options.prenorm, Xs, gamma, beta, eps);
    if (options.prenorm != Prenorm::none) {
      operators::detail::normalized_rows(options.prenorm, Xs, eps, U_, inv_scale_);
      gamma_ = gamma;
    }
    const Matrix<S> WO = cast<S>(layer.WO);
    for (int h = 0; h < layer.heads; ++h) {
      Head hd;
      hd.P = kernels[h];
      const Matrix<S>& WQ = block.WQ()[h];
      const Matrix<S>& WK = block.WK()[h];
      hd.WQt = WQ.transpose();
      hd.WVO = block.WVO()[h];
      Matrix<S> Q = mul<S>(Xn, WQ), K = mul<S>(Xn, WK);
      if (!layer.bQ.empty()) Q.rowwise() += cast<S>(layer.bQ[h]).transpose();
      if (!layer.bK.empty()) K.rowwise() += cast<S>(layer.bK[h]).transpose();
      Matrix<S> V = mul<S>(Xn, hd.WVO);
      if (!layer.bV.empty()) {
        const Matrix<S> offset =
            mul<S>(Matrix<S>(cast<S>(layer.bV[h]).transpose()),
                   Matrix<S>(WO.middleRows(Index(h) * layer.value_dim, layer.value_dim)));
        V.rowwise() += offset.row(0);
      }
      hd.Vt = V.transpose();  // row a = column a of V, contiguous
      hd.F = mul<S>(hd.P, V);
      const Matrix<S> WKt = WK.transpose();
      hd.QW = mul<S>(Q, WKt);
      if (kind_ == AttentionKind::dot) {
        hd.QW *= inv_sqrt_dh;
        hd.K = K * inv_sqrt_dh;
      } else {
        const S c = S(2) * inv_sqrt_dh;
        hd.QW *= c;
        hd.KW = mul<S>(K, WKt) * c;
        hd.K = K * c;
        hd.Q = Q * c;
      }
      heads_.push_back(std::move(hd));
    }
  }

  Index n() const { return n_; }
  Index d() const { return d_; }

  /// G = row i·d + a of J, reshaped n×d.
  void row(Index i, Index a, Matrix<S>& G) {
    G.setZero(n_, d_);
    S tmp(0);
    Vector<S> sbar(n_), qbar, r(d_);
    for (const Head& hd : heads_) {
      const Index dh = hd.WQt.rows();
      // s̄_j = P_ij (V_ja − F_ia)
      for (Index j = 0; j < n_; ++j) sbar(j) = hd.P(i, j) * (hd.Vt(a, j) - hd.F(i, a));
      // Value path and the key part of the kernel path, rank one each: G_jb += P_ij W^VO_ba + s̄_j u_b.
      for (Index j = 0; j < n_; ++j) {
        const S& p = hd.P(i, j);
        const S& s = sbar(j);
        for (Index b = 0; b < d_; ++b) {
          add_product<S>(G(j, b), p, hd.WVO(b, a), tmp);
          add_product<S>(G(j, b), s, hd.QW(i, b), tmp);
        }
      }
      qbar = Vector<S>::Zero(dh);
      if (kind_ == AttentionKind::dot) {
        for (Index j = 0; j < n_; ++j)
          for (Index c = 0; c < dh; ++c) add_product<S>(qbar(c), sbar(j), hd.K(j, c), tmp);
      } else {
        // −s̄_j K W^Kᵀ part of the keys, and Q̄_i = −c (q_i Σ_j s̄_j − Σ_j s̄_j k_j) (c folded into Q, K).
        S total(0);
        for (Index j = 0; j < n_; ++j) {
          total += sbar(j);
          const S minus = -sbar(j);
          for (Index b = 0; b < d_; ++b) add_product<S>(G(j, b), minus, hd.KW(j, b), tmp);
          for (Index c = 0; c < dh; ++c) add_product<S>(qbar(c), sbar(j), hd.K(j, c), tmp);
        }
        for (Index c = 0; c < dh; ++c) qbar(c) -= total * hd.Q(i, c);
      }
      // G_i· += Q̄_i W^Qᵀ
      for (Index c = 0; c < dh; ++c)
        for (Index b = 0; b < d_; ++b) add_product<S>(G(i, b), qbar(c), hd.WQt(c, b), tmp);
    }
    if (options_.prenorm != Prenorm::none) {
      if (gamma_.size() != 0) G = G * gamma_.asDiagonal();
      operators::detail::apply_bracket(options_.prenorm, U_, inv_scale_, G);
    }
    if (options_.residual) G(i, a) += S(1);
  }

 private:
  struct Head {
    Matrix<S> P;    // n×n kernel
    Matrix<S> Vt;   // d×n values, transposed
    Matrix<S> F;    // n×d head output P V
    Matrix<S> WVO;  // d×d
    Matrix<S> WQt;  // d_h×d
    Matrix<S> QW;   // n×d: Q W^Kᵀ/√d_h (dot) or c Q W^Kᵀ (l2)
    Matrix<S> KW;   // n×d: c K W^Kᵀ (l2)
    Matrix<S> K;    // n×d_h: K/√d_h (dot) or c K (l2)
    Matrix<S> Q;    // n×d_h: c Q (l2)
  };
  AttentionOptions options_;
  AttentionKind kind_;
  Index n_, d_;
  std::vector<Head> heads_;
  Matrix<S> U_;
  Vector<S> inv_scale_, gamma_;
};

}  // namespace

std::optional<std::string> structured_rows_refusal(const AttentionLayer& layer,
                                                   const AttentionOptions& options) {
  (void)layer;
  if (options.sinkhorn_iterations != 1)
    return "the structured rows need softmax attention (Sinkhorn t = " +
           std::to_string(options.sinkhorn_iterations) + " couples every row of the kernel)";
  return std::nullopt;
}

template <class S>
InducedNorm<S> block_jacobian_norm_inf(const AttentionLayer& layer, const AttentionOptions& options,
                                       const Matrix<double>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, cast<S>(X));
  RunningMax<S> best;
  Matrix<S> G;
  const Index total = rows.n() * rows.d();
  const std::string stage = stage_name<S>("norm-inf rows (structured)");
  report(progress, stage, 0, total);
  for (Index i = 0; i < rows.n(); ++i)
    for (Index a = 0; a < rows.d(); ++a) {
      rows.row(i, a, G);
      const Index k = i * rows.d() + a;
      best.add(abs_sum<S>(G), k);
      if (due(k + 1, total)) report(progress, stage, k + 1, total);
    }
  return best.result();
}

template <class S>
Matrix<S> block_dense_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                               const Matrix<double>& X, const Progress& progress) {
  return block_dense_jacobian_on_box<S>(layer, options, cast<S>(X), progress);
}

template <class S>
Matrix<S> block_dense_jacobian_on_box(const AttentionLayer& layer, const AttentionOptions& options,
                                      const Matrix<S>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, X);
  const Index nd = rows.n() * rows.d();
  Matrix<S> J(nd, nd);
  Matrix<S> G;
  const std::string stage = stage_name<S>("dense Jacobian rows");
  report(progress, stage, 0, nd);
  for (Index i = 0; i < rows.n(); ++i)
    for (Index a = 0; a < rows.d(); ++a) {
      rows.row(i, a, G);
      const Index k = i * rows.d() + a;
      J.row(k) = Eigen::Map<const Eigen::Matrix<S, 1, Eigen::Dynamic>>(G.data(), nd);
      if (due(k + 1, nd)) report(progress, stage, k + 1, nd);
    }
  return J;
}

// ---------------------------------------------------------------------------------------------------------
// Everything about ‖J(X)‖ for one block
// ---------------------------------------------------------------------------------------------------------

namespace {

void check_precision(unsigned bits) {
  if (bits < 64 || bits > max_precision_bits)
    throw InputError("precision", "must be between 64 and " + std::to_string(max_precision_bits) +
                                      " bits for the interval evaluations, got " + std::to_string(bits));
}

}  // namespace

LocalNormReport local_jacobian_norms(const AttentionLayer& layer, const AttentionOptions& options,
                                     const Matrix<double>& X, const LocalNormOptions& local) {
  check_precision(local.precision_bits);
  check_spectral_options(local.spectral);
  if (local.certify && !local.certified_lower)
    throw InputError("certified_lower", "cannot be switched off when certifying");
  LocalNormReport out;
  const Block<double> block(layer, options);
  const Linearization<double> lin = block.linearize(X);
  const Index nd = X.rows() * X.cols();

  const std::string two_stage = "norm-2 (" + to_string(local.spectral.method) + ")";
  report(local.progress, two_stage, 0, 1);
  out.two = jacobian_norm_2(lin, local.spectral);
  report(local.progress, two_stage, 1, 1);

  const bool structured = !structured_rows_refusal(layer, options).has_value();
  out.inf_structured = structured;
  out.inf = structured ? block_jacobian_norm_inf<double>(layer, options, X, local.progress)
                       : jacobian_norm_inf<double>(lin, local.progress);

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
    const Matrix<double>& w = out.two.witness;
    const Linearization<interval64> flin = Block<interval64>(layer, options).linearize(cast<interval64>(X));
    const Matrix<interval64> wi = cast<interval64>(w);
    const interval64 ratio = frobenius<interval64>(flin.jvp(wi)) / frobenius<interval64>(wi);
    if (isfinite(ratio) && ratio.lower() >= 0 && w.cwiseAbs().maxCoeff() > 0)
      out.two_lower = std::max(0.0, ratio.lower());
    else
      out.two_lower = std::max(0.0, lower_double(jacobian_ratio_enclosure(ilin_get(), w)));
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

// ---------------------------------------------------------------------------------------------------------
// Havens et al. local sensitivity (bounds.md §6)
// ---------------------------------------------------------------------------------------------------------

std::optional<std::string> havens_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (layer.kind != AttentionKind::dot)
    return "the score perturbation of bounds.md §6.2 is for dot-product scores, not L2 attention";
  if (options.prenorm != Prenorm::none)
    return "a pre-normalisation inside F is outside the hypotheses of bounds.md §6.3";
  if (options.sinkhorn_iterations != 1)
    return "Sinkhorn kernels are not row softmaxes (the 1/2-Lipschitz softmax step of §6.3 does not apply)";
  return std::nullopt;
}

namespace {

/// The per-head matrices of §6 in S, from the exact binary64 layer and X.
template <class S>
struct HavensMatrices {
  std::vector<Matrix<S>> P, WVO, A, C, B, WQ, WK, WV, WO;  // C = X A_hᵀ, B = X A_h + 1 b_Qᵀ W^Kᵀ/√d_h
  std::vector<Vector<S>> query_bias;                       // W^K_h b_Q,h/√d_h (empty without bias)
  Matrix<S> X;
  bool residual = false;
};

template <class S>
HavensMatrices<S> havens_matrices(const AttentionLayer& layer, const AttentionOptions& options,
                                  const Matrix<double>& X) {
  if (const auto why = havens_refusal(layer, options)) throw InputError("havens.local_delta", *why);
  const Block<S> block(layer, options);
  HavensMatrices<S> m;
  m.X = cast<S>(X);
  m.P = block.kernels(m.X);  // validates X
  m.residual = options.residual;
  using std::sqrt;
  const S inv_sqrt_dh = S(1) / sqrt(scalar_cast<S>(double(layer.head_dim)));
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<S>& WQ = block.WQ()[h];
    const Matrix<S>& WK = block.WK()[h];
    m.WQ.push_back(WQ);
    m.WK.push_back(WK);
    m.WV.push_back(cast<S>(layer.WV[h]));
    m.WO.push_back(cast<S>(Matrix<double>(layer.WO.middleRows(Index(h) * layer.value_dim, layer.value_dim))));
    m.WVO.push_back(block.WVO()[h]);
    const Matrix<S> WKt = WK.transpose();
    const Matrix<S> A = mul<S>(WQ, WKt) * inv_sqrt_dh;
    m.A.push_back(A);
    m.C.push_back(mul<S>(m.X, Matrix<S>(A.transpose())));
    Matrix<S> Q = mul<S>(m.X, WQ);
    if (!layer.bQ.empty()) {
      const Vector<S> bQ = cast<S>(layer.bQ[h]);
      Q.rowwise() += bQ.transpose();
      m.query_bias.push_back(Vector<S>(mul<S>(WK, Matrix<S>(bQ)) * inv_sqrt_dh));
    } else {
      m.query_bias.push_back(Vector<S>());
    }
    m.B.push_back(mul<S>(Q, WKt) * inv_sqrt_dh);
  }
  return m;
}

/// ξ's operator M(V) = V W^skip + Σ_h P_h V W^VO_h and its transpose (bounds.md §6.5).
template <class S>
Matrix<S> xi_apply(const HavensMatrices<S>& m, const Matrix<S>& V) {
  Matrix<S> out = m.residual ? V : Matrix<S>(Matrix<S>::Zero(V.rows(), V.cols()));
  for (std::size_t h = 0; h < m.P.size(); ++h) out += mul<S>(m.P[h], mul<S>(V, m.WVO[h]));
  return out;
}
template <class S>
Matrix<S> xi_apply_transpose(const HavensMatrices<S>& m, const Matrix<S>& U) {
  Matrix<S> out = m.residual ? U : Matrix<S>(Matrix<S>::Zero(U.rows(), U.cols()));
  for (std::size_t h = 0; h < m.P.size(); ++h)
    out += mul<S>(Matrix<S>(m.P[h].transpose()), mul<S>(U, Matrix<S>(m.WVO[h].transpose())));
  return out;
}
/// κ_h's operator 𝓛(V) = V Cᵀ + B Vᵀ (n×d → n×n) and its transpose G ↦ G C + Gᵀ B.
template <class S>
Matrix<S> kappa_apply(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& V) {
  return mul<S>(V, Matrix<S>(C.transpose())) + mul<S>(B, Matrix<S>(V.transpose()));
}
template <class S>
Matrix<S> kappa_apply_transpose(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& G) {
  return mul<S>(G, C) + mul<S>(Matrix<S>(G.transpose()), B);
}

template <class S>
S vector_norm(const Vector<S>& v) {
  using std::sqrt;
  S sum(0);
  for (Index i = 0; i < v.size(); ++i) sum += regatta::detail::square<S>(v(i));
  return sqrt(sum);
}

/// Certified enclosure [lower, upper] of ‖M‖₂ for an interval matrix.
/// Certified [lower, upper] of ‖M‖₂ over the box M: binary64 first (the MPFI entries rounded outward to
/// interval64, spectral_norm_upper_fast), the 106-bit MPFI Cholesky only when that reaches no Cholesky
/// certificate or an entry leaves the double range.
interval certified_norm(const Matrix<interval>& M) {
  if (M.size() == 0) return interval(0);
  const Matrix<interval64> fast = matrix_cast<interval64>(M);
  bool finite = true;
  for (Index r = 0; r < fast.rows() && finite; ++r)
    for (Index c = 0; c < fast.cols() && finite; ++c) finite = isfinite(fast(r, c));
  if (finite) {
    const CertifiedNormBound b = spectral_norm_upper_fast(fast);
    if (b.method == "binary64-cholesky") return enclosure(std::min(b.lower, b.upper), b.upper);
  }
  const CertifiedNormBound b = spectral_norm_upper_certified<interval>(M);
  return enclosure(std::min(b.lower, b.upper), b.upper);
}

/// [lower end of `below`, upper end of `above`] for an enclosure `below` of a value ≤ x and `above` of a
/// value ≥ x (the lower end is capped at the upper end; mathematically it never exceeds it).
interval bracket(const interval& below, const interval& above) {
  const mpfr hi = upper_bound(above);
  const mpfr lo = lower_bound(below);
  return make_interval(lo < hi ? lo : hi, hi);
}

/// [max(lo₁, lo₂), min(hi₁, hi₂)] of two enclosures of the same number (never empty in exact arithmetic;
/// should rounding ever make it so, the first enclosure is kept).
interval intersect(const interval& a, const interval& b) {
  const mpfr lo = std::max(lower_bound(a), lower_bound(b));
  const mpfr hi = std::min(upper_bound(a), upper_bound(b));
  return lo <= hi ? make_interval(lo, hi) : a;
}

}  // namespace

HavensIngredients<double> havens_estimates(const AttentionLayer& layer, const AttentionOptions& options,
                                           const Matrix<double>& X, const SpectralOptions& spectral) {
  check_spectral_options(spectral);
  const HavensMatrices<double> m = havens_matrices<double>(layer, options, X);
  HavensIngredients<double> q;
  q.n = X.rows();
  q.heads = layer.heads;
  q.skip = options.residual ? 1.0 : 0.0;
  const Index n = X.rows(), d = X.cols();
  const SpectralEstimate xi =
      matrix_free_norm_2([&](const Matrix<double>& V) { return xi_apply(m, V); },
                         [&](const Matrix<double>& U) { return xi_apply_transpose(m, U); }, n, d, spectral);
  q.xi = xi.estimate;
  q.xi_estimate = xi;
  q.input_two = spectral_norm_reference<double>(X);
  q.input_frobenius = X.norm();
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<double>& C = m.C[h];
    const Matrix<double>& B = m.B[h];
    const SpectralEstimate kappa = matrix_free_norm_2(
        [&](const Matrix<double>& V) { return kappa_apply(C, B, V); },
        [&](const Matrix<double>& G) { return kappa_apply_transpose(C, B, G); }, n, d, spectral);
    q.kappa.push_back(kappa.estimate);
    q.kappa_estimates.push_back(kappa);
    q.score.push_back(spectral_norm_reference<double>(m.A[h]));
    q.values.push_back(spectral_norm_reference<double>(m.WVO[h]));
    q.input_values.push_back(spectral_norm_reference<double>(Matrix<double>(X * m.WVO[h])));
    q.kernel.push_back(spectral_norm_reference<double>(m.P[h]));
    q.value_factors.push_back(spectral_norm_reference<double>(m.WV[h]) *
                              spectral_norm_reference<double>(m.WO[h]));
    q.kappa_split.push_back(spectral_norm_reference<double>(C) + spectral_norm_reference<double>(B));
    q.query_bias.push_back(m.query_bias[h].size() != 0 ? m.query_bias[h].norm() : 0.0);
    q.query_key.push_back(spectral_norm_reference<double>(m.WQ[h]) *
                          spectral_norm_reference<double>(m.WK[h]) / std::sqrt(double(layer.head_dim)));
  }
  return q;
}

HavensIngredients<interval> havens_certified(const AttentionLayer& layer, const AttentionOptions& options,
                                             const Matrix<double>& X,
                                             const HavensIngredients<double>& estimates, Index dense_limit) {
  const HavensMatrices<interval> m = havens_matrices<interval>(layer, options, X);
  if (!estimates.xi_estimate || Index(estimates.kappa_estimates.size()) != layer.heads)
    throw InputError("estimates", "must come from havens_estimates for the same layer and input");
  const Index n = X.rows(), d = X.cols();
  HavensIngredients<interval> q;
  q.n = n;
  q.heads = layer.heads;
  q.skip = interval(options.residual ? 1 : 0);
  q.input_two = certified_norm(m.X);
  q.input_frobenius = frobenius<interval>(m.X);
  using std::sqrt;
  const interval inv_sqrt_dh = interval(1) / sqrt(interval(layer.head_dim));
  for (int h = 0; h < layer.heads; ++h) {
    q.score.push_back(certified_norm(m.A[h]));
    q.values.push_back(certified_norm(m.WVO[h]));
    q.input_values.push_back(certified_norm(mul<interval>(m.X, m.WVO[h])));
    q.kernel.push_back(certified_norm(m.P[h]));
    q.value_factors.push_back(certified_norm(m.WV[h]) * certified_norm(m.WO[h]));
    q.kappa_split.push_back(certified_norm(m.C[h]) + certified_norm(m.B[h]));
    q.query_bias.push_back(m.query_bias[h].size() != 0 ? vector_norm<interval>(m.query_bias[h])
                                                       : interval(0));
    q.query_key.push_back(certified_norm(m.WQ[h]) * certified_norm(m.WK[h]) * inv_sqrt_dh);
  }
  // ξ: the witness value from below, the first naive bound from above (§6.4), the dense certificate when
  // small.
  const bool dense = n * d <= dense_limit;
  const bool dense_kappa = dense && n * n <= 2 * dense_limit;
  {
    const Matrix<interval> w = cast<interval>(estimates.xi_estimate->witness);
    const interval lower = frobenius<interval>(xi_apply(m, w)) / frobenius<interval>(w);
    interval upper = q.skip;
    for (int h = 0; h < layer.heads; ++h) upper += q.kernel[h] * q.values[h];
    q.xi = bracket(lower, upper);
    if (dense) {
      // Kronecker matrix I_n ⊗ (W^skip)ᵀ + Σ_h P_h ⊗ (W^VO_h)ᵀ: entry ((i,a),(j,b)) = δ_ij δ_ab [residual]
      // + Σ_h P_h,ij W^VO_h,ba (row-major vectorisation, shared/math/README.md).
      Matrix<interval> M = Matrix<interval>::Zero(n * d, n * d);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          for (Index a = 0; a < d; ++a)
            for (Index b = 0; b < d; ++b) {
              interval v(options.residual && i == j && a == b ? 1 : 0);
              for (int h = 0; h < layer.heads; ++h) v += m.P[h](i, j) * m.WVO[h](b, a);
              M(i * d + a, j * d + b) = v;
            }
      q.xi = intersect(q.xi, certified_norm(M));
    }
  }
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<interval> w = cast<interval>(estimates.kappa_estimates[h].witness);
    const interval lower = frobenius<interval>(kappa_apply(m.C[h], m.B[h], w)) / frobenius<interval>(w);
    interval kappa = bracket(lower, q.kappa_split[h]);
    if (dense_kappa) {
      // 𝓛(V)_ij = Σ_b V_ib C_jb + B_ib V_jb: entry ((i,j),(k,b)) = δ_ik C_jb + δ_jk B_ib.
      Matrix<interval> M = Matrix<interval>::Zero(n * n, n * d);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          for (Index b = 0; b < d; ++b) {
            M(i * n + j, i * d + b) += m.C[h](j, b);
            M(i * n + j, j * d + b) += m.B[h](i, b);
          }
      kappa = intersect(kappa, certified_norm(M));
    }
    q.kappa.push_back(kappa);
  }
  q.certificate = std::string("xi: ") +
                  (dense ? "certified Cholesky of the Kronecker matrix (binary64, MPFI on fallback)"
                         : "naive bound ||W^skip|| + sum ||P_h|| ||W^VO_h||") +
                  "; kappa: " +
                  (dense_kappa ? "certified Cholesky of the Kronecker matrix (binary64, MPFI on fallback)"
                               : "||X A^T|| + ||B|| (triangle inequality)");
  return q;
}

namespace {

template <class S>
S sqrt_of(double v) {
  using std::sqrt;
  return sqrt(scalar_cast<S>(v));
}

/// δ with the given ξ, κ_h and the factor ‖X W^VO_h‖₂ + ε‖W^VO_h‖₂ (bounds.md §6.3), ε as S.
template <class S, class Kappa, class Values>
S delta_form(const HavensIngredients<S>& q, const S& eps, const S& xi, Kappa kappa, Values value_factor) {
  S sum(0);
  for (int h = 0; h < q.heads; ++h) sum += (eps * kappa(h) + eps * eps * q.score[h]) * value_factor(h);
  return eps * xi + sum / S(2);
}

template <class S>
S delta_at(const HavensIngredients<S>& q, const S& eps) {
  return delta_form<S>(
      q, eps, q.xi, [&](int h) { return q.kappa[h]; },
      [&](int h) { return S(q.input_values[h] + eps * q.values[h]); });
}

void check_epsilon(double epsilon) { check_positive("epsilon", epsilon); }

}  // namespace

template <class S>
std::array<S, 3> havens_delta_coefficients(const HavensIngredients<S>& q) {
  S c1 = q.xi, c2(0), c3(0);
  for (int h = 0; h < q.heads; ++h) {
    c1 += q.kappa[h] * q.input_values[h] / S(2);
    c2 += (q.kappa[h] * q.values[h] + q.score[h] * q.input_values[h]) / S(2);
    c3 += q.score[h] * q.values[h] / S(2);
  }
  return {c1, c2, c3};
}

template <class S>
S havens_delta(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  return delta_at<S>(q, scalar_cast<S>(epsilon));
}

template <class S>
S havens_delta_naive_kernel(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S eps = scalar_cast<S>(epsilon);
  S xi = q.skip;
  for (int h = 0; h < q.heads; ++h) xi += q.kernel[h] * q.values[h];
  return delta_form<S>(
      q, eps, xi, [&](int h) { return q.kappa_split[h]; },
      [&](int h) { return S(q.values[h] * (q.input_two + eps)); });
}

template <class S>
S havens_delta_naive_weights(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S eps = scalar_cast<S>(epsilon);
  const S sqrt_n = sqrt_of<S>(double(q.n));
  S factors(0);
  for (int h = 0; h < q.heads; ++h) factors += q.value_factors[h];
  const S xi = q.skip + sqrt_n * factors;
  return delta_form<S>(
      q, eps, xi, [&](int h) { return S(S(2) * q.input_two * q.score[h] + sqrt_n * q.query_bias[h]); },
      [&](int h) { return S(q.values[h] * (q.input_two + eps)); });
}

template <class S>
S havens_gradnorm_lipschitz(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S B = q.input_frobenius + scalar_cast<S>(epsilon);
  const S sqrt_n = sqrt_of<S>(double(q.n));
  S sum = q.skip;
  for (int h = 0; h < q.heads; ++h)
    sum += q.values[h] * (sqrt_n + q.query_key[h] * B * B + sqrt_n * q.query_bias[h] * B / S(2));
  return sum;
}

template <class S>
RadiusResult havens_certified_radius(const HavensIngredients<S>& q, const MarginSetting& setting) {
  check_positive("margin", setting.margin);
  if (!(std::isfinite(setting.readout_lipschitz) && setting.readout_lipschitz >= 0))
    throw InputError("readout_lipschitz", "must be finite and >= 0");
  if (!(std::isfinite(setting.embedding_lipschitz) && setting.embedding_lipschitz >= 0))
    throw InputError("embedding_lipschitz", "must be finite and >= 0");
  if (!(setting.relative_tolerance > 0 && setting.relative_tolerance < 1))
    throw InputError("relative_tolerance", "must lie in (0, 1)");
  RadiusResult out;
  const S sqrt2_out = sqrt_of<S>(2.0) * scalar_cast<S>(setting.readout_lipschitz);
  const S L_in = scalar_cast<S>(setting.embedding_lipschitz);
  // safe(ε): √2·L_out·δ(X, L_in·ε) < m, decided on the upper end for interval (certified).
  const auto safe = [&](double epsilon) {
    ++out.steps;
    const S value = sqrt2_out * delta_at<S>(q, S(L_in * scalar_cast<S>(epsilon)));
    if constexpr (is_interval_v<S>) {
      return upper_bound(value) < mpfr(setting.margin);
    } else {
      return value < setting.margin;
    }
  };
  constexpr int max_exponent = 1000;
  double lo = 0, hi = 1;
  if (safe(1.0)) {
    lo = 1;
    int e = 0;
    while (e < max_exponent && safe(std::ldexp(1.0, e + 1))) lo = std::ldexp(1.0, ++e);
    if (e == max_exponent) {
      out.radius = std::numeric_limits<double>::infinity();
      out.first_failure = std::numeric_limits<double>::infinity();
      return out;
    }
    hi = std::ldexp(1.0, e + 1);
  } else {
    int e = 0;
    while (e > -max_exponent && !safe(std::ldexp(1.0, e - 1))) hi = std::ldexp(1.0, --e);
    if (e == -max_exponent) {
      out.radius = 0;
      out.first_failure = hi;
      return out;
    }
    lo = std::ldexp(1.0, e - 1);
  }
  while (hi - lo > setting.relative_tolerance * lo) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (safe(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  out.radius = lo;
  out.first_failure = hi;
  return out;
}

// ---- explicit instantiations ----

#define REGATTA_LOCAL_GENERIC(S)                                                          \
  template InducedNorm<S> jacobian_norm_inf<S>(const Linearization<S>&, const Progress&); \
  template InducedNorm<S> jacobian_norm_one<S>(const Linearization<S>&, const Progress&);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_LOCAL_GENERIC)
#undef REGATTA_LOCAL_GENERIC

#define REGATTA_LOCAL_CERTIFIABLE(S)                                                                 \
  template InducedNorm<S> block_jacobian_norm_inf<S>(const AttentionLayer&, const AttentionOptions&, \
                                                     const Matrix<double>&, const Progress&);        \
  template Matrix<S> block_dense_jacobian<S>(const AttentionLayer&, const AttentionOptions&,         \
                                             const Matrix<double>&, const Progress&);                \
  template std::array<S, 3> havens_delta_coefficients<S>(const HavensIngredients<S>&);               \
  template S havens_delta<S>(const HavensIngredients<S>&, double);                                   \
  template S havens_delta_naive_kernel<S>(const HavensIngredients<S>&, double);                      \
  template S havens_delta_naive_weights<S>(const HavensIngredients<S>&, double);                     \
  template S havens_gradnorm_lipschitz<S>(const HavensIngredients<S>&, double);                      \
  template RadiusResult havens_certified_radius<S>(const HavensIngredients<S>&, const MarginSetting&);
REGATTA_FOR_EACH_CERTIFYING_SCALAR(REGATTA_LOCAL_CERTIFIABLE)
#undef REGATTA_LOCAL_CERTIFIABLE

#define REGATTA_LOCAL_BOX(S)                                                                        \
  template Matrix<S> block_dense_jacobian_on_box<S>(const AttentionLayer&, const AttentionOptions&, \
                                                    const Matrix<S>&, const Progress&);
REGATTA_FOR_EACH_INTERVAL_SCALAR(REGATTA_LOCAL_BOX)
#undef REGATTA_LOCAL_BOX

}  // namespace regatta::lip
