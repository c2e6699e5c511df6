// The affine forms of a graph as graph::verify's bounds (graph_verify_bounds.hpp).
#include <regatta/operators/graph_verify_bounds.hpp>

#include <algorithm>
#include <memory>
#include <utility>

#include <regatta/core/interval64.hpp>
#include <regatta/operators/graph_affine_branch.hpp>

namespace regatta::operators {

InputSet box_input_set(const std::vector<double>& lo, const std::vector<double>& hi) {
  const Eigen::Index n = static_cast<Eigen::Index>(lo.size());
  InputSet set;
  set.norm = InputNorm::linf;
  set.radius = 1;
  set.centre.resize(n);
  set.scale.resize(n);
  set.lower = Eigen::Map<const Vector<double>>(lo.data(), n);
  set.upper = Eigen::Map<const Vector<double>>(hi.data(), n);
  for (Eigen::Index k = 0; k < n; ++k) {
    const double c = 0.5 * lo[std::size_t(k)] + 0.5 * hi[std::size_t(k)];
    set.centre(k) = c;
    set.scale(k) = std::max((interval64(hi[std::size_t(k)]) - interval64(c)).upper(),
                            (interval64(c) - interval64(lo[std::size_t(k)])).upper());
  }
  return set;
}

Matrix<double> functional_matrix(const graph::Graph& g,
                                 const std::vector<graph::OutputFunctional>& functionals) {
  const std::size_t outputs =
      static_cast<std::size_t>(graph::element_count(g.values[static_cast<std::size_t>(g.outputs[0])].shape));
  Matrix<double> C =
      Matrix<double>::Zero(static_cast<Eigen::Index>(functionals.size()), static_cast<Eigen::Index>(outputs));
  for (std::size_t r = 0; r < functionals.size(); ++r)
    for (const auto& [index, coefficient] : functionals[r].terms)
      C(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(index)) += coefficient;
  return C;
}

graph::BoxLowerBounds affine_box_lower_bounds(const graph::Graph& g, const std::atomic<bool>* stop) {
  return [&g, stop](const std::vector<double>& lo, const std::vector<double>& hi,
                    const std::vector<graph::OutputFunctional>& functionals) {
    const Matrix<double> C = functional_matrix(g, functionals);
    return graph_affine_lower_bounds(g, box_input_set(lo, hi), C, Vector<double>::Zero(C.rows()),
                                     GraphAffineOptions{stop});
  };
}

graph::PhaseBounderFactory affine_phase_bounds(const graph::Graph& g, const std::atomic<bool>* stop,
                                               std::optional<InputSet> set, std::vector<graph::Op> kinds) {
  return
      [&g, stop, set = std::move(set), kinds = std::move(kinds)](
          const std::vector<double>& lo, const std::vector<double>& hi,
          const std::vector<graph::OutputFunctional>& functionals) -> std::unique_ptr<graph::PhaseBounder> {
        const Matrix<double> C = functional_matrix(g, functionals);
        return std::make_unique<GraphAffineBranching>(g, set ? *set : box_input_set(lo, hi), C,
                                                      Vector<double>::Zero(C.rows()),
                                                      GraphAffineOptions{stop}, 20, kinds);
      };
}

}  // namespace regatta::operators
