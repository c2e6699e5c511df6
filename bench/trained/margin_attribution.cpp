// Where the certified margin goes, stage by stage, on a recognised ViT export (bench/RESULTS.md, "ViTs
// written other ways"; docs/models.md#what-limits-the-certified-radius). For each of the first N correctly
// classified test images: the certified radius r* (affine_certified_radius below 10, tolerance 0.01), then
// one plain pass at r* (the logits' forms of pooled_form + logits_form: no ledger, no deferred LN₂ remainder,
// no joint final norm and head, every column kept) whose margin against the class that sets the minimum is
// split as
//     centre − r*‖∇‖ (the input symbols, first order) − Σ_stages Σ_{j ∈ stage} |a_j| − slack,
// the fresh symbols attributed to the step that created them by the pass's own column counter (Pass::poll is
// called at the start of each block's attention and of its MLP). Printed per stage as a fraction of the
// centre margin, the median over the images; the refined margin of affine_margin at r* (≈ 0 by the search)
// beside it shows what the refinements recover. A measurement, not a certificate.
//
//   regatta_margin_attribution MODEL.onnx TEST.npz [N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <regatta/core/io/npz.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model_affine.hpp>

#include "../../operators/src/model/affine/form.hpp"
#include "../../operators/src/model/affine/norms.hpp"
#include "../../operators/src/model/affine/pass.hpp"

