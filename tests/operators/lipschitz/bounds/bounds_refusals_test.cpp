// The refusals of the theoretical bounds (operators/lipschitz/bounds.hpp): each bound outside its hypotheses
// is refused with a reason in theoretical_bounds and an InputError from evaluate, bad input throws; and the
// catalogue: every bound described, derived, listed once and in the docs in table order.
#include <gtest/gtest.h>

#include "bounds_cases.hpp"

namespace regatta::lip {
namespace {

using namespace bounds_test;

/// The reason theoretical_bounds gives for `bound` (empty when it applies), and evaluate throws iff refused.
std::string reason_for(Bound bound, const AttentionLayer& L, const AttentionOptions& o, const BoundSetting& s,
                       std::optional<Norm> norm = {}) {
  for (const BoundReport& r : theoretical_bounds(L, o, s, norm))
    if (r.bound == bound) {
      if (!norm) {
        if (r.applies)
          EXPECT_NO_THROW(evaluate<double>(bound, L, o, s));
        else
          EXPECT_THROW(evaluate<double>(bound, L, o, s), InputError);
      }
      EXPECT_EQ(r.applies, r.reason.empty());
      return r.reason;
    }
  ADD_FAILURE() << "bound missing from the list";
  return "";
}

bool mentions(const std::string& reason, const std::string& word) {
  return reason.find(word) != std::string::npos;
}

TEST(Refusals, L2BoundsNeedATiedL2LayerWithTheDiagonalAndN) {
  const AttentionLayer l2 = layer_of(AttentionKind::l2, 4, 2, 30);
  const BoundSetting s = setting_with(8, 1.0);
  for (Bound b : {Bound::kim_inf, Bound::kim_two}) {
    EXPECT_EQ(reason_for(b, l2, {}, s), "");
    EXPECT_TRUE(mentions(reason_for(b, layer_of(AttentionKind::dot, 4, 2, 30), {}, s), "dot-product"));
    AttentionLayer untied = l2;
    untied.WK[1](0, 0) += 0.125;
    EXPECT_TRUE(mentions(reason_for(b, untied, {}, s), "untied"));
    BoundSetting masked = s;
    masked.diagonal_masked = true;
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, masked), "diagonal"));
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, setting_with(std::nullopt, 1.0)), "--n"));
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, setting_with(1, 1.0)), "n >= 2"));
    AttentionOptions sinkhorn;
    sinkhorn.sinkhorn_iterations = 3;
    EXPECT_TRUE(mentions(reason_for(b, l2, sinkhorn, s), "Sinkhorn"));
    // The causal mask keeps the diagonal: covered (kim.causal_l2), same value.
    AttentionOptions causal;
    causal.causal = true;
    EXPECT_EQ(reason_for(b, l2, causal, s), "");
    EXPECT_EQ(evaluate<double>(b, l2, causal, s), evaluate<double>(b, l2, {}, s));
    // Tied biases cancel.
    EXPECT_EQ(reason_for(b, layer_of(AttentionKind::l2, 4, 2, 31, 1.0, true), {}, s), "");
  }
  // The norm a bound does not cover.
  EXPECT_TRUE(mentions(reason_for(Bound::kim_two, l2, {}, s, Norm::inf), "covers the 2-norm only"));
  EXPECT_TRUE(mentions(reason_for(Bound::kim_inf, l2, {}, s, Norm::two), "covers the inf-norm only"));
  EXPECT_EQ(reason_for(Bound::kim_inf, l2, {}, s, Norm::inf), "");
  EXPECT_EQ(reason_for(Bound::softmax_half, l2, {}, s, Norm::inf), "");
}

