#pragma once
// Section 7 of `regatta report`: attention dynamics and clustering (section_flow.cpp). Declared apart from
// sections.hpp so that adding it recompiles only the runner.
#include "context.hpp"
#include "document.hpp"

namespace regatta::cli::report {

/// 7. Attention dynamics: the sphere model at β = 1 (one cluster) and β = 9 (metastable plateaus).
Section section_flow(const Context& ctx);

}  // namespace regatta::cli::report
