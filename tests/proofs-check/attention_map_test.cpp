// The checker's own attention Jacobian (proofs-check detail::AttentionMap): the sparse dense-Jacobian equals
// the column-by-column JVP, central differences at 256 bits, and the library's Block Jacobian.
#include <gtest/gtest.h>

#include <cmath>

#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/proofs/detail/attention_map.hpp>

#include "support/tolerance.hpp"

namespace regatta::proofs::detail {
namespace {

template <class S>
AttentionMap<S> random_map(ScoreKind kind, MaskKind mask, bool untied, bool skip, std::uint64_t seed) {
  const Eigen::Index d = 3, dh = 2, e = 3;
  AttentionMap<S> map;
  map.kind = kind;
  map.mask = mask;
  for (int h = 0; h < 2; ++h) {
    const Matrix<double> wq = random_matrix({d, dh, RandomMatrixKind::gaussian, 1, 1, seed + 10 * h});
    const Matrix<double> wk =
        untied ? random_matrix({d, dh, RandomMatrixKind::gaussian, 1, 1, seed + 10 * h + 1}) : wq;
    const Matrix<double> wv = random_matrix({d, e, RandomMatrixKind::gaussian, 1, 1, seed + 10 * h + 2});
    map.heads.push_back({num::lift_matrix<S>(wq), num::lift_matrix<S>(wk), num::lift_matrix<S>(wv), S(0.7)});
  }
  if (skip) map.skip = num::lift_matrix<S>(Matrix<double>(Matrix<double>::Identity(d, e)));
  return map;
}

struct Case {
  ScoreKind kind;
  MaskKind mask;
  bool untied;
  bool skip;
};

const Case cases[] = {{ScoreKind::dot, MaskKind::none, true, false},
                      {ScoreKind::dot, MaskKind::causal, true, true},
                      {ScoreKind::l2, MaskKind::none, false, false},
                      {ScoreKind::l2, MaskKind::no_diagonal, false, true},
                      {ScoreKind::l2, MaskKind::causal, true, false}};

TEST(ProofsAttentionMap, SparseJacobianEqualsJvpColumns) {
  const Matrix<double> X = random_matrix({5, 3, RandomMatrixKind::gaussian, 1, 1, 3});
  for (const Case& c : cases) {
    const AttentionMap<double> map = random_map<double>(c.kind, c.mask, c.untied, c.skip, 11);
    const Matrix<double> a = map.jacobian(X), b = map.jacobian_from_jvp(X);
    // Both are sums of the same O(n) products in different orders: 64 n eps relative to the entries' scale.
    const double tol = 64 * 5 * 0x1.0p-52 * (1 + b.cwiseAbs().maxCoeff());
    EXPECT_LE((a - b).cwiseAbs().maxCoeff(), tol) << int(c.kind) << " " << int(c.mask);
  }
}

TEST(ProofsAttentionMap, JacobianEqualsCentralDifferencesAt256Bits) {
  PrecisionGuard guard(256);
  const Matrix<mpfr> X = num::lift_matrix<mpfr>(random_matrix({4, 3, RandomMatrixKind::gaussian, 1, 1, 5}));
  const mpfr h = mpfr(1) / mpfr(std::ldexp(1.0, 80));  // error O(h²) = 2^-160 times the third derivative
  // Central differences: truncation h² |D³f|/6 and rounding eps |f|/h (2^-175 here). The third derivatives
  // of these maps (Gaussian weights of scale 1, scores O(1)) are modest: measured worst 30 h²; c = 1000.
  const mpfr difference_error = 1000 * (h * h + eps<mpfr>() / h);
  for (const Case& c : cases) {
    const AttentionMap<mpfr> map = random_map<mpfr>(c.kind, c.mask, c.untied, c.skip, 17);
    const Matrix<mpfr> J = map.jacobian(X);
    mpfr worst(0);
    for (Eigen::Index j = 0; j < X.rows(); ++j)
      for (Eigen::Index b = 0; b < X.cols(); ++b) {
        Matrix<mpfr> Xp = X, Xm = X;
        Xp(j, b) += h;
        Xm(j, b) -= h;
        const Matrix<mpfr> diff = (map.forward(Xp) - map.forward(Xm)) / (mpfr(2) * h);
        for (Eigen::Index i = 0; i < diff.rows(); ++i)
          for (Eigen::Index a = 0; a < diff.cols(); ++a) {
            const mpfr err = abs(diff(i, a) - J(i * diff.cols() + a, j * X.cols() + b));
            if (err > worst) worst = err;
          }
      }
    EXPECT_LT(worst, difference_error) << int(c.kind) << " " << int(c.mask);
  }
}

TEST(ProofsAttentionMap, AgreesWithTheLibraryBlockJacobian) {
  // A dot-product and a tied L2 layer (no biases) through operators::Block and through AttentionMap.
  for (auto kind : {operators::AttentionKind::dot, operators::AttentionKind::l2}) {
    operators::RandomLayerSpec spec;
    spec.d = 4;
    spec.heads = 2;
    spec.seed = 9;
    spec.kind = kind;
    const operators::AttentionLayer layer = operators::random_layer(spec);
    const Matrix<double> X = random_matrix({5, 4, RandomMatrixKind::gaussian, 1, 1, 21});
    const operators::Block<double> block(layer);
    const Matrix<double> reference = operators::dense_jacobian(block.linearize(X));
    AttentionMap<double> map;
    map.kind = kind == operators::AttentionKind::dot ? ScoreKind::dot : ScoreKind::l2;
    const double scale = 1.0 / std::sqrt(static_cast<double>(layer.head_dim));
    for (int h = 0; h < layer.heads; ++h) {
      const Matrix<double> WOh = layer.WO.middleRows(h * layer.value_dim, layer.value_dim);
      Matrix<double> wval = layer.WV[h] * WOh;
      if (kind == operators::AttentionKind::l2) wval = layer.WQ[h] * layer.WQ[h].transpose() * scale * wval;
      map.heads.push_back({layer.WQ[h], layer.WK[h], wval, scale});
    }
    const Matrix<double> ours = map.jacobian(X);
    // Two constructions of the Jacobian: chains of ~32 rounded operations (scores over d = 4, a softmax over
    // n = 5, the folded values W^V W^O and, for l2, W^Q W^Q^T/sqrt(d_h)), c = 16 for the different orders
    // (measured: 0.5 eps).
    const double tol = testing::rounding_bound<double>(16, 32) * (1 + reference.cwiseAbs().maxCoeff());
    EXPECT_LE((ours - reference).cwiseAbs().maxCoeff(), tol) << operators::to_string(kind);
  }
}

}  // namespace
}  // namespace regatta::proofs::detail
