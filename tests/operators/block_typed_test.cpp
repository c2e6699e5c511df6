// The generic attention block (differentiable.hpp: Block<S>, forward and JVP / VJP) for every scalar type the
// operators are instantiated for (scalars::exact64: double, mpfr, interval, interval64 — and any type added
// to the list later), each property from two computations:
//   forward and JVP in S against the same in another precision (binary64 for S ≠ double, 128-bit MPFR for
//   double): Eigen's blocked products against the plain loops, rounding to nearest against outward;
//   the duality ⟨J v, u⟩ = ⟨v, Jᵀ u⟩ between the JVP and the VJP code paths, in S;
//   for the enclosures, their widths against the rounding error they must carry (tightness).
// Every value is compared in MPFI at 128 bits: a point value as the degenerate interval it is, an enclosure
// as itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regatta/core/convert.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <string>
#include <vector>

#include "support/random_layers.hpp"
#include "support/scalar_names.hpp"
#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

constexpr unsigned working_bits = 128;

struct Case {
  std::string name;
  AttentionKind kind;
  bool biases, causal, residual;
  Prenorm prenorm;
};

// n tokens of dimension d, H heads of dimension d_h = d_v = d / H.
constexpr Eigen::Index n = 5;
constexpr int d = 4, heads = 2;

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"dot_biases_causal_residual", AttentionKind::dot, true, true, true, Prenorm::none},
      {"l2_rmsnorm_residual", AttentionKind::l2, false, false, true, Prenorm::rmsnorm},
      {"dot_layernorm", AttentionKind::dot, true, false, false, Prenorm::layernorm}};
  return c;
}

AttentionLayer layer_for(const Case& c, std::uint64_t seed) {
  RandomLayerSpec s;
  s.d = d;
  s.heads = heads;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  AttentionLayer layer = random_layer(s);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(layer, seed);
  return layer;
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  return o;
}

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

/// Rounded operations on the longest dependency chain of one entry of the forward pass or of a JVP / VJP:
/// pre-norm (2d: mean and second moment, plus a square root and a division), Q and K (d each, in sequence
/// through the score), the score (d_h), the softmax (n terms, an exp and a division), the value product (n),
/// W^V W^O (d_v + d), the sum over heads (H) and the residual (1).
constexpr double chain = n + 2 * d + 2 + d + d + (d / heads) + n + 2 + n + (d / heads) + d + heads + 1;
/// c = 64. A score s carries an absolute error of about |s|·chain·eps, which the exp of the softmax turns
/// into a relative error of the kernel of the same size: |s| ≤ 16 for these unit-scale weights and tokens
/// (|q|, |k| ≤ about 4), and a further factor 4 covers the ulp of each libm exp / log / sqrt.
constexpr double safety = 64;

/// |a − b| as sets: 0 when the enclosures intersect, else the gap (rounded up, in double).
double gap(const interval& a, const interval& b) {
  const mpfr above = lower_bound(a) - upper_bound(b), below = lower_bound(b) - upper_bound(a);
  const mpfr g = std::max({above, below, mpfr(0)});
  return scalar_traits<mpfr>::to_double(g);
}

double magnitude(const interval& x) {
  return std::max(std::abs(scalar_traits<mpfr>::to_double(lower_bound(x))),
                  std::abs(scalar_traits<mpfr>::to_double(upper_bound(x))));
}

template <class S>
Matrix<interval> as_interval(const Matrix<S>& m) {
  Matrix<interval> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = scalar_cast<interval>(m(i, j));
  return r;
}

template <class S>
S inner(const Matrix<S>& a, const Matrix<S>& b) {
  S sum(0);
  for (Eigen::Index k = 0; k < a.size(); ++k) sum += a.data()[k] * b.data()[k];
  return sum;
}

/// The block's forward value and JVP at (X, V) in T, as intervals.
template <class T>
std::pair<Matrix<interval>, Matrix<interval>> evaluate(const AttentionLayer& layer, const AttentionOptions& o,
                                                       const Matrix<double>& X, const Matrix<double>& V) {
  const Block<T> block(layer, o);
  const Linearization<T> lin = block.linearize(matrix_cast<T>(X));
  return {as_interval<T>(lin.value()), as_interval<T>(lin.jvp(matrix_cast<T>(V)))};
}

