#pragma once
// Entropic optimal transport by log-domain Sinkhorn with ε-scaling, and the debiased Sinkhorn divergence
// (docs/math/transport.md#entropic).
//
// Problem. For mu = Σ a_i δ_{x_i}, nu = Σ b_j δ_{y_j} and C_ij = ‖x_i − y_j‖^p (p ≥ 1),
//     OT_ε(mu, nu) = min_{P ∈ Π(a, b)} <P, C> + ε KL(P ‖ a ⊗ b),
// with unique solution P_ij = a_i b_j exp((f_i + g_j − C_ij)/ε). ε is absolute, in the units of the cost
// (POT's `reg`). KL is relative to a ⊗ b (not the negative entropy Σ P log P): the plan is the same, the
// objective differs by the constant ε (H(a) + H(b)).
//
// Iteration. Every soft c-transform is one streamed pairwise::reduce (memory O((n + m) d), C never formed):
//     g_j ← −ε LSE_i(log a_i + (f_i − C_ij)/ε)      (columns of P exact afterwards)
//     f_i ← −ε LSE_j(log b_j + (g_j − C_ij)/ε)      (rows exact afterwards)
// with Kernel{neg_sq_dist (p = 2) or neg_dist_pow (power p), scale = 1/ε} and log-weights g/ε + log b. One
// *iteration* is a g-update followed by the reduction of the next f-update; its lse gives the row marginal of
// the current plan P(f, g) for free: r_i = a_i exp((f_i − f_i^new)/ε). The stopping test is
//     marginal_error = ‖r − a‖₁ = Σ_i a_i |exp((f_i − f_i^new)/ε) − 1| ≤ tolerance
// (the column marginals of P(f, g) are exact up to rounding). On success the returned (f, g) are the ones
// whose plan has that marginal error (the last f-update is not applied), so the reported error describes the
// reported plan; `converged` is decided on the reported marginal_error itself (never on a different rounding
// of it), so status and error cannot disagree.
//
// ε-scaling: ε_0 = (diameter of the union of supports)^p ≥ max C (or epsilon_start), ε_{k+1} =
// max(ε, scaling·ε_k), stage_iterations iterations per intermediate stage (warm-started), then iterations to
// tolerance at ε. max_iterations bounds the total over all stages; if it runs out the potentials are
// re-evaluated at the target ε (one more iteration) and status = max_iterations: the numbers are then *not*
// converged values and must not be reported as such.
//
// Outputs (evaluated at the target ε for the returned potentials):
//     cost      = <P, C> = Σ_i r_i Σ_j π_ij C_ij via expected_score of the row softmax π (estimate of the
//                 entropic plan's transport cost; W_p^p ≤ cost when P is feasible)
//     objective = D_ε(f, g) = <a, f> + <b, g> − ε (Σ_ij P_ij − 1), the dual objective (≤ OT_ε for any f, g,
//                 = OT_ε at the fixed point). docs/math/transport.md#entropic: W_p^p ≤ cost ≤ OT_ε ≤ W_p^p +
//                 ε min(H(a),
//                 H(b)).
// Two evaluation paths for the same iteration (SinkhornOptions::kernel, transport.md §5):
//   streamed  the soft c-transforms above, memory O((n + m) d), n·m exponentials per half-step;
//   dense     p = 2, double, every weight positive: sinkhorn_sq_euclidean's scaling iteration on the
//             materialised stabilised Gibbs kernel (sinkhorn_attention.hpp, n·m doubles), a matrix–vector
//             product per half-step. The same iterates, ε-scaling, stopping rule and outputs; `converged` is
//             decided on the marginal error of the returned potentials evaluated by a streamed log-domain
//             transform, so the reported numbers mean the same on both paths.
//   automatic dense where it applies and n·m·8 bytes ≤ dense_kernel_budget(options), else streamed.
// SinkhornResult::kernel says which path ran.
// Inputs: measures of the same dimension, p ≥ 1, ε > 0 finite, scaling in (0, 1), tolerance > 0,
// max_iterations ≥ 1 (InputError naming "p", "epsilon", "scaling", "tolerance", "max_iterations", "nu";
// "kernel" when dense is forced where it does not apply). Instantiated for float and double (float: the
// tolerance must stay above ~n·eps(float); always streamed).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <regatta/core/pairwise.hpp>
#include <regatta/measures/discrete_measure.hpp>

