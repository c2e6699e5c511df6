// Branch and bound for Lip(F; D) (operators/lipschitz/branch_bound.hpp), each end against an independent
// computation:
//   upper end      the dense Jacobian of the generic engine (Block<double>::linearize, JVPs) at sampled and
//                  grid points of D: ‖J‖ there (JacobiSVD, row sums) never exceeds the certified upper end;
//   lower end      the same engine at the witness: ‖J(witness)‖ reaches the certified lower end, and the
//                  witness lies in D;
//   reductions     every symmetry reduction against the unreduced search on a small case: the brackets
//                  intersect (both contain the true constant);
//   checkpoints    a run stopped, written to JSON text, read back and continued ends with the identical
//                  state of the uninterrupted run;
//   bad input      sizes, gaps, radii and malformed states throw InputError;
//   centred form   the closed-form Jacobian against the generic engine at random points, and the centred
//                  enclosure over boxes containing the generic engine's Jacobian at sampled points (corners
//                  and uniform), for dot and L2 layers with heads, biases, causal masks and residuals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include "../../../../operators/src/lipschitz/branch_bound/centred_jacobian.hpp"
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;

/// ‖J‖ of a double Jacobian may exceed the exact value by rounding of order (n·d)·u per entry and per
/// accumulation; 64·64·u covers the sizes here (n·d ≤ 6) with a wide margin.
const double sampled_norm_slack = testing::rounding_bound<double>(64, 64);

double norm_of(const Matrix<double>& J, Norm norm) {
  if (norm == Norm::two) return largest_singular_value(J);
  return J.cwiseAbs().rowwise().sum().maxCoeff();
}

/// ‖J(X)‖ from the generic engine (JVPs of Block<double>, not the structured rows of the search).
double generic_norm(const AttentionLayer& L, const AttentionOptions& o, const Matrix<double>& X, Norm norm) {
  return norm_of(operators::dense_jacobian(Block<double>(L, o).linearize(X)), norm);
}

Matrix<double> as_matrix(const std::vector<double>& v, Index n, Index d) {
  Matrix<double> X(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) X(i, a) = v[std::size_t(i * d + a)];
  return X;
}

BnbState solve(const BranchBound& problem) {
  BnbState state = problem.initial_state();
  run_branch_bound(problem, state, {}, {});
  return state;
}

bool in_domain(const Matrix<double>& X, const BnbDomain& D) {
  for (Index i = 0; i < X.rows(); ++i) {
    if (D.shape == DomainShape::box && X.row(i).cwiseAbs().maxCoeff() > D.radius) return false;
    if (D.shape == DomainShape::ball && X.row(i).norm() > D.radius) return false;
  }
  return true;
}

/// Uniform points of D (the ball by rejection from its bounding box).
std::vector<Matrix<double>> samples(const BnbDomain& D, Index d, int count, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-D.radius, D.radius);
  std::vector<Matrix<double>> out;
  while (int(out.size()) < count) {
    Matrix<double> X(D.n, d);
    for (Index k = 0; k < X.size(); ++k) X.data()[k] = u(gen);
    if (in_domain(X, D)) out.push_back(X);
  }
  return out;
}

struct Setting {
  std::string name;
  AttentionLayer layer;
  AttentionOptions options;
  BnbDomain domain;
  Norm norm = Norm::two;
  double gap = 1e-2;
};

AttentionLayer random_dot(int d, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = d;
  s.heads = 1;
  s.seed = seed;
  return operators::random_layer(s);
}

/// d = 2, one head, WQ, WK, WV, WO of the form aI + bJ (dyadic entries): rotation equivariant.
AttentionLayer isotropic_dot() {
  AttentionLayer L = random_dot(2, 1);
  Matrix<double> R(2, 2), V(2, 2);
  R << 0.5, -1.0, 1.0, 0.5;
  V << 0.75, 0.25, -0.25, 0.75;
  L.WQ[0] = R;
  L.WK[0] = Matrix<double>::Identity(2, 2);
  L.WV[0] = V;
  L.WO = Matrix<double>::Identity(2, 2);
  return L;
}

