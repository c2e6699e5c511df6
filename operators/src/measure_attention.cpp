// Attention on discrete and grid measures through the weighted token path (docs/math/attention.md#measures).
#include <regatta/operators/measure_attention.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>

namespace regatta::operators {

namespace {

using measures::DiscreteMeasure;

/// The atoms of positive weight of a measure, split for attention.
struct Context {
  Matrix<double> points;              ///< m×d: the token part of the atoms
  Vector<double> times;               ///< m: the last coordinate of lifted atoms (causal only)
  Vector<double> weights;             ///< m: their weights (all > 0)
  Vector<double> log_weights;         ///< ω_j = log w_j − max log w; empty when all are 0
  std::vector<Eigen::Index> indices;  ///< their rows in the measure
};

Context split(const AttentionLayer& layer, const DiscreteMeasure<double>& mu, bool lifted, const char* name) {
  layer.validate();
  if (layer.rotary)
    throw InputError("layer",
                     "rotary position embeddings rotate a token by its position, and the atoms of a "
                     "measure have none: measure attention is defined for layers without RoPE");
  const Eigen::Index d = layer.d;
  if (mu.dim() != (lifted ? d + 1 : d))
    throw InputError(name,
                     "has dimension " + std::to_string(mu.dim()) + ", the layer expects " +
                         (lifted ? "d + 1 = " + std::to_string(d + 1) +
                                       " (tokens and time last, as lift_causal makes) for causal attention"
                                 : "d = " + std::to_string(d)));
  const Vector<double>& w = mu.weights();
  Context c;
  for (Eigen::Index j = 0; j < mu.size(); ++j)
    if (w(j) > 0) c.indices.push_back(j);
  const Eigen::Index m = Eigen::Index(c.indices.size());
  c.points.resize(m, d);
  c.weights.resize(m);
  if (lifted) c.times.resize(m);
  for (Eigen::Index k = 0; k < m; ++k) {
    const Eigen::Index j = c.indices[std::size_t(k)];
    c.points.row(k) = mu.atoms().row(j).head(d);
    c.weights(k) = w(j);
    if (lifted) c.times(k) = mu.atoms()(j, d);
  }
  const double top = std::log(c.weights.maxCoeff());
  c.log_weights.resize(m);
  bool all_zero = true;
  for (Eigen::Index k = 0; k < m; ++k) {
    c.log_weights(k) = std::log(c.weights(k)) - top;
    all_zero = all_zero && c.log_weights(k) == 0;
  }
  if (all_zero) c.log_weights.resize(0);
  return c;
}

/// Time order is index order: the times of the atoms of positive weight strictly increase.
void require_time_order(const Context& c, const char* name) {
  for (Eigen::Index k = 1; k < c.times.size(); ++k)
    if (!(c.times(k) > c.times(k - 1)))
      throw InputError(name,
                       "causal attention needs the lifted atoms sorted by strictly increasing time (last "
                       "coordinate): atom " +
                           std::to_string(c.indices[std::size_t(k)]) + " has time " +
                           std::to_string(c.times(k)) + ", not after atom " +
                           std::to_string(c.indices[std::size_t(k - 1)]) + " at " +
                           std::to_string(c.times(k - 1)));
}

void require_softmax(const AttentionOptions& options, const char* what) {
  if (options.sinkhorn_iterations != 1)
    throw InputError("sinkhorn_iterations",
                     std::string(what) +
                         " is softmax only: Sinkhorn potentials need the query measure (use attend_measure "
                         "for F(mu)); got " +
                         std::to_string(options.sinkhorn_iterations) + " half-steps");
}

/// [Y | times] for lifted measures, Y otherwise.
Matrix<double> with_times(Matrix<double> Y, const Vector<double>& times) {
  if (times.size() == 0) return Y;
  Matrix<double> out(Y.rows(), Y.cols() + 1);
  out.leftCols(Y.cols()) = Y;
  out.col(Y.cols()) = times;
  return out;
}

}  // namespace

DiscreteMeasure<double> measure_kernel(const AttentionLayer& layer, int head, const Vector<double>& x,
                                       const DiscreteMeasure<double>& mu, const AttentionOptions& options) {
  require_softmax(options, "the kernel at a point");
  const Context c = split(layer, mu, options.causal, "mu");
  const Eigen::Index d = layer.d;
  check_nonempty("x", x.size());
  check_rows("x", x.size(), options.causal ? d + 1 : d);
  check_finite("x", x);
  Vector<double> log_weights = c.log_weights;
  AttentionOptions unmasked = options;
  unmasked.causal = false;
  if (options.causal) {  // one query: the time mask is a log-weight −∞ on the later atoms
    const double s = x(d);
    if (log_weights.size() == 0) log_weights = Vector<double>::Zero(c.points.rows());
    Eigen::Index visible = 0;
    for (Eigen::Index k = 0; k < c.times.size(); ++k) {
      if (c.times(k) > s)
        log_weights(k) = -std::numeric_limits<double>::infinity();
      else
        ++visible;
    }
    if (visible == 0)
      throw InputError("x", "at time " + std::to_string(s) +
                                " sees no atom of positive weight of mu (every such atom has a later time)");
  }
  const Matrix<double> query = x.head(d).transpose();
  const Matrix<double> row = attention_kernel_weighted(layer, head, query, c.points, log_weights, unmasked);
  Vector<double> weights = Vector<double>::Zero(mu.size());
  for (std::size_t k = 0; k < c.indices.size(); ++k) weights(c.indices[k]) = row(0, Eigen::Index(k));
  return DiscreteMeasure<double>(mu.atoms(), std::move(weights));
}

DiscreteMeasure<double> measure_kernel(const AttentionLayer& layer, int head, const Vector<double>& x,
                                       const measures::GridMeasure& mu, const AttentionOptions& options) {
  return measure_kernel(layer, head, x, mu.to_discrete(), options);
}

Matrix<double> attention_value_map(const AttentionLayer& layer, const Matrix<double>& X,
                                   const DiscreteMeasure<double>& mu, const AttentionOptions& options) {
  require_softmax(options, "the value map at arbitrary points");
  const Context c = split(layer, mu, options.causal, "mu");
  const Eigen::Index d = layer.d;
  check_nonempty("X", X.rows());
  check_cols("X", X.cols(), options.causal ? d + 1 : d);
  check_finite("X", X);
  if (!options.causal) return attend_cross_weighted(layer, X, c.points, c.log_weights, options);

  // Causal: query (x, s) sees the atoms with t ≤ s, a prefix of the time-sorted context. Queries that see
  // the same prefix share one unmasked pass.
  require_time_order(c, "mu");
  std::map<Eigen::Index, std::vector<Eigen::Index>> groups;  // prefix length → query rows
  const double* t = c.times.data();
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const Eigen::Index k = Eigen::Index(std::upper_bound(t, t + c.times.size(), X(i, d)) - t);
    if (k == 0)
      throw InputError("X", "row " + std::to_string(i) + " at time " + std::to_string(X(i, d)) +
                                " sees no atom of positive weight of mu (the first is at time " +
                                std::to_string(c.times(0)) + ")");
    groups[k].push_back(i);
  }
  AttentionOptions unmasked = options;
  unmasked.causal = false;
  Matrix<double> out(X.rows(), d + 1);
  out.col(d) = X.col(d);
  for (const auto& [k, rows] : groups) {
    Matrix<double> queries(Eigen::Index(rows.size()), d);
    for (std::size_t r = 0; r < rows.size(); ++r) queries.row(Eigen::Index(r)) = X.row(rows[r]).head(d);
    const Vector<double> log_weights =
        c.log_weights.size() != 0 ? Vector<double>(c.log_weights.head(k)) : Vector<double>();
    const Matrix<double> Y =
        attend_cross_weighted(layer, queries, c.points.topRows(k), log_weights, unmasked);
    for (std::size_t r = 0; r < rows.size(); ++r) out.row(rows[r]).head(d) = Y.row(Eigen::Index(r));
  }
  return out;
}

