#include <regatta/measures/sinkhorn.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include <regatta/core/error.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/measures/sinkhorn_attention.hpp>

namespace regatta::measures {

namespace detail {
void check_exponent(double p);
void check_same_dimension(Eigen::Index mu_dim, Eigen::Index nu_dim);
}  // namespace detail

const char* to_string(SinkhornStatus status) {
  switch (status) {
    case SinkhornStatus::converged:
      return "converged";
    case SinkhornStatus::max_iterations:
      return "max_iterations";
  }
  return "unknown";
}

const char* to_string(SinkhornKernel kernel) {
  switch (kernel) {
    case SinkhornKernel::automatic:
      return "automatic";
    case SinkhornKernel::streamed:
      return "streamed";
    case SinkhornKernel::dense:
      return "dense";
  }
  return "unknown";
}

namespace {

/// MemAvailable of /proc/meminfo in bytes (the memory the kernel can hand out now without swapping), or 0
/// where it cannot be read.
std::uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
    return 0;
  }
  return 0;
}

}  // namespace

std::size_t dense_kernel_budget(const SinkhornOptions& options) {
  std::uint64_t available = available_memory_bytes();
  if (const std::uint64_t now = mem_available_bytes(); now > 0) available = std::min(available, now);
  return std::size_t(std::min<std::uint64_t>(options.dense_kernel_bytes, available / 4));
}

template <class S>
std::string dense_kernel_refusal(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p) {
  if (!std::is_same_v<S, double>) return "the dense kernel is implemented for double measures only";
  if (p != 2) {
    std::ostringstream os;
    os << "the dense kernel needs p = 2 (the squared Euclidean cost), got p = " << p;
    return os.str();
  }
  if (!(mu.weights().array() > S(0)).all() || !(nu.weights().array() > S(0)).all())
    return std::string("the dense kernel needs every weight > 0 (") +
           (!(mu.weights().array() > S(0)).all() ? "mu" : "nu") + " has a zero weight)";
  const double bytes = double(sizeof(double)) * double(mu.size()) * double(nu.size());
  const double available = double(available_memory_bytes());
  if (!(bytes <= available))
    return "the dense " + std::to_string(mu.size()) + " x " + std::to_string(nu.size()) + " kernel needs " +
           format_bytes(bytes) + ", more than the " + format_bytes(available) + " of memory available";
  return "";
}

template <class S>
SinkhornKernel sinkhorn_kernel_for(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p,
                                   const SinkhornOptions& options) {
  if (options.kernel == SinkhornKernel::streamed) return SinkhornKernel::streamed;
  const std::string refusal = dense_kernel_refusal(mu, nu, p);
  if (options.kernel == SinkhornKernel::dense) {
    if (!refusal.empty()) throw InputError("kernel", refusal);
    return SinkhornKernel::dense;
  }
  if (!refusal.empty()) return SinkhornKernel::streamed;
  const auto n = static_cast<std::size_t>(mu.size()), m = static_cast<std::size_t>(nu.size());
  return n * m <= dense_kernel_budget(options) / sizeof(double) ? SinkhornKernel::dense
                                                                : SinkhornKernel::streamed;
}

void check_sinkhorn_options(const SinkhornOptions& o,
                            const std::function<std::string(const std::string&)>& option_name) {
  const auto fail = [&](const std::string& member, const std::string& problem) {
    throw InputError(option_name ? option_name(member) : member, problem);
  };
  if (!std::isfinite(o.epsilon) || !(o.epsilon > 0)) fail("epsilon", "must be a finite number > 0");
  if (!(o.scaling > 0 && o.scaling < 1)) fail("scaling", "must lie in (0, 1)");
  if (!std::isfinite(o.epsilon_start) || o.epsilon_start < 0)
    fail("epsilon_start", "must be 0 (automatic) or a finite number > 0");
  if (o.stage_iterations < 1) fail("stage_iterations", "must be >= 1");
  if (o.max_iterations < 1) fail("max_iterations", "must be >= 1");
  if (!std::isfinite(o.tolerance) || !(o.tolerance > 0)) fail("tolerance", "must be a finite number > 0");
}

