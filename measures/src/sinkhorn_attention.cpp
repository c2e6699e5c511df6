// Sinkhorn for ‖x − y‖² as a row-wise log-sum-exp of biased dot products (sinkhorn_attention.hpp).
#include <regatta/measures/sinkhorn_attention.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/resources.hpp>
#include <type_traits>

#include "sinkhorn_dense_kernel.hpp"

namespace regatta::measures {

namespace detail {
void check_same_dimension(Eigen::Index mu_dim, Eigen::Index nu_dim);
}  // namespace detail

const char* to_string(SinkhornStorage storage) {
  return storage == SinkhornStorage::float32 ? "float32" : "float64";
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
/// Keys per chunk of the fused kernel: 512 scores (2–4 KB) stay in L1 between the FMA, max and exp passes.
constexpr Eigen::Index chunk_keys = 512;

void check_options(const AttentionSinkhornOptions& options) {
  check_sinkhorn_options(options.sinkhorn);
  if (options.narrow_dimension < 0) throw InputError("narrow_dimension", "must be >= 0");
  if (!(options.over_relaxation >= 1 && options.over_relaxation < 2))
    throw InputError("over_relaxation", "must lie in [1, 2)");
}

/// One side of the iteration: new potentials of the queries from the potential of the keys,
///     h_i = ‖x_i‖² − ε LSE_j(log w_j + (k_j − ‖y_j‖²)/ε + (2/ε)⟨x_i, y_j⟩),
/// and optionally row_cost_i = Σ_j π_ij C_ij. Keys of weight 0 are left out (they carry no mass).
class Transform {
 public:
  Transform(const Matrix<double>& queries, const Matrix<double>& keys, const Vector<double>& key_weights,
            const AttentionSinkhornOptions& options)
      : x_(queries), options_(options) {
    for (Eigen::Index j = 0; j < keys.rows(); ++j)
      if (key_weights(j) > 0) support_.push_back(j);
    const Eigen::Index m = Eigen::Index(support_.size()), d = keys.cols();
    y_.resize(m, d);
    log_w_.resize(m);
    y_sq_.resize(m);
    for (Eigen::Index s = 0; s < m; ++s) {
      y_.row(s) = keys.row(support_[s]);
      log_w_(s) = std::log(key_weights(support_[s]));
      y_sq_(s) = y_.row(s).squaredNorm();
    }
    x_sq_ = x_.rowwise().squaredNorm();
    threads_ = options.sinkhorn.reduce_options.threads;
    if (threads_ == 0)
      threads_ = std::int64_t(x_.rows()) * m < pairwise::single_thread_pairs ? 1 : omp_get_max_threads();
    const bool f32 = options.storage == SinkhornStorage::float32;
    narrow_ = d <= options.narrow_dimension;
    if (f32) {
      xf_ = x_.cast<float>();
      yf_ = y_.cast<float>();
      ysqf_ = y_sq_.cast<float>();
      ykf_ = yf_.transpose();
    } else {
      yk_ = y_.transpose();
    }
  }

  /// New query potentials from key potentials k (indexed like the keys given to the constructor).
  Vector<double> operator()(const Vector<double>& k, double epsilon, Vector<double>* row_cost = nullptr) {
    omega_.resize(Eigen::Index(support_.size()));
    for (Eigen::Index s = 0; s < omega_.size(); ++s)
      omega_(s) = log_w_(s) + (k(support_[s]) - y_sq_(s)) / epsilon;
    Vector<double> lse(x_.rows());
    if (row_cost) row_cost->resize(x_.rows());
    if (options_.storage == SinkhornStorage::float32) {
      const Vector<float> omega = omega_.cast<float>();
      if (!narrow_)
        wide<float>(xf_, yf_, ysqf_, omega, epsilon, lse, row_cost);
      else if (options_.accumulate_double)
        narrow<float, double>(ykf_, ysqf_, omega, epsilon, lse, row_cost);
      else
        narrow<float, float>(ykf_, ysqf_, omega, epsilon, lse, row_cost);
    } else if (narrow_) {
      narrow<double, double>(yk_, y_sq_, omega_, epsilon, lse, row_cost);
    } else {
      wide<double>(x_, y_, y_sq_, omega_, epsilon, lse, row_cost);
    }
    return x_sq_ - epsilon * lse;
  }

 private:
  /// The fused narrow-token kernel: per row, chunks of scores t = ω + Σ_k x'_k y_k (d FMAs per key), the
  /// chunk maximum, Σ exp(t − max) in T, merged into the running (max, sum) state in Acc.
  template <class T, class Acc>
  void narrow(const Matrix<T>& yk, const Vector<T>& y_sq, const Vector<T>& omega, double epsilon,
              Vector<double>& lse, Vector<double>* row_cost) const {
    const Eigen::Index n = x_.rows(), m = omega.size(), d = x_.cols();
    const double q = 2 / epsilon;
#pragma omp parallel num_threads(threads_)
    {
      Eigen::Array<T, Eigen::Dynamic, 1> t(chunk_keys), e(chunk_keys);
      std::vector<T> xi(std::size_t(d), T(0));
#pragma omp for schedule(static)
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index k = 0; k < d; ++k) xi[std::size_t(k)] = T(q * x_(i, k));
        Acc running_max = -std::numeric_limits<Acc>::infinity(), sum = 0, cost = 0;
        for (Eigen::Index j0 = 0; j0 < m; j0 += chunk_keys) {
          const Eigen::Index len = std::min(chunk_keys, m - j0);
          auto tc = t.head(len);
          tc = omega.segment(j0, len).array();
          for (Eigen::Index k = 0; k < d; ++k)
            tc += xi[std::size_t(k)] * yk.row(k).segment(j0, len).transpose().array();
          const T chunk_max = tc.maxCoeff();
          auto ec = e.head(len);
          ec = (tc - chunk_max).exp();
          const Acc chunk_sum = Acc(ec.sum());
          Acc chunk_cost = 0;
          // C_ij − ‖x_i‖² = ‖y_j‖² − ε (t_j − ω_j).
          if (row_cost)
            chunk_cost = Acc(
                (ec * (y_sq.segment(j0, len).array() - T(epsilon) * (tc - omega.segment(j0, len).array())))
                    .sum());
          if (Acc(chunk_max) > running_max) {
            const Acc r = std::exp(running_max - Acc(chunk_max));
            sum = sum * r + chunk_sum;
            cost = cost * r + chunk_cost;
            running_max = Acc(chunk_max);
          } else {
            const Acc r = std::exp(Acc(chunk_max) - running_max);
            sum += chunk_sum * r;
            cost += chunk_cost * r;
          }
        }
        lse(i) = double(running_max) + std::log(double(sum));
        if (row_cost) (*row_cost)(i) = x_sq_(i) + double(cost) / double(sum);
      }
    }
  }

