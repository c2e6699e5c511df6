// The forward pass of a Model and the MLP activations (model.hpp).
#include <mpfr.h>
#include <stdexcept>
#include <string>

#include <cmath>
#include <numbers>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {

std::string to_string(Activation activation) {
  switch (activation) {
    case Activation::gelu_erf:
      return "gelu_erf";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::relu:
      return "relu";
    case Activation::tanh:
      return "tanh";
    case Activation::silu:
      return "silu";
  }
  return "?";
}

std::string to_string(Pooling pooling) {
  switch (pooling) {
    case Pooling::cls:
      return "cls";
    case Pooling::mean:
      return "mean";
    case Pooling::last:
      return "last";
  }
  return "?";
}

std::string to_string(InputStage input) { return input == InputStage::patches ? "patches" : "tokens"; }

bool Model::accepts(Eigen::Index length) const {
  if (!text()) return length == input_size();
  return length > 0 && length % width == 0 && length / width <= context;
}

Vector<double> Model::embed_tokens(const std::vector<int>& ids) const {
  if (!text() || ids.empty() || ids.size() > std::size_t(context))
    throw std::logic_error("embed_tokens: " + std::to_string(ids.size()) + " tokens for a model of context " +
                           std::to_string(context));
  Vector<double> x(Eigen::Index(ids.size()) * width);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) throw std::logic_error("embed_tokens: token id out of range");
    x.segment(Eigen::Index(i) * width, width) = token_embed.row(ids[i]).transpose();
  }
  return x;
}

int Model::pixel_of(int patch, int k) const {
  const int p = patch_size, pi = patch / grid(), pj = patch % grid();
  const int c = k / (p * p), ky = (k / p) % p, kx = k % p;
  return (c * image_size + pi * p + ky) * image_size + pj * p + kx;
}

AttentionOptions Model::attention_options() const {
  AttentionOptions o;
  o.residual = true;
  o.causal = causal;
  o.prenorm = prenorm ? norm : Prenorm::none;
  return o;
}

void Model::validate() const {
  auto need = [](bool ok, const std::string& member, const std::string& problem) {
    if (!ok) throw InputError("model." + member, problem);
  };
  need(width > 0 && heads > 0 && width % heads == 0, "heads", "must divide the width");
  if (text()) {
    // vocab 0: no table, the inputs are the embeddings (a text transformer recognised in a graph).
    need(vocab >= 0 && token_embed.rows() == vocab && (vocab == 0 || token_embed.cols() == width),
         "token_embed", "wrong shape");
    need(context > 0 && (pos_embed.size() == 0 || (pos_embed.rows() == context && pos_embed.cols() == width)),
         "pos_embed", "wrong shape");
    need(token_type.size() == 0 || token_type.size() == width, "token_type", "wrong length");
    need(!embed_norm.present() || (embed_norm.gamma.size() == width && embed_norm.beta.size() == width),
         "embed_norm", "wrong length");
    need(pooling != Pooling::cls || !causal, "pooling", "cls pooling of a causal model sees one token");
  } else {
    need(patch_size > 0 && image_size % patch_size == 0, "patch_size", "must divide the image size");
    const Eigen::Index K = Eigen::Index(channels) * patch_size * patch_size;
    need(patch.W.rows() == K && patch.W.cols() == width && patch.b.size() == width, "patch", "wrong shape");
    need(!class_token || cls_token.size() == width, "cls_token", "wrong length");
    need(pos_embed.rows() == tokens() && pos_embed.cols() == width, "pos_embed", "wrong shape");
    need(pooling != Pooling::last, "pooling", "last-token pooling is for text models");
  }
  need(head.W.rows() == width && head.W.cols() == classes && head.b.size() == classes && classes >= 2, "head",
       "wrong shape (or fewer than 2 classes)");
  need(norm == Prenorm::layernorm || norm == Prenorm::rmsnorm, "norm", "must be layernorm or rmsnorm");
  // RMSNorm has no β (rmsnorm ignores one).
  auto norm_ok = [this](const NormParameters& p) {
    return p.gamma.size() == width &&
           (p.beta.size() == width || (norm == Prenorm::rmsnorm && p.beta.size() == 0));
  };
  need(!final_norm.present() || norm_ok(final_norm), "norm", "wrong length");
  need(pooler.W.size() == 0 ||
           (pooler.W.rows() == width && pooler.W.cols() == width && pooler.b.size() == width),
       "pooler", "wrong shape");
  need(eps > 0, "eps", "must be positive");
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const TransformerBlock& blk = blocks[b];
    const std::string name = "blocks." + std::to_string(b);
    blk.attention.validate();
    need(blk.attention.d == width, name + ".attn", "wrong width");
    need(blk.fc1.W.rows() == width && blk.fc1.W.cols() == mlp_width && blk.fc1.b.size() == mlp_width,
         name + ".mlp.fc1", "wrong shape");
    need(blk.fc2.W.rows() == mlp_width && blk.fc2.W.cols() == width && blk.fc2.b.size() == width,
         name + ".mlp.fc2", "wrong shape");
    need(!blk.gated() ||
             (blk.gate.W.rows() == width && blk.gate.W.cols() == mlp_width && blk.gate.b.size() == mlp_width),
         name + ".mlp.gate", "wrong shape");
    need(!blk.norm1.present() || norm_ok(blk.norm1), name + ".norm1", "wrong length");
    need(!blk.norm2.present() || norm_ok(blk.norm2), name + ".norm2", "wrong length");
  }
}

