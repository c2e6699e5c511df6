#pragma once
// Elementwise nonlinearities of affine forms (nonlinear.cpp): f(v) is replaced by λ·v + μ plus a remainder
// bounded over the entry's range (Lagrange form with an interval enclosure of f″, or the chord for the
// convex exp, 1/x, 1/√x), which becomes one fresh symbol per entry (docs/models.md).
#include <vector>

#include "form.hpp"

namespace regatta::operators::affine {

enum class Function { exp, reciprocal, rsqrt, gelu_erf, gelu_tanh, tanh, relu, silu, erf, sqrt };

/// f(x) entrywise by the tangent at the centre p plus the Lagrange remainder over the range J (the range
/// intersected with the domain: (0, ∞) for 1/x, [floor, ∞) for 1/√x and √x); exp, 1/x and 1/√x by their
/// chord, √x by the chord of the convex −√x. f(v) ∈ λ·v + M + β·[−1, 1] for every v in the range of each
/// entry of a form (nonlinear below).
struct Linearisation {
  std::vector<I> lambda, M;
  Vector<double> beta;
};

/// The affine enclosure λ·v + M + β·[−1, 1] of f over the range of each entry of F (the range intersected
/// with the domain: (0, ∞) for 1/x, [floor, ∞) for 1/√x). `within` (when given): per entry, an interval the
/// range is intersected with first (a branch's constraint on that entry, docs/verify.md#general-splits); the
/// enclosure then holds only for the values of the entry inside it. An empty intersection: Vacuous.
Linearisation linearise(const Form& F, Function f, const Pass& p, double floor = 0,
                        const std::vector<I>* within = nullptr);
/// y = f(x) entrywise: linearise, then one fresh symbol per entry for the remainder. `own` (when given): per
/// entry, a column that no other entry nor any later step reads (−1: none), which absorbs the remainder.
Form nonlinear(const Form& F, Function f, const Pass& p, double floor = 0,
               const std::vector<Index>* own = nullptr);

}  // namespace regatta::operators::affine