namespace regatta::measures {

enum class SinkhornStatus {
  converged,      ///< marginal_error <= tolerance at the target ε
  max_iterations  ///< the budget ran out first: values are not converged
};

const char* to_string(SinkhornStatus status);

/// How the iteration is evaluated (see the header comment; sinkhorn_attention.hpp for the dense iteration).
enum class SinkhornKernel { automatic, streamed, dense };

const char* to_string(SinkhornKernel kernel);

struct SinkhornOptions {
  double epsilon = 1e-2;                 ///< target regularisation ε > 0 (absolute, cost units)
  double scaling = 0.7;                  ///< ε-scaling factor q in (0, 1); stages ε_k = max(ε, q^k ε_0)
  double epsilon_start = 0;              ///< ε_0; 0: automatic (diameter^p)
  int stage_iterations = 3;              ///< iterations per intermediate stage (>= 1)
  std::int64_t max_iterations = 100000;  ///< total iterations over all stages (>= 1)
  double tolerance = 1e-9;               ///< on ‖P 1 − a‖₁ (the column marginals are exact)
  pairwise::Options reduce_options{};  ///< threads = 0 means 1 thread below 2^16 pairs, OpenMP default above
  SinkhornKernel kernel = SinkhornKernel::automatic;  ///< streamed, dense, or dense where it applies and fits
  /// automatic: the largest dense kernel (1 GiB), further capped by ¼ of the memory available at the call
  /// (dense_kernel_budget).
  std::size_t dense_kernel_bytes = std::size_t(1) << 30;
  /// When set, called after every iteration with (iterations so far, max_iterations): progress, and a way
  /// to stop (it may throw; the exception leaves sinkhorn with no result). The dense path also calls it after
  /// every build of its kernel (n·m exponentials), with the iterations so far (0 after the first build). Not
  /// called by the ε-scaling epilogue or the final evaluation (one iteration each).
  std::function<void(std::int64_t, std::int64_t)> poll;
};

template <class S>
struct SinkhornResult {
  double cost = 0;       ///< <P, C> of the entropic plan (estimate of W_p^p from above)
  double objective = 0;  ///< D_ε(f, g), the regularised objective (= OT_ε at convergence)
  Vector<S> f;           ///< potentials of mu (size n)
  Vector<S> g;           ///< potentials of nu (size m)
  SinkhornStatus status = SinkhornStatus::max_iterations;
  std::int64_t iterations = 0;  ///< iterations over all stages (each = 2 streamed reductions)
  int stages = 0;               ///< ε values visited, the target included
  double marginal_error = 0;    ///< ‖P 1 − a‖₁ of the returned plan
  double epsilon = 0;           ///< the target ε
  SinkhornKernel kernel = SinkhornKernel::streamed;  ///< the path that ran (never automatic)
  /// dense only: the dense iteration handed the solve over to the streamed log-domain iteration, which
  /// finished it from the current potentials (K's rounding floor above the tolerance, or a scaling out of
  /// range).
  bool handed_over = false;
  bool converged() const { return status == SinkhornStatus::converged; }
};

/// The one check of the iteration's options, for the library and every front end: throws InputError when
/// epsilon is not a finite number > 0, scaling not in (0, 1), epsilon_start neither 0 nor a finite number >
/// 0, stage_iterations or max_iterations < 1, or tolerance not a finite number > 0. The error's subject is
/// option_name(member) for the SinkhornOptions member's name ("epsilon", "max_iterations", ...): the member
/// name itself when option_name is empty (the library, Python keywords), the command line's option otherwise
/// ("--epsilon", "--max-iterations").
void check_sinkhorn_options(const SinkhornOptions& options,
                            const std::function<std::string(const std::string&)>& option_name = {});

/// Bytes the automatic choice allows the dense kernel: min(options.dense_kernel_bytes, ¼ of the memory
/// available now (MemAvailable of /proc/meminfo, capped by available_memory_bytes(); ¼ of the latter where
/// /proc/meminfo is not readable)).
std::size_t dense_kernel_budget(const SinkhornOptions& options);

/// Why the dense path cannot run sinkhorn(mu, nu, p, ...) (p ≠ 2, a zero weight, float storage, n·m doubles
/// beyond the machine's memory), or "" when it can. Independent of options.kernel and of the budget.
template <class S>
std::string dense_kernel_refusal(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p);

/// The path sinkhorn(mu, nu, p, options) takes: streamed or dense (see the header comment). Throws
/// InputError("kernel", reason) when dense is forced and dense_kernel_refusal gives a reason.
template <class S>
SinkhornKernel sinkhorn_kernel_for(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p,
                                   const SinkhornOptions& options);

/// OT_ε(mu, nu) by log-domain Sinkhorn with ε-scaling (see the header comment).
template <class S>
SinkhornResult<S> sinkhorn(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p,
                           const SinkhornOptions& options = {});

/// OT_ε(mu, mu) by the averaged symmetric update f ← ½ (f + T_ε(f)) (Feydy et al. 2019) with ε-scaling;
/// f == g in the result, marginal_error = ‖P 1 − a‖₁ with P_ij = a_i a_j exp((f_i + f_j − C_ij)/ε), each
/// iteration one streamed reduction (always the streamed path; options.kernel is not consulted).
template <class S>
SinkhornResult<S> sinkhorn_symmetric(const DiscreteMeasure<S>& mu, double p,
                                     const SinkhornOptions& options = {});

struct SinkhornDivergenceResult {
  double value = 0;    ///< S_ε = OT_ε(mu, nu) − ½ OT_ε(mu, mu) − ½ OT_ε(nu, nu) (objectives D_ε)
  double cross = 0;    ///< OT_ε(mu, nu)
  double self_mu = 0;  ///< OT_ε(mu, mu)
  double self_nu = 0;  ///< OT_ε(nu, nu)
  SinkhornStatus status = SinkhornStatus::max_iterations;  ///< converged only if all three converged
  std::int64_t iterations = 0;                             ///< sum over the three problems
  double marginal_error = 0;                               ///< the largest of the three
  bool converged() const { return status == SinkhornStatus::converged; }
};

/// The divergence from its three solves (cross, mu with itself, nu with itself), whichever solver ran them.
template <class S>
SinkhornDivergenceResult divergence_from(const SinkhornResult<S>& cross, const SinkhornResult<S>& self_mu,
                                         const SinkhornResult<S>& self_nu) {
  SinkhornDivergenceResult d;
  d.cross = cross.objective;
  d.self_mu = self_mu.objective;
  d.self_nu = self_nu.objective;
  d.value = d.cross - 0.5 * d.self_mu - 0.5 * d.self_nu;
  d.iterations = cross.iterations + self_mu.iterations + self_nu.iterations;
  d.marginal_error = std::max({cross.marginal_error, self_mu.marginal_error, self_nu.marginal_error});
  d.status = cross.converged() && self_mu.converged() && self_nu.converged() ? SinkhornStatus::converged
                                                                             : SinkhornStatus::max_iterations;
  return d;
}

/// Debiased Sinkhorn divergence (docs/math/transport.md#entropic). S_ε ≥ 0 with equality iff mu = nu for p ∈
/// {1, 2} on
/// bounded supports; a computed negative value (rounding, non-convergence) is returned as is, never clamped.
template <class S>
SinkhornDivergenceResult sinkhorn_divergence(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu,
                                             double p, const SinkhornOptions& options = {});

#define REGATTA_DECLARE_SINKHORN(S)                                                                         \
  extern template std::string dense_kernel_refusal<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, \
                                                      double);                                              \
  extern template SinkhornKernel sinkhorn_kernel_for<S>(                                                    \
      const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double, const SinkhornOptions&);                \
  extern template SinkhornResult<S> sinkhorn<S>(const DiscreteMeasure<S>&, const DiscreteMeasure<S>&,       \
                                                double, const SinkhornOptions&);                            \
  extern template SinkhornResult<S> sinkhorn_symmetric<S>(const DiscreteMeasure<S>&, double,                \
                                                          const SinkhornOptions&);                          \
  extern template SinkhornDivergenceResult sinkhorn_divergence<S>(                                          \
      const DiscreteMeasure<S>&, const DiscreteMeasure<S>&, double, const SinkhornOptions&);
REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_DECLARE_SINKHORN)
#undef REGATTA_DECLARE_SINKHORN

}  // namespace regatta::measures
