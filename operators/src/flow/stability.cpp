// Certified Grönwall bound of the sphere flows (flow_stability.hpp, docs/flow.md#flow-stability).
#include <regatta/operators/flow_stability.hpp>

#include <cmath>
#include <limits>

namespace regatta::operators::flow {

namespace {

/// Σ a_i enclosed (S; exactly 1 for uniform weights).
interval64 weight_sum(const Vector<double>& weights) {
  if (weights.size() == 0) return interval64(1.0);
  interval64 s(0.0);
  for (Eigen::Index i = 0; i < weights.size(); ++i) s += interval64(weights(i));
  return s;
}

}  // namespace

FieldLipschitz certified_field_lipschitz(const ModelSpec& spec, const Vector<double>& weights) {
  FieldLipschitz out;
  const interval64 beta(spec.beta);
  const interval64 e_beta = exp(beta);
  switch (spec.model) {
    case Model::sphere:
      out.available = true;
      out.formula = "2 + beta + (1 + beta) e^beta";
      out.constant = interval64(2.0) + beta + (interval64(1.0) + beta) * e_beta;
      return out;
    case Model::sphere_unnormalized:
      out.available = true;
      out.formula = weights.size() ? "(3 + 2 beta) (sum of the weights) e^beta" : "(3 + 2 beta) e^beta";
      out.constant = (interval64(3.0) + interval64(2.0) * beta) * weight_sum(weights) * e_beta;
      return out;
    case Model::sphere_sinkhorn:
      out.reason =
          "no derivative bound is derived for the Sinkhorn kernel (the output of finitely many scaling "
          "iterations)";
      return out;
    case Model::self_attention:
    case Model::cross_attention:
      out.reason = "no bounded invariant set is established for the layer models";
      return out;
  }
  out.reason = "unknown model";
  return out;
}

interval64 projected_distance(const Matrix<double>& X, const Matrix<double>& Y, const Vector<double>& weights,
                              bool project) {
  const Eigen::Index n = X.rows(), d = X.cols();
  interval64 total(0.0);
  for (Eigen::Index i = 0; i < n; ++i) {
    if (weights.size() && !(weights(i) > 0)) continue;
    // Row norms (1 when not projecting: the rows are used as given).
    interval64 nx(1.0), ny(1.0);
    if (project) {
      interval64 sx(0.0), sy(0.0);
      for (Eigen::Index k = 0; k < d; ++k) {
        sx += interval64(X(i, k)) * interval64(X(i, k));
        sy += interval64(Y(i, k)) * interval64(Y(i, k));
      }
      nx = sqrt(sx);
      ny = sqrt(sy);
    }
    interval64 row(0.0);
    for (Eigen::Index k = 0; k < d; ++k) {
      const interval64 diff = interval64(X(i, k)) / nx - interval64(Y(i, k)) / ny;
      row += diff * diff;
    }
    total += weights.size() ? interval64(weights(i)) * row : row;
  }
  if (!weights.size()) total = total / interval64(static_cast<long long>(n));
  // The sum of squares is ≥ 0; an enclosure reaching below 0 is clipped before the square root.
  if (total.lower() < 0) total = interval64::hull(0.0, total.upper());
  return sqrt(total);
}

double weighted_distance(const Matrix<double>& X, const Matrix<double>& Y, const Vector<double>& weights) {
  const Vector<double> rows = (X - Y).rowwise().squaredNorm();
  const double total = weights.size() ? weights.dot(rows) : rows.mean();
  return std::sqrt(total);
}

double gronwall_upper(double lipschitz_upper, double distance_upper, double t) {
  const interval64 growth = exp(interval64(lipschitz_upper) * interval64(t));
  const double bound = (growth * interval64(distance_upper)).upper();
  return std::isnan(bound) ? std::numeric_limits<double>::infinity() : bound;
}

}  // namespace regatta::operators::flow
