// Time integration of the attention dynamics: RK4, Dormand–Prince 5(4), layers as Euler steps (flow.hpp).
#include <regatta/core/decimal.hpp>
#include <regatta/operators/flow.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <regatta/core/error.hpp>

namespace regatta::operators::flow {

std::string to_string(Integrator integrator) {
  switch (integrator) {
    case Integrator::rk4:
      return "rk4";
    case Integrator::dopri5:
      return "dopri5";
    case Integrator::layers:
      return "layers";
  }
  return "unknown";
}

namespace {

/// Recorded times: output_times ∪ {0, T}, sorted, duplicates merged.
std::vector<double> record_times(const IntegratorOptions& o) {
  std::vector<double> t = o.output_times;
  t.push_back(0);
  t.push_back(o.horizon);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

/// Number of fixed steps from 0 to T (rk4: each gap between recorded times split into ⌈gap/step⌉ equal
/// steps; layers: T/step, which must be an integer).
double fixed_step_count(const IntegratorOptions& o) {
  if (o.method == Integrator::layers) return std::round(o.horizon / o.step);
  const std::vector<double> t = record_times(o);
  double steps = 0;
  for (std::size_t k = 1; k < t.size(); ++k) steps += std::ceil((t[k] - t[k - 1]) / o.step);
  return steps;
}

Vector<double> log_of(const Vector<double>& w) {
  Vector<double> out(w.size());
  for (Eigen::Index i = 0; i < w.size(); ++i)
    out(i) = w(i) > 0 ? std::log(w(i)) : -std::numeric_limits<double>::infinity();
  return out;
}

void renormalise(Matrix<double>& X) { X.rowwise().normalize(); }

}  // namespace

void validate(const ModelSpec& spec, const Matrix<double>& X0, const Vector<double>& weights,
              const IntegratorOptions& o) {
  if (X0.rows() < 1 || X0.cols() < 1) throw InputError("particles", "must be a non-empty n x d matrix");
  if (!X0.allFinite()) throw InputError("particles", "contain NaN or Inf");
  if (!std::isfinite(spec.beta) || spec.beta < 0) throw InputError("beta", "must be a finite number >= 0");
  if (spec.sinkhorn_iterations < 1) throw InputError("sinkhorn_iterations", "must be >= 1");
  if (!std::isfinite(o.step) || !(o.step > 0)) throw InputError("step", "must be a finite number > 0");
  if (!std::isfinite(o.horizon) || o.horizon < 0) throw InputError("horizon", "must be a finite number >= 0");
  if (!std::isfinite(o.rtol) || !(o.rtol > 0)) throw InputError("rtol", "must be a finite number > 0");
  if (!std::isfinite(o.atol) || !(o.atol > 0)) throw InputError("atol", "must be a finite number > 0");
  if (o.max_steps < 1) throw InputError("max_steps", "must be >= 1");
  for (double t : o.output_times)
    if (!std::isfinite(t) || t < 0 || t > o.horizon)
      throw InputError("output_times", "must lie in [0, horizon], got " + nearest_decimal(t));
  if (o.method == Integrator::layers) {
    const double k = o.horizon / o.step;
    if (std::abs(k - std::round(k)) > 1e-9 * std::max(1.0, k))
      throw InputError("horizon",
                       "must be a whole number of steps for the layers integrator (horizon / step = " +
                           nearest_decimal(k) + ")");
  }
  if (o.method != Integrator::dopri5) {
    const double steps = fixed_step_count(o);
    if (steps > double(o.max_steps))
      throw InputError("horizon", "needs " + nearest_decimal(steps) + " steps of " + nearest_decimal(o.step) +
                                      ", more than the maximum " + std::to_string(o.max_steps));
  }
  if (weights.size() != 0) {
    if (weights.size() != X0.rows())
      throw InputError("weights", "has " + std::to_string(weights.size()) + " entries for " +
                                      std::to_string(X0.rows()) + " particles");
    if (!weights.allFinite() || (weights.array() < 0).any())
      throw InputError("weights", "must be finite and >= 0");
    const double total = weights.sum();
    if (!(std::abs(total - 1) <= 1e-9))
      throw InputError("weights", "must sum to 1, sum " + nearest_decimal(total));
  }
  if (is_sphere_model(spec.model)) {
    Eigen::Index worst = 0;
    const Vector<double> deviation = (X0.rowwise().norm().array() - 1).abs().matrix();
    const double largest = deviation.maxCoeff(&worst);
    if (largest > o.sphere_tolerance)
      throw InputError("particles", "are not on the unit sphere (sphere model): largest | |x| - 1 | = " +
                                        nearest_decimal(largest) + " at row " + std::to_string(worst) +
                                        ", tolerance " + nearest_decimal(o.sphere_tolerance));
  } else {
    if (!spec.layer)
      throw InputError("layer", "a layer is needed for the " + to_string(spec.model) + " model");
    spec.layer->validate();
    if (X0.cols() != spec.layer->d)
      throw InputError("particles", "have dimension " + std::to_string(X0.cols()) +
                                        ", the layer has d = " + std::to_string(spec.layer->d));
    if (spec.attention.residual)
      throw InputError("residual",
                       "the flow's time derivative is the attention output; the residual is the "
                       "integrator's (use the layers integrator for residual layers as steps)");
    if (spec.model == Model::cross_attention) {
      if (spec.context.rows() < 1 || spec.context.cols() != X0.cols())
        throw InputError("context", "must be a non-empty m x " + std::to_string(X0.cols()) + " matrix");
      if (!spec.context.allFinite()) throw InputError("context", "contains NaN or Inf");
    }
  }
}

Trajectory integrate(const ModelSpec& spec, const Matrix<double>& X0, const Vector<double>& weights,
                     const IntegratorOptions& o,
                     const std::function<void(double, const Matrix<double>&)>& on_state) {
  validate(spec, X0, weights, o);
  const Eigen::Index n = X0.rows();
  const Vector<double> omega =
      weights.size() ? log_of(weights) : Vector<double>::Constant(n, -std::log(double(n)));
  const bool sphere = is_sphere_model(spec.model);
  Trajectory tr;
  auto field = [&](const Matrix<double>& X) {
    ++tr.field_evaluations;
    return velocity(spec, X, omega);
  };
  auto record = [&](double t, const Matrix<double>& X) {
    tr.times.push_back(t);
    tr.states.push_back(X);
    if (on_state) on_state(t, X);
  };
  const std::vector<double> times = record_times(o);
  Matrix<double> X = X0;
  if (sphere) renormalise(X);
  record(0, X);

  if (o.method == Integrator::layers) {
    const auto total = std::int64_t(std::round(o.horizon / o.step));
    // Recorded time τ is taken after layer ⌊τ/step⌋ (at time ⌊τ/step⌋·step; the horizon exactly).
    std::size_t next = 1;
    for (std::int64_t k = 1; k <= total; ++k) {
      X += o.step * field(X);
      if (sphere) renormalise(X);
      ++tr.steps;
      while (next < times.size() &&
             (k == total || std::int64_t(std::floor(times[next] / o.step + 1e-9)) <= k)) {
        record(k == total ? o.horizon : double(k) * o.step, X);
        ++next;
      }
    }
    return tr;
  }

  if (o.method == Integrator::rk4) {
    for (std::size_t k = 1; k < times.size(); ++k) {
      const double gap = times[k] - times[k - 1];
      const auto steps = std::int64_t(std::ceil(gap / o.step));
      const double h = gap / double(steps);
      for (std::int64_t s = 0; s < steps; ++s) {
        const Matrix<double> k1 = field(X);
        const Matrix<double> k2 = field(X + (h / 2) * k1);
        const Matrix<double> k3 = field(X + (h / 2) * k2);
        const Matrix<double> k4 = field(X + h * k3);
        X += (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4);
        if (sphere) renormalise(X);
        ++tr.steps;
      }
      record(times[k], X);
    }
    return tr;
  }

  // Dormand–Prince 5(4) (Hairer, Nørsett, Wanner, Solving ODEs I, Table II.5.2).
  constexpr double a21 = 1.0 / 5, a31 = 3.0 / 40, a32 = 9.0 / 40, a41 = 44.0 / 45, a42 = -56.0 / 15,
                   a43 = 32.0 / 9, a51 = 19372.0 / 6561, a52 = -25360.0 / 2187, a53 = 64448.0 / 6561,
                   a54 = -212.0 / 729, a61 = 9017.0 / 3168, a62 = -355.0 / 33, a63 = 46732.0 / 5247,
                   a64 = 49.0 / 176, a65 = -5103.0 / 18656, b1 = 35.0 / 384, b3 = 500.0 / 1113,
                   b4 = 125.0 / 192, b5 = -2187.0 / 6784, b6 = 11.0 / 84;
  // e = b (5th order) − b̂ (4th order).
  constexpr double e1 = 71.0 / 57600, e3 = -71.0 / 16695, e4 = 71.0 / 1920, e5 = -17253.0 / 339200,
                   e6 = 22.0 / 525, e7 = -1.0 / 40;
  double t = 0, h = std::min(o.step, std::max(o.horizon, o.min_step));
  Matrix<double> k1 = field(X);
  std::int64_t attempts = 0;
  for (std::size_t next = 1; next < times.size(); ++next) {
    while (t < times[next]) {
      if (attempts >= o.max_steps) {
        tr.status = FlowStatus::max_steps;
        record(t, X);
        return tr;
      }
      if (h < o.min_step) {
        tr.status = FlowStatus::step_underflow;
        record(t, X);
        return tr;
      }
      ++attempts;
      const bool lands = t + h >= times[next];
      const double step = lands ? times[next] - t : h;
      const Matrix<double> k2 = field(X + step * a21 * k1);
      const Matrix<double> k3 = field(X + step * (a31 * k1 + a32 * k2));
      const Matrix<double> k4 = field(X + step * (a41 * k1 + a42 * k2 + a43 * k3));
      const Matrix<double> k5 = field(X + step * (a51 * k1 + a52 * k2 + a53 * k3 + a54 * k4));
      const Matrix<double> k6 = field(X + step * (a61 * k1 + a62 * k2 + a63 * k3 + a64 * k4 + a65 * k5));
      Matrix<double> Xn = X + step * (b1 * k1 + b3 * k3 + b4 * k4 + b5 * k5 + b6 * k6);
      const Matrix<double> k7 = field(Xn);
      const Matrix<double> e = step * (e1 * k1 + e3 * k3 + e4 * k4 + e5 * k5 + e6 * k6 + e7 * k7);
      const Eigen::ArrayXXd scale = o.atol + o.rtol * X.array().abs().max(Xn.array().abs());
      const double err = std::sqrt((e.array() / scale).square().mean());
      if (std::isfinite(err) && err <= 1) {
        t = lands ? times[next] : t + step;
        X = std::move(Xn);
        ++tr.steps;
        tr.max_error_ratio = std::max(tr.max_error_ratio, err);
        if (sphere) {
          renormalise(X);
          k1 = field(X);
        } else {
          k1 = k7;
        }
      } else {
        ++tr.rejected;
      }
      const bool accepted = std::isfinite(err) && err <= 1;
      const double factor = !std::isfinite(err) ? 0.2
                            : err == 0          ? 5.0
                                                : std::clamp(0.9 * std::pow(err, -0.2), 0.2, 5.0);
      // A step shortened to land on a recorded time does not shrink the next one below what the
      // controller allowed before.
      h = accepted && lands ? std::max(step * factor, h * std::min(factor, 1.0)) : step * factor;
    }
    record(times[next], X);
  }
  return tr;
}

/// How an integration ended (the status the integrator above records).
std::string to_string(FlowStatus status) {
  switch (status) {
    case FlowStatus::completed:
      return "completed";
    case FlowStatus::max_steps:
      return "max_steps";
    case FlowStatus::step_underflow:
      return "step_underflow";
  }
  return "unknown";
}

}  // namespace regatta::operators::flow
