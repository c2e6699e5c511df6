#pragma once
// regatta::pairwise — streamed softmax reductions over all pairs (query i, key j). Everything in regatta
// that sums over pairs of points runs through reduce(): attention outputs, Jacobian moments, Sinkhorn
// iterations, soft c-transforms and transport costs. The n×m matrix is never materialised (memory
// O((n + m)·d)) unless log_kernel_matrix() is called explicitly.
//
// Mathematics (docs/math/attention.md#streamed-reduction). For queries x_i (n×d), keys y_j (m×d), log-weights
// ω_j ∈
// [−inf, inf), the score s_ij of the Kernel and the mask:
//     t_ij = s_ij + ω_j            (t_ij = −inf where the mask hides key j from query i)
//     lse_i = log Σ_j exp(t_ij),   π_ij = exp(t_ij − lse_i)      (row i of π is a probability vector)
// and the requested outputs are softmax-weighted sums over keys:
//     out_i                    = Σ_j π_ij v_j                     (values v_j ∈ R^e)
//     feature_mean_i           = Σ_j π_ij b_j                     (features b_j ∈ R^f)
//     cross_moment_i           = Σ_j π_ij v_j b_jᵀ                (e×f, stored row-major in one row)
//     feature_second_moment_i  = Σ_j π_ij b_j b_jᵀ                (f×f, stored row-major in one row)
//     expected_score_i         = Σ_j π_ij s_ij                    (e.g. the transport cost of a Sinkhorn
//     plan)
// The moments are what JVP/VJP of attention need (Σ π v yᵀ, Σ π y, Σ π y yᵀ with features = keys or tangent
// keys); the transposed reductions of a VJP (sums over queries for each key) are reduce() with the roles of
// queries and keys exchanged, log-weights −lse_i and the anticausal mask.
//
// Scores (after the optional linear maps of Problem):
//     dot            s_ij = scale · ⟨x_i, y_j⟩
//     neg_sq_dist    s_ij = −scale · ‖x_i − y_j‖²         (scale > 0)
//     neg_dist_pow   s_ij = −scale · ‖x_i − y_j‖^power    (scale > 0, power ≥ 1; −C_ij/ε for W_p costs)
// Masks: causal — key j visible to query i iff j ≤ i (the diagonal is kept); anticausal — iff j ≥ i.
//
// Paths. float and double run the blocked CPU path (GEMM score blocks, vectorised exp, OpenMP over query
// blocks); neg_sq_dist there uses ‖x‖² − 2⟨x, y⟩ + ‖y‖² with the row-constant ‖x_i‖² kept out of the
// exponentials, so its absolute error in t_ij is O(eps · scale · (‖x_i‖² + ‖y_j‖²)). mpfr and interval run
// the generic path: one term at a time, scores in the difference form; for interval every output encloses the
// exact value for every choice of inputs inside the input intervals (a certified enclosure). All paths share
// the reduction object LogSumExp (online_softmax.hpp) and its rescale factors.
//
// Errors. Bad input (shape mismatch, non-finite coordinates or values, NaN or +inf log-weights, a scale or
// power outside its range, a requested output whose input is missing, a row with no visible key — every
// ω_j = −inf or masked) throws InputError naming the argument. No partial result is returned.
#include <string>

#include <regatta/core/eigen.hpp>