using namespace regatta;
using namespace regatta::operators;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: regatta_margin_attribution MODEL.onnx TEST.npz [N]\n");
    return 2;
  }
  const int limit = argc > 3 ? std::atoi(argv[3]) : 10;
  const graph::Graph g = graph::import_onnx(argv[1]);
  std::string why;
  const auto t = recognise_transformer(g, &why);
  if (!t) {
    std::fprintf(stderr, "%s: not recognised: %s\n", argv[1], why.c_str());
    return 2;
  }
  const Model& m = t->model;
  std::printf("%s: %s\n", argv[1], t->summary().c_str());
  const io::Array images = io::read_npz_member(argv[2], "images");
  const io::Array labels =
      io::read_npz_member(argv[2], "labels", io::default_max_file_bytes, io::NonFloat::integers);
  const std::size_t size = images.data.size() / labels.data.size();
  std::vector<std::string> names;
  std::vector<std::vector<double>> shares;  // per stage, per image: Σ|a_j| / centre
  std::vector<double> radii, input_share, slack_share, refined;
  int done = 0;
  for (std::size_t i = 0; i < labels.data.size() && done < limit; ++i) {
    const std::vector<double> raw(images.data.begin() + std::ptrdiff_t(i * size),
                                  images.data.begin() + std::ptrdiff_t((i + 1) * size));
    const Vector<double> x = t->model_input(raw);
    const int y = int(labels.data[i]);
    const Vector<double> logits = forward<double>(m, x);
    Eigen::Index top;
    logits.maxCoeff(&top);
    if (top != y) continue;
    const double r = affine_certified_radius(m, x, y, 10.0, 0.01).radius;
    if (!(r > 0)) continue;
    affine::Pass p;
    p.q = p.next = x.size();
    p.compact = false;
    // Pass::poll is called at the start of each block (pass.cpp), before each head's products
    // (attention.cpp) and before the block's MLP (pass.cpp): heads + 2 calls per block, in that order.
    std::vector<Eigen::Index> ticks;
    p.poll = [&] { ticks.push_back(p.next); };
    const affine::Form pooled = affine::pooled_form(m, x, r, p);
    const Eigen::Index before_head = p.next;
    const affine::Form z = affine::logits_form(m, pooled, p);
    const std::size_t per_block = std::size_t(m.heads) + 2;
    if (ticks.size() != per_block * m.blocks.size()) {
      std::fprintf(stderr, "unexpected poll count %zu\n", ticks.size());
      return 1;
    }
    std::vector<Eigen::Index> marks{Eigen::Index(p.q)};
    for (std::size_t b = 0; b < m.blocks.size(); ++b) {
      marks.push_back(ticks[b * per_block]);                  // the block starts
      marks.push_back(ticks[b * per_block + 1]);              // the first head's products start
      marks.push_back(ticks[b * per_block + per_block - 1]);  // the MLP starts
    }
    marks.push_back(before_head);
    marks.push_back(std::max(p.next, Eigen::Index(z.A.cols())));
    // The class that sets the plain margin's minimum.
    double worst = 1e300;
    std::vector<double> best_parts;
    // With a final norm read by the head, the margin's sign is that of N(z) = wᵀz + κ·s(z) (margin.cpp's
    // normed_margin): its linear part λ = w + κ·G at the centre, and the quadratic term
    // [κ < 0]·|κ|·‖u‖²/(2d·s₀) (‖u‖ bounded here entry by entry), attributed to the final norm.
    const bool normed = m.final_norm.present() && m.pooler.W.size() == 0;
    const Eigen::Index d = m.width;
    const affine::Form zc = normed ? affine::centred_rows(pooled, 1, d, p) : affine::Form{};
    double s0 = 0, u2 = 0;
    if (normed) {
      s0 = std::sqrt(zc.c.squaredNorm() / double(d) + m.eps);
      for (Eigen::Index f = 0; f < d; ++f) {
        const double e =
            zc.A.row(f).head(p.q).norm() + zc.A.row(f).tail(zc.A.cols() - p.q).cwiseAbs().sum() + zc.s(f);
        u2 += e * e;
      }
    }
    for (Eigen::Index c = 0; c < m.classes; ++c) {
      if (c == y) continue;
      Eigen::Matrix<double, 1, Eigen::Dynamic> a;
      double centre, slack, quadratic = 0;
      if (normed) {
        const Vector<double> diff = m.head.W.col(y) - m.head.W.col(c);
        const Vector<double> w = diff.cwiseProduct(m.final_norm.gamma);
        const double kappa = diff.dot(m.final_norm.beta) + m.head.b(y) - m.head.b(c);
        const Vector<double> lambda = w + kappa * zc.c / (double(d) * s0);
        a = lambda.transpose() * zc.A;
        centre = w.dot(zc.c) + kappa * s0;
        slack = lambda.cwiseAbs().dot(zc.s);
        if (kappa < 0) quadratic = -kappa * u2 / (2 * double(d) * s0);
      } else {
        a = z.A.row(y) - z.A.row(c);
        centre = z.c(y) - z.c(c);
        slack = z.s(y) + z.s(c);
      }
      std::vector<double> parts{a.head(p.q).norm()};
      double low = centre - parts[0] - slack - quadratic;
      for (std::size_t k = 0; k + 1 < marks.size(); ++k) {
        const Eigen::Index b = std::min(marks[k], Eigen::Index(a.size())),
                           e = std::min(marks[k + 1], Eigen::Index(a.size()));
        const double part = e > b ? a.segment(b, e - b).cwiseAbs().sum() : 0.0;
        parts.push_back(part);
        low -= part;
      }
      parts.back() += quadratic;
      parts.push_back(slack);
      parts.push_back(centre);
      if (low < worst) {
        worst = low;
        best_parts = parts;
      }
    }
    if (names.empty()) {
      names.push_back("input stage");
      for (std::size_t b = 0; b < m.blocks.size(); ++b) {
        const std::string at = "block " + std::to_string(b);
        names.push_back(at + (m.prenorm ? " LN1" : " (before the heads)"));
        names.push_back(at + " attention products, softmax" + (m.prenorm ? "" : ", LN1 after"));
        names.push_back(at + " MLP" + (m.prenorm ? " with LN2 before" : " with LN2 after"));
      }
      names.push_back("pooling, final norm, head");
      shares.resize(names.size());
    }
    const double centre = best_parts.back();
    radii.push_back(r);
    input_share.push_back(best_parts[0] / centre);
    for (std::size_t k = 0; k < names.size(); ++k) shares[k].push_back(best_parts[1 + k] / centre);
    slack_share.push_back(best_parts[best_parts.size() - 2] / centre);
    refined.push_back(affine_margin(m, x, y, r));
    if (std::getenv("REGATTA_ATTRIBUTION_PROFILE")) {  // the refined margin just past r*: smooth or a cliff
      std::printf("  refined margin at r* x");
      for (double k : {1.0, 1.01, 1.02, 1.05, 1.1, 1.2})
        std::printf(" %.2f: %.4g", k, affine_margin(m, x, y, r * k));
      std::printf("\n");
    }
    std::printf("image %zu: r* %.5g, plain margin at r* %.4g of centre %.4g (refined %.3g)\n", i, r, worst,
                centre, refined.back());
    ++done;
  }
  std::printf("median over %d images (r* median %.5g): share of the centre margin at r*\n", done,
              median(radii));
  std::printf("  %-45s %.3f\n", "input symbols, first order (r*·|grad|)", median(input_share));
  for (std::size_t k = 0; k < names.size(); ++k)
    std::printf("  %-45s %.3f\n", names[k].c_str(), median(shares[k]));
  std::printf("  %-45s %.3g\n", "slack (rounding)", median(slack_share));
  return 0;
}
