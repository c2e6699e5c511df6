#pragma once
// Multi-head dot-product attention on affine forms (attention.cpp).
#include <vector>

#include <regatta/operators/model.hpp>

#include "form.hpp"

namespace regatta::operators::affine {

/// (X + MHA(N(X))) at the query tokens `queries` (N the pre-norm or the identity; keys and values from all
/// n tokens).
Form attention_block(const Form& X, Index n, const std::vector<Index>& queries, const AttentionLayer& L,
                     Prenorm prenorm, bool causal, const Pass& p);

}  // namespace regatta::operators::affine
