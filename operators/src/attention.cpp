// Multi-head softmax and Sinkhorn attention through pairwise::reduce (docs/math/attention.md#layers).
#include <regatta/operators/attention.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/pairwise.hpp>

#include "rotary.hpp"

namespace regatta::operators {

namespace {

/// Z·W + 1·bᵀ (b may be absent: empty list).
Matrix<double> project(const MatrixRef<double>& Z, const Matrix<double>& W,
                       const std::vector<Vector<double>>& b, std::size_t h) {
  Matrix<double> out = Z * W;
  if (!b.empty()) out.rowwise() += b[h].transpose();
  return out;
}

/// a + b where an empty vector stands for 0.
Vector<double> add_log_weights(const Vector<double>& a, const Vector<double>& b) {
  if (a.size() == 0) return b;
  if (b.size() == 0) return a;
  return a + b;
}

/// Checks a log-weight vector (length, no NaN or +inf) and returns it, or an empty vector when every entry
/// is exactly 0 (the unweighted path, bit for bit).
Vector<double> checked_log_weights(const Vector<double>& w, Eigen::Index expected, const char* name) {
  if (w.size() == 0) return w;
  if (w.size() != expected)
    throw InputError(name, "expected " + std::to_string(expected) + " entries (one per token), got " +
                               std::to_string(w.size()));
  bool all_zero = true;
  for (Eigen::Index j = 0; j < w.size(); ++j) {
    if (std::isnan(w(j)) || w(j) == std::numeric_limits<double>::infinity())
      throw InputError(name, "entry " + std::to_string(j) + " is " + (std::isnan(w(j)) ? "NaN" : "+inf") +
                                 " (log-weights must be finite or -inf)");
    all_zero = all_zero && w(j) == 0;
  }
  return all_zero ? Vector<double>() : w;
}

/// The inputs of one call after validation and pre-normalisation. Without a pre-norm the inputs are read in
/// place (the views point at the caller's X and Y); with one, at the normalised copies held here. Neither
/// copyable nor movable, so that the views never dangle.
struct Setup {
  Setup(const AttentionLayer& layer, const MatrixRef<double>& X, const MatrixRef<double>& Y, bool self,
        const Vector<double>& query_log_weights, const Vector<double>& context_log_weights,
        const AttentionOptions& options);
  Setup(const Setup&) = delete;
  Setup& operator=(const Setup&) = delete;