TEST(Refusals, DotProductBoundsNeedADotLayerARadiusAndNoQueryBias) {
  const AttentionLayer dot = layer_of(AttentionKind::dot, 4, 2, 32);
  BoundSetting s = setting_with(8, 1.0);
  s.depth = 2;
  s.input = Matrix<double>::Identity(3, 4);
  s.n.reset();
  BoundSetting with_n = s;
  with_n.input.resize(0, 0);
  with_n.n = 8;
  const std::vector<Bound> dot_bounds{Bound::castin_sqrt_n, Bound::castin_local, Bound::mf_query,
                                      Bound::mf_context,    Bound::mf_self,      Bound::mf_depth};
  for (Bound b : dot_bounds) {
    const BoundSetting& use = b == Bound::castin_local ? s : with_n;
    EXPECT_EQ(reason_for(b, dot, {}, use), "") << info(b).id;
    EXPECT_TRUE(mentions(reason_for(b, layer_of(AttentionKind::l2, 4, 2, 32), {}, use), "L2 layer"));
    EXPECT_TRUE(
        mentions(reason_for(b, layer_of(AttentionKind::dot, 4, 2, 33, 1.0, true), {}, use), "query bias"));
    AttentionOptions sinkhorn;
    sinkhorn.sinkhorn_iterations = 2;
    EXPECT_TRUE(mentions(reason_for(b, dot, sinkhorn, use), "Sinkhorn"));
    EXPECT_TRUE(mentions(reason_for(b, dot, {}, use, Norm::inf), "--norm inf"));
  }
  BoundSetting no_radius = with_n;
  no_radius.radius.reset();
  for (Bound b :
       {Bound::castin_sqrt_n, Bound::mf_query, Bound::mf_context, Bound::mf_self, Bound::mf_depth}) {
    EXPECT_TRUE(mentions(reason_for(b, dot, {}, no_radius), "--radius")) << info(b).id;
    AttentionOptions pre;
    pre.prenorm = Prenorm::rmsnorm;
    EXPECT_EQ(reason_for(b, dot, pre, no_radius), "") << info(b).id;  // the pre-norm fixes the radius
  }
  AttentionOptions causal;
  causal.causal = true;
  for (Bound b : {Bound::mf_query, Bound::mf_context, Bound::mf_self, Bound::mf_depth})
    EXPECT_TRUE(mentions(reason_for(b, dot, causal, with_n), "masked mean field"));
  EXPECT_EQ(reason_for(Bound::castin_sqrt_n, dot, causal, with_n), "");  // masks allowed
  EXPECT_EQ(reason_for(Bound::castin_local, dot, causal, s), "");
  EXPECT_TRUE(mentions(reason_for(Bound::castin_sqrt_n, dot, {}, setting_with(std::nullopt, 1.0)), "--n"));
  EXPECT_TRUE(mentions(reason_for(Bound::castin_local, dot, {}, with_n), "--input"));
  BoundSetting single = with_n;
  single.depth = 1;
  EXPECT_TRUE(mentions(reason_for(Bound::mf_depth, dot, {}, single), "--depth"));
  AttentionOptions residual;
  residual.residual = true;
  EXPECT_THROW(castin_local_code_form_claim<double>(dot, residual, s), InputError);
}

TEST(Refusals, NormConstantsNeedTheirPrenorm) {
  const AttentionLayer L = layer_of(AttentionKind::dot, 4, 2, 34);
  AttentionOptions ln, rms;
  ln.prenorm = Prenorm::layernorm;
  rms.prenorm = Prenorm::rmsnorm;
  const BoundSetting s;
  for (Bound b : {Bound::layernorm_two, Bound::layernorm_inf}) {
    EXPECT_EQ(reason_for(b, L, ln, s), "");
    EXPECT_TRUE(mentions(reason_for(b, L, {}, s), "LayerNorm"));
    EXPECT_TRUE(mentions(reason_for(b, L, rms, s), "LayerNorm"));
  }
  for (Bound b : {Bound::rmsnorm_two, Bound::rmsnorm_inf}) {
    EXPECT_EQ(reason_for(b, L, rms, s), "");
    EXPECT_TRUE(mentions(reason_for(b, L, ln, s), "RMSNorm"));
  }
  EXPECT_EQ(reason_for(Bound::softmax_half, L, {}, s), "");
}

