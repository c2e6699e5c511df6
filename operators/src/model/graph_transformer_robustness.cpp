// The robustness row of a graph recognised as a transformer (graph_transformer.hpp,
// docs/models.md#recognised-transformers): the row the safetensors path computes for the model
// (input_robustness.cpp with affine forms), with the graph's stop flag polled by the attack and the search.
#include <algorithm>
#include <cmath>
#include <limits>

#include <regatta/core/interval64.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model_affine.hpp>

#include "centre_margins.hpp"

namespace regatta::operators {
namespace {

struct TransformerRowStopped {};

}  // namespace

InputRobustness transformer_input_robustness(const RecognisedTransformer& transformer,
                                             const std::vector<double>& graph_x, int y,
                                             const GraphRobustnessOptions& options) {
  const Model& m = transformer.model;
  const Vector<double> x = transformer.model_input(graph_x);
  InputRobustness r;
  r.label = y;
  r.method = RadiusMethod::affine;
  // Exactly input_robustness's steps for RadiusMethod::affine (model/input_robustness.cpp), so that the
  // graph and the safetensors file of one model give the same row.
  detail::centre_margins(m, x, y, r);
  const std::function<void()> poll = [stop = options.stop] {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw TransformerRowStopped{};
  };
  try {
    const ConvertedModel<double> md(m);
    AttackOptions attack_options;
    attack_options.poll = poll;
    const AttackResult a = attack(md, x, y, attack_options);
    r.attack = a.found ? a.radius : std::numeric_limits<double>::infinity();
    if (r.prediction == y && r.margin_lower > 0) {
      const CertifiedRadius c =
          affine_certified_radius(m, x, y, a.found ? a.radius : options.cap, options.tolerance, poll,
                                  r.margin_lower);  // centre_margins' interval64 margin: not computed twice
      r.certified = c.radius;
      r.refuted = c.refuted;
      r.checks = c.checks;
    }
  } catch (const TransformerRowStopped&) {
    // options.stop was set: the row is abandoned (the caller discards it).
  }
  return r;
}

}  // namespace regatta::operators
