#pragma once
// Progress reports of the long loops of the local-regularity routines (local.hpp, region.hpp).
#include <functional>
#include <string_view>

#include <regatta/core/eigen.hpp>

namespace regatta::lip {

/// Reports progress of long loops: `stage` names the loop, `done` of `total` steps are finished. Called at
/// most a few hundred times per loop; may be empty.
using Progress = std::function<void(std::string_view stage, Eigen::Index done, Eigen::Index total)>;

}  // namespace regatta::lip