  /// Wide tokens: the GEMM-blocked attention path, dot score scale 2/ε with log-weights ω.
  template <class T>
  void wide(const Matrix<T>& x, const Matrix<T>& y, const Vector<T>& y_sq, const Vector<T>& omega,
            double epsilon, Vector<double>& lse, Vector<double>* row_cost) const {
    pairwise::Problem<T> problem;
    problem.queries = &x;
    problem.keys = &y;
    problem.log_weights = &omega;
    const Matrix<T> values = y_sq;
    problem.values = &values;
    pairwise::Kernel kernel;
    kernel.score = pairwise::ScoreKind::dot;
    kernel.scale = 2 / epsilon;
    pairwise::Request request;
    request.out = row_cost != nullptr;
    request.expected_score = row_cost != nullptr;
    pairwise::Options o = options_.sinkhorn.reduce_options;
    o.threads = threads_;
    const pairwise::Result<T> r = pairwise::reduce<T>(problem, kernel, request, o);
    lse = r.lse.template cast<double>();
    if (row_cost)
      for (Eigen::Index i = 0; i < x.rows(); ++i)
        (*row_cost)(i) = x_sq_(i) + double(r.out(i, 0)) - epsilon * double(r.expected_score(i));
  }

  const Matrix<double>& x_;
  const AttentionSinkhornOptions& options_;
  std::vector<Eigen::Index> support_;
  Matrix<double> y_, yk_;
  Vector<double> log_w_, y_sq_, x_sq_, omega_;
  Matrix<float> xf_, yf_, ykf_;
  Vector<float> ysqf_;
  int threads_ = 1;
  bool narrow_ = true;
};