  Matrix<double> normalized_queries, normalized_context;    // N(X), N(Y) with a pre-norm
  std::optional<MatrixRef<double>> queries_in, context_in;  // N(X), N(Y): the inputs without a pre-norm
  Vector<double> query_log_weights, context_log_weights;    // empty: all 0
  pairwise::Kernel kernel;
  double inv_sqrt_dh = 1;
  int iterations = 1;
  std::optional<detail::RotaryTables<double>> rotary;  // rows 0..max(n, m)−1 when the layer has RoPE
};

Setup::Setup(const AttentionLayer& layer, const MatrixRef<double>& X, const MatrixRef<double>& Y, bool self,
             const Vector<double>& query_log_weights_in, const Vector<double>& context_log_weights_in,
             const AttentionOptions& options) {
  layer.validate();
  check_nonempty("X", X.rows());
  check_cols("X", X.cols(), layer.d);
  check_finite("X", X);
  if (!self) {
    check_nonempty("Y", Y.rows());
    check_cols("Y", Y.cols(), layer.d);
    check_finite("Y", Y);
  }
  if (layer.kind == AttentionKind::l2 && !options.allow_untied_l2 && !layer.tied())
    throw InputError("layer",
                     "untied L2 is outside the L2 theorem (WK must equal WQ; allow_untied_l2 overrides)");
  if (options.sinkhorn_iterations < 1)
    throw InputError("sinkhorn_iterations", "must be >= 1 (1 is softmax attention), got " +
                                                std::to_string(options.sinkhorn_iterations));
  const Eigen::Index n = X.rows(), m = self ? X.rows() : Y.rows();
  if (options.causal && options.sinkhorn_iterations > 1 && n < m)
    throw InputError("Y", "causal Sinkhorn attention needs at least as many queries as context rows (n = " +
                              std::to_string(n) + ", m = " + std::to_string(m) +
                              "): the last context rows would see no query");

  query_log_weights = checked_log_weights(query_log_weights_in, n, "log_weights");
  context_log_weights = checked_log_weights(context_log_weights_in, m, "log_weights");
  if (options.prenorm == Prenorm::none) {
    queries_in.emplace(X);
    context_in.emplace(self ? X : Y);
  } else {
    normalized_queries =
        normalize_rows(options.prenorm, Matrix<double>(X), layer.norm_gamma, layer.norm_beta, layer.norm_eps);
    queries_in.emplace(normalized_queries);
    if (self) {
      context_in.emplace(normalized_queries);
    } else {
      normalized_context = normalize_rows(options.prenorm, Matrix<double>(Y), layer.norm_gamma,
                                          layer.norm_beta, layer.norm_eps);
      context_in.emplace(normalized_context);
    }
  }
  inv_sqrt_dh = 1.0 / std::sqrt(double(layer.head_dim));
  kernel = pairwise::Kernel{
      layer.kind == AttentionKind::dot ? pairwise::ScoreKind::dot : pairwise::ScoreKind::neg_sq_dist,
      inv_sqrt_dh, 1.0, options.causal ? pairwise::MaskKind::causal : pairwise::MaskKind::none};
  iterations = options.sinkhorn_iterations;
  if (layer.rotary) rotary = detail::rotary_tables<double>(*layer.rotary, std::max(n, m), layer.head_dim);
}

const MatrixRef<double>& context_of(const Setup& s) { return *s.context_in; }

/// Projected queries, keys and values of one head.
struct Head {
  Matrix<double> queries, keys, values;
};

Head make_head(const AttentionLayer& layer, const Setup& s, std::size_t h, bool with_values) {
  const MatrixRef<double>& Y = context_of(s);
  Head head{project(*s.queries_in, layer.WQ[h], layer.bQ, h), project(Y, layer.WK[h], layer.bK, h), {}};
  if (s.rotary) {  // RoPE after the biases, positions = row indices (layer.hpp)
    detail::rotate_rows(head.queries, *s.rotary);
    detail::rotate_rows(head.keys, *s.rotary);
  }
  if (with_values) {
    // l2 value map Y·A_h·WV_h = (Y·WQ_h)·(WQ_hᵀ·WV_h)/√d_h, evaluated without forming the d×d matrix A_h.
    const Matrix<double> value_map =
        layer.kind == AttentionKind::dot
            ? layer.WV[h]
            : Matrix<double>(layer.WQ[h] * (s.inv_sqrt_dh * (layer.WQ[h].transpose() * layer.WV[h])));
    head.values = project(Y, value_map, layer.bV, h);
  }
  return head;
}

/// The Sinkhorn potentials after the half-steps that precede the output reduce: for odd t the steps
/// 1..t−1 (step t is the output reduce itself, its f being −lse), for even t the steps 1..t. f is the last
/// row potential (n), g the last column potential (m; empty means 0, as before the first column step).
struct Potentials {
  Vector<double> f, g;
};

Potentials sinkhorn_potentials(const Head& head, const Setup& s) {
  Potentials p;
  const int steps = s.iterations % 2 == 1 ? s.iterations - 1 : s.iterations;
  pairwise::Kernel transposed = s.kernel;
  if (s.kernel.mask == pairwise::MaskKind::causal) transposed.mask = pairwise::MaskKind::anticausal;
  const pairwise::Request lse_only{.out = false};
  for (int step = 1; step <= steps; ++step) {
    pairwise::Problem<double> problem;
    Vector<double> log_weights;
    if (step % 2 == 1) {  // rows: f_i = −LSE_j(S_ij + M_ij + ω_j + g_j)
      log_weights = add_log_weights(s.context_log_weights, p.g);
      problem.queries = &head.queries;
      problem.keys = &head.keys;
    } else {  // columns: g_j = −LSE_i(S_ij + M_ij + ω_i + f_i), the transposed problem
      log_weights = add_log_weights(s.query_log_weights, p.f);
      problem.queries = &head.keys;
      problem.keys = &head.queries;
    }
    if (log_weights.size() != 0) problem.log_weights = &log_weights;
    const pairwise::Result<double> r =
        pairwise::reduce<double>(problem, step % 2 == 1 ? s.kernel : transposed, lse_only);
    (step % 2 == 1 ? p.f : p.g) = -r.lse;
  }
  return p;
}

/// Σ_h K_h·values_h·WO_h + 1 bOᵀ (+ X when residual).
Matrix<double> forward(const AttentionLayer& layer, const MatrixRef<double>& X, const Setup& s,
                       const AttentionOptions& options) {
  Matrix<double> out = Matrix<double>::Zero(X.rows(), layer.d);
  for (std::size_t h = 0; h < std::size_t(layer.heads); ++h) {
    const Head head = make_head(layer, s, h, true);
    const Potentials p = sinkhorn_potentials(head, s);
    const Vector<double> log_weights = add_log_weights(s.context_log_weights, p.g);
    pairwise::Problem<double> problem;
    problem.queries = &head.queries;
    problem.keys = &head.keys;
    problem.values = &head.values;
    if (log_weights.size() != 0) problem.log_weights = &log_weights;
    pairwise::Result<double> r = pairwise::reduce<double>(problem, s.kernel);
    // Even t: K_ij = exp(S_ij + ω_j + f_i + g_j) = exp(f_i + lse_i)·softmax_j(S_ij + ω_j + g_j).
    if (s.iterations % 2 == 0)
      for (Eigen::Index i = 0; i < r.out.rows(); ++i) r.out.row(i) *= std::exp(p.f(i) + r.lse(i));
    out.noalias() += r.out * layer.WO.middleRows(Eigen::Index(h) * layer.value_dim, layer.value_dim);
  }
  if (layer.bO.size() != 0) out.rowwise() += layer.bO.transpose();
  if (options.residual) out += X;
  return out;
}

Matrix<double> kernel_matrix(const AttentionLayer& layer, int head_index, const Setup& s) {
  if (head_index < 0 || head_index >= layer.heads)
    throw InputError(
        "head", "must be in 0.." + std::to_string(layer.heads - 1) + ", got " + std::to_string(head_index));
  const Head head = make_head(layer, s, std::size_t(head_index), false);
  const Potentials p = sinkhorn_potentials(head, s);
  const Vector<double> log_weights = add_log_weights(s.context_log_weights, p.g);
  pairwise::Problem<double> problem;
  problem.queries = &head.queries;
  problem.keys = &head.keys;
  if (log_weights.size() != 0) problem.log_weights = &log_weights;
  Matrix<double> K = pairwise::log_kernel_matrix<double>(problem, s.kernel);  // S + M + ω + 1gᵀ
  // Scalar std::exp: exp(−inf) is exactly 0 (Eigen's vectorised exp clamps its argument and would leave a
  // subnormal at masked entries).
  for (Eigen::Index i = 0; i < K.rows(); ++i) {
    const double shift = s.iterations % 2 == 1 ? -K.row(i).maxCoeff() : p.f(i);  // odd: the row softmax
    double sum = 0;
    for (Eigen::Index j = 0; j < K.cols(); ++j) sum += K(i, j) = std::exp(K(i, j) + shift);
    if (s.iterations % 2 == 1) K.row(i) /= sum;
  }
  return K;
}

}  // namespace

Matrix<double> attend(const AttentionLayer& layer, const MatrixRef<double>& X,
                      const AttentionOptions& options) {
  const Setup s(layer, X, X, true, {}, {}, options);
  return forward(layer, X, s, options);
}

Matrix<double> attend_cross(const AttentionLayer& layer, const MatrixRef<double>& X,
                            const MatrixRef<double>& Y, const AttentionOptions& options) {
  const Setup s(layer, X, Y, false, {}, {}, options);
  return forward(layer, X, s, options);
}

Matrix<double> attend_weighted(const AttentionLayer& layer, const MatrixRef<double>& X,
                               const Vector<double>& log_weights, const AttentionOptions& options) {
  const Setup s(layer, X, X, true, log_weights, log_weights, options);
  return forward(layer, X, s, options);
}

namespace {

void require_softmax_for_weighted_context(const Vector<double>& w, const AttentionOptions& options) {
  if (w.size() != 0 && options.sinkhorn_iterations != 1)
    throw InputError("sinkhorn_iterations",
                     "Sinkhorn attention to a weighted context is available for self-attention only "
                     "(attend_weighted); got " +
                         std::to_string(options.sinkhorn_iterations) + " half-steps");
}

}  // namespace

Matrix<double> attend_cross_weighted(const AttentionLayer& layer, const MatrixRef<double>& X,
                                     const MatrixRef<double>& Y, const Vector<double>& context_log_weights,
                                     const AttentionOptions& options) {
  require_softmax_for_weighted_context(context_log_weights, options);
  const Setup s(layer, X, Y, false, {}, context_log_weights, options);
  return forward(layer, X, s, options);
}

Matrix<double> attention_kernel(const AttentionLayer& layer, int head, const MatrixRef<double>& X,
                                const MatrixRef<double>& Y, const AttentionOptions& options) {
  const Setup s(layer, X, Y, false, {}, {}, options);
  return kernel_matrix(layer, head, s);
}

Matrix<double> attention_kernel_weighted(const AttentionLayer& layer, int head, const MatrixRef<double>& X,
                                         const MatrixRef<double>& Y,
                                         const Vector<double>& context_log_weights,
                                         const AttentionOptions& options) {
  require_softmax_for_weighted_context(context_log_weights, options);
  const Setup s(layer, X, Y, false, {}, context_log_weights, options);
  return kernel_matrix(layer, head, s);
}

Matrix<double> attend_stack(const std::vector<AttentionLayer>& layers, const MatrixRef<double>& X,
                            const AttentionOptions& options) {
  if (layers.empty()) throw InputError("layers", "the stack is empty (depth must be >= 1)");
  for (std::size_t k = 1; k < layers.size(); ++k)
    if (layers[k].d != layers[0].d)
      throw InputError("layers[" + std::to_string(k) + "]",
                       "has d = " + std::to_string(layers[k].d) + " but layers[0] has d = " +
                           std::to_string(layers[0].d) + " (a stack maps R^{n×d} to itself)");
  Matrix<double> Z = X;
  for (const AttentionLayer& layer : layers) Z = attend(layer, Z, options);
  return Z;
}

}  // namespace regatta::operators