std::vector<Setting> settings() {
  AttentionOptions residual;
  residual.residual = true;
  AttentionOptions causal;
  causal.causal = true;
  // Small enough to run in well under a second each (Release); the d = 2 ball exercises the projection of
  // box centres onto the balls.
  return {{"kim_unit_n2_box", kim_unit_layer(), {}, {DomainShape::box, 1.5, 2}},
          {"kim_unit_n3_box_inf", kim_unit_layer(), {}, {DomainShape::box, 1.0, 3}, Norm::inf},
          {"dot_d2_n1_ball", random_dot(2, 7), {}, {DomainShape::ball, 1.0, 1}},
          {"dot_d1_n2_ball_residual_causal_inf",
           random_dot(1, 8),
           causal,
           {DomainShape::ball, 0.7, 2},
           Norm::inf},
          {"dot_d1_n3_box_residual", random_dot(1, 9), residual, {DomainShape::box, 1.0, 3}},
          // Polar boxes (d = 2 balls): with the rotation reduction (θ_1 = 0, sorted angles), with rotation
          // but no permutation (causal), and with the ∞-norm, which keeps the sign reduction instead.
          {"dot_d2_n2_ball_rotation", isotropic_dot(), {}, {DomainShape::ball, 1.0, 2}},
          {"dot_d2_n2_ball_rotation_causal", isotropic_dot(), causal, {DomainShape::ball, 0.8, 2}},
          {"dot_d2_n2_ball_inf", isotropic_dot(), {}, {DomainShape::ball, 0.8, 2}, Norm::inf, 3e-2}};
}

TEST(BranchBound, BracketHoldsAgainstTheGenericJacobianAndReachesTheGap) {
  for (const Setting& s : settings()) {
    SCOPED_TRACE(s.name);
    const BranchBound problem(s.layer, s.options, s.domain, BnbOptions{s.norm, s.gap});
    const BnbState state = solve(problem);
    const BnbBracket b = problem.bracket(state);
    EXPECT_TRUE(b.gap_reached);
    EXPECT_LE(b.lower, b.upper);
    EXPECT_LE(b.upper - b.lower, s.gap * b.lower * (1 + sampled_norm_slack));
    // The lower end is attained at the witness, a point of D.
    const Matrix<double> W = as_matrix(state.witness, s.domain.n, s.layer.d);
    EXPECT_TRUE(in_domain(W, s.domain));
    EXPECT_GE(generic_norm(s.layer, s.options, W, s.norm) * (1 + sampled_norm_slack), b.lower);
    // No point of D has a larger norm than the upper end.
    double largest = 0;
    for (const Matrix<double>& X : samples(s.domain, s.layer.d, 400, 17)) {
      const double v = generic_norm(s.layer, s.options, X, s.norm);
      largest = std::max(largest, v);
      ASSERT_LE(v, b.upper * (1 + sampled_norm_slack));
    }
    EXPECT_GT(largest, 0.0);
  }
}

TEST(BranchBound, KimUnitTwoTokensAgainstAFineGrid) {
  // d = 1, n = 2: ‖J‖₂ on a 121 × 121 grid of [−R, R]² (the generic engine) stays below the upper end.
  const BnbDomain D{DomainShape::box, 2.0, 2};
  const AttentionLayer L = kim_unit_layer();
  const BnbOptions options{};
  const BranchBound problem(L, {}, D, options);
  const BnbBracket b = problem.bracket(solve(problem));
  double largest = 0;
  for (int i = 0; i <= 120; ++i)
    for (int j = 0; j <= 120; ++j) {
      Matrix<double> X(2, 1);
      X << -D.radius + D.radius * i / 60.0, -D.radius + D.radius * j / 60.0;
      largest = std::max(largest, generic_norm(L, {}, X, Norm::two));
    }
  EXPECT_LE(largest, b.upper * (1 + sampled_norm_slack));
  // The grid's maximum is a lower estimate of the sup; with step R/60 it lies within the solver's gap here.
  EXPECT_GE(largest, b.lower * (1 - options.gap));
}