namespace {

/// The ε schedule: ε_0 = epsilon_start or diameter^p of the union of both supports, then ×scaling down to ε.
template <class S>
double initial_epsilon(const Matrix<S>& x, const Matrix<S>& y, double p, const SinkhornOptions& o) {
  if (o.epsilon_start > 0) return std::max(o.epsilon_start, o.epsilon);
  const Eigen::RowVectorXd lo =
      x.template cast<double>().colwise().minCoeff().cwiseMin(y.template cast<double>().colwise().minCoeff());
  const Eigen::RowVectorXd hi =
      x.template cast<double>().colwise().maxCoeff().cwiseMax(y.template cast<double>().colwise().maxCoeff());
  const double diameter = (hi - lo).norm();
  return std::max(o.epsilon, std::pow(diameter, p));
}

double next_epsilon(double current, const SinkhornOptions& o) {
  return std::max(o.epsilon, current * o.scaling);
}

/// ε-scaling: once a stage above the target has had its stage_iterations, move to the next ε.
template <class Count>
void advance_stage(double& epsilon, int& in_stage, Count& stages, bool at_target, const SinkhornOptions& o) {
  if (at_target || in_stage < o.stage_iterations) return;
  epsilon = next_epsilon(epsilon, o);
  ++stages;
  in_stage = 0;
}

/// Atoms shifted by the centre of the common bounding box: costs are translation invariant, and the
/// neg_sq_dist path's rounding error grows with ‖x‖² + ‖y‖².
template <class S>
Matrix<S> centred(const Matrix<S>& m, const Eigen::Matrix<S, 1, Eigen::Dynamic>& centre) {
  return m.rowwise() - centre;
}

template <class S>
Vector<S> log_of(const Vector<S>& w) {
  Vector<S> out(w.size());
  for (Eigen::Index i = 0; i < w.size(); ++i)
    out(i) = w(i) > S(0) ? S(std::log(w(i))) : -std::numeric_limits<S>::infinity();
  return out;
}

pairwise::Options reduce_options(const SinkhornOptions& o, Eigen::Index n, Eigen::Index m) {
  pairwise::Options r = o.reduce_options;
  if (r.threads == 0 && std::int64_t(n) * m < pairwise::single_thread_pairs) r.threads = 1;
  return r;
}

/// The streamed soft c-transform: lse_i = log Σ_j exp(log w_j + h_j/ε − C_ij/ε), optionally with
/// expected_score_i = Σ_j π_ij (−C_ij/ε).
template <class S>
class SoftTransform {
 public:
  SoftTransform(const Matrix<S>& queries, const Matrix<S>& keys, const Vector<S>& log_key_weights, double p,
                const pairwise::Options& options)
      : queries_(queries), keys_(keys), log_w_(log_key_weights), options_(options) {
    kernel_.score = p == 2 ? pairwise::ScoreKind::neg_sq_dist : pairwise::ScoreKind::neg_dist_pow;
    kernel_.power = p == 2 ? 1.0 : p;
  }

  pairwise::Result<S> operator()(const Vector<S>& key_potential, double epsilon,
                                 bool expected_score = false) {
    omega_ = log_w_ + key_potential / S(epsilon);
    pairwise::Problem<S> problem;
    problem.queries = &queries_;
    problem.keys = &keys_;
    problem.log_weights = &omega_;
    pairwise::Kernel kernel = kernel_;
    kernel.scale = 1 / epsilon;
    pairwise::Request request;
    request.out = false;
    request.expected_score = expected_score;
    return pairwise::reduce<S>(problem, kernel, request, options_);
  }

 private:
  const Matrix<S>& queries_;
  const Matrix<S>& keys_;
  const Vector<S>& log_w_;
  pairwise::Options options_;
  pairwise::Kernel kernel_;
  Vector<S> omega_;
};

/// Σ_i a_i |exp((f_i − f_new_i)/ε) − 1| and Σ_i a_i exp((f_i − f_new_i)/ε), accumulated in double.
template <class S>
std::pair<double, double> row_marginal(const Vector<S>& a, const Vector<S>& f, const Vector<S>& f_new,
                                       double epsilon) {
  double error = 0, mass = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (!(a(i) > S(0))) continue;
    const double ai = double(a(i));
    const double ratio = std::exp((double(f(i)) - double(f_new(i))) / epsilon);
    error += ai * std::abs(ratio - 1);
    mass += ai * ratio;
  }
  return {error, mass};
}

