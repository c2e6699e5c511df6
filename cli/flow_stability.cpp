// regatta flow --perturb: two nearby flows and the certified Grönwall bound (flow_stability.hpp).
#include "flow_stability.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/measures/sampling.hpp>
#include "numbers.hpp"

namespace regatta::cli {

namespace fl = operators::flow;

Matrix<double> perturbed_particles(const Matrix<double>& X0, const Vector<double>& weights, double eps,
                                   std::uint64_t seed, bool sphere) {
  if (!std::isfinite(eps) || !(eps > 0)) throw InputError("--perturb", "must be a finite number > 0");
  // The direction's stream is decorrelated from --init's (which may use the same seed: a sphere sample is a
  // normalised Gaussian of the same stream, and a radial direction would vanish in the projection below).
  Matrix<double> G = measures::sample_gaussian(Vector<double>::Zero(X0.cols()), 1.0, X0.rows(),
                                               seed ^ 0x9e3779b97f4a7c15ULL);
  if (sphere)  // tangent to the sphere at each particle: the projection back then moves it by O(eps²) only
    for (Eigen::Index i = 0; i < G.rows(); ++i) G.row(i) -= G.row(i).dot(X0.row(i)) * X0.row(i);
  const double norm = fl::weighted_distance(G, Matrix<double>::Zero(G.rows(), G.cols()), weights);
  if (!(norm > 0)) throw InputError("--perturb", "the particles of positive weight have no room to move");
  Matrix<double> Y = X0 + (eps / norm) * G;
  if (!Y.allFinite()) throw InputError("--perturb", "gives non-finite particles (too large)");
  if (sphere) {
    for (Eigen::Index i = 0; i < Y.rows(); ++i) {
      const double r = Y.row(i).norm();
      if (!(r > 0) || !std::isfinite(r))
        throw InputError("--perturb",
                         "moves particle " + std::to_string(i) + " to the origin or beyond the double range");
      Y.row(i) /= r;
    }
  }
  return Y;
}

Stability compare_trajectories(
    const fl::ModelSpec& spec, const fl::Trajectory& x, const fl::Trajectory& y,
    const Vector<double>& weights, double perturbation, std::uint64_t seed,
    const std::function<double(const Matrix<double>&, const Matrix<double>&)>& w2) {
  Stability s;
  s.perturbation = perturbation;
  s.seed = seed;
  s.lipschitz = fl::certified_field_lipschitz(spec, weights);
  const bool sphere = fl::is_sphere_model(spec.model);
  s.initial_distance = fl::projected_distance(x.states.front(), y.states.front(), weights, sphere);
  const std::size_t count = std::min(x.times.size(), y.times.size());
  for (std::size_t k = 0; k < count && x.times[k] == y.times[k]; ++k) {
    StabilityRow row;
    row.time = x.times[k];
    row.index_distance = fl::weighted_distance(x.states[k], y.states[k], weights);
    if (w2) row.w2 = w2(x.states[k], y.states[k]);
    if (s.lipschitz.available)
      row.bound = fl::gronwall_upper(s.lipschitz.constant.upper(), s.initial_distance.upper(), row.time);
    s.rows.push_back(row);
  }
  return s;
}

namespace {

const char* bound_label =
    "certified upper bound on W2 and on the index-coupling distance of the exact flows from the radially "
    "projected initial particles: e^(L t) d0, interval arithmetic, rounded up";
const char* distance_label = "estimate (a-weighted l2 distance of the integrated states, index coupling)";

}  // namespace

nlohmann::json to_json(const Stability& s, const std::string& w2_label) {
  nlohmann::json rows = nlohmann::json::array();
  for (const StabilityRow& r : s.rows)
    rows.push_back({{"t", r.time},
                    {"index_distance", number_or_null(r.index_distance)},
                    {"w2", number_or_null(r.w2)},
                    {"gronwall_bound_certified_upper", number_or_null(r.bound)},
                    {"gronwall_bound_text", std::isnan(r.bound) ? "none" : upper_decimal(r.bound, 10)}});
  nlohmann::json j{{"perturbation", s.perturbation},
                   {"perturbation_seed", s.seed},
                   {"certified_bound_available", s.lipschitz.available},
                   {"initial_distance_certified_lower", s.initial_distance.lower()},
                   {"initial_distance_certified_upper", s.initial_distance.upper()},
                   {"labels",
                    {{"index_distance", distance_label},
                     {"w2", w2_label},
                     {"gronwall_bound_certified_upper", bound_label},
                     {"initial_distance",
                      "certified enclosure of the a-weighted l2 distance of the radial "
                      "projections of the two initial particle sets"}}},
                   {"rows", rows}};
  if (s.lipschitz.available) {
    j["lipschitz_certified_upper"] = s.lipschitz.constant.upper();
    j["lipschitz_formula"] = s.lipschitz.formula;
    j["lipschitz_norm"] = "a-weighted l2 norm on the product of closed unit balls (docs/flow.md section 4)";
  } else {
    j["no_bound_reason"] = s.lipschitz.reason;
  }
  return j;
}

void print_table(std::ostream& out, const Stability& s, const std::string& w2_label) {
  out << "\nstability  a second flow from the initial particles moved by " << number(s.perturbation)
      << " (a-weighted l2, seed " << s.seed << ")\n";
  if (s.lipschitz.available)
    out << "           certified: L = " << s.lipschitz.formula
        << " <= " << upper_number(s.lipschitz.constant.upper())
        << " (Lipschitz constant of the field, a-weighted l2, on the product of unit balls)\n"
        << "           certified: d0 in [" << lower_number(s.initial_distance.lower()) << ", "
        << upper_number(s.initial_distance.upper()) << "]\n"
        << "           bound: " << bound_label << "\n";
  else
    out << "           no certified bound: " << s.lipschitz.reason << "\n";
  out << "           |X_t - Y_t|_a: " << distance_label << "; W2: " << w2_label << "\n\n"
      << std::setw(10) << "t" << std::setw(18) << "|X_t-Y_t|_a" << std::setw(18) << "W2(mu_t,nu_t)"
      << std::setw(24) << "Gronwall bound (cert.)"
      << "\n";
  for (const StabilityRow& r : s.rows)
    out << std::setw(10) << number(r.time, 6) << std::setw(18) << number(r.index_distance, 6) << std::setw(18)
        << number(r.w2, 6) << std::setw(24) << (std::isnan(r.bound) ? "none" : upper_number(r.bound, 6))
        << "\n";
}

void write_csv(const std::string& path, const Stability& s) {
  std::ofstream csv(path);
  csv << "t,index_distance_estimate,w2_estimate,gronwall_bound_certified_upper\n";
  for (const StabilityRow& r : s.rows) {
    std::ostringstream line;
    line << std::setprecision(17) << r.time << "," << r.index_distance << "," << r.w2 << ",";
    csv << line.str() << (std::isnan(r.bound) ? "nan" : upper_decimal(r.bound, 10)) << "\n";
  }
}

}  // namespace regatta::cli
