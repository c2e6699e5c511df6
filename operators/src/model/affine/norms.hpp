#pragma once
// Row-wise LayerNorm and RMSNorm of affine forms (norms.cpp), and the linear maps that read a norm's output.
#include <vector>

#include <regatta/operators/model.hpp>

#include "form.hpp"
#include "linear.hpp"

namespace regatta::operators::affine {

/// X minus the mean of its row (n rows × d features), linear in the symbols.
Form centred_rows(const Form& X, Index n, Index d, const Pass& p);
/// Row-wise LayerNorm of n rows × d features with γ, β (empty: 1, 0) and ε.
Form layer_norm(const Form& X, Index n, Index d, const Vector<double>& gamma, const Vector<double>& beta,
                double eps, const Pass& p);
/// Row-wise RMSNorm of n rows × d features: γ ⊙ x/√(‖x‖²/d + ε) (γ empty: 1).
Form rms_norm(const Form& X, Index n, Index d, const Vector<double>& gamma, double eps, const Pass& p);
/// The norm of kind `kind` (LayerNorm with β, or RMSNorm) of n rows × d features.
Form norm_rows(const Form& X, Index n, Index d, Prenorm kind, const Vector<double>& gamma,
               const Vector<double>& beta, double eps, const Pass& p);

/// What a linear map reads: the rows of a form, or a row-wise norm's output γ ⊙ z·r + β (z the centred or raw
/// rows, r = 1/√(mean z² + ε) per row) kept as three forms: `linear` = γ ⊙ (c_z·r + c_r·z − c_z·c_r) + β, its
/// part linear in the symbols; `scaled` = γ ⊙ (z − c_z), centred at exactly 0; `root` = r. What `linear`
/// leaves out is the product remainder γ_f (z_f − c_z)(r − c_r). A linear map W applied next (project) bounds
/// Σ_f W_fo γ_f (z_f − c_z)(r − c_r) for each output o as one deviation product, of entry o of (γ ⊙ (z −
/// c_z))·W and r, so the cancellations of the sum over f are kept; the product as one fresh symbol per entry,
/// mapped by W, pays Σ_f |W_fo|·(remainder of entry f) instead.
struct Rows {
  Form linear, scaled, root;
};

/// The pre-norm of kind `kind` of n rows × d features, kept as Rows.
Rows normed_rows(const Form& X, Index n, Index d, Prenorm kind, const Vector<double>& gamma,
                 const Vector<double>& beta, double eps, const Pass& p);
/// y = x·W_k + b_k per token for the normed rows H of n tokens, one form per map, with one fresh symbol per
/// output for the norm's product remainder.
std::vector<Form> project_parts(const Rows& H, Index n, const std::vector<Map>& maps, const Pass& p);
/// The same for one map.
Form project(const Rows& H, Index n, const Matrix<double>& W, const Vector<double>& b, const Pass& p);
/// The norm's output as one form: `linear` plus, per entry, the product remainder as a fresh symbol.
Form materialise(const Rows& H, Index d, const Pass& p);

}  // namespace regatta::operators::affine
