#pragma once
// Certified, naive-product and attack accuracy of a model against the l2 radius (regatta certify --plot and
// the report's section "Certified robustness of a trained ViT").
#include <vector>

#include <regatta/operators/model_robustness.hpp>
#include "figure.hpp"

namespace regatta::cli::report {

/// The three accuracies as exact step functions of r: a vertical step at every per-input radius (the only
/// places where a curve can change), the value for r <= b then for r > b; certified values rounded down.
/// Id "certified_accuracy".
Figure accuracy_figure(const std::vector<operators::InputRobustness>& rows);

}  // namespace regatta::cli::report
