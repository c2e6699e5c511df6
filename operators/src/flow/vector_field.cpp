// Velocity fields of the attention dynamics (flow.hpp).
#include <regatta/operators/flow.hpp>

#include <cmath>
#include <limits>

#include <regatta/core/error.hpp>

namespace regatta::operators::flow {

bool is_sphere_model(Model model) {
  return model == Model::sphere || model == Model::sphere_unnormalized || model == Model::sphere_sinkhorn;
}

std::string to_string(Model model) {
  switch (model) {
    case Model::sphere:
      return "sphere";
    case Model::sphere_unnormalized:
      return "sphere-unnormalized";
    case Model::sphere_sinkhorn:
      return "sphere-sinkhorn";
    case Model::self_attention:
      return "self-attention";
    case Model::cross_attention:
      return "cross-attention";
  }
  return "unknown";
}

namespace {

/// P⊥_{x_i} applied to row i of v, in place: v_i − ⟨x_i, v_i⟩ x_i.
void project_tangent(const Matrix<double>& X, Matrix<double>& v) {
  for (Eigen::Index i = 0; i < X.rows(); ++i) v.row(i) -= X.row(i).dot(v.row(i)) * X.row(i);
}

/// One streamed reduction with the dot score β⟨x_i, x_j⟩, log-weights ω and values X.
pairwise::Result<double> dot_reduce(const Matrix<double>& X, const Vector<double>& omega, double beta,
                                    bool values, const pairwise::Options& options) {
  pairwise::Problem<double> problem;
  problem.queries = &X;
  problem.keys = &X;
  problem.log_weights = &omega;
  if (values) problem.values = &X;
  pairwise::Kernel kernel;
  kernel.score = pairwise::ScoreKind::dot;
  kernel.scale = beta;
  pairwise::Request request;
  request.out = values;
  return pairwise::reduce<double>(problem, kernel, request, options);
}

}  // namespace

Matrix<double> velocity(const ModelSpec& spec, const Matrix<double>& X, const Vector<double>& log_weights) {
  switch (spec.model) {
    case Model::sphere: {
      Matrix<double> v = dot_reduce(X, log_weights, spec.beta, true, spec.reduce).out;
      project_tangent(X, v);
      return v;
    }
    case Model::sphere_unnormalized: {
      // Σ_j a_j e^{β⟨x_i,x_j⟩} x_j = exp(lse_i) · (softmax mean)_i.
      const pairwise::Result<double> r = dot_reduce(X, log_weights, spec.beta, true, spec.reduce);
      Matrix<double> v = r.out;
      for (Eigen::Index i = 0; i < X.rows(); ++i) v.row(i) *= std::exp(r.lse(i));
      project_tangent(X, v);
      return v;
    }
    case Model::sphere_sinkhorn: {
      // Symmetric scaling: f_i = −LSE_j(log a_j + f_j + β⟨x_i,x_j⟩) at the fixed point; averaged updates.
      Vector<double> f = Vector<double>::Zero(X.rows());
      for (int t = 0; t < spec.sinkhorn_iterations; ++t) {
        const Vector<double> omega = log_weights + f;
        f = 0.5 * (f - dot_reduce(X, omega, spec.beta, false, spec.reduce).lse);
      }
      // Row i of K: e^{f_i + f_j + β⟨⟩} a_j = e^{f_i + lse_i} · softmax_j(log a_j + f_j + β⟨⟩).
      const Vector<double> omega = log_weights + f;
      const pairwise::Result<double> r = dot_reduce(X, omega, spec.beta, true, spec.reduce);
      Matrix<double> v = r.out;
      for (Eigen::Index i = 0; i < X.rows(); ++i) v.row(i) *= std::exp(f(i) + r.lse(i));
      project_tangent(X, v);
      return v;
    }
    case Model::self_attention:
      return attend_weighted(*spec.layer, X, log_weights, spec.attention);
    case Model::cross_attention:
      return attend_cross_weighted(*spec.layer, X, spec.context, spec.context_log_weights, spec.attention);
  }
  throw std::logic_error("flow::velocity: unknown model");
}

}  // namespace regatta::operators::flow
