// The per-input robustness record of `regatta certify` and the report (model_robustness.hpp): the margin in
// double and its certified lower end, the naive product certificate, the attack radius, the certified
// radius (affine forms or region enclosures) and, when asked, the composition of local bounds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_local.hpp>
#include <regatta/operators/model_robustness.hpp>

#include "centre_margins.hpp"

namespace regatta::operators {

double naive_denominator(const std::vector<LipschitzFactor>& factors) {
  interval64 p = sqrt(interval64(2.0));
  for (const LipschitzFactor& f : factors) p = p * interval64(f.upper);
  return p.upper();
}

std::string to_string(RadiusMethod method) { return method == RadiusMethod::affine ? "affine" : "region"; }

InputRobustness input_robustness(const ConvertedModel<double>& model_double,
                                 const ConvertedModel<interval64>& model_interval, const Vector<double>& x,
                                 int y, double naive_denominator, double tolerance, RadiusMethod method,
                                 bool compare_local) {
  const Model& m = model_double.model;
  InputRobustness r;
  r.label = y;
  // Affine forms where asked and where they apply (their first-order part is exact), region enclosures
  // otherwise.
  r.method = method == RadiusMethod::affine && affine_unsupported(m).empty() ? RadiusMethod::affine
                                                                             : RadiusMethod::region;
  detail::centre_margins(m, x, y, r);  // margin_lower < 0 where y is not certainly the top class: no radius
  if (std::isfinite(naive_denominator) && r.margin_lower > 0)
    r.naive = (interval64(r.margin_lower) / interval64(naive_denominator)).lower();
  const AttackResult a = attack(model_double, x, y);
  r.attack = a.found ? a.radius : std::numeric_limits<double>::infinity();
  if (r.prediction == y && r.margin_lower > 0) {
    const double upper = a.found ? a.radius : 100.0;
    const CertifiedRadius c = r.method == RadiusMethod::affine
                                  ? affine_certified_radius(m, x, y, upper, tolerance, {}, r.margin_lower)
                                  : certified_radius(model_interval, x, y, upper, tolerance);
    r.certified = c.radius;
    r.refuted = c.refuted;
    r.checks = c.checks;
  }
  if (compare_local && local_composition_unsupported(m).empty()) {
    r.has_local = true;
    if (r.prediction == y && r.margin_lower > 0) {
      const CertifiedRadius c =
          local_composition_radius(model_interval, x, y, a.found ? a.radius : 100.0, tolerance);
      r.local = c.radius;
      r.local_checks = c.checks;
    }
  }
  return r;
}

namespace {

/// The median; of an even count, the mean of the two middle values, rounded down when `down`.
double median(std::vector<double> v, bool down) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n % 2) return v[n / 2];
  const interval64 mean = (interval64(v[n / 2 - 1]) + interval64(v[n / 2])) / interval64(2.0);
  return down ? mean.lower() : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

RobustnessSummary summarize(const std::vector<InputRobustness>& rows) {
  std::vector<double> certified, attack, naive, local;
  long correct = 0;
  for (const InputRobustness& r : rows) {
    certified.push_back(r.certified);
    attack.push_back(r.attack);
    naive.push_back(r.naive);
    if (r.has_local) local.push_back(r.local);
    correct += r.prediction == r.label;
  }
  RobustnessSummary s;
  s.clean_accuracy = double(correct) / double(rows.size());
  s.median_certified = median(certified, true);
  s.median_attack = median(attack, false);
  s.median_naive = median(naive, true);
  if (!local.empty()) s.median_local = median(local, true);
  return s;
}

}  // namespace regatta::operators
