#pragma once
// The first fields of a certify row (model_robustness.hpp) at the centre x: the prediction and the margin
// z_y − max_{c≠y} z_c (ESTIMATES, double forward) and the margin's CERTIFIED lower end (interval64 forward,
// rounded down; negative where y is not certainly the top class). One function for the safetensors row
// (input_robustness.cpp) and a recognised transformer's (graph_transformer_robustness.cpp), so that both
// give the same row.
#include <algorithm>
#include <limits>

#include <regatta/core/interval64.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators::detail {

inline void centre_margins(const Model& m, const Vector<double>& x, int y, InputRobustness& r) {
  const Vector<double> z = forward<double>(m, x);
  Eigen::Index predicted = 0;
  z.maxCoeff(&predicted);
  r.prediction = int(predicted);
  double runner_up = -std::numeric_limits<double>::infinity();
  for (Eigen::Index c = 0; c < z.size(); ++c)
    if (c != y) runner_up = std::max(runner_up, z(c));
  r.margin = z(y) - runner_up;
  const Vector<interval64> zi = forward<interval64>(m, x.cast<interval64>());
  double lower = std::numeric_limits<double>::infinity();
  for (Eigen::Index c = 0; c < zi.size(); ++c)
    if (c != y) lower = std::min(lower, (zi(y) - zi(c)).lower());
  r.margin_lower = lower;
}

}  // namespace regatta::operators::detail
