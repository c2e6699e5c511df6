#pragma once
// Attention dynamics on (weighted) empirical measures: tokens as an interacting particle system and its
// mean-field flow of measures (docs/flow.md). For particles x_i with weights a_i (Σ a_i = 1), μ = Σ a_i
// δ_{x_i}, the velocity fields V(X)_i are:
//
//   sphere                 (Geshkovski–Letrouit–Polyanskiy–Rigollet, "SA" model) tokens on S^{d−1},
//                          v_i = P⊥_{x_i}( Σ_j π_ij x_j ),  π_ij = a_j e^{β⟨x_i,x_j⟩} / Σ_k a_k
//                          e^{β⟨x_i,x_k⟩}
//   sphere_unnormalized    ("USA" model) v_i = P⊥_{x_i}( Σ_j a_j e^{β⟨x_i,x_j⟩} x_j ): the gradient ascent,
//                          in the metric Σ a_i |ẋ_i|², of E_β(μ) = (1/2β) Σ_ij a_i a_j e^{β⟨x_i,x_j⟩}, so
//                          dE_β/dt = Σ_i a_i |v_i|² ≥ 0 along exact trajectories
//   sphere_sinkhorn        (Sinkformers, Sander et al. 2022) v_i = P⊥_{x_i}( Σ_j K_ij x_j ) with K the
//                          symmetric doubly stochastic (w.r.t. a) scaling of a_j e^{β⟨x_i,x_j⟩}:
//                          K_ij = e^{f_i + f_j + β⟨x_i,x_j⟩} a_j, f by `sinkhorn_iterations` averaged
//                          symmetric updates f ← ½(f − LSE_j(log a_j + f_j + β⟨x_i,x_j⟩)) from f = 0
//   self_attention         v = MHA(N(X)) of a layer (attention.hpp: softmax or Sinkhorn kernel, weighted by
//                          log a, optional pre-norm N; the residual is the time derivative's "X +", so the
//                          layer's residual flag must be off)
//   cross_attention        v = MHA against a fixed context measure (attend_cross_weighted; softmax only)
// with P⊥_x v = v − ⟨x, v⟩ x (x on the unit sphere). Every field is evaluated through pairwise::reduce
// (streamed, memory O(n d)); all numbers are double-precision estimates.
//
// Integrators (ẋ = V(X), X(0) given):
//   rk4       classical fixed-step Runge–Kutta 4 (global error O(h⁴)); steps = ⌈horizon/step⌉, the last
//             shortened to land on the horizon
//   dopri5    Dormand–Prince 5(4) with FSAL, local extrapolation (the 5th-order solution is kept) and the
//             standard controller: err = sqrt(mean_{i,k} (e_ik / (atol + rtol·max(|x_ik|, |x̃_ik|)))²) with
//             e = the difference of the embedded 4th- and 5th-order solutions; a step is accepted iff
//             err ≤ 1, and h ← h · min(5, max(0.2, 0.9 err^{−1/5})). This controls the *local* error per
//             step, not the global error (an estimate, not a bound).
//   layers    the layer map itself as a time step: X_{k+1} = X_k + step · V(X_k) (Euler; step = 1 with the
//             self_attention field is exactly a residual (pre-norm) layer applied k times)
// For the sphere models every accepted state is renormalised row-wise onto S^{d−1} (the exact flow stays on
// the sphere; this removes the integrator's drift off it, which is O(local error)).
//
// Errors (InputError, before any work): β < 0 or not finite ("beta"), step ≤ 0 or not finite ("step"),
// horizon < 0 or not finite ("horizon"), a horizon needing more than max_steps steps ("horizon", with the
// count), rtol/atol ≤ 0 ("rtol"/"atol"), particles off the sphere for a sphere model by more than
// sphere_tolerance in | ‖x_i‖ − 1 | ("particles", naming the largest deviation and its row), no layer for a
// layer model, a context of the wrong width.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators::flow {

enum class Model { sphere, sphere_unnormalized, sphere_sinkhorn, self_attention, cross_attention };
enum class Integrator { rk4, dopri5, layers };

