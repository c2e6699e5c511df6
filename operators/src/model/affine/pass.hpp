#pragma once
// The forward pass of a whole Model on affine forms over the ball (pass.cpp): the driver of the transfer
// functions, up to the pooled row and the logits.
#include <regatta/operators/model.hpp>

#include "form.hpp"

namespace regatta::operators::affine {

/// The product remainder of the last block's LN₂ on the pooled row, carried to the margin (normed_margin)
/// instead of one symbol per fc1 output: fc1's output o is h_o + ρ_o with ρ_o = Zw_o·(r − c_r) (Zw = the row
/// of (γ ⊙ (z − c_z))·W₁, centred at 0; r the root; project's deviation product), the activation's tangent
/// slope l_o multiplies it, and fc2 adds Σ_o W₂_of·l_o·ρ_o to feature f of the row. A functional λ of the row
/// then meets (r − c_r)·Σ_o w_o Zw_o with w_o = l_o·(W₂λ)_o: one deviation product, so the cancellations of
/// the sum over the fc1 outputs are kept; ρ_o's range (|ρ_o| ≤ mag ρ_o) enters the activation's range and
/// the row's.
struct Deferred {
  Form Zw, root;
  Vector<double> slope;  ///< l_o
  Vector<double> rho;    ///< mag ρ_o (upper bounds)
  Matrix<double> W;      ///< W₂ (mlp × width)
  bool present() const { return Zw.size() != 0; }
};

/// The pooled row's form over the ball x + r·ε (what the final norm, the pooler and the head read).
/// `deferred`: for the last block, LN₂'s product remainder is left out and described there instead.
Form pooled_form(const Model& m, const Vector<double>& x, double r, const Pass& p,
                 Deferred* deferred = nullptr);
/// The logits' forms from the pooled row's.
Form logits_form(const Model& m, Form X, const Pass& p);

}  // namespace regatta::operators::affine
