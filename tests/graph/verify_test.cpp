// regatta verify (docs/verify.md, "Tests"): the VNNLIB reader (accepted forms, every malformed class with
// its line), and verdicts against independent deciders: a brute-force grid over mlp_tiny's 2-D box (double
// forward, a second algorithm), and torch's logits of vit_vnncomp_like.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/graph/verify.hpp>
#include <regatta/graph/vnnlib.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string onnx_dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
const std::string vnn_dir = std::string(REGATTA_TEST_DATA_DIR) + "/vnnlib/";

std::string refusal(std::string_view text) {
  try {
    parse_vnnlib(text, "p.vnnlib");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

const std::string decl2 =
    "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 "
    "Real)\n";
const std::string box2 =
    "(assert (>= X_0 -1))\n(assert (<= X_0 1))\n(assert (>= X_1 0))\n(assert (<= X_1 0.1))\n";  // lines 5-8

TEST(Vnnlib, ReadsBoxesAndDisjunctions) {
  const Property p = parse_vnnlib(
      "; comment\n" + decl2 + box2 +
          "(assert (or (and (>= Y_0 Y_1) (<= Y_0 2.5)) (and (> Y_1 (- 3)))))\n(assert (<= 0 Y_1))\n",
      "p.vnnlib");
  EXPECT_EQ(p.input_count, 2u);
  EXPECT_EQ(p.output_count, 2u);
  EXPECT_EQ(p.outer_lower[0], -1);
  EXPECT_EQ(p.inner_upper[0], 1);
  // 0.1 is no double: the outer box encloses it, the inner box lies inside it.
  EXPECT_LT(p.outer_upper[1], 0.1 + 1e-17);
  EXPECT_EQ(p.outer_upper[1], std::nextafter(p.inner_upper[1], 1.0));
  EXPECT_LE(p.inner_upper[1], 0.1);
  ASSERT_EQ(p.disjuncts.size(), 2u);  // (A or B) and C = (A and C) or (B and C)
  EXPECT_EQ(p.disjuncts[0].size(), 3u);
  EXPECT_EQ(p.disjuncts[1].size(), 2u);
  EXPECT_TRUE(p.disjuncts[1][0].strict);
  EXPECT_EQ(p.disjuncts[1][0].smaller.constant.lower, -3);
  EXPECT_EQ(p.disjuncts[1][0].greater.output, 1);
}

TEST(Vnnlib, RefusesMalformedWithTheLine) {
  const auto has = [](const std::string& what, const std::string& part) {
    EXPECT_NE(what.find(part), std::string::npos) << what;
    EXPECT_NE(what.find("p.vnnlib"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  };
  has(refusal(decl2 + box2 + "(assert (<= Y_0 1)\n"), "line 9: unbalanced");
  has(refusal(decl2 + box2 + "(assert (<= Y_0 1)))\n"), "line 9: unbalanced");
  has(refusal(decl2 + box2 + "(assert (<= Y_5 1))\n"), "line 9: unknown variable 'Y_5'");
  has(refusal(decl2 + "(assert (>= X_0 1e999))\n"), "line 5: the constant '1e999' is not a finite double");
  has(refusal(decl2 + "(assert (>= X_0 nan))\n"), "line 5: unknown variable 'nan'");
  has(refusal(decl2 + "(assert (>= X_0 2))\n(assert (<= X_0 1))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"),
      "line 6: the box is empty");
  has(refusal(decl2 + "(assert (>= X_0 0))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"),
      "line 1: X_0 has no upper bound");
  has(refusal(decl2 + box2 + "(assert (<= X_0 Y_0))\n"), "line 9:");
  has(refusal(decl2 + box2 + "(check-sat)\n"), "line 9: unsupported command 'check-sat'");
  has(refusal("(declare-const X_0 Real)\n(declare-const X_0 Real)\n"),
      "line 2: variable 'X_0' is declared twice");
  has(refusal(
          "(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"),
      "X_0 is never declared");
  has(refusal(decl2 + box2 + "(assert (or))\n"), "line 9: an empty (or)");
  std::string deep = decl2 + box2 + "(assert ";
  for (int k = 0; k < 100; ++k) deep += "(and ";
  has(refusal(deep), "nested deeper than 64");
  VnnlibLimits small;
  small.max_disjuncts = 3;
  EXPECT_THROW(parse_vnnlib(decl2 + box2 +
                                "(assert (or (<= Y_0 1) (<= Y_0 2)))\n(assert (or (<= Y_1 1) (<= Y_1 2)))\n",
                            "p.vnnlib", small),
               InputError);
  const Property p = parse_vnnlib(decl2 + box2, "p.vnnlib");
  try {
    check_property_size(p, 3, 2);
    ADD_FAILURE();
  } catch (const InputError& e) {
    has(e.what(), "line 2: declares 2 input variables X_i, the model has 3 inputs");
  }
}

// The property's condition decided by a grid of the double forward over mlp_tiny's 2-D box: the largest
// attack score (max over disjuncts of min over atoms of greater − smaller).
double grid_max_score(const Graph& g, const Property& p, int steps) {
  double best = -1e300;
  for (int i = 0; i <= steps; ++i)
    for (int j = 0; j <= steps; ++j) {
      const double x0 = p.inner_lower[0] + (p.inner_upper[0] - p.inner_lower[0]) * i / steps;
      const double x1 = p.inner_lower[1] + (p.inner_upper[1] - p.inner_lower[1]) * j / steps;
      const auto y = evaluate<double>(g, {Tensor<double>{{1, 2}, {x0, x1}}})[0].data;
      for (const auto& d : p.disjuncts) {
        double s = 1e300;
        for (const Atom& a : d) {
          auto v = [&](const Term& t) {
            return t.output >= 0 ? y[static_cast<std::size_t>(t.output)] : t.constant.lower;
          };
          s = std::min(s, v(a.greater) - v(a.smaller));
        }
        best = std::max(best, s);
      }
    }
  return best;
}

TEST(Verify, MlpVerdictsAgreeWithAGrid) {
  const Graph g = import_onnx(onnx_dir + "mlp_tiny.onnx");
  struct Expect {
    const char* name;
    Verdict verdict;
  };
  for (const Expect& e : {Expect{"mlp_unsat_split", Verdict::unsat}, Expect{"mlp_sat_narrow", Verdict::sat},
                          Expect{"mlp_or_unsat", Verdict::unsat}, Expect{"mlp_sat_compare", Verdict::sat},
                          Expect{"mlp_unsat_small", Verdict::unsat}}) {
    SCOPED_TRACE(e.name);
    const Property p = read_vnnlib(vnn_dir + e.name + ".vnnlib");
    // The grid decides: a positive score is a point where the condition holds; below zero everywhere on a
    // fine grid of this piecewise-linear model (kinks on grid lines) means it never holds.
    const double grid = grid_max_score(g, p, 400);
    EXPECT_EQ(grid > 0, e.verdict == Verdict::sat) << grid;
    VerifyOptions o;
    o.timeout_seconds = 20;
    const VerifyResult r = verify(g, p, o);
    EXPECT_EQ(r.verdict, e.verdict) << r.reason;
    if (r.verdict == Verdict::sat) {
      ASSERT_EQ(r.input.size(), 2u);
      for (std::size_t k = 0; k < 2; ++k) {
        EXPECT_GE(r.input[k], p.inner_lower[k]);
        EXPECT_LE(r.input[k], p.inner_upper[k]);
      }
      EXPECT_TRUE(certainly_satisfies(g, p, r.input));
    }
  }
  // unsat_split needs the splitting: IBP on the whole box does not refute it.
  VerifyOptions o;
  o.timeout_seconds = 20;
  const VerifyResult r = verify(g, read_vnnlib(vnn_dir + "mlp_unsat_split.vnnlib"), o);
  EXPECT_GT(r.root_bound, 0);
  EXPECT_GT(r.boxes_split, 0u);
}

// At the point (0.75, 1) Y_1 is exactly −0.375 (dyadic weights): (<= Y_1 -0.375) holds there and the MPFI
// re-check must certify it; (< Y_1 -0.375) does not hold and IBP of the point refutes it.
TEST(Verify, BoundaryOfAStrictInequality) {
  const Graph g = import_onnx(onnx_dir + "mlp_tiny.onnx");
  const VerifyResult sat = verify(g, read_vnnlib(vnn_dir + "mlp_point_sat.vnnlib"));
  EXPECT_EQ(sat.verdict, Verdict::sat) << sat.reason;
  EXPECT_EQ(sat.input, (std::vector<double>{0.75, 1}));
  EXPECT_EQ(sat.output[1], -0.375);
  const VerifyResult unsat = verify(g, read_vnnlib(vnn_dir + "mlp_point_strict_unsat.vnnlib"));
  EXPECT_EQ(unsat.verdict, Verdict::unsat) << unsat.reason;
}

// vit_vnncomp_like around its torch input: an l_inf ball of 1e-6 is proved robust for torch's class by IBP;
// in the box of one ulp around the torch input, torch's logits say Y_label >= Y_runner-up, and the
// counterexample found is within one ulp of that input, with outputs matching torch's to 1e-12.
TEST(Verify, VitLikeAgreesWithTorch) {
  const Graph g = import_onnx(onnx_dir + "vit_vnncomp_like.onnx");
  const io::Array logits = io::read_npy(onnx_dir + "vit_vnncomp_like.logits.npy");
  const io::Array x = io::read_npy(onnx_dir + "vit_vnncomp_like.input.npy");
  VerifyOptions o;
  o.timeout_seconds = 20;
  const VerifyResult unsat = verify(g, read_vnnlib(vnn_dir + "vit_like_eps_unsat.vnnlib"), o);
  EXPECT_EQ(unsat.verdict, Verdict::unsat) << unsat.reason;
  const VerifyResult sat = verify(g, read_vnnlib(vnn_dir + "vit_like_point_sat.vnnlib"), o);
  ASSERT_EQ(sat.verdict, Verdict::sat) << sat.reason;
  ASSERT_EQ(sat.input.size(), x.data.size());
  for (std::size_t k = 0; k < x.data.size(); ++k) {
    EXPECT_GE(sat.input[k], std::nextafter(x.data[k], -1e300));
    EXPECT_LE(sat.input[k], std::nextafter(x.data[k], 1e300));
  }
  ASSERT_EQ(sat.output.size(), logits.data.size());
  for (std::size_t k = 0; k < logits.data.size(); ++k) EXPECT_NEAR(sat.output[k], logits.data[k], 1e-12);
}

TEST(Verify, ModelSizeMismatchIsRefused) {
  const Graph g = import_onnx(onnx_dir + "mlp_tiny.onnx");
  EXPECT_THROW(verify(g, read_vnnlib(vnn_dir + "vit_like_point_sat.vnnlib")), InputError);
}

TEST(Verify, TimeoutIsHonoured) {
  const Graph g = import_onnx(onnx_dir + "vit_vnncomp_like.onnx");
  // A box of ±0.003 around the input: IBP's bound of it is far above zero (about 58) and the attack finds
  // nothing, so the search runs until the limit and must stop there.
  Property p = read_vnnlib(vnn_dir + "vit_like_eps_unsat.vnnlib");
  for (std::size_t k = 0; k < p.input_count; ++k) {
    p.outer_lower[k] -= 0.003, p.inner_lower[k] -= 0.003;
    p.outer_upper[k] += 0.003, p.inner_upper[k] += 0.003;
  }
  VerifyOptions o;
  o.timeout_seconds = 1;
  const VerifyResult r = verify(g, p, o);
  EXPECT_EQ(r.verdict, Verdict::timeout) << r.reason;
  EXPECT_LT(r.seconds, 3.0);  // a bound on the stopping, not a timing measurement
}

// A caller's phase bounder that certifies nothing and has no unstable ReLU to split (every branch_on
// none): the phase search is stuck at its root at once.
class NothingToSplit final : public PhaseBounder {
 public:
  explicit NothingToSplit(std::size_t functionals) {
    root_.lower.assign(functionals, -std::numeric_limits<double>::infinity());
    root_.multipliers.assign(functionals, {});
    root_.branch_on.assign(functionals, {std::numeric_limits<std::size_t>::max(), 0});
  }
  const PhaseBranchBounds& root() const override { return root_; }
  PhaseBranchBounds bound(const std::vector<Phase>&, const std::vector<std::vector<double>>&) override {
    ADD_FAILURE() << "a stuck search bounds no child";
    return root_;
  }

 private:
  PhaseBranchBounds root_;
};

// docs/verify.md#phase-splitting: a phase search stuck on a branch with no unstable ReLU left hands the box
// to input splitting, which decides mlp_unsat_split (unsat: the grid of MlpVerdictsAgreeWithAGrid agrees) and
// still finds mlp_sat_narrow's counterexample; with box_encloses_set (the box only encloses the caller's
// set) it answers unknown and evaluates no point.
TEST(Verify, StuckPhaseSearchFallsBackToInputSplitting) {
  const Graph g = import_onnx(onnx_dir + "mlp_tiny.onnx");
  VerifyOptions o;
  o.timeout_seconds = 20;
  o.phase_bounds = [](const std::vector<double>&, const std::vector<double>&,
                      const std::vector<OutputFunctional>& f) -> std::unique_ptr<PhaseBounder> {
    return std::make_unique<NothingToSplit>(f.size());
  };
  const Property unsat = read_vnnlib(vnn_dir + "mlp_unsat_split.vnnlib");
  const VerifyResult r = verify(g, unsat, o);
  EXPECT_EQ(r.verdict, Verdict::unsat) << r.reason;
  EXPECT_EQ(r.splitting, "phase, then input");
  EXPECT_GT(r.boxes_split, 0u);
  const VerifyResult sat = verify(g, read_vnnlib(vnn_dir + "mlp_sat_narrow.vnnlib"), o);
  EXPECT_EQ(sat.verdict, Verdict::sat) << sat.reason;
  o.box_encloses_set = true;
  const VerifyResult enclosed = verify(g, unsat, o);
  EXPECT_EQ(enclosed.verdict, Verdict::unknown) << enclosed.reason;
  EXPECT_EQ(enclosed.point_evaluations, 0u);
  EXPECT_EQ(enclosed.boxes_split, 0u);
}

// The real VNN-COMP 2023 ViT (not in the repository): with REGATTA_VNNCOMP_VIT_ONNX
// (models/ibp_3_3_8/model.onnx of the benchmark) and REGATTA_VNNCOMP_VIT_REF (the npz of
// bench/vnncomp/onnx_numpy.py: normalised images, an independent numpy float64 evaluation of the ONNX graph,
// the labels), regatta's double forward matches the numpy logits, its interval forward at each image encloses
// them, and it predicts the same classes.
TEST(VnncompVit, MatchesNumpyReference) {
  const char* model = std::getenv("REGATTA_VNNCOMP_VIT_ONNX");
  const char* ref = std::getenv("REGATTA_VNNCOMP_VIT_REF");
  if (model == nullptr || ref == nullptr)
    GTEST_SKIP() << "REGATTA_VNNCOMP_VIT_ONNX / REGATTA_VNNCOMP_VIT_REF not set";
  const Graph g = import_onnx(model);
  const auto arrays = io::read_npz(ref);
  const io::Array& x = arrays.at("inputs");
  const io::Array& logits = arrays.at("logits");
  const io::Array& labels = arrays.at("labels");
  const std::size_t n = x.shape[0], per = x.data.size() / n, classes = logits.shape[1];
  double worst = 0;
  std::size_t agree = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Tensor<double> in{{1, 3, 32, 32},
                      std::vector<double>(x.data.begin() + static_cast<std::ptrdiff_t>(i * per),
                                          x.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * per))};
    const auto y = evaluate<double>(g, {in})[0].data;
    const auto yi =
        evaluate<interval64>(
            g, {Tensor<interval64>{in.shape, std::vector<interval64>(in.data.begin(), in.data.end())}})[0]
            .data;
    ASSERT_EQ(y.size(), classes);
    for (std::size_t c = 0; c < classes; ++c) {
      const double r = logits.data[i * classes + c];
      worst = std::max(worst, std::abs(y[c] - r));
      EXPECT_LE(yi[c].lower(), r + 1e-9);
      EXPECT_GE(yi[c].upper(), r - 1e-9);
      EXPECT_LT(yi[c].upper() - yi[c].lower(), 1e-6);
    }
    agree += static_cast<double>(std::max_element(y.begin(), y.end()) - y.begin()) == labels.data[i];
  }
  std::cout << "ibp_3_3_8: " << n << " images, max |regatta - numpy| = " << worst
            << ", predicted = label for " << agree << "\n";
  EXPECT_LT(worst, 1e-9);
  EXPECT_EQ(agree, n);
}

}  // namespace