/// Final evaluation for potentials (f, g) at ε: marginal error (the same formula as the loop's test),
/// <P, C> and the dual objective. `transform` computes the f-side reduction (queries = mu's atoms, keys =
/// nu's atoms, key potential g).
template <class S>
void evaluate(SoftTransform<S>& transform, const Vector<S>& a, const Vector<S>& b, double epsilon,
              SinkhornResult<S>& r) {
  const pairwise::Result<S> red = transform(r.g, epsilon, true);
  double error = 0, mass = 0, cost = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (!(a(i) > S(0))) continue;
    const double ai = double(a(i));
    const double f_new = -epsilon * double(red.lse(i));
    const double ri = ai * std::exp((double(r.f(i)) - f_new) / epsilon);
    error += std::abs(ri - ai);
    mass += ri;
    cost += ri * (-epsilon * double(red.expected_score(i)));
  }
  r.marginal_error = error;
  r.cost = cost;
  r.objective = a.template cast<double>().dot(r.f.template cast<double>()) +
                b.template cast<double>().dot(r.g.template cast<double>()) - epsilon * (mass - 1);
}

}  // namespace

template <class S>
SinkhornResult<S> sinkhorn(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p,
                           const SinkhornOptions& options) {
  detail::check_exponent(p);
  detail::check_same_dimension(mu.dim(), nu.dim());
  check_sinkhorn_options(options);
  if constexpr (std::is_same_v<S, double>) {
    if (sinkhorn_kernel_for(mu, nu, p, options) == SinkhornKernel::dense) {
      // The same iteration as below (ω = 1) on the materialised kernel (sinkhorn_attention.hpp).
      AttentionSinkhornOptions dense;
      dense.sinkhorn = options;
      dense.sinkhorn.kernel = SinkhornKernel::dense;
      return sinkhorn_sq_euclidean(mu, nu, dense);
    }
  } else {
    sinkhorn_kernel_for(mu, nu, p, options);  // throws when dense is forced
  }
  const auto centre = ((mu.atoms().colwise().minCoeff().cwiseMin(nu.atoms().colwise().minCoeff()) +
                        mu.atoms().colwise().maxCoeff().cwiseMax(nu.atoms().colwise().maxCoeff())) /
                       S(2))
                          .eval();
  const Matrix<S> x = centred<S>(mu.atoms(), centre), y = centred<S>(nu.atoms(), centre);
  const Vector<S>&a = mu.weights(), &b = nu.weights();
  const Vector<S> log_a = log_of(a), log_b = log_of(b);
  const pairwise::Options threads = reduce_options(options, mu.size(), nu.size());
  SoftTransform<S> row_transform(x, y, log_b, p, threads);  // f from g
  SoftTransform<S> col_transform(y, x, log_a, p, threads);  // g from f

  SinkhornResult<S> r;
  r.epsilon = options.epsilon;
  double epsilon = initial_epsilon(x, y, p, options);
  r.g = Vector<S>::Zero(nu.size());
  r.f = -S(epsilon) * row_transform(r.g, epsilon).lse;
  r.stages = 1;
  int in_stage = 0;
  bool converged = false;
  while (r.iterations < options.max_iterations) {
    r.g = -S(epsilon) * col_transform(r.f, epsilon).lse;
    const Vector<S> f_new = -S(epsilon) * row_transform(r.g, epsilon).lse;
    ++r.iterations;
    ++in_stage;
    if (options.poll) options.poll(r.iterations, options.max_iterations);
    const bool at_target = epsilon == options.epsilon;
    if (at_target && row_marginal(a, r.f, f_new, epsilon).first <= options.tolerance) {
      // Confirm with the reported evaluation, so that status and marginal_error never disagree.
      evaluate(row_transform, a, b, epsilon, r);
      if (r.marginal_error <= options.tolerance) {
        converged = true;
        break;
      }
    }
    if (r.iterations >= options.max_iterations) break;  // keep (f, g): their plan is what gets evaluated
    r.f = f_new;
    advance_stage(epsilon, in_stage, r.stages, at_target, options);
  }
  if (epsilon != options.epsilon) {
    // Budget spent during ε-scaling: one iteration at the target so that every reported number refers to ε.
    epsilon = options.epsilon;
    ++r.stages;
    r.f = -S(epsilon) * row_transform(r.g, epsilon).lse;
    r.g = -S(epsilon) * col_transform(r.f, epsilon).lse;
  }
  if (!converged) evaluate(row_transform, a, b, epsilon, r);
  r.status = converged ? SinkhornStatus::converged : SinkhornStatus::max_iterations;
  return r;
}