/// Σ_i a_i |exp((f_i − f_new_i)/ε) − 1|.
double row_marginal_error(const Vector<double>& a, const Vector<double>& f, const Vector<double>& f_new,
                          double epsilon) {
  double error = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (a(i) > 0) error += a(i) * std::abs(std::exp((f(i) - f_new(i)) / epsilon) - 1);
  return error;
}

/// Marginal error, <P, C> and D_ε(f, g) of the plan of (r.f, r.g) at ε (as sinkhorn.cpp's evaluate()).
void evaluate(Transform& row_transform, const Vector<double>& a, const Vector<double>& b, double epsilon,
              SinkhornResult<double>& r) {
  Vector<double> row_cost;
  const Vector<double> f_new = row_transform(r.g, epsilon, &row_cost);
  double error = 0, mass = 0, cost = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (!(a(i) > 0)) continue;
    const double ri = a(i) * std::exp((r.f(i) - f_new(i)) / epsilon);
    error += std::abs(ri - a(i));
    mass += ri;
    cost += ri * row_cost(i);
  }
  r.marginal_error = error;
  r.cost = cost;
  r.objective = a.dot(r.f) + b.dot(r.g) - epsilon * (mass - 1);
}

double initial_epsilon(const Matrix<double>& x, const Matrix<double>& y, const SinkhornOptions& o) {
  if (o.epsilon_start > 0) return std::max(o.epsilon_start, o.epsilon);
  const Eigen::RowVectorXd lo = x.colwise().minCoeff().cwiseMin(y.colwise().minCoeff());
  const Eigen::RowVectorXd hi = x.colwise().maxCoeff().cwiseMax(y.colwise().maxCoeff());
  return std::max(o.epsilon, (hi - lo).squaredNorm());
}

void advance_stage(double& epsilon, int& in_stage, int& stages, bool at_target, const SinkhornOptions& o) {
  if (at_target || in_stage < o.stage_iterations) return;
  epsilon = std::max(o.epsilon, epsilon * o.scaling);
  ++stages;
  in_stage = 0;
}

Eigen::RowVectorXd box_centre(const Matrix<double>& x, const Matrix<double>& y) {
  return (x.colwise().minCoeff().cwiseMin(y.colwise().minCoeff()) +
          x.colwise().maxCoeff().cwiseMax(y.colwise().maxCoeff())) /
         2;
}

}  // namespace

