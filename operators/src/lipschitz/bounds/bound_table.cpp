// The table of theoretical bounds (bound_table.hpp): one row per bound, with its refusal rule, note and
// formula; the mathematics is in docs/math/bounds.md and docs/bounds.md.
#include "bound_table.hpp"

#include <array>
#include <sstream>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>

namespace regatta::lip::detail {

namespace {

using operators::AttentionKind;
using operators::Prenorm;

// ---- refusal rules (most fundamental reason first) ----

std::optional<std::string> applies_always(const BoundContext&) { return std::nullopt; }

std::optional<std::string> prenorm_reason(const BoundContext& c, Prenorm wanted) {
  if (c.options.prenorm == wanted) return std::nullopt;
  return wanted == Prenorm::layernorm ? "the layer has no LayerNorm pre-norm (--prenorm layernorm)"
                                      : "the layer has no RMSNorm pre-norm (--prenorm rmsnorm)";
}
std::optional<std::string> needs_layernorm(const BoundContext& c) {
  return prenorm_reason(c, Prenorm::layernorm);
}
std::optional<std::string> needs_rmsnorm(const BoundContext& c) {
  return prenorm_reason(c, Prenorm::rmsnorm);
}

/// Every attention bound: plain softmax attention without rotary position embeddings (no published bound
/// has the position-dependent rotation of queries and keys in its scores).
std::optional<std::string> attention_reason(const BoundContext& c) {
  if (c.options.sinkhorn_iterations != 1)
    return "Sinkhorn attention (--sinkhorn > 1) is outside the hypotheses of every attention bound";
  if (c.layer.rotary)
    return "rotary position embeddings (--rope) rotate queries and keys by their position: outside the "
           "hypotheses of every published attention bound";
  return std::nullopt;
}

/// Kim et al.'s Theorem 3.2: tied L2 attention, diagonal kept, n ≥ 2.
std::optional<std::string> kim_reason(const BoundContext& c) {
  if (auto r = attention_reason(c)) return r;
  if (c.layer.kind != AttentionKind::l2)
    return "dot-product layer: Theorem 3.2 covers tied L2 attention only (dot-product attention is not "
           "globally Lipschitz, kim.thm31_dp_unbounded)";
  if (!c.layer.tied())
    return "untied L2 layer (W^K != W^Q or different query/key biases): outside Theorem 3.2, and not "
           "Lipschitz (kim.l2_necessity_untied)";
  if (c.setting.diagonal_masked)
    return "a mask hides the diagonal: outside Theorem 3.2, and not Lipschitz "
           "(kim.l2_necessity_masked_diag)";
  if (!c.setting.n) return "needs the sequence length n (--n)";
  if (*c.setting.n < 2) return "needs n >= 2 (hypothesis of Theorem 3.2)";
  return std::nullopt;
}

bool has_query_bias(const operators::AttentionLayer& layer) {
  for (const auto& b : layer.bQ)
    if ((b.array() != 0).any()) return true;
  return false;
}

/// Dot-product scores xᵀAy with values Vy (Castin et al., measure level); `measure`: no mask allowed.
std::optional<std::string> dot_reason(const BoundContext& c, bool measure) {
  if (auto r = attention_reason(c)) return r;
  if (c.layer.kind != AttentionKind::dot)
    return "L2 layer: this bound is for dot-product scores x^T A y with values V y (see kim.*)";
  if (has_query_bias(c.layer))
    return "the query bias adds a key-dependent term to the scores (docs/math/attention.md#dot-score): "
           "outside the "
           "hypotheses";
  if (measure && (c.options.causal || c.setting.diagonal_masked))
    return "masked mean field: no established constant (docs/math/bounds.md#mean-field-consequences)";
  return std::nullopt;
}

std::optional<std::string> radius_reason(const BoundContext& c) {
  if (c.options.prenorm == Prenorm::none && !c.setting.radius)
    return "needs a radius R (--radius) or a pre-norm: dot-product attention is not globally Lipschitz "
           "(kim.thm31_dp_unbounded)";
  return std::nullopt;
}

std::optional<std::string> castin_sqrt_n_reason(const BoundContext& c) {
  if (auto r = dot_reason(c, false)) {
    if (!attention_reason(c) && c.layer.kind == AttentionKind::dot && has_query_bias(c.layer))
      return *r + " (castin.sqrt_n_augmented covers biased layers)";
    return r;
  }
  if (!c.setting.n) return "needs the sequence length n (--n)";
  return radius_reason(c);
}

/// The augmented castin.sqrt_n (docs/bounds.md#augmented-castin): dot-product with a query bias.
std::optional<std::string> castin_augmented_reason(const BoundContext& c) {
  if (auto r = attention_reason(c)) return r;
  if (c.layer.kind != AttentionKind::dot)
    return "L2 layer: this bound is for dot-product scores x^T A y with values V y (see kim.*)";
  if (!has_query_bias(c.layer))
    return "no query bias: castin.sqrt_n applies and is tighter (the augmented form is castin.sqrt_n at "
           "radius sqrt(R^2 + t^2))";
  if (!c.setting.n) return "needs the sequence length n (--n)";
  return radius_reason(c);
}

std::optional<std::string> castin_local_reason(const BoundContext& c) {
  if (auto r = dot_reason(c, false)) return r;
  if (c.setting.input.size() == 0) return "needs an input X (--input)";
  return std::nullopt;
}

std::optional<std::string> measure_reason(const BoundContext& c) {
  if (auto r = dot_reason(c, true)) return r;
  return radius_reason(c);
}

std::optional<std::string> mf_depth_reason(const BoundContext& c) {
  if (auto r = measure_reason(c)) return r;
  if (c.setting.depth < 2) return "needs a stack depth L >= 2 (--depth)";
  return std::nullopt;
}

// ---- notes ----

std::string radius_text(const BoundContext& c) {
  if (c.options.prenorm != Prenorm::none)
    return "R = " + nearest_decimal(prenorm_radius<double>(c.layer, c.options.prenorm)) +
           " (fixed by the pre-norm)";
  return c.setting.radius ? "R = " + nearest_decimal(*c.setting.radius) : std::string();
}

std::string no_note(const BoundContext&) { return ""; }
std::string norm_note(const BoundContext& c) {
  return "d = " + std::to_string(c.layer.d) + ", eps = " + nearest_decimal(c.layer.norm_eps);
}
std::string kim_note(const BoundContext& c) {
  return "n = " + std::to_string(*c.setting.n) +
         ", Lambda_n = " + nearest_decimal(kim_lambda<double>(*c.setting.n)) +
         ", d_h = " + std::to_string(c.layer.head_dim);
}
std::string castin_sqrt_n_note(const BoundContext& c) {
  return "n = " + std::to_string(*c.setting.n) + ", " + radius_text(c);
}
std::string castin_augmented_note(const BoundContext& c) {
  return castin_sqrt_n_note(c) +
         ", augmented tokens (x, t_h) in the ball of radius sqrt(R^2 + t_h^2), t_h = 2^k per head (|k| <= 8)";
}
std::string castin_local_note(const BoundContext& c) {
  return "at the input, n = " + std::to_string(c.setting.input.rows()) +
         (c.options.prenorm != Prenorm::none ? ", evaluated at N(X)" : "");
}
std::string radius_note(const BoundContext& c) { return radius_text(c); }
std::string mf_context_note(const BoundContext& c) {
  if (c.options.prenorm != Prenorm::none) return radius_text(c);
  const double rq =
      c.setting.query_radius ? *c.setting.query_radius : (c.setting.radius ? *c.setting.radius : 0);
  return radius_text(c) + ", R' = " + nearest_decimal(rq);
}
std::string mf_depth_note(const BoundContext& c) {
  return "L = " + std::to_string(c.setting.depth) + ", " + radius_text(c);
}

#define REGATTA_KIM_HYPOTHESES                                                                               \
  "tied L2 attention (W^K_h = W^Q_h, shared query/key bias), value map X A_h W^V_h, softmax (no Sinkhorn), " \
  "diagonal never masked (the causal mask keeps it: kim.causal_l2), n >= 2"
#define REGATTA_DOT_HYPOTHESES                                                                       \
  "dot-product softmax attention without query bias (key bias cancels; value and output biases are " \
  "constants)"

// ---- the table ----

constexpr std::array rows{
    BoundRow{Bound::softmax_half, "softmax.half", "softmax, row-wise", "2 and inf", "derived",
             "none: every probability vector (equality at p = (1/2, 1/2, 0, ...))",
             "docs/math/bounds.md#softmax-half; all l_p norms published in arXiv:2510.23012", Covers::both,
             false, applies_always, no_note, [](auto& e) { return e.half(); }},
    BoundRow{Bound::layernorm_two, "layernorm.lip2", "LayerNorm pre-norm: max|gamma|/sqrt(eps)", "2",
             "derived", "LayerNorm pre-norm with eps > 0; equality for constant gamma and d >= 2",
             "docs/math/bounds.md#layernorm", Covers::two, false, needs_layernorm, norm_note,
             [](auto& e) { return e.prenorm_lipschitz(Norm::two); }},
    BoundRow{
        Bound::layernorm_inf, "layernorm.lipinf_sqrt_d", "LayerNorm pre-norm: sqrt(d) max|gamma|/sqrt(eps)",
        "inf", "derived",
        "LayerNorm pre-norm with eps > 0; the true constant lies in [2(d-1)/d, sqrt(d)] max|gamma|/sqrt(eps)",
        "docs/math/bounds.md#layernorm", Covers::inf, false, needs_layernorm, norm_note,
        [](auto& e) { return e.prenorm_lipschitz(Norm::inf); }},
    BoundRow{Bound::rmsnorm_two, "rmsnorm.lip2", "RMSNorm pre-norm: max|gamma|/sqrt(eps) (exact)", "2",
             "derived", "RMSNorm pre-norm with eps > 0; attained at x = 0", "docs/math/bounds.md#rmsnorm",
             Covers::two, false, needs_rmsnorm, norm_note,
             [](auto& e) { return e.prenorm_lipschitz(Norm::two); }},
    BoundRow{Bound::rmsnorm_inf, "rmsnorm.lipinf_sqrt_d", "RMSNorm pre-norm: sqrt(d) max|gamma|/sqrt(eps)",
             "inf", "derived",
             "RMSNorm pre-norm with eps > 0; the true constant lies in [1, sqrt(d)] max|gamma|/sqrt(eps)",
             "docs/math/bounds.md#rmsnorm", Covers::inf, false, needs_rmsnorm, norm_note,
             [](auto& e) { return e.prenorm_lipschitz(Norm::inf); }},
    BoundRow{Bound::kim_inf, "kim.thm32_inf", "L2 multi-head attention (Kim et al. 2021, Thm 3.2), inf-norm",
             "inf", "derived", REGATTA_KIM_HYPOTHESES,
             "docs/math/bounds.md#kim-thm32; coincides with the commonly quoted form of Kim et al. 2021, Thm "
             "3.2 (quoted, "
             "unverified)",
             Covers::inf, true, kim_reason, kim_note, [](auto& e) { return e.kim_inf(); }},
    BoundRow{Bound::kim_two, "kim.thm32_2",
             "L2 multi-head attention (Kim et al. 2021, Thm 3.2), 2-norm, scaling-consistent form", "2",
             "derived", REGATTA_KIM_HYPOTHESES,
             "docs/math/bounds.md#kim-thm32; the commonly quoted form with ||W^Q_h||^2 is refuted "
             "(kim.thm32_2_quoted) and "
             "never offered",
             Covers::two, true, kim_reason, kim_note,
             [](auto& e) { return e.compose(e.kim_two(4), Norm::two); }},
    BoundRow{Bound::castin_sqrt_n, "castin.sqrt_n", "dot-product attention on B_R^n (sqrt(n) bound)", "2",
             "derived", REGATTA_DOT_HYPOTHESES ", every token in B_R (or a pre-norm); masks allowed",
             "docs/math/bounds.md#castin-sqrt-n; constant coincides with Castin, Ablin, Peyre 2024 as "
             "recalled (quoted)",
             Covers::two, true, castin_sqrt_n_reason, castin_sqrt_n_note,
             [](auto& e) { return e.castin_sqrt_n(); }},
    BoundRow{Bound::castin_sqrt_n_augmented, "castin.sqrt_n_augmented",
             "dot-product attention with biases on B_R^n (sqrt(n) bound on the augmented tokens (x, t))", "2",
             "derived",
             "dot-product softmax attention with a query bias (any key, value and output biases), every "
             "token in B_R (or a pre-norm); masks allowed; c_h = W^K_h b_Q,h / sqrt(d_h)",
             "docs/bounds.md#augmented-castin (castin.sqrt_n, docs/math/bounds.md#castin-sqrt-n, "
             "on the augmented tokens)",
             Covers::two, true, castin_augmented_reason, castin_augmented_note,
             [](auto& e) { return e.castin_sqrt_n_augmented(); }},
    BoundRow{Bound::castin_local, "castin.local",
             "dot-product attention: bound on ||DF(X)||_2 at the input X", "2", "derived",
             REGATTA_DOT_HYPOTHESES "; a bound at the given input only, not a Lipschitz constant over a set; "
                                    "masks allowed",
             "docs/math/bounds.md#castin-local; the authors' code form is a claim under test, never offered",
             Covers::two, false, castin_local_reason, castin_local_note,
             [](auto& e) { return e.castin_local(false); }},
    BoundRow{Bound::mf_query, "mf.query_lipschitz",
             "measure attention, Lipschitz in the query measure (Theorem A)", "W_p", "derived",
             REGATTA_DOT_HYPOTHESES ", context measure in P(B_R), queries unbounded, no mask",
             "docs/math/bounds.md#mf-theorem-a", Covers::two, false, measure_reason, radius_note,
             [](auto& e) { return e.mf_query(); }},
    BoundRow{
        Bound::mf_context, "mf.context_lipschitz",
        "measure attention, Lipschitz in the context measure (Theorem B)", "W_1 -> sup_x", "derived",
        REGATTA_DOT_HYPOTHESES
        ", context measures in P(B_R), queries in B_R' (default R' = R), no mask; bounds sup over queries "
        "of |Gamma_mu(x) - Gamma_nu(x)| per unit W_1(mu, nu), hence also the W_p distance of the "
        "cross-attention outputs",
        "docs/math/bounds.md#mf-theorem-b", Covers::two, false, measure_reason, mf_context_note,
        [](auto& e) { return e.mf_context(); }},
    BoundRow{Bound::mf_self, "mf.self_lipschitz", "mean-field self-attention (Theorem C)", "W_p", "derived",
             REGATTA_DOT_HYPOTHESES ", measures in P(B_R), no mask",
             "docs/math/bounds.md#mf-theorem-c; constant coincides with Castin et al.'s mean-field bound as "
             "recalled "
             "(quoted)",
             Covers::two, false, measure_reason, radius_note,
             [](auto& e) { return e.compose(e.mf_self_attention(e.attention_radius()), Norm::two); }},
    BoundRow{Bound::mf_depth, "mf.depth",
             "weight-shared stack of L layers, mean field (product of Theorem C constants)", "W_p", "derived",
             REGATTA_DOT_HYPOTHESES ", input measures in P(B_R), no mask, radii propagated layer by layer",
             "docs/math/bounds.md#mean-field-consequences", Covers::two, false, mf_depth_reason,
             mf_depth_note, [](auto& e) { return e.mf_depth(); }},
};

#undef REGATTA_KIM_HYPOTHESES
#undef REGATTA_DOT_HYPOTHESES

// ---- compile-time completeness ----

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (static_cast<std::size_t>(rows[i].bound) != i) return false;
  return true;
}
constexpr bool ids_distinct() {
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = i + 1; j < rows.size(); ++j)
      if (rows[i].id == rows[j].id) return false;
  return true;
}
constexpr bool rows_filled() {
  for (const BoundRow& r : rows)
    if (r.id.empty() || r.name.empty() || r.norm.empty() || r.hypotheses.empty() ||
        r.source.find("bounds.md") == std::string_view::npos || r.provenance != "derived" || !r.refusal ||
        !r.note || !r.formula.complete())
      return false;
  return true;
}
static_assert(rows.size() == static_cast<std::size_t>(Bound::count), "one row per enumerator of Bound");
static_assert(rows_in_enum_order(), "rows in the order of enum Bound (row(bound) indexes by the enumerator)");
static_assert(ids_distinct(), "every row has its own claim ID");
static_assert(rows_filled(),
              "every row: ID, name, norm, hypotheses, a bounds.md source, derived, rules, formula");

}  // namespace

std::span<const BoundRow> bound_rows() { return rows; }

const BoundRow& row(Bound bound) { return rows[static_cast<std::size_t>(bound)]; }

bool covers(const BoundRow& r, Norm norm) {
  return r.covers == Covers::both || (r.covers == Covers::two) == (norm == Norm::two);
}

}  // namespace regatta::lip::detail