Matrix<double> attention_value_map(const AttentionLayer& layer, const Matrix<double>& X,
                                   const measures::GridMeasure& mu, const AttentionOptions& options) {
  return attention_value_map(layer, X, mu.to_discrete(), options);
}

DiscreteMeasure<double> attend_measure(const AttentionLayer& layer, const DiscreteMeasure<double>& mu,
                                       const AttentionOptions& options) {
  const Context c = split(layer, mu, options.causal, "mu");
  if (options.causal) require_time_order(c, "mu");
  Matrix<double> Y = attend_weighted(layer, c.points, c.log_weights, options);
  return DiscreteMeasure<double>(with_times(std::move(Y), c.times), c.weights);
}

DiscreteMeasure<double> attend_measure(const AttentionLayer& layer, const measures::GridMeasure& mu,
                                       const AttentionOptions& options) {
  return attend_measure(layer, mu.to_discrete(), options);
}

DiscreteMeasure<double> attend_measure_cross(const AttentionLayer& layer, const DiscreteMeasure<double>& eta,
                                             const DiscreteMeasure<double>& mu,
                                             const AttentionOptions& options) {
  if (options.causal)
    throw InputError("causal",
                     "causal cross-attention of two measures is not available (the time order of "
                     "two lifted measures is not an index order)");
  require_softmax(options, "cross-attention of measures");
  const Context queries = split(layer, eta, false, "eta");
  const Context context = split(layer, mu, false, "mu");
  Matrix<double> Y =
      attend_cross_weighted(layer, queries.points, context.points, context.log_weights, options);
  return DiscreteMeasure<double>(std::move(Y), queries.weights);
}

DiscreteMeasure<double> attend_measure_cross(const AttentionLayer& layer, const DiscreteMeasure<double>& eta,
                                             const measures::GridMeasure& mu,
                                             const AttentionOptions& options) {
  return attend_measure_cross(layer, eta, mu.to_discrete(), options);
}

DiscreteMeasure<double> attend_measure_stack(const std::vector<AttentionLayer>& layers,
                                             const DiscreteMeasure<double>& mu,
                                             const AttentionOptions& options) {
  if (layers.empty()) throw InputError("layers", "the stack is empty (depth must be >= 1)");
  for (std::size_t k = 1; k < layers.size(); ++k)
    if (layers[k].d != layers[0].d)
      throw InputError("layers[" + std::to_string(k) + "]",
                       "has d = " + std::to_string(layers[k].d) + " but layers[0] has d = " +
                           std::to_string(layers[0].d) + " (a stack maps measures on R^d to themselves)");
  DiscreteMeasure<double> current = mu;
  for (const AttentionLayer& layer : layers) current = attend_measure(layer, current, options);
  return current;
}

}  // namespace regatta::operators
