// The near-extremal constructions of docs/math/bounds.md as seed families of the adversarial search
// (search.hpp).
#include <algorithm>
#include <cmath>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/lipschitz/search.hpp>
#include "search_support.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;

Vector<double> normalized(Vector<double> u) {
  const double norm = u.norm();
  if (norm > 0) u /= norm;
  return u;
}

/// Distinct token indices, in order.
std::vector<Eigen::Index> unique_tokens(std::initializer_list<Eigen::Index> list, Eigen::Index n) {
  std::vector<Eigen::Index> out;
  for (const Eigen::Index i : list)
    if (i >= 0 && i < n && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  return out;
}

}  // namespace

Matrix<double> balanced_input(Eigen::Index n, const Vector<double>& u, double scale, Eigen::Index zero) {
  Matrix<double> X = Matrix<double>::Zero(n, u.size());
  int sign = 1;
  for (Eigen::Index i = 0; i < n; ++i) {
    if (i == zero) continue;
    X.row(i) = (sign * scale) * u.transpose();
    sign = -sign;
  }
  return X;
}

std::vector<SeedFamily> near_extremal_families(const AttentionLayer& layer, const AttentionOptions& options,
                                               Eigen::Index n, std::optional<double> radius,
                                               std::uint64_t seed) {
  layer.validate();
  if (n < 1) throw InputError("n", "must be at least 1, got " + std::to_string(n));
  if (radius && !(*radius > 0 && std::isfinite(*radius)))
    throw InputError("radius", "must be positive and finite");
  const double ell = detail::length_scale(layer, options, radius);
  const double top = radius ? *radius * detail::ball_margin : 10 * ell;
  const double bottom = std::min(ell / 10, top / 10);
  const Eigen::Index zero = options.causal ? n - 1 : 0;
  const Eigen::Index d = layer.d;
  const int heads = std::min(layer.heads, detail::max_seed_heads);

  std::vector<SeedFamily> families;
  for (int h = 0; h < heads; ++h) {
    const Matrix<double> A = detail::score_matrix(layer, h);
    const std::string head = " head " + std::to_string(h);
    const Vector<double> gaussian = normalized(standard_normal(d, detail::mix_seed(seed, 101 + h)));
    if (layer.kind == AttentionKind::l2) {
      // docs/math/bounds.md#kim-tightness: pairs (zero, ±) at scaled squared distance t = λ s², λ = uᵀA u; t
      // from 0.05 to 40 (t* of the
      // table lies in [1.9, 12] for n up to 10^6).
      const DenseSvd svd = dense_svd(Eigen::MatrixXd(layer.WQ[h]), true, false);
      const std::pair<const char*, Vector<double>> directions[] = {
          {" (top singular vector)", normalized(svd.U.col(0))}, {" (Gaussian direction)", gaussian}};
      for (const auto& [label, u] : directions) {
        const double lambda = std::abs(u.dot(A * u));
        if (!(lambda > 0)) continue;
        const double hi = std::min(std::sqrt(40 / lambda), top);
        const double lo = std::min(std::sqrt(0.05 / lambda), hi / 10);
        families.push_back({"kim" + head + label,
                            [n, dir = u, zero](double s) { return balanced_input(n, dir, s, zero); }, lo, hi,
                            unique_tokens({zero}, n)});
      }
    } else {
      // docs/math/bounds.md#dot-product-unbounded: balanced layout and single spike, ‖J‖ ≥ κc²‖(W^V)ᵀu‖‖Au‖ −
      // ‖W^V‖/n.
      const std::pair<const char*, Vector<double>> directions[] = {
          {" (top singular vector)", detail::top_right_singular_vector(A)},
          {" (Gaussian direction)", gaussian}};
      for (const auto& [label, u] : directions) {
        families.push_back({"thm31 balanced" + head + label,
                            [n, dir = u, zero](double c) { return balanced_input(n, dir, c, zero); }, bottom,
                            top, unique_tokens({zero}, n)});
        const Eigen::Index spike = zero == 0 ? 1 : 0;
        families.push_back({"thm31 spike" + head + label,
                            [n, dir = u, spike](double c) {
                              Matrix<double> X = Matrix<double>::Zero(n, dir.size());
                              if (spike < n) X.row(spike) = c * dir.transpose();
                              return X;
                            },
                            bottom, top, unique_tokens({zero, spike}, n)});
      }
      // docs/math/bounds.md#castin-adversarial: Castin et al.'s adversarial input along a real eigenvector.
      const detail::ExtremeEigen e = detail::extreme_eigen(A);
      const bool positive_regime = e.lambda_max > -8 * e.lambda_min;
      const Vector<double> u = positive_regime ? e.u_max : e.u_min;
      families.push_back(
          {std::string("castin") + (positive_regime ? " (lambda_max)" : " (lambda_min)") + head,
           [n, u, positive_regime](double r) {
             Matrix<double> X(n, u.size());
             for (Eigen::Index i = 0; i < n; ++i) X.row(i) = (positive_regime ? r / 2 : r) * u.transpose();
             X.row(0) = (positive_regime ? r : -r) * u.transpose();
             return X;
           },
           bottom, top, unique_tokens({0, 1, n - 1}, n)});
    }
  }
  return families;
}

}  // namespace regatta::lip
