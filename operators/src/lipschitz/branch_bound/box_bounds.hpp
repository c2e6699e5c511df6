#pragma once
// Internal to the branch and bound (branch_bound.cpp, bounding.cpp, checkpoint.cpp): the best-first order of
// the frontier's boxes and the certified bounds of the induced norm over an interval Jacobian.
#include <regatta/core/interval64.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>

namespace regatta::lip::detail {

/// The best-first order: larger upper first, then older boxes first (a strict total order, so the pop
/// order does not depend on the heap's layout).
inline bool heap_less(const BnbBox& a, const BnbBox& b) {
  if (a.upper != b.upper) return a.upper < b.upper;
  return a.id > b.id;
}

/// Certified upper bound on the induced norm of every matrix in J (+inf for a non-finite entry).
double norm_upper(const Matrix<interval64>& J, Norm norm);
/// Certified lower bound on the induced norm of every matrix in J (a point enclosure: of J itself).
double norm_lower(const Matrix<interval64>& J, Norm norm);

}  // namespace regatta::lip::detail