TEST(BranchBound, EachSymmetryReductionAgreesWithTheUnreducedSearch) {
  // Each reduction against the same search without it (the unreduced L2 search must cover a line of
  // maximisers, translation being a symmetry: kept to n = 2 there).
  struct Reduction {
    std::string name;
    AttentionLayer layer;
    BnbDomain domain;
    Symmetries with, without;
  };
  const Symmetries none{false, false, false, false};
  const std::vector<Reduction> reductions = {
      {"l2_permutation", kim_unit_layer(), {DomainShape::box, 1.5, 2}, {true, false, false, false}, none},
      {"l2_translation",
       kim_unit_layer(),
       {DomainShape::box, 1.5, 2},
       {true, true, false, false},
       {true, false, false, false}},
      {"l2_sign_sorted",
       kim_unit_layer(),
       {DomainShape::box, 1.5, 2},
       {true, false, true, false},
       {true, false, false, false}},
      {"l2_sign_translated",
       kim_unit_layer(),
       {DomainShape::box, 1.5, 3},
       {true, true, true, false},
       {true, true, false, false}},
      {"dot_sign_alone", random_dot(1, 3), {DomainShape::ball, 1.0, 2}, {false, false, true, false}, none},
      {"dot_sign_sorted", random_dot(1, 3), {DomainShape::ball, 1.0, 2}, {true, false, true, false}, none},
      {"d2_sign_alone", random_dot(2, 3), {DomainShape::ball, 1.0, 1}, {false, false, true, false}, none},
      // Rotation (polar boxes) against Cartesian boxes without it.
      {"rotation_alone", isotropic_dot(), {DomainShape::ball, 1.0, 1}, {false, false, false, true}, none},
      {"rotation_sorted",
       isotropic_dot(),
       {DomainShape::ball, 0.5, 2},
       {true, false, false, true},
       {true, false, true, false}}};
  for (const Reduction& r : reductions) {
    SCOPED_TRACE(r.name);
    const double gap = 2e-2;
    const BranchBound reduced(r.layer, {}, r.domain, BnbOptions{Norm::two, gap, r.with});
    const BranchBound full(r.layer, {}, r.domain, BnbOptions{Norm::two, gap, r.without});
    // The reductions asked for are the ones used (their hypotheses hold here).
    EXPECT_EQ(reduced.symmetries().permutation, r.with.permutation);
    EXPECT_EQ(reduced.symmetries().translation, r.with.translation);
    EXPECT_EQ(reduced.symmetries().sign, r.with.sign);
    EXPECT_EQ(reduced.symmetries().rotation, r.with.rotation);
    const BnbBracket a = reduced.bracket(solve(reduced)), b = full.bracket(solve(full));
    EXPECT_LE(std::max(a.lower, b.lower), std::min(a.upper, b.upper));
  }
}

TEST(BranchBound, PolarBoxesOnlyWithTheRotationReduction) {
  const BnbDomain disk{DomainShape::ball, 1, 2};
  EXPECT_TRUE(BranchBound(isotropic_dot(), {}, disk, {}).polar());
  EXPECT_FALSE(BranchBound(random_dot(2, 5), {}, disk, {}).polar());  // no rotation: Cartesian boxes
  BnbOptions no_rotation;
  no_rotation.symmetries.rotation = false;
  EXPECT_FALSE(BranchBound(isotropic_dot(), {}, disk, no_rotation).polar());
}