template <class S>
class BlockTyped : public ::testing::Test {};
TYPED_TEST_SUITE(BlockTyped, testing::TypesOf<scalars::exact64>, testing::ScalarNames);

// The forward value and the JVP in S agree with the other precision within binary64's rounding (the less
// precise side of every pairing is binary64).
TYPED_TEST(BlockTyped, ForwardAndJvpAgreeWithTheOtherPrecision) {
  using S = TypeParam;
  PrecisionGuard guard(working_bits);
  const double tolerance = testing::rounding_bound<double>(safety, chain);
  std::uint64_t seed = 100;
  for (const Case& c : cases()) {
    const AttentionLayer layer = layer_for(c, seed);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(n, d, seed + 1), V = gaussian(n, d, seed + 2);
    seed += 10;
    const auto [F, J] = evaluate<S>(layer, o, X, V);
    const auto [Fr, Jr] =
        std::is_same_v<S, double> ? evaluate<mpfr>(layer, o, X, V) : evaluate<double>(layer, o, X, V);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index a = 0; a < d; ++a) {
        EXPECT_LE(gap(F(i, a), Fr(i, a)), tolerance * (1 + magnitude(Fr(i, a)))) << c.name << " F " << i << a;
        EXPECT_LE(gap(J(i, a), Jr(i, a)), tolerance * (1 + magnitude(Jr(i, a)))) << c.name << " J " << i << a;
      }
  }
}

// ⟨J v, u⟩ = ⟨v, Jᵀ u⟩ from the JVP and the VJP in S: for point types within S's rounding of both chains
// and the inner products (2n·d more operations), for enclosures the two must intersect (both contain the
// exact number).
TYPED_TEST(BlockTyped, JvpAndVjpAreDual) {
  using S = TypeParam;
  PrecisionGuard guard(working_bits);
  const double tolerance = testing::rounding_bound<S>(safety, chain + 2 * n * d);
  std::uint64_t seed = 200;
  for (const Case& c : cases()) {
    const AttentionLayer layer = layer_for(c, seed);
    const AttentionOptions o = options_for(c);
    const Matrix<double> Xd = gaussian(n, d, seed + 1), Vd = gaussian(n, d, seed + 2),
                         Ud = gaussian(n, d, seed + 3);
    seed += 10;
    const Linearization<S> lin = Block<S>(layer, o).linearize(matrix_cast<S>(Xd));
    const Matrix<S> V = matrix_cast<S>(Vd), U = matrix_cast<S>(Ud);
    const interval lhs = scalar_cast<interval>(inner<S>(lin.jvp(V), U));
    const interval rhs = scalar_cast<interval>(inner<S>(V, lin.vjp(U)));
    // ‖J v‖·‖u‖ bounds Σ|(J v)_k u_k|, the size of the terms whose rounding the tolerance scales.
    const double scale = 1 + Block<double>(layer, o).linearize(Xd).jvp(Vd).norm() * Ud.norm();
    if constexpr (scalar_traits<S>::is_interval) {
      EXPECT_EQ(gap(lhs, rhs), 0.0) << c.name;
    } else {
      EXPECT_LE(gap(lhs, rhs), tolerance * scale) << c.name;
    }
  }
}

// An enclosure of the forward value is as narrow as the rounding it carries: width ≤ c·chain·eps<S> of the
// value's size (point types have no width: skipped).
TYPED_TEST(BlockTyped, EnclosuresAreTight) {
  using S = TypeParam;
  if constexpr (!scalar_traits<S>::is_interval) {
    GTEST_SKIP() << "a point type has no width";
  } else {
    PrecisionGuard guard(working_bits);
    const double tolerance = testing::rounding_bound<S>(safety, chain);
    std::uint64_t seed = 300;
    for (const Case& c : cases()) {
      const AttentionLayer layer = layer_for(c, seed);
      const Matrix<double> X = gaussian(n, d, seed + 1), V = gaussian(n, d, seed + 2);
      seed += 10;
      const auto [F, J] = evaluate<S>(layer, options_for(c), X, V);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index a = 0; a < d; ++a) {
          const double width =
              scalar_traits<mpfr>::to_double(mpfr(upper_bound(F(i, a)) - lower_bound(F(i, a))));
          EXPECT_LE(width, tolerance * (1 + magnitude(F(i, a)))) << c.name << " " << i << a;
        }
    }
  }
}

}  // namespace
}  // namespace regatta::operators
