#pragma once
// regatta flow --perturb EPS: a second flow from a nearby initial measure, the measured distances between the
// two trajectories (estimates) and the certified Grönwall bound e^{Lt}·d_0 (operators/flow_stability.hpp,
// docs/flow.md#flow-stability) at every recorded time.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <regatta/operators/flow.hpp>
#include <regatta/operators/flow_stability.hpp>

namespace regatta::cli {

/// The perturbed initial particles: X0 + eps·G/‖G‖_a for a standard Gaussian G (seeded), so that the
/// perturbation has a-weighted norm eps; for the sphere models G is first made tangent (row i minus its
/// component along x_i) and every moved row is then projected back onto the sphere.
/// Throws InputError("--perturb") for eps not finite or ≤ 0, or a row that vanishes (sphere models).
Matrix<double> perturbed_particles(const Matrix<double>& X0, const Vector<double>& weights, double eps,
                                   std::uint64_t seed, bool sphere);

struct StabilityRow {
  double time = 0;
  double index_distance = 0;  ///< ‖X_t − Y_t‖_a of the integrated states (estimate)
  double w2 = NAN;            ///< W₂(μ_t, ν_t) of the integrated states (estimate; NaN: not computed)
  double bound = NAN;         ///< certified upper bound e^{Lt} d_0 (NaN: no bound for this model)
};

struct Stability {
  double perturbation = 0;
  std::uint64_t seed = 0;
  operators::flow::FieldLipschitz lipschitz;
  interval64 initial_distance{0.0};  ///< ‖X̂_0 − Ŷ_0‖_a of the radial projections, certified enclosure
  std::vector<StabilityRow> rows;
};

/// Rows for the recorded times the two trajectories share. `w2` computes W₂ between two states (or is
/// empty: not computed). `weights` empty means exactly uniform.
Stability compare_trajectories(const operators::flow::ModelSpec& spec, const operators::flow::Trajectory& x,
                               const operators::flow::Trajectory& y, const Vector<double>& weights,
                               double perturbation, std::uint64_t seed,
                               const std::function<double(const Matrix<double>&, const Matrix<double>&)>& w2);

nlohmann::json to_json(const Stability& s, const std::string& w2_label);
void print_table(std::ostream& out, const Stability& s, const std::string& w2_label);
/// stability.csv: t, index distance and W₂ (estimates, 17 digits), the bound rounded up (10 digits).
void write_csv(const std::string& path, const Stability& s);

}  // namespace regatta::cli
