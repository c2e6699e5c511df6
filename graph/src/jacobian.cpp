// Jacobians of a Graph at a point (binary64) and over a box (interval64)
// (docs/graph.md#forward-mode-and-jacobian-enclosures): one forward, then one reverse sweep per output or
// one tangent sweep per input, whichever is fewer.
#include <cmath>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/graph/derivatives.hpp>

#include "gradient.hpp"

namespace regatta::graph {

namespace {

template <class S>
Jacobian<S> jacobian_of(const Graph& g, const std::vector<S>& x) {
  detail::require_one_input_output(g, x.size());
  Jacobian<S> J;
  J.rows = static_cast<std::size_t>(element_count(g.values[static_cast<std::size_t>(g.outputs[0])].shape));
  J.cols = x.size();
  J.data.assign(J.rows * J.cols, S(0.0));
  if (J.rows <= J.cols) {  // rows: e_iᵀ·J by reverse mode
    std::vector<std::vector<S>> ws(J.rows, std::vector<S>(J.rows, S(0.0)));
    for (std::size_t i = 0; i < J.rows; ++i) ws[i][i] = S(1.0);
    const std::vector<std::vector<S>> rows = vjps(g, x, ws);
    for (std::size_t i = 0; i < J.rows; ++i)
      for (std::size_t j = 0; j < J.cols; ++j) J.data[i * J.cols + j] = rows[i][j];
  } else {  // columns: J·e_j by forward mode
    std::vector<std::vector<S>> vs(J.cols, std::vector<S>(J.cols, S(0.0)));
    for (std::size_t j = 0; j < J.cols; ++j) vs[j][j] = S(1.0);
    const std::vector<std::vector<S>> cols = jvps(g, x, vs);
    for (std::size_t j = 0; j < J.cols; ++j)
      for (std::size_t i = 0; i < J.rows; ++i) J.data[i * J.cols + j] = cols[j][i];
  }
  return J;
}

}  // namespace

std::vector<interval64> input_box(const Graph& g, const std::vector<double>& lo,
                                  const std::vector<double>& hi) {
  if (lo.size() != hi.size())
    throw InputError(g.source, "a box with " + std::to_string(lo.size()) + " lower and " +
                                   std::to_string(hi.size()) + " upper ends");
  std::vector<interval64> box;
  box.reserve(lo.size());
  for (std::size_t j = 0; j < lo.size(); ++j) {
    if (!(std::isfinite(lo[j]) && std::isfinite(hi[j]) && lo[j] <= hi[j]))
      throw InputError(g.source,
                       "coordinate " + std::to_string(j) + " of the box is not a finite interval lo <= hi");
    box.push_back(interval64::hull(lo[j], hi[j]));
  }
  return box;
}

Jacobian<double> jacobian(const Graph& g, const std::vector<double>& x) { return jacobian_of(g, x); }

Jacobian<interval64> jacobian_enclosure_at(const Graph& g, const std::vector<double>& x, int bits) {
  input_box(g, x, x);  // finite, sized like the input
  PrecisionGuard guard(bits);
  const Jacobian<interval> M = jacobian_of(g, std::vector<interval>(x.begin(), x.end()));
  Jacobian<interval64> J{M.rows, M.cols, {}};
  J.data.reserve(M.data.size());
  for (const interval& e : M.data) J.data.emplace_back(e);  // outward to binary64 endpoints
  return J;
}

Jacobian<interval64> jacobian_enclosure(const Graph& g, const std::vector<double>& lo,
                                        const std::vector<double>& hi) {
  return jacobian_of(g, input_box(g, lo, hi));
}

}  // namespace regatta::graph