namespace {

/// Where the iteration stands (shared by the two evaluation paths, so one can hand over to the other).
struct LoopState {
  double epsilon = 0;
  int in_stage = 0;
  bool relaxing = false;
  double previous_error = inf;
};

/// The log-domain iteration from (r.f, r.g) until convergence or the budget; true when converged.
/// Over-relaxation at the target ε (while relaxing is on): h ← h + ω (T(h′) − h) for both potentials. The
/// stopping test is only applied to plain iterations (exact columns); relaxing stops once the row error is
/// within 10 × tolerance, or as soon as it grows (then the plain iteration finishes from where it is).
bool log_domain_iterations(Transform& row_transform, Transform& col_transform, const Vector<double>& a,
                           const Vector<double>& b, const AttentionSinkhornOptions& options, LoopState& s,
                           SinkhornResult<double>& r) {
  const SinkhornOptions& o = options.sinkhorn;
  const double omega = options.over_relaxation;
  while (r.iterations < o.max_iterations) {
    const bool at_target = s.epsilon == o.epsilon;
    const bool relaxed = s.relaxing && at_target;
    const Vector<double> g_plain = col_transform(r.f, s.epsilon);
    r.g = relaxed ? Vector<double>(r.g + omega * (g_plain - r.g)) : g_plain;
    const Vector<double> f_new = row_transform(r.g, s.epsilon);
    ++r.iterations;
    ++s.in_stage;
    if (o.poll) o.poll(r.iterations, o.max_iterations);
    const double error = at_target ? row_marginal_error(a, r.f, f_new, s.epsilon) : inf;
    if (relaxed && (!(error <= s.previous_error * 2) || error <= 10 * o.tolerance)) s.relaxing = false;
    if (at_target) s.previous_error = error;
    if (at_target && !relaxed && error <= o.tolerance) {
      evaluate(row_transform, a, b, s.epsilon, r);
      if (r.marginal_error <= o.tolerance) return true;
    }
    if (r.iterations >= o.max_iterations) break;
    r.f = relaxed ? Vector<double>(r.f + omega * (f_new - r.f)) : f_new;
    advance_stage(s.epsilon, s.in_stage, r.stages, at_target, o);
  }
  return false;
}

enum class DenseOutcome { converged, exhausted, hand_over };

bool positive_finite(const Vector<double>& v) { return v.allFinite() && (v.array() > 0).all(); }

/// h^{1−ω} h_new^ω elementwise (the over-relaxed update of a scaling; ω = 1: h_new).
Vector<double> relax(const Vector<double>& h, const Vector<double>& h_new, double omega) {
  if (omega == 1) return h_new;
  return ((1 - omega) * h.array().log() + omega * h_new.array().log()).exp().matrix();
}

/// The same iteration in the scaling form on a materialised stabilised kernel (SinkhornKernel::dense):
/// f = α + ε log u, g = β + ε log v, P_ij = a_i b_j u_i K_ij v_j. Starts from (r.f, r.g) and leaves in
/// (r.f, r.g) the potentials of the state it stops in (finite: a hand-over starts from them).
template <class T>
DenseOutcome dense_iterations(const Matrix<double>& x, const Matrix<double>& y, Transform& row_transform,
                              const Vector<double>& a, const Vector<double>& b,
                              const AttentionSinkhornOptions& options, int threads, LoopState& s,
                              SinkhornResult<double>& r) {
  const SinkhornOptions& o = options.sinkhorn;
  const double omega = options.over_relaxation;
  // Scalings beyond e^{±threshold} are absorbed into the potentials and K is rebuilt: entries of K that
  // flush to 0 then stand for plan entries below e^{2 threshold} · (smallest normal of T) · a_i b_j.
  const double threshold = std::is_same_v<T, float> ? 10.0 : 30.0;
  detail::DenseGibbsKernel<T> kernel(x, y, threads);
  Vector<double> alpha = r.f, beta = r.g;
  Vector<double> u = Vector<double>::Ones(a.size()), v = Vector<double>::Ones(b.size()), u_prev;
  Vector<double> row_sums, col_sums;
  double built = s.epsilon;
  auto rebuild = [&] {
    alpha += built * u.array().log().matrix();
    beta += built * v.array().log().matrix();
    built = s.epsilon;
    kernel.build(alpha, beta, built);
    u.setOnes();
    v.setOnes();
    kernel.apply_transpose(a, col_sums);
    if (o.poll) o.poll(r.iterations, o.max_iterations);  // a build costs n·m exponentials: a way to stop
  };
  auto store = [&](const Vector<double>& uu, const Vector<double>& vv) {
    r.f = alpha + built * uu.array().log().matrix();
    r.g = beta + built * vv.array().log().matrix();
  };
  kernel.build(alpha, beta, built);
  kernel.apply_transpose(a, col_sums);
  if (o.poll) o.poll(r.iterations, o.max_iterations);
  while (r.iterations < o.max_iterations) {
    const bool at_target = s.epsilon == o.epsilon;
    const bool relaxed = s.relaxing && at_target;
    if (!positive_finite(col_sums)) {
      store(u, v);
      return DenseOutcome::hand_over;
    }
    v = relax(v, col_sums.cwiseInverse(), relaxed ? omega : 1);  // columns: v_j = 1/Σ_i K_ij a_i u_i
    u_prev = u;
    kernel.sweep(b.cwiseProduct(v), relaxed ? omega : 1, a, u, row_sums, col_sums);
    if (!positive_finite(row_sums)) {
      store(u_prev, v);
      return DenseOutcome::hand_over;
    }
    ++r.iterations;
    ++s.in_stage;
    if (o.poll) o.poll(r.iterations, o.max_iterations);
    // Row marginal of the plan of (u_prev, v): a_i u_prev_i Σ_j K_ij b_j v_j.
    const double error = at_target ? (a.array() * (u_prev.array() * row_sums.array() - 1).abs()).sum() : inf;
    if (relaxed && (!(error <= s.previous_error * 2) || error <= 10 * o.tolerance)) s.relaxing = false;
    if (at_target) s.previous_error = error;
    if (at_target && !relaxed && error <= o.tolerance) {
      store(u_prev, v);
      evaluate(row_transform, a, b, s.epsilon, r);  // the exact (streamed) marginal error decides
      if (r.marginal_error <= o.tolerance) return DenseOutcome::converged;
      return DenseOutcome::hand_over;  // K's rounding floor is above the tolerance
    }
    if (r.iterations >= o.max_iterations) {
      store(u_prev, v);
      return DenseOutcome::exhausted;
    }
    if (!positive_finite(u)) {
      // The row update left the representable range: hand over from the last representable state.
      store(u_prev, v);
      return DenseOutcome::hand_over;
    }
    const double epsilon_before = s.epsilon;
    advance_stage(s.epsilon, s.in_stage, r.stages, at_target, o);
    const bool absorb =
        u.array().log().abs().maxCoeff() > threshold || v.array().log().abs().maxCoeff() > threshold;
    if (absorb || s.epsilon != epsilon_before) rebuild();
  }
  store(u, v);
  return DenseOutcome::exhausted;
}

/// Threads of the dense kernel's passes: a sweep is only 2 n m multiply-adds (no exponentials), so a thread
/// needs its min_parallel_work of them (resources.hpp) — below that a parallel region per iteration costs
/// more in barrier waits than it saves, and on a loaded machine far more (measured: 500 × 500 took 3–8 s on
/// two threads against 0.2 s on one).
int team_size(const AttentionSinkhornOptions& options, Eigen::Index n, Eigen::Index m) {
  const int threads = options.sinkhorn.reduce_options.threads;
  if (threads > 0) return threads;
  return threads_for(2.0 * double(n) * double(m));
}

}  // namespace

