// verify's gradient attack (graph/src/verify.cpp, gradient_attack): on properties whose counterexamples lie
// only deep inside the input box, where the corner search cannot reach (every corner is far from them) and
// no uniform random points are drawn (20 inputs > 16), the attack phase must find a certified `sat`
// (docs/verify.md, "Method").
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include <regatta/graph/verify.hpp>
#include <regatta/graph/vnnlib.hpp>

namespace {

using namespace regatta::graph;

constexpr int n = 20;

// Y_j = −mean_k (x_k − centre_j,k)² for each centre: a well of depth 0 at the centre, below −0.25 at every
// corner of [−1, 1]^n when the centres lie in [−0.5, 0.5]^n.
Graph wells(const std::vector<std::vector<double>>& centres) {
  Graph g;
  g.source = "wells";
  g.values.push_back(Value{"x", {1, n}, false, {}});
  g.inputs = {0};
  const auto value = [&](Shape s, bool c = false, std::vector<double> d = {}) {
    g.values.push_back(Value{"v" + std::to_string(g.values.size()), std::move(s), c, std::move(d)});
    return static_cast<int>(g.values.size()) - 1;
  };
  const auto node = [&](Op op, std::vector<int> in, Shape out, Attributes a = {}) {
    const int o = value(std::move(out));
    g.nodes.push_back(
        Node{op, "n" + std::to_string(o), std::string(op_name(op)), std::move(in), o, std::move(a)});
    return o;
  };
  std::vector<int> wells_out;
  for (const auto& c : centres) {
    const int d = node(Op::sub, {0, value({n}, true, c)}, {1, n});
    const int sq = node(Op::mul, {d, d}, {1, n});
    const int m = node(Op::reduce_mean, {sq}, {1, 1}, ReduceMeanAttrs{{1}, true});
    wells_out.push_back(node(Op::neg, {m}, {1, 1}));
  }
  g.outputs = {node(Op::concat, wells_out, {1, static_cast<std::int64_t>(centres.size())}, ConcatAttrs{1})};
  g.validate();
  return g;
}

std::vector<double> random_centre(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> c(n);
  for (double& v : c) v = std::uniform_real_distribution<double>(-0.5, 0.5)(rng);
  return c;
}

std::string box_text(int outputs) {
  std::ostringstream s;
  for (int k = 0; k < n; ++k) s << "(declare-const X_" << k << " Real)\n";
  for (int k = 0; k < outputs; ++k) s << "(declare-const Y_" << k << " Real)\n";
  for (int k = 0; k < n; ++k) s << "(assert (<= X_" << k << " 1))\n(assert (>= X_" << k << " -1))\n";
  return s.str();
}

double sq_distance(const std::vector<double>& x, const std::vector<double>& c) {
  double s = 0;
  for (int k = 0; k < n; ++k)
    s += (x[static_cast<std::size_t>(k)] - c[static_cast<std::size_t>(k)]) *
         (x[static_cast<std::size_t>(k)] - c[static_cast<std::size_t>(k)]);
  return s;
}

TEST(VerifyAttack, FindsACounterexampleInsideTheBox) {
  const auto a = random_centre(1);
  const Graph g = wells({a});
  const Property p = parse_vnnlib(box_text(1) + "(assert (>= Y_0 -0.001))\n", "well.vnnlib");
  VerifyOptions o;
  o.timeout_seconds = 20;
  const VerifyResult r = verify(g, p, o);
  ASSERT_EQ(r.verdict, Verdict::sat) << r.reason;
  EXPECT_NE(r.reason.find("attack"), std::string::npos) << r.reason;
  EXPECT_TRUE(certainly_satisfies(g, p, r.input));
  EXPECT_LE(sq_distance(r.input, a) / n, 0.001);
}

// (Y_0 ≥ −δ ∧ Y_1 ≥ −δ) ∨ (Y_1 ≥ −δ ∧ Y_0 ≥ −1): the first disjunct is infeasible (the wells are apart), the
// second holds only near the second well; the gradient must follow the active atom of the active disjunct.
TEST(VerifyAttack, FollowsTheActiveAtomOfTheActiveDisjunct) {
  const auto a = random_centre(2), b = random_centre(3);
  ASSERT_GT(sq_distance(a, b) / n, 0.05);
  const Graph g = wells({a, b});
  const Property p = parse_vnnlib(box_text(2) +
                                      "(assert (or (and (>= Y_0 -0.001) (>= Y_1 -0.001))\n"
                                      "            (and (>= Y_1 -0.001) (>= Y_0 -1))))\n",
                                  "two_wells.vnnlib");
  VerifyOptions o;
  o.timeout_seconds = 20;
  const VerifyResult r = verify(g, p, o);
  ASSERT_EQ(r.verdict, Verdict::sat) << r.reason;
  EXPECT_NE(r.reason.find("attack"), std::string::npos) << r.reason;
  EXPECT_TRUE(certainly_satisfies(g, p, r.input));
  EXPECT_LE(sq_distance(r.input, b) / n, 0.001);
}

}  // namespace
