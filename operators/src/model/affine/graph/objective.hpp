#pragma once
// A functional of the graph pass's output form as the branch and bound bounds it (branch.cpp, slopes.cpp;
// docs/verify.md#phase-splitting): its centre, symbol coefficients and slack, the constrained elements'
// input forms, and the certified lower bound of f − Σ β_i·σ_i·(x_i − t_i) over the forms' symbols.
// Internal header of operators/src/model/affine/graph/.
#include <vector>

#include "operands.hpp"

namespace regatta::operators::affine::gp {

using Row = Eigen::Matrix<double, 1, Eigen::Dynamic>;

/// A split element's input: x ∈ c + r·(ε, η) + [−s, s] (the form's invariant), and its constraint
/// σ·(x − t) ≥ 0 as the sign σ and the threshold t.
struct SplitRow {
  Row r;
  double c = 0, s = 0, sign = 1, t = 0;
  bool seen = false;
};

/// One functional of the output form with the rounding of its coefficients in the slack:
/// f ∈ centre + a·(ε, η) + [−slack, slack] (functional_bounds of walk.cpp has the same terms).
struct Objective {
  I centre;
  Row a;
  I slack;
};

/// The functionals C.row(k)·y + d(k) on the output's form Y, their rows padded with zeros to `width`.
std::vector<Objective> objectives(const Form& Y, const Matrix<double>& C, const Vector<double>& d,
                                  Index width, const Pass& p);
/// v = a − Σ β_i·σ_i·r_i in binary64.
Row combined(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta);
/// CERTIFIED: a lower bound of f over the points where every σ_i·(x_i − t_i) ≥ 0, for β ≥ 0 (no rows: of f
/// over the set).
double certified_bound(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta,
                       const Pass& p);

}  // namespace regatta::operators::affine::gp