struct ModelSpec {
  Model model = Model::sphere;
  double beta = 1.0;                      ///< inverse temperature (sphere models), ≥ 0
  int sinkhorn_iterations = 20;           ///< sphere_sinkhorn: averaged symmetric updates (≥ 1)
  const AttentionLayer* layer = nullptr;  ///< self_attention / cross_attention
  AttentionOptions attention{};           ///< pre-norm, Sinkhorn kernel (residual must be false)
  Matrix<double> context;                 ///< cross_attention: context atoms (m×d)
  Vector<double> context_log_weights;     ///< cross_attention: empty (uniform) or log weights (m)
  pairwise::Options reduce{};             ///< threads of the streamed reductions
};

bool is_sphere_model(Model model);
std::string to_string(Model model);
std::string to_string(Integrator integrator);

/// V(X) for particles X (n×d) of log-weights ω (length n: log a_i). Contract: inputs already validated.
Matrix<double> velocity(const ModelSpec& spec, const Matrix<double>& X, const Vector<double>& log_weights);

struct IntegratorOptions {
  Integrator method = Integrator::rk4;
  double step = 0.1;                 ///< rk4 / layers: the step; dopri5: the first trial step
  double horizon = 1.0;              ///< final time T ≥ 0
  double rtol = 1e-6;                ///< dopri5
  double atol = 1e-9;                ///< dopri5
  std::int64_t max_steps = 1000000;  ///< rk4/layers: ⌈T/step⌉ must not exceed it; dopri5: attempted steps
  double min_step = 1e-12;           ///< dopri5: a step below this ends the run with status step_underflow
  std::vector<double> output_times;  ///< sorted times in [0, T] at which states are recorded (0 and T always)
  double sphere_tolerance = 1e-6;    ///< allowed | ‖x_i(0)‖ − 1 | for the sphere models
};

enum class FlowStatus { completed, max_steps, step_underflow };
std::string to_string(FlowStatus status);

struct Trajectory {
  std::vector<double> times;           ///< recorded times (output_times ∪ {0, T}, increasing)
  std::vector<Matrix<double>> states;  ///< X(t) at those times
  std::int64_t steps = 0;              ///< accepted steps
  std::int64_t rejected = 0;           ///< dopri5 rejected steps
  std::int64_t field_evaluations = 0;
  double max_error_ratio = 0;  ///< dopri5: largest accepted err (≤ 1)
  FlowStatus status = FlowStatus::completed;
};

/// Checks everything listed under "Errors" (also called by integrate).
void validate(const ModelSpec& spec, const Matrix<double>& X0, const Vector<double>& weights,
              const IntegratorOptions& options);

/// Integrates ẋ = V(X) from X0 with weights (empty: uniform; else nonnegative, summing to 1).
/// `on_state`, if set, is called at each recorded time (after it is stored) — for progress output.
Trajectory integrate(const ModelSpec& spec, const Matrix<double>& X0, const Vector<double>& weights,
                     const IntegratorOptions& options,
                     const std::function<void(double, const Matrix<double>&)>& on_state = {});

}  // namespace regatta::operators::flow

namespace regatta::operators::flow {

/// E_β(μ) = (1/2β) Σ_ij a_i a_j e^{β⟨x_i,x_j⟩} for β > 0 (the energy the unnormalised sphere flow
/// increases), and ½ Σ_ij a_i a_j ⟨x_i, x_j⟩ = ½ |Σ a_i x_i|² for β = 0 (the limit of E_β − 1/2β). One
/// streamed reduction (Σ_j a_j e^{β⟨x_i,x_j⟩} = exp(lse_i)); a double-precision estimate.
double interaction_energy(const Matrix<double>& X, const Vector<double>& weights, double beta,
                          const pairwise::Options& options = {});

struct PairStatistics {
  Eigen::Index clusters = 0;  ///< connected components of the graph i ~ j iff ‖x_i − x_j‖ ≤ radius
  double min_inner = 0;       ///< min over i ≠ j of ⟨x_i, x_j⟩ (n = 1: ⟨x_1, x_1⟩)
  double max_inner = 0;       ///< max over i ≠ j of ⟨x_i, x_j⟩
};

/// The threshold-graph cluster count and the extreme pairwise inner products: O(n² d) work, O(n) memory
/// (union–find), parallel over rows. Exact comparisons of computed doubles (an estimate near the threshold).
PairStatistics pair_statistics(const Matrix<double>& X, double radius, int threads = 0);

}  // namespace regatta::operators::flow