template <class S>
SinkhornResult<S> sinkhorn_symmetric(const DiscreteMeasure<S>& mu, double p, const SinkhornOptions& options) {
  detail::check_exponent(p);
  check_sinkhorn_options(options);
  const auto centre = ((mu.atoms().colwise().minCoeff() + mu.atoms().colwise().maxCoeff()) / S(2)).eval();
  const Matrix<S> x = centred<S>(mu.atoms(), centre);
  const Vector<S>& a = mu.weights();
  const Vector<S> log_a = log_of(a);
  SoftTransform<S> transform(x, x, log_a, p, reduce_options(options, mu.size(), mu.size()));

  SinkhornResult<S> r;
  r.epsilon = options.epsilon;
  double epsilon = initial_epsilon(x, x, p, options);
  r.f = Vector<S>::Zero(mu.size());
  r.stages = 1;
  int in_stage = 0;
  bool converged = false;
  while (r.iterations < options.max_iterations) {
    const Vector<S> t = -S(epsilon) * transform(r.f, epsilon).lse;
    ++r.iterations;
    ++in_stage;
    if (options.poll) options.poll(r.iterations, options.max_iterations);
    const bool at_target = epsilon == options.epsilon;
    if (at_target && row_marginal(a, r.f, t, epsilon).first <= options.tolerance) {
      r.g = r.f;
      evaluate(transform, a, a, epsilon, r);
      if (r.marginal_error <= options.tolerance) {
        converged = true;
        break;
      }
    }
    if (r.iterations >= options.max_iterations) break;
    r.f = S(0.5) * (r.f + t);
    advance_stage(epsilon, in_stage, r.stages, at_target, options);
  }
  if (epsilon != options.epsilon) {
    epsilon = options.epsilon;
    ++r.stages;
    r.f = S(0.5) * (r.f - S(epsilon) * transform(r.f, epsilon).lse);
  }
  r.g = r.f;
  // evaluate() uses g = f as key potential: P_ij = a_i a_j exp((f_i + f_j − C_ij)/ε).
  if (!converged) evaluate(transform, a, a, epsilon, r);
  r.status = converged ? SinkhornStatus::converged : SinkhornStatus::max_iterations;
  return r;
}

template <class S>
SinkhornDivergenceResult sinkhorn_divergence(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu,
                                             double p, const SinkhornOptions& options) {
  const SinkhornResult<S> cross = sinkhorn(mu, nu, p, options);
  const SinkhornResult<S> self_mu = sinkhorn_symmetric(mu, p, options);
  const SinkhornResult<S> self_nu = sinkhorn_symmetric(nu, p, options);
  return divergence_from(cross, self_mu, self_nu);
}

#define REGATTA_INSTANTIATE_SINKHORN(S)                                                                \
  template std::string dense_kernel_refusal<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&,   \
                                               double);                                                \
  template SinkhornKernel sinkhorn_kernel_for<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, \
                                                 double, const SinkhornOptions&);                      \
  template SinkhornResult<S> sinkhorn<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double, \
                                         const SinkhornOptions&);                                      \
  template SinkhornResult<S> sinkhorn_symmetric<S>(const DiscreteMeasure<S>&, double,                  \
                                                   const SinkhornOptions&);                            \
  template SinkhornDivergenceResult sinkhorn_divergence<S>(                                            \
      const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double, const SinkhornOptions&);
REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_INSTANTIATE_SINKHORN)
#undef REGATTA_INSTANTIATE_SINKHORN

}  // namespace regatta::measures
