#pragma once
// Internal: small helpers shared by the Jacobian search, its seeds, the bracket and the measure-level search.
#include <cstdint>
#include <functional>
#include <optional>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {
struct MeasureSearchOptions;
}  // namespace regatta::lip

namespace regatta::lip::detail {

/// Throws InputError for the invalid settings of a measure-level search (measure_ratio.hpp).
void validate_measure_search(const operators::AttentionLayer& layer,
                             const operators::AttentionOptions& options, const MeasureSearchOptions& search);

/// Tokens projected onto B_R land at norm R·ball_margin: 1 − 2^-50 leaves ~2^-50·R, far above the rounding of
/// the norm (a few 2^-53·R), so interval arithmetic can verify ‖x_i‖ ≤ R at the witness.
inline constexpr double ball_margin = 1.0 - 0x1p-50;

/// Seed families are built for the first heads only (each head adds a handful of families).
inline constexpr int max_seed_heads = 8;

/// A_h = W^Q_h W^K_hᵀ/√d_h (d×d) in double.
Matrix<double> score_matrix(const operators::AttentionLayer& layer, int h);

/// The length on which the scores change by O(1): 1/√max_h‖A_h‖₂ (1 with a pre-norm, whose output does not
/// depend on the input scale; 1 when every A_h is 0), capped by the radius when one is given.
double length_scale(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                    std::optional<double> radius);

/// Real unit eigenvectors of A for its largest and smallest real eigenvalues
/// (docs/math/bounds.md#castin-adversarial). A matrix
/// without a real eigenvalue falls back to the symmetric part (a heuristic, as docs/math/bounds.md#mean-field
/// says).
struct ExtremeEigen {
  double lambda_max = 0, lambda_min = 0;
  Vector<double> u_max, u_min;
};
ExtremeEigen extreme_eigen(const Matrix<double>& A);

/// The unit right singular vector of the largest singular value of M.
Vector<double> top_right_singular_vector(const Matrix<double>& M);

/// The first row of X that is not certainly inside the closed ball B_R, checked in interval arithmetic at
/// the current working precision (Σ_a x_ia² ≤ R² for the exact binary64 entries); −1 when every row is.
Eigen::Index first_row_outside_ball(const Matrix<double>& X, double radius);

/// Every row with Euclidean norm above R·ball_margin scaled to that norm.
void project_rows_to_ball(Matrix<double>& X, double radius);

/// A well-mixed 64-bit seed for stream `k` of `seed` (splitmix64 finaliser).
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t k);

/// The result of maximize_log_scale: the best argument evaluated and its value (−inf when none was).
struct ScalarMax {
  double argument = 0;
  double value = 0;
};

/// Maximises f over [low, high] (0 < low ≤ high): f at `scan` log-spaced points, then `golden` steps of
/// golden-section search on log θ between the neighbours of the best scan point (a local refinement: f is
/// only assumed unimodal near its best scan point). f returns −inf for a rejected point; `stop`, when set, is
/// polled before every evaluation and ends the search early.
ScalarMax maximize_log_scale(const std::function<double(double)>& f, double low, double high, int scan,
                             int golden, const std::function<bool()>& stop = {});

/// The adaptive ascent with rejection shared by the searches (search.hpp, measure_ratio.hpp and the region's
/// lower end, region.hpp): `next_direction()` takes the ascent direction at the current point (false: none,
/// e.g. a zero or non-finite gradient, and the ascent ends); `climb(step)` tries the point at that step along
/// it and returns whether it improved on the current point (the caller then keeps it). After an improvement
/// the step grows ×1.5 and a new direction is taken; after a rejection it shrinks ÷3 and the same direction
/// is tried again, until the step is at most min_step (the ascent ends), `max_steps` tries are spent, or
/// `stop` (when set, polled before every try) returns true.
void adaptive_ascent(double step, double min_step, int max_steps, const std::function<bool()>& next_direction,
                     const std::function<bool(double)>& climb, const std::function<bool()>& stop = {});

/// Directed conversions of MPFR numbers to double (for certified ends).
double round_down(const mpfr& x);
double round_up(const mpfr& x);

/// Monotonic seconds since an arbitrary origin (for time budgets only).
double seconds_now();

/// Throws InputError (argument "precision") unless 53 ≤ bits ≤ max_precision_bits: the MPFR/MPFI precision
/// of a certified search or bracket.
void check_precision(unsigned bits);

}  // namespace regatta::lip::detail