namespace regatta::pairwise {

enum class ScoreKind { dot, neg_sq_dist, neg_dist_pow };

/// Whether the score is a (negated) distance: keys are then compared with the queries' space.
inline bool is_distance(ScoreKind kind) {
  return kind == ScoreKind::neg_sq_dist || kind == ScoreKind::neg_dist_pow;
}
enum class MaskKind { none, causal, anticausal };

struct Kernel {
  ScoreKind score = ScoreKind::dot;
  double scale = 1.0;  ///< s: finite for dot, > 0 for the distance scores
  double power = 1.0;  ///< p ≥ 1, neg_dist_pow only
  MaskKind mask = MaskKind::none;
};

/// Inputs. queries and keys are required; every other pointer may be null. Pointed-to data must outlive
/// the call.
template <class S>
struct Problem {
  const Matrix<S>* queries = nullptr;      ///< X: n×d
  const Matrix<S>* keys = nullptr;         ///< Y: m×d
  const Vector<S>* log_weights = nullptr;  ///< ω: m (null: all 0)
  const Matrix<S>* values = nullptr;       ///< V: m×e
  const Matrix<S>* features = nullptr;     ///< B: m×f
  /// Optional linear maps applied before scoring: queries become X·query_map and keys Y·key_map
  /// (d×d' each). For the distance scores one map is applied to both: key_map must be null or equal to
  /// query_map. Values and features are not mapped.
  const Matrix<S>* query_map = nullptr;
  const Matrix<S>* key_map = nullptr;
};

/// Which outputs to compute (lse always is).
struct Request {
  bool out = true;  ///< needs values
  bool feature_mean = false;
  bool cross_moment = false;  ///< needs values and features
  bool feature_second_moment = false;
  bool expected_score = false;
};

template <class S>
struct Result {
  Vector<S> lse;                    ///< n
  Matrix<S> out;                    ///< n×e (empty unless requested)
  Matrix<S> feature_mean;           ///< n×f
  Matrix<S> cross_moment;           ///< n×(e·f), row i = Σ_j π_ij v_j b_jᵀ flattened row-major
  Matrix<S> feature_second_moment;  ///< n×(f·f)
  Vector<S> expected_score;         ///< n
};

/// Below this many query–key pairs a caller that left the thread count automatic does its reductions on one
/// thread: waking an OpenMP team costs more than a 2^16-pair reduction (measured in Sinkhorn: 30 µs against
/// 15 µs per iteration on 40 × 30, and 30× slower on a loaded machine).
inline constexpr long long single_thread_pairs = 1LL << 16;

/// Tuning of the blocked CPU path (ignored by the generic path). 0 = automatic.
struct Options {
  Eigen::Index query_block = 0;
  Eigen::Index key_block = 0;
  int threads = 0;  ///< OpenMP threads; 0 = the OpenMP default (OMP_NUM_THREADS)
};

/// The streamed reduction; see the header comment for the mathematics, guarantees and errors.
template <class S>
Result<S> reduce(const Problem<S>& problem, const Kernel& kernel, const Request& request = {},
                 const Options& options = {});

/// The n×m matrix t_ij = s_ij + ω_j (−inf where masked), materialised. For tests and small problems only;
/// throws InputError when n·m exceeds max_materialized_entries.
template <class S>
Matrix<S> log_kernel_matrix(const Problem<S>& problem, const Kernel& kernel);

/// Reference implementation: materialises log_kernel_matrix, then reduces each row with softmax_rows.
/// Same outputs and errors as reduce(); used to test the streamed paths.
template <class S>
Result<S> reduce_materialized(const Problem<S>& problem, const Kernel& kernel, const Request& request = {});

inline constexpr Eigen::Index max_materialized_entries = Eigen::Index(1) << 28;

/// Throws InputError for every problem listed under "Errors" (called by reduce and reduce_materialized).
template <class S>
void validate(const Problem<S>& problem, const Kernel& kernel, const Request& request);

std::string to_string(ScoreKind kind);
std::string to_string(MaskKind kind);

#define REGATTA_PAIRWISE_EXTERN(S)                                                                       \
  extern template Result<S> reduce<S>(const Problem<S>&, const Kernel&, const Request&, const Options&); \
  extern template Matrix<S> log_kernel_matrix<S>(const Problem<S>&, const Kernel&);                      \
  extern template Result<S> reduce_materialized<S>(const Problem<S>&, const Kernel&, const Request&);    \
  extern template void validate<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_SCALAR(REGATTA_PAIRWISE_EXTERN)
#undef REGATTA_PAIRWISE_EXTERN

}  // namespace regatta::pairwise
