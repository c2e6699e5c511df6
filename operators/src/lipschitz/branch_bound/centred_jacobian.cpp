// The centred enclosure of the Jacobian over a box (see centred_jacobian.hpp).
#include "centred_jacobian.hpp"

#include "../jacobian/closed_form_jacobian.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <regatta/core/error.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>

namespace regatta::lip::detail {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;

using Forward = detail::Dual<int(bnb_max_dimension)>;

}  // namespace

std::optional<std::string> centred_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (options.prenorm != operators::Prenorm::none)
    return "the centred enclosure does not cover pre-normalisation";
  if (options.sinkhorn_iterations != 1) return "the centred enclosure is for softmax attention";
  if (layer.rotary) return "the centred enclosure does not cover rotary position embeddings";
  if (layer.kind == AttentionKind::l2 && !layer.tied() && !options.allow_untied_l2)
    return "untied L2 attention needs allow_untied_l2";
  return std::nullopt;
}

Matrix<double> closed_form_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                                    const Matrix<double>& X) {
  if (const auto why = centred_refusal(layer, options)) throw InputError("closed-form Jacobian", *why);
  return closed_form_at(layer, options, X);
}

JacobianDerivatives jacobian_derivatives_on_box(const AttentionLayer& layer, const AttentionOptions& options,
                                                const Matrix<interval64>& box) {
  if (const auto why = centred_refusal(layer, options)) throw InputError("centred enclosure", *why);
  const Index n = box.rows(), d = box.cols(), k = n * d;
  if (k > Forward::size) throw InputError("centred enclosure", "n*d above the branch-and-bound limit");
  Grid<Forward> X(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      X(i, a) = Forward(box(i, a));
      X(i, a).g[std::size_t(i * d + a)] = interval64(1.0);
    }
  const Grid<Forward> J = closed_form<Forward>(layer, options, X);
  JacobianDerivatives out;
  out.value.resize(k, k);
  out.partial.assign(std::size_t(k), Matrix<interval64>(k, k));
  for (Index r = 0; r < k; ++r)
    for (Index c = 0; c < k; ++c) {
      out.value(r, c) = J(r, c).v;
      for (Index q = 0; q < k; ++q) out.partial[std::size_t(q)](r, c) = J(r, c).g[std::size_t(q)];
    }
  return out;
}

Matrix<interval64> centred_enclosure(const AttentionLayer& layer, const AttentionOptions& options,
                                     const Matrix<interval64>& box, const Matrix<double>& centre,
                                     const Matrix<interval64>& at_centre) {
  const JacobianDerivatives jd = jacobian_derivatives_on_box(layer, options, box);
  const Index n = box.rows(), d = box.cols(), k = n * d;
  std::vector<interval64> offset(static_cast<std::size_t>(k));
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) offset[std::size_t(i * d + a)] = box(i, a) - interval64(centre(i, a));
  Matrix<interval64> out(k, k);
  for (Index r = 0; r < k; ++r)
    for (Index c = 0; c < k; ++c) {
      interval64 e = at_centre(r, c);
      for (Index q = 0; q < k; ++q) e = e + jd.partial[std::size_t(q)](r, c) * offset[std::size_t(q)];
      // Both enclose the range of J_rc over the box: so does their intersection (non-empty in exact
      // terms; if rounding made it look empty, the centred one alone is kept).
      out(r, c) = intersect(e, jd.value(r, c));
    }
  return out;
}

}  // namespace regatta::lip::detail