namespace {

// erf at a binary64 point rounded down or up (MPFR rounds correctly in the requested direction at 53 bits).
struct MpfrPair {
  mpfr_t x, y;
  MpfrPair() {
    mpfr_init2(x, 53);
    mpfr_init2(y, 53);
  }
  ~MpfrPair() {
    mpfr_clear(x);
    mpfr_clear(y);
  }
};

double erf_directed(double v, bool up) {
  thread_local MpfrPair w;
  mpfr_set_d(w.x, v, MPFR_RNDN);  // exact
  mpfr_erf(w.y, w.x, up ? MPFR_RNDU : MPFR_RNDD);
  return mpfr_get_d(w.y, up ? MPFR_RNDU : MPFR_RNDD);
}

double erf_of(double x) { return std::erf(x); }
interval64 erf_of(const interval64& x) {  // erf is increasing
  return interval64::hull(erf_directed(x.lower(), false), erf_directed(x.upper(), true));
}

double inv_sqrt2(double) { return 1.0 / std::numbers::sqrt2; }
interval64 inv_sqrt2(const interval64&) { return interval64(1.0) / sqrt(interval64(2.0)); }
double inv_sqrt_2pi(double) { return 1.0 / std::sqrt(2.0 * std::numbers::pi); }
interval64 inv_sqrt_2pi(const interval64&) {
  // π enclosed by the binary64 neighbours of its nearest double.
  const interval64 pi =
      interval64::hull(std::nextafter(std::numbers::pi, 0.0), std::nextafter(std::numbers::pi, 4.0));
  return interval64(1.0) / sqrt(interval64(2.0) * pi);
}
double tanh_of(double x) { return std::tanh(x); }
interval64 tanh_of(const interval64& x) {  // 1 − 2/(e^{2x} + 1), increasing in e^{2x}
  return interval64(1.0) - interval64(2.0) / (exp(interval64(2.0) * x) + interval64(1.0));
}

/// Φ(x) = (1 + erf(x/√2))/2, φ(x) = e^{−x²/2}/√(2π).
template <class S>
S normal_cdf(const S& x) {
  return (S(1.0) + erf_of(x * inv_sqrt2(x))) / S(2.0);
}
template <class S>
S normal_pdf(const S& x) {
  using std::exp;
  return exp(-(x * x) / S(2.0)) * inv_sqrt_2pi(x);
}

template <class S>
S gelu_erf_derivative_naive(const S& x) {
  return normal_cdf(x) + x * normal_pdf(x);
}

/// GELU′(x) = Φ(x) + x·φ(x) in binary64 from 1 + erf(x/√2): x·φ(x) rounded, then Φ added with one rounding
/// (halving is exact there: 1 + erf is 0 or at least 2⁻⁵³), one fixed sequence whether or not the compiler
/// contracts into FMA, so activate_with_derivative gives the same numbers.
double gelu_erf_derivative_of(double x, double one_plus_erf) {
  return std::fma(one_plus_erf, 0.5, x * normal_pdf(x));
}
double gelu_erf_derivative(double x) { return gelu_erf_derivative_of(x, 1.0 + erf_of(x * inv_sqrt2(x))); }
interval64 gelu_erf_derivative(const interval64& x) {
  // GELU″(x) = φ(x)(2 − x²): GELU′ decreases on (−∞, −√2], increases on [−√2, √2], decreases on [√2, ∞).
  // On one piece the range is the hull of the endpoint enclosures; across a boundary the naive formula.
  constexpr double s_lo = 1.4142135623730949, s_hi = 1.4142135623730951;  // s_lo < √2 < s_hi
  const double a = x.lower(), b = x.upper();
  const bool one_piece = b <= -s_hi || (a >= -s_lo && b <= s_lo) || a >= s_hi;
  if (!one_piece) return gelu_erf_derivative_naive(x);
  return hull(gelu_erf_derivative_naive(interval64(a)), gelu_erf_derivative_naive(interval64(b)));
}

template <class S>
S gelu_tanh(const S& x) {
  const S c = S(2.0) * inv_sqrt_2pi(x);  // √(2/π) = 2/√(2π)
  return S(0.5) * x * (S(1.0) + tanh_of(c * (x + S(0.044715) * x * x * x)));
}
template <class S>
S gelu_tanh_derivative(const S& x) {
  const S c = S(2.0) * inv_sqrt_2pi(x);
  const S t = tanh_of(c * (x + S(0.044715) * x * x * x));
  return S(0.5) * (S(1.0) + t) + S(0.5) * x * (S(1.0) - t * t) * c * (S(1.0) + S(3.0 * 0.044715) * x * x);
}

double relu(double x) { return x > 0 ? x : 0.0; }
interval64 relu(const interval64& x) { return max(x, interval64(0.0)); }
double relu_derivative(double x) { return x > 0 ? 1.0 : 0.0; }
interval64 relu_derivative(const interval64& x) {
  if (x.lower() > 0) return interval64(1.0);
  if (x.upper() < 0) return interval64(0.0);
  return interval64::hull(0.0, 1.0);
}

double tanh_derivative(double x) {
  const double t = std::tanh(x);
  return 1.0 - t * t;
}
interval64 tanh_derivative(const interval64& x) {
  // 1 − tanh² is decreasing in |tanh x|; tanh is odd and increasing, so |tanh| over x is enclosed by the
  // tanh enclosures at the endpoint magnitudes (0 when x holds 0).
  const double lo_mag = x.lower() > 0 ? x.lower() : (x.upper() < 0 ? -x.upper() : 0.0);
  const double hi_mag = std::max(std::fabs(x.lower()), std::fabs(x.upper()));
  const interval64 t_lo = tanh_of(interval64(lo_mag)), t_hi = tanh_of(interval64(hi_mag));
  const double small = std::max(0.0, t_lo.lower()), large = std::min(1.0, t_hi.upper());
  const interval64 upper = interval64(1.0) - interval64(small) * interval64(small);
  const interval64 lower = interval64(1.0) - interval64(large) * interval64(large);
  return interval64::hull(std::max(0.0, lower.lower()), std::min(1.0, upper.upper()));
}

/// SiLU(x) = x/(1 + e⁻ˣ) and s(x) = 1/(1 + e⁻ˣ); for intervals s is enclosed by the interval formula (it is
/// increasing in x and the formula has one occurrence of x).
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
interval64 sigmoid(const interval64& x) { return interval64(1.0) / (interval64(1.0) + exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
interval64 silu(const interval64& x) {
  // Decreasing on (−∞, x*], increasing on [x*, ∞): SiLU′ = s(1 + x(1 − s)) has the sign of
  // 1 + x(1 − s(x)), increasing in x for x < 0 (its derivative 1 − s − x·s(1 − s) is positive there) and
  // positive for x ≥ 0; it is negative at −1.2785 and positive at −1.2784. At x*, 1 − s = −1/x*, so
  // SiLU(x*) = x*·s(x*) = x* + 1 > −0.2785.
  constexpr double left = -1.2785, right = -1.2784, floor = -0.2785;
  const double a = x.lower(), b = x.upper();
  if (!std::isfinite(a) || !std::isfinite(b)) return x * sigmoid(x);
  const interval64 fa = interval64(a) * sigmoid(interval64(a)), fb = interval64(b) * sigmoid(interval64(b));
  if (b <= left) return interval64::hull(fb.lower(), fa.upper());
  if (a >= right) return interval64::hull(fa.lower(), fb.upper());
  return interval64::hull(std::min({floor, fa.lower(), fb.lower()}), std::max(fa.upper(), fb.upper()));
}
template <class S>
S silu_derivative(const S& x) {
  const S s = sigmoid(x);
  return s * (S(1.0) + x * (S(1.0) - s));
}

/// The model's norm (LayerNorm or RMSNorm) with parameters p.
template <class S>
Matrix<S> apply_norm(const Model& m, const Matrix<S>& X, const NormParameters& p) {
  return normalize_rows(m.norm, X, Vector<S>(p.gamma.cast<S>()), Vector<S>(p.beta.cast<S>()), S(m.eps));
}

}  // namespace

template <class S>
Matrix<S> activate(Activation activation, const Matrix<S>& H) {
  return H.unaryExpr([activation](const S& x) -> S {
    switch (activation) {
      case Activation::gelu_erf:
        return x * normal_cdf(x);
      case Activation::gelu_tanh:
        return gelu_tanh(x);
      case Activation::relu:
        return relu(x);
      case Activation::tanh:
        return tanh_of(x);
      case Activation::silu:
        return silu(x);
    }
    return x;
  });
}

template <class S>
Matrix<S> activation_derivative(Activation activation, const Matrix<S>& H) {
  return H.unaryExpr([activation](const S& x) -> S {
    switch (activation) {
      case Activation::gelu_erf:
        return gelu_erf_derivative(x);
      case Activation::gelu_tanh:
        return gelu_tanh_derivative(x);
      case Activation::relu:
        return relu_derivative(x);
      case Activation::tanh:
        return tanh_derivative(x);
      case Activation::silu:
        return silu_derivative(x);
    }
    return x;
  });
}

void activate_with_derivative(Activation activation, const Matrix<double>& H, Matrix<double>& value,
                              Matrix<double>& derivative) {
  if (activation != Activation::gelu_erf) {
    value = activate(activation, H);
    derivative = activation_derivative(activation, H);
    return;
  }
  // x·Φ(x) (activate) and gelu_erf_derivative with one erf.
  value.resize(H.rows(), H.cols());
  derivative.resize(H.rows(), H.cols());
  for (Eigen::Index i = 0; i < H.rows(); ++i)
    for (Eigen::Index j = 0; j < H.cols(); ++j) {
      const double x = H(i, j), one_plus_erf = 1.0 + erf_of(x * inv_sqrt2(x));
      value(i, j) = x * (one_plus_erf / 2.0);
      derivative(i, j) = gelu_erf_derivative_of(x, one_plus_erf);
    }
}

template <class S>
Matrix<S> embed(const Model& m, const Vector<S>& x) {
  if (!m.accepts(x.size()))  // callers check the input against the model first
    throw std::logic_error("embed: input of " + std::to_string(x.size()) + " values, the model takes " +
                           std::to_string(m.input_size()) + (m.text() ? " at most" : ""));
  if (m.text()) {
    const Eigen::Index n = x.size() / m.width;
    Matrix<S> X = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        x.data(), n, m.width);
    if (m.pos_embed.size() != 0) X += m.pos_embed.topRows(n).cast<S>();
    if (m.token_type.size() != 0) X.rowwise() += m.token_type.cast<S>().transpose();
    return X;
  }
  const int K = m.channels * m.patch_size * m.patch_size;
  Matrix<S> P(m.patch_count(), K);
  for (int q = 0; q < m.patch_count(); ++q)
    for (int k = 0; k < K; ++k) P(q, k) = x(m.pixel_of(q, k));
  Matrix<S> X(m.tokens(), m.width);
  if (m.class_token) X.row(0) = m.cls_token.cast<S>().transpose();
  X.bottomRows(m.patch_count()) = P * m.patch.W.cast<S>();
  X.bottomRows(m.patch_count()).rowwise() += m.patch.b.cast<S>().transpose();
  return X + m.pos_embed.cast<S>();
}

template <class S>
Matrix<S> pool(const Model& m, const Matrix<S>& X) {
  if (X.rows() == 1) return X;
  switch (m.pooling) {
    case Pooling::cls:
      return X.topRows(1);
    case Pooling::last:
      return X.bottomRows(1);
    case Pooling::mean: {
      const Eigen::Index count = m.text() ? X.rows() : m.patch_count();
      return Matrix<S>(X.bottomRows(count).colwise().sum() / S(double(count)));
    }
  }
  return X.topRows(1);
}

template <class S>
Vector<S> forward(const Model& m, const Vector<S>& x) {
  Matrix<S> X = embed(m, x);
  if (m.embed_norm.present()) X = apply_norm(m, X, m.embed_norm);
  const AttentionOptions options = m.attention_options();
  for (const TransformerBlock& blk : m.blocks) {
    X = Block<S>(blk.attention, options).forward(X);
    if (!m.prenorm) X = apply_norm(m, X, blk.norm1);
    const Matrix<S> Y = m.prenorm ? apply_norm(m, X, blk.norm2) : X;
    Matrix<S> H = Y * blk.fc1.W.cast<S>();
    H.rowwise() += blk.fc1.b.cast<S>().transpose();
    Matrix<S> A;
    if (blk.gated()) {  // SwiGLU: σ(Y·W_g + b_g) ⊙ (Y·W₁ + b₁)
      Matrix<S> G = Y * blk.gate.W.cast<S>();
      G.rowwise() += blk.gate.b.cast<S>().transpose();
      A = activate(m.activation, G).cwiseProduct(H);
    } else {
      A = activate(m.activation, H);
    }
    Matrix<S> O = A * blk.fc2.W.cast<S>();
    O.rowwise() += blk.fc2.b.cast<S>().transpose();
    X += O;
    if (!m.prenorm) X = apply_norm(m, X, blk.norm2);
  }
  Matrix<S> pooled = pool(m, X);
  if (m.final_norm.present()) pooled = apply_norm(m, pooled, m.final_norm);
  if (m.pooler.W.size() != 0) {
    Matrix<S> P = pooled * m.pooler.W.cast<S>();
    P.rowwise() += m.pooler.b.cast<S>().transpose();
    pooled = activate(Activation::tanh, P);
  }
  Vector<S> z = (pooled * m.head.W.cast<S>()).transpose();
  return z + m.head.b.cast<S>();
}

#define REGATTA_INSTANTIATE(S)                                               \
  template Matrix<S> activate<S>(Activation, const Matrix<S>&);              \
  template Matrix<S> activation_derivative<S>(Activation, const Matrix<S>&); \
  template Matrix<S> embed<S>(const Model&, const Vector<S>&);               \
  template Matrix<S> pool<S>(const Model&, const Matrix<S>&);                \
  template Vector<S> forward<S>(const Model&, const Vector<S>&);
REGATTA_INSTANTIATE(double)
REGATTA_INSTANTIATE(interval64)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