TEST(BranchBound, ReductionsAreDroppedWhereTheyDoNotHold) {
  AttentionOptions causal;
  causal.causal = true;
  const Symmetries s = applicable_symmetries(kim_unit_layer(), causal, {DomainShape::box, 1, 3}, {});
  EXPECT_FALSE(s.permutation);
  EXPECT_FALSE(s.translation);  // it needs the sorted order
  EXPECT_TRUE(s.sign);
  const Symmetries ball = applicable_symmetries(kim_unit_layer(), {}, {DomainShape::ball, 1, 3}, {});
  EXPECT_FALSE(ball.translation);  // a ball is not translation invariant
  operators::RandomLayerSpec spec;
  spec.d = 2;
  spec.heads = 1;
  spec.biases = true;
  const Symmetries biased =
      applicable_symmetries(operators::random_layer(spec), {}, {DomainShape::box, 1, 2}, {});
  EXPECT_FALSE(biased.sign);  // query/key biases make the scores odd in part
  AttentionOptions prenorm;
  prenorm.prenorm = operators::Prenorm::layernorm;
  EXPECT_FALSE(applicable_symmetries(kim_unit_layer(), prenorm, {DomainShape::box, 1, 3}, {}).translation);
  // Rotation: the isotropic layer on a d = 2 ball with the 2-norm; not a generic layer, not a box, not with
  // the ∞-norm (not rotation invariant), not with Cartesian boxes. Where it holds, sign is not used.
  const BnbDomain disk{DomainShape::ball, 1, 2};
  const Symmetries iso = BranchBound(isotropic_dot(), {}, disk, {}).symmetries();
  EXPECT_TRUE(iso.rotation);
  EXPECT_FALSE(iso.sign);
  EXPECT_FALSE(BranchBound(random_dot(2, 3), {}, disk, {}).symmetries().rotation);
  EXPECT_FALSE(BranchBound(isotropic_dot(), {}, {DomainShape::box, 1, 2}, {}).symmetries().rotation);
  EXPECT_FALSE(BranchBound(isotropic_dot(), {}, disk, BnbOptions{Norm::inf}).symmetries().rotation);
  BnbOptions cartesian;
  cartesian.polar = false;
  EXPECT_FALSE(BranchBound(isotropic_dot(), {}, disk, cartesian).symmetries().rotation);
  AttentionLayer skewed = isotropic_dot();
  skewed.WV[0](0, 1) = 0.5;  // no longer aI + bJ
  EXPECT_FALSE(BranchBound(skewed, {}, disk, {}).symmetries().rotation);
}

TEST(BranchBound, ResumedRunEndsInTheSameStateAsAnUninterruptedOne) {
  const BranchBound problem(kim_unit_layer(), {}, {DomainShape::box, 2.0, 3}, BnbOptions{Norm::two, 5e-3});
  const BnbState whole = solve(problem);
  BnbState part = problem.initial_state();
  int steps = 0;
  run_branch_bound(problem, part, [&](const BnbState&) { return ++steps > 4; }, {});
  ASSERT_FALSE(problem.done(part));
  const std::string text = state_to_json(part).dump();
  BnbState resumed = state_from_json(nlohmann::json::parse(text), problem.dimension(), "test");
  run_branch_bound(problem, resumed, {}, {});
  EXPECT_EQ(resumed.lower, whole.lower);
  EXPECT_EQ(problem.bracket(resumed).upper, problem.bracket(whole).upper);
  EXPECT_EQ(resumed.evaluated, whole.evaluated);
  EXPECT_EQ(resumed.witness, whole.witness);
}

