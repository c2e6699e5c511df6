#pragma once
// The two constants of the a-priori rounding-error bounds of binary64 arithmetic in round-to-nearest
// (docs/numerics.md): u, the unit roundoff (|fl(x ∘ y) − x ∘ y| ≤ u·|x ∘ y| for a result in the normal
// range), and η, the smallest subnormal (a result rounded in the subnormal range, a product or an fma, errs
// by at most η/2). γ_k = k·u/(1 − k·u) bounds the relative error of a sum or dot product of k terms (Higham,
// Accuracy and Stability, Thm 3.5), k·η its underflow.

namespace regatta {

inline constexpr double unit_roundoff = 0x1.0p-53;
inline constexpr double underflow_unit = 0x1.0p-1074;

}  // namespace regatta