bool uses_dense_kernel(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                       const AttentionSinkhornOptions& options) {
  const SinkhornKernel kernel = options.sinkhorn.kernel;
  if (kernel == SinkhornKernel::streamed) return false;
  if (!(mu.weights().array() > 0).all() || !(nu.weights().array() > 0).all()) return false;
  if (kernel == SinkhornKernel::dense) return true;
  const std::size_t entry = options.storage == SinkhornStorage::float32 ? sizeof(float) : sizeof(double);
  const auto n = static_cast<std::size_t>(mu.size()), m = static_cast<std::size_t>(nu.size());
  return n * m <= dense_kernel_budget(options.sinkhorn) / entry;
}

SinkhornResult<double> sinkhorn_sq_euclidean(const DiscreteMeasure<double>& mu,
                                             const DiscreteMeasure<double>& nu,
                                             const AttentionSinkhornOptions& options) {
  detail::check_same_dimension(mu.dim(), nu.dim());
  check_options(options);
  const SinkhornOptions& o = options.sinkhorn;
  const Eigen::RowVectorXd centre = box_centre(mu.atoms(), nu.atoms());
  const Matrix<double> x = mu.atoms().rowwise() - centre, y = nu.atoms().rowwise() - centre;
  const Vector<double>&a = mu.weights(), &b = nu.weights();
  Transform row_transform(x, y, b, options);  // f from g
  Transform col_transform(y, x, a, options);  // g from f

  SinkhornResult<double> r;
  r.epsilon = o.epsilon;
  LoopState s;
  s.epsilon = initial_epsilon(x, y, o);
  s.relaxing = options.over_relaxation > 1;
  r.g = Vector<double>::Zero(nu.size());
  r.f = row_transform(r.g, s.epsilon);
  r.stages = 1;
  bool converged = false, done = false;
  if (uses_dense_kernel(mu, nu, options)) {
    const int threads = team_size(options, mu.size(), nu.size());
    const DenseOutcome outcome =
        options.storage == SinkhornStorage::float32
            ? dense_iterations<float>(x, y, row_transform, a, b, options, threads, s, r)
            : dense_iterations<double>(x, y, row_transform, a, b, options, threads, s, r);
    converged = outcome == DenseOutcome::converged;
    done = outcome != DenseOutcome::hand_over;
    r.kernel = SinkhornKernel::dense;
    r.handed_over = !done;
  }
  if (!done) converged = log_domain_iterations(row_transform, col_transform, a, b, options, s, r);
  if (s.epsilon != o.epsilon) {
    s.epsilon = o.epsilon;
    ++r.stages;
    r.f = row_transform(r.g, s.epsilon);
    r.g = col_transform(r.f, s.epsilon);
  }
  if (!converged) evaluate(row_transform, a, b, s.epsilon, r);
  r.status = converged ? SinkhornStatus::converged : SinkhornStatus::max_iterations;
  return r;
}

