#pragma once
// The search for the largest certified radius shared by the model path (affine_certified_radius,
// model/affine/margin.cpp) and the graph path (graph_certified_radius, model/graph_radius.cpp):
// docs/models.md#certifying-an-onnx-graph. Internal header of operators/src/model/.
#include <functional>

#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// The largest radius r in (0, upper] with margin(r) > 0 that the search tested, within a factor
/// 1 + tolerance of the smallest failing radius tried (CertifiedRadius::refuted; `upper` when the search
/// ended there). `margin(r)` is a CERTIFIED lower bound L(r) of the margin over the set of radius r, and
/// `at_centre` = L(0) > 0. Only the radius returned is certified: it passed its own test; every other test
/// only steered the search. `stopped` (may be empty) ends the search early; a test run while it was set
/// counts neither way. `checks` counts the tests.
CertifiedRadius search_certified_radius(const std::function<double(double)>& margin, double at_centre,
                                        double upper, double tolerance,
                                        const std::function<bool()>& stopped = {});

}  // namespace regatta::operators
