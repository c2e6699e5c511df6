// The functionals of the graph pass's output form and their certified lower bounds with Lagrangian terms
// for a branch's constraints (objective.hpp, docs/verify.md#phase-splitting).
#include "objective.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "walk.hpp"

namespace regatta::operators::affine::gp {

std::vector<Objective> objectives(const Form& Y, const Matrix<double>& C, const Vector<double>& d,
                                  Index width, const Pass& p) {
  const Index K = Y.A.cols();
  const Vector<double>& rs = row_sums(Y, p);
  const Matrix<double> CA = C * Y.A;
  std::vector<Objective> out;
  for (Index k = 0; k < C.rows(); ++k) {
    const FunctionalCentre f = functional_centre(Y, rs, C, d, k);
    Row a = Row::Zero(std::max(width, K));
    a.head(K) = CA.row(k);
    out.push_back({f.centre, std::move(a), f.slack});
  }
  return out;
}

Row combined(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta) {
  Row v = o.a;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (beta[i] != 0) v.head(rows[i].r.size()) -= (beta[i] * rows[i].sign) * rows[i].r;
  return v;
}

/// f − Σ β_i·σ_i·(x_i − t_i) bounded below as functional_bounds does (c_i − t_i in intervals), with the
/// rounding of v (γ_{n+1} of the magnitudes, n the multipliers used) and the splits' slacks β_i·s_i added.
double certified_bound(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta,
                       const Pass& p) {
  const Row v = combined(o, rows, beta);
  const Index K = v.size(), q = std::min(p.q, K);
  I centre = o.centre, slack = o.slack, magnitude(sum_up(o.a.cwiseAbs().sum(), double(K)));
  double terms = 1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (beta[i] == 0) continue;
    if (!(beta[i] > 0)) throw std::logic_error("certified_bound: a negative multiplier");
    terms += 1;
    centre -= I(beta[i]) * I(rows[i].sign) * (I(rows[i].c) - I(rows[i].t));
    slack += I(beta[i]) * I(rows[i].s);
    magnitude += I(beta[i]) * I(sum_up(rows[i].r.cwiseAbs().sum(), double(rows[i].r.size())));
  }
  const double dual = input_norm(v.head(q), p);
  const double rest = sum_up(v.tail(K - q).cwiseAbs().sum(), double(K - q));
  const I width =
      I(dual) + I(rest) + slack + I(gamma_of(terms)) * magnitude + I(terms * double(K)) * I(underflow_unit);
  const I low = centre - width;
  return isfinite(low) ? low.lower() : -std::numeric_limits<double>::infinity();
}

}  // namespace regatta::operators::affine::gp