SinkhornResult<double> sinkhorn_sq_euclidean_symmetric(const DiscreteMeasure<double>& mu,
                                                       const AttentionSinkhornOptions& options) {
  check_options(options);
  const SinkhornOptions& o = options.sinkhorn;
  const Matrix<double> x = mu.atoms().rowwise() - box_centre(mu.atoms(), mu.atoms());
  const Vector<double>& a = mu.weights();
  Transform transform(x, x, a, options);

  SinkhornResult<double> r;
  r.epsilon = o.epsilon;
  double epsilon = initial_epsilon(x, x, o);
  r.f = Vector<double>::Zero(mu.size());
  r.stages = 1;
  int in_stage = 0;
  bool converged = false;
  while (r.iterations < o.max_iterations) {
    const Vector<double> t = transform(r.f, epsilon);
    ++r.iterations;
    ++in_stage;
    if (o.poll) o.poll(r.iterations, o.max_iterations);
    const bool at_target = epsilon == o.epsilon;
    if (at_target && row_marginal_error(a, r.f, t, epsilon) <= o.tolerance) {
      r.g = r.f;
      evaluate(transform, a, a, epsilon, r);
      if (r.marginal_error <= o.tolerance) {
        converged = true;
        break;
      }
    }
    if (r.iterations >= o.max_iterations) break;
    r.f = 0.5 * (r.f + t);
    advance_stage(epsilon, in_stage, r.stages, at_target, o);
  }
  if (epsilon != o.epsilon) {
    epsilon = o.epsilon;
    ++r.stages;
    r.f = 0.5 * (r.f + transform(r.f, epsilon));
  }
  r.g = r.f;
  if (!converged) evaluate(transform, a, a, epsilon, r);
  r.status = converged ? SinkhornStatus::converged : SinkhornStatus::max_iterations;
  return r;
}

SinkhornDivergenceResult sinkhorn_divergence_sq_euclidean(const DiscreteMeasure<double>& mu,
                                                          const DiscreteMeasure<double>& nu,
                                                          const AttentionSinkhornOptions& options) {
  const SinkhornResult<double> cross = sinkhorn_sq_euclidean(mu, nu, options);
  const SinkhornResult<double> self_mu = sinkhorn_sq_euclidean_symmetric(mu, options);
  const SinkhornResult<double> self_nu = sinkhorn_sq_euclidean_symmetric(nu, options);
  return divergence_from(cross, self_mu, self_nu);
}

}  // namespace regatta::measures
