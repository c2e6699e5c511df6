#pragma once
// Linear maps of affine forms (linear.cpp): they act on the symbols exactly, so only the binary64 rounding
// of the new coefficients enters the slack (docs/numerics.md#affine-forms-operatorsmodel_affinehpp).
#include <vector>

#include <regatta/operators/layer.hpp>

#include "form.hpp"

namespace regatta::operators::affine {

/// One affine map y = x·W + b of a token's features (b empty: 0).
struct Map {
  const Matrix<double>* W;
  Vector<double> b;
};

/// Rows of n tokens × din features mapped by y = x·W_k + b_k per token, for several maps of the same rows at
/// once: one form per map. `fresh`: room in each form for that many symbols a caller adds next.
std::vector<Form> linear_parts(const Form& F, Index n, const std::vector<Map>& maps, const Pass& p,
                               Index fresh = 0);
/// Rows of n tokens × W.rows() features mapped by y = x·W + b per token.
Form linear_rows(const Form& F, Index n, const Matrix<double>& W, const Vector<double>& b, const Pass& p,
                 Index fresh = 0);
/// out_g = Σ_{e ∈ groups[g]} F_e.
Form sum_groups(const Form& F, const std::vector<std::vector<Index>>& groups, const Pass& p);
/// F (rows × d_h) rotated as the tokens `positions` when the layer has rotary embeddings, else F.
Form rotated(Form F, const std::vector<Index>& positions, const AttentionLayer& L, const Pass& p);
/// The same for the rows 0..n−1 (keys: every token of the context).
Form rotated(Form F, Index n, const AttentionLayer& L, const Pass& p);
/// b[h], or an empty vector when b is empty.
Vector<double> bias_or_empty(const std::vector<Vector<double>>& b, std::size_t h);
/// The rows `rows` of n tokens × d features (row-major entries).
Form keep_tokens(const Form& X, const std::vector<Index>& rows, Index d);

}  // namespace regatta::operators::affine