// A state read back is checked against the problem where it can be (BranchBound::check_resumed): the
// run's own state passes; a raised lower end, a moved witness, a box outside the domain, a lowered box
// bound or a repeated id are refused — each of them made a resumed run print a false certified bracket.
TEST(BranchBound, ResumedStatesAreCheckedAgainstTheProblem) {
  const BranchBound problem(kim_unit_layer(), {}, {DomainShape::ball, 1.0, 2}, BnbOptions{Norm::two, 5e-3});
  BnbState part = problem.initial_state();
  int steps = 0;
  run_branch_bound(problem, part, [&](const BnbState&) { return ++steps > 3; }, {});
  ASSERT_GE(part.frontier.size(), 2u);
  ASSERT_FALSE(part.witness.empty());
  EXPECT_NO_THROW(problem.check_resumed(part, "f"));
  const auto refused = [&](const BnbState& s, const std::string& what) {
    try {
      problem.check_resumed(s, "f");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  BnbState bad = part;
  bad.lower = std::nextafter(part.lower, 10.0);
  refused(bad, "above the certified norm at its witness");
  bad = part;
  bad.witness[0] = 1.5;  // the first token outside the unit disk
  refused(bad, "witness is not in the domain");
  bad = part;
  bad.witness.clear();
  refused(bad, "no witness");
  bad = part;
  bad.frontier[0].hi[0] = 1.5;
  refused(bad, "is not inside the domain");
  bad = part;
  bad.frontier[1].upper = bad.frontier[1].upper * 0.5;
  refused(bad, "below its evaluation");
  bad = part;
  bad.frontier[1].id = bad.frontier[0].id;
  refused(bad, "two frontier boxes have the id");
}

TEST(BranchBound, RefusesBadProblemsAndMalformedStates) {
  const AttentionLayer L = kim_unit_layer();
  EXPECT_THROW(BranchBound(L, {}, {DomainShape::box, 1, 13}, {}), InputError);  // n·d above the limit
  try {
    BranchBound(L, {}, {DomainShape::box, 1, 13}, {});
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("limit 12"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BranchBound(L, {}, {DomainShape::box, 0, 2}, {}), InputError);
  EXPECT_THROW(BranchBound(L, {}, {DomainShape::box, std::nan(""), 2}, {}), InputError);
  EXPECT_THROW(BranchBound(L, {}, {DomainShape::box, 1, 2}, BnbOptions{Norm::two, 0}), InputError);
  EXPECT_THROW(BranchBound(L, {}, {DomainShape::box, 1, 2}, BnbOptions{Norm::two, std::nan("")}), InputError);
  AttentionOptions sinkhorn;
  sinkhorn.sinkhorn_iterations = 3;
  EXPECT_THROW(BranchBound(L, sinkhorn, {DomainShape::box, 1, 2}, {}), InputError);

  AttentionLayer huge = L;  // its Jacobian overflows at the origin: refused (the search never pruned a box)
  huge.WV[0] *= 1e300;
  huge.WO *= 1e300;
  EXPECT_THROW(BranchBound(huge, {}, {DomainShape::box, 1, 2}, {}), InputError);

  const BranchBound problem(L, {}, {DomainShape::box, 1, 2}, {});
  nlohmann::json s = state_to_json(problem.initial_state());
  nlohmann::json bad = s;
  bad["frontier"] = {{{"id", 0}, {"upper", 1.0}, {"lo", {0.5, 0.0}}, {"hi", {0.0, 1.0}}}};
  EXPECT_THROW(state_from_json(bad, 2, "f"), InputError);  // lo > hi
  bad["frontier"] = {{{"id", 0}, {"upper", 1.0}, {"lo", {0.0}}, {"hi", {1.0}}}};
  EXPECT_THROW(state_from_json(bad, 2, "f"), InputError);  // wrong size
  bad = s;
  bad["lower"] = "x";
  EXPECT_THROW(state_from_json(bad, 2, "f"), InputError);
  const BranchBound other(L, {}, {DomainShape::box, 2, 2}, {});
  const auto why = BranchBound::describe_mismatch(problem.problem_json(), other.problem_json());
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("domain"), std::string::npos) << *why;
  EXPECT_FALSE(BranchBound::describe_mismatch(problem.problem_json(), problem.problem_json()).has_value());
}

AttentionLayer layer_of(AttentionKind kind, int d, int heads, bool biases, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = d;
  s.heads = heads;
  s.head_dim = 2;
  s.kind = kind;
  s.biases = biases;
  s.seed = seed;
  return operators::random_layer(s);
}

struct CentredCase {
  std::string name;
  AttentionLayer layer;
  bool causal = false, residual = false;
  Index n = 3;
};

std::vector<CentredCase> centred_cases() {
  return {{"dot", layer_of(AttentionKind::dot, 2, 1, false, 1)},
          {"dot_heads_biases_causal_residual", layer_of(AttentionKind::dot, 2, 2, true, 2), true, true},
          {"l2_heads_biases", layer_of(AttentionKind::l2, 2, 2, true, 3), false, false, 4},
          {"l2_unit_residual", kim_unit_layer(), false, true, 5}};
}

TEST(CentredJacobian, ClosedFormMatchesTheGenericEngine) {
  std::mt19937_64 gen(21);
  std::normal_distribution<double> z;
  for (const CentredCase& c : centred_cases()) {
    SCOPED_TRACE(c.name);
    AttentionOptions o;
    o.causal = c.causal;
    o.residual = c.residual;
    for (int t = 0; t < 3; ++t) {
      Matrix<double> X(c.n, c.layer.d);
      for (Index k = 0; k < X.size(); ++k) X.data()[k] = z(gen);
      const Matrix<double> a = detail::closed_form_jacobian(c.layer, o, X);
      const Matrix<double> b = operators::dense_jacobian(Block<double>(c.layer, o).linearize(X));
      EXPECT_LE((a - b).cwiseAbs().maxCoeff(), sampled_norm_slack * std::max(1.0, b.cwiseAbs().maxCoeff()));
    }
  }
}

TEST(CentredJacobian, EnclosureContainsTheJacobianAtSampledPointsAndBeatsTheNaiveOneOnSmallBoxes) {
  std::mt19937_64 gen(22);
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const CentredCase& c : centred_cases()) {
    SCOPED_TRACE(c.name);
    AttentionOptions o;
    o.causal = c.causal;
    o.residual = c.residual;
    for (double r : {0.3, 0.01}) {
      Matrix<double> centre(c.n, c.layer.d);
      for (Index k = 0; k < centre.size(); ++k) centre.data()[k] = z(gen);
      Matrix<interval64> box(c.n, c.layer.d);
      for (Index k = 0; k < centre.size(); ++k)
        box.data()[k] = interval64::hull(centre.data()[k] - r, centre.data()[k] + r);
      const Matrix<interval64> at_centre =
          block_dense_jacobian_on_box<interval64>(c.layer, o, centre.cast<interval64>());
      const Matrix<interval64> J = detail::centred_enclosure(c.layer, o, box, centre, at_centre);
      for (int sample = 0; sample < 8; ++sample) {
        Matrix<double> P = centre;
        for (Index k = 0; k < P.size(); ++k) {
          const double t = u(gen);
          P.data()[k] += r * (sample % 2 == 0 ? (t < 0 ? -1.0 : 1.0) : t);
        }
        const Matrix<double> ref = operators::dense_jacobian(Block<double>(c.layer, o).linearize(P));
        for (Index i = 0; i < J.rows(); ++i)
          for (Index k = 0; k < J.cols(); ++k) {
            const double slack = sampled_norm_slack * std::max(1.0, std::fabs(ref(i, k)));
            ASSERT_LE(J(i, k).lower(), ref(i, k) + slack) << "r " << r << " entry " << i << ", " << k;
            ASSERT_GE(J(i, k).upper(), ref(i, k) - slack) << "r " << r << " entry " << i << ", " << k;
          }
      }
      if (r < 0.1) {  // the point of the centred form: a narrower enclosure than the naive extension
        const Matrix<interval64> naive = block_dense_jacobian_on_box<interval64>(c.layer, o, box);
        double centred_width = 0, naive_width = 0;
        for (Index k = 0; k < J.size(); ++k) {
          centred_width += J.data()[k].upper() - J.data()[k].lower();
          naive_width += naive.data()[k].upper() - naive.data()[k].lower();
        }
        EXPECT_LT(centred_width, naive_width);
      }
    }
  }
}

}  // namespace
}  // namespace regatta::lip