TEST(Refusals, BadInputThrowsInsteadOfRefusing) {
  const AttentionLayer L = layer_of(AttentionKind::dot, 4, 2, 35);
  const auto throws = [&](BoundSetting s) {
    EXPECT_THROW(theoretical_bounds(L, {}, s), InputError);
    EXPECT_THROW(refusal(Bound::softmax_half, L, {}, s), InputError);
  };
  throws(setting_with(0, 1.0));
  throws(setting_with(5, 0.0));
  throws(setting_with(5, -1.0));
  throws(setting_with(5, std::nan("")));
  BoundSetting depth = setting_with(5, 1.0);
  depth.depth = 0;
  throws(depth);
  BoundSetting width = setting_with(std::nullopt, 1.0);
  width.input = Matrix<double>::Zero(3, 5);
  throws(width);
  BoundSetting rows = setting_with(4, 1.0);
  rows.input = Matrix<double>::Zero(3, 4);
  throws(rows);
  BoundSetting nonfinite = setting_with(std::nullopt, 1.0);
  nonfinite.input = Matrix<double>::Zero(3, 4);
  nonfinite.input(1, 2) = INFINITY;
  throws(nonfinite);
  AttentionLayer broken = L;
  broken.WO.resize(3, 3);
  EXPECT_THROW(theoretical_bounds(broken, {}, BoundSetting{}), InputError);
  EXPECT_THROW(parse_norm("1"), InputError);
  EXPECT_EQ(parse_norm("inf"), Norm::inf);
  EXPECT_EQ(parse_norm("2"), Norm::two);
}

TEST(Catalogue, EveryBoundIsDescribedAndDerived) {
  for (Bound b : all_bounds()) {
    const BoundInfo& i = info(b);
    EXPECT_FALSE(i.id.empty());
    EXPECT_FALSE(i.name.empty());
    EXPECT_FALSE(i.hypotheses.empty());
    EXPECT_NE(i.source.find("bounds.md"), std::string::npos);
    EXPECT_EQ(i.provenance,
              "derived");  // only derived statements are offered as bounds (docs/math/bounds.md)
  }
}

TEST(Catalogue, EveryEnumeratorIsOneRowWithItsOwnId) {
  // The table's size is the enum's (static_assert in bound_table.cpp); here: each enumerator exactly once,
  // in enum order, with distinct IDs.
  ASSERT_EQ(all_bounds().size(), static_cast<std::size_t>(Bound::count));
  std::set<std::string> ids;
  for (std::size_t i = 0; i < all_bounds().size(); ++i) {
    EXPECT_EQ(all_bounds()[i], static_cast<Bound>(i));
    EXPECT_TRUE(ids.insert(info(all_bounds()[i]).id).second) << info(all_bounds()[i]).id << " used twice";
  }
}

TEST(Catalogue, DocsListEveryRowInTableOrder) {
  // docs/bounds.md "Every bound": one table line per row, `id` first, in the table's order.
  std::ifstream in(std::string(REGATTA_TEST_DATA_DIR) + "/../../docs/bounds.md");
  ASSERT_TRUE(in) << "docs/bounds.md not found";
  std::vector<std::string> listed;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Every bound";
    if (inside && line.rfind("| `", 0) == 0) listed.push_back(line.substr(3, line.find('`', 3) - 3));
  }
  std::vector<std::string> table;
  for (Bound b : all_bounds()) table.push_back(info(b).id);
  EXPECT_EQ(listed, table);
}

TEST(Catalogue, SequenceBoundsAndNormsComeFromTheTable) {
  // The bracket compares the bounds on the n-token map: the Kim and Castin sqrt(n) rows (plain, augmented).
  std::set<std::string> sequence;
  for (Bound b : all_bounds())
    if (is_sequence_bound(b)) sequence.insert(info(b).id);
  EXPECT_EQ(sequence, (std::set<std::string>{"kim.thm32_inf", "kim.thm32_2", "castin.sqrt_n",
                                             "castin.sqrt_n_augmented"}));
  for (Bound b : all_bounds()) {
    const std::string& n = info(b).norm;
    EXPECT_EQ(covers(b, Norm::inf), n == "inf" || n == "2 and inf") << info(b).id;
    EXPECT_EQ(covers(b, Norm::two), n != "inf") << info(b).id;
  }
}

}  // namespace
}  // namespace regatta::lip
