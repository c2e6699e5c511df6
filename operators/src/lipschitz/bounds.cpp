// The catalogue of theoretical bounds: descriptions, hypotheses (refusals), evaluation in a scalar type, and
// the list of every bound for one configuration (see bounds.hpp; mathematics in shared/math/bounds.md).
#include <regatta/operators/lipschitz/bounds.hpp>

#include <array>
#include <cmath>
#include <sstream>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include "bound_evaluator.hpp"
#include "matrix_norms.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

constexpr std::array<Bound, 13> bound_order{
    Bound::softmax_half, Bound::layernorm_two, Bound::layernorm_inf, Bound::rmsnorm_two,  Bound::rmsnorm_inf,
    Bound::kim_inf,      Bound::kim_two,       Bound::castin_sqrt_n, Bound::castin_local, Bound::mf_query,
    Bound::mf_context,   Bound::mf_self,       Bound::mf_depth};

/// Largest n accepted: every integer up to 2^53 is exact in binary64.
constexpr std::int64_t max_n = std::int64_t(1) << 53;
constexpr int max_depth = 1000000;

const std::string kim_hypotheses =
    "tied L2 attention (W^K_h = W^Q_h, shared query/key bias), value map X A_h W^V_h, softmax (no Sinkhorn), "
    "diagonal never masked (the causal mask keeps it: kim.causal_l2), n >= 2";
const std::string dot_hypotheses =
    "dot-product softmax attention without query bias (key bias cancels; value "
    "and output biases are constants)";

const std::array<BoundInfo, 13> infos{{
    {"softmax.half", "softmax, row-wise", "2 and inf", "derived",
     "none: every probability vector (equality at p = (1/2, 1/2, 0, ...))",
     "bounds.md §1.2; all l_p norms published in arXiv:2510.23012"},
    {"layernorm.lip2", "LayerNorm pre-norm: max|gamma|/sqrt(eps)", "2", "derived",
     "LayerNorm pre-norm with eps > 0; equality for constant gamma and d >= 2", "bounds.md §1.3"},
    {"layernorm.lipinf_sqrt_d", "LayerNorm pre-norm: sqrt(d) max|gamma|/sqrt(eps)", "inf", "derived",
     "LayerNorm pre-norm with eps > 0; the true constant lies in [2(d-1)/d, sqrt(d)] max|gamma|/sqrt(eps)",
     "bounds.md §1.3"},
    {"rmsnorm.lip2", "RMSNorm pre-norm: max|gamma|/sqrt(eps) (exact)", "2", "derived",
     "RMSNorm pre-norm with eps > 0; attained at x = 0", "bounds.md §1.4"},
    {"rmsnorm.lipinf_sqrt_d", "RMSNorm pre-norm: sqrt(d) max|gamma|/sqrt(eps)", "inf", "derived",
     "RMSNorm pre-norm with eps > 0; the true constant lies in [1, sqrt(d)] max|gamma|/sqrt(eps)",
     "bounds.md §1.4"},
    {"kim.thm32_inf", "L2 multi-head attention (Kim et al. 2021, Thm 3.2), inf-norm", "inf", "derived",
     kim_hypotheses,
     "bounds.md §3.5; coincides with the commonly quoted form of Kim et al. 2021, Thm 3.2 (quoted, "
     "unverified)"},
    {"kim.thm32_2", "L2 multi-head attention (Kim et al. 2021, Thm 3.2), 2-norm, scaling-consistent form",
     "2", "derived", kim_hypotheses,
     "bounds.md §3.5; the commonly quoted form with ||W^Q_h||^2 is refuted (kim.thm32_2_quoted) and never "
     "offered"},
    {"castin.sqrt_n", "dot-product attention on B_R^n (sqrt(n) bound)", "2", "derived",
     dot_hypotheses + ", every token in B_R (or a pre-norm); masks allowed",
     "bounds.md §4.1; constant coincides with Castin, Ablin, Peyre 2024 as recalled (quoted)"},
    {"castin.local", "dot-product attention: bound on ||DF(X)||_2 at the input X", "2", "derived",
     dot_hypotheses + "; a bound at the given input only, not a Lipschitz constant over a set; masks allowed",
     "bounds.md §4.2; the authors' code form is a claim under test, never offered"},
    {"mf.query_lipschitz", "measure attention, Lipschitz in the query measure (Theorem A)", "W_p", "derived",
     dot_hypotheses + ", context measure in P(B_R), queries unbounded, no mask", "bounds.md §5, Theorem A"},
    {"mf.context_lipschitz", "measure attention, Lipschitz in the context measure (Theorem B)",
     "W_1 -> sup_x", "derived",
     dot_hypotheses +
         ", context measures in P(B_R), queries in B_R' (default R' = R), no mask; bounds "
         "sup over queries of |Gamma_mu(x) - Gamma_nu(x)| per unit W_1(mu, nu), hence also the W_p "
         "distance of the cross-attention outputs",
     "bounds.md §5, Theorem B"},
    {"mf.self_lipschitz", "mean-field self-attention (Theorem C)", "W_p", "derived",
     dot_hypotheses + ", measures in P(B_R), no mask",
     "bounds.md §5, Theorem C; constant coincides with Castin et al.'s mean-field bound as recalled "
     "(quoted)"},
    {"mf.depth", "weight-shared stack of L layers, mean field (product of Theorem C constants)", "W_p",
     "derived", dot_hypotheses + ", input measures in P(B_R), no mask, radii propagated layer by layer",
     "bounds.md §5.1"},
}};

std::size_t index_of(Bound bound) { return static_cast<std::size_t>(bound); }

bool has_query_bias(const AttentionLayer& layer) {
  for (const auto& b : layer.bQ)
    if ((b.array() != 0).any()) return true;
  return false;
}

/// The norms a bound covers: 2 (W_p counts as Euclidean), inf, or both.
bool covers(Bound bound, Norm norm) {
  switch (bound) {
    case Bound::softmax_half:
      return true;
    case Bound::layernorm_inf:
    case Bound::rmsnorm_inf:
    case Bound::kim_inf:
      return norm == Norm::inf;
    default:
      return norm == Norm::two;
  }
}

void validate(const AttentionLayer& layer, const AttentionOptions& options, const BoundSetting& setting) {
  layer.validate();
  if (options.sinkhorn_iterations < 1) throw InputError("sinkhorn_iterations", "must be >= 1");
  if (setting.n && (*setting.n < 1 || *setting.n > max_n))
    throw InputError("n", "must be between 1 and 2^53, got " + std::to_string(*setting.n));
  if (setting.radius) check_positive("radius", *setting.radius);
  if (setting.query_radius) check_positive("query_radius", *setting.query_radius);
  if (setting.depth < 1 || setting.depth > max_depth)
    throw InputError("depth", "must be between 1 and " + std::to_string(max_depth) + ", got " +
                                  std::to_string(setting.depth));
  if (setting.input.size() != 0) {
    check_cols("input", setting.input.cols(), layer.d);
    check_finite("input", setting.input);
    if (setting.n && *setting.n != setting.input.rows())
      throw InputError("n", "is " + std::to_string(*setting.n) + " but the input has " +
                                std::to_string(setting.input.rows()) + " tokens");
  }
}

std::optional<std::string> prenorm_reason(const AttentionOptions& options, Prenorm wanted) {
  if (options.prenorm == wanted) return std::nullopt;
  return wanted == Prenorm::layernorm ? "the layer has no LayerNorm pre-norm (--prenorm layernorm)"
                                      : "the layer has no RMSNorm pre-norm (--prenorm rmsnorm)";
}

/// Refusal reasons of the attention bounds, most fundamental first.
std::optional<std::string> refusal_unchecked(Bound bound, const AttentionLayer& layer,
                                             const AttentionOptions& options, const BoundSetting& setting) {
  const bool prenorm = options.prenorm != Prenorm::none;
  switch (bound) {
    case Bound::softmax_half:
      return std::nullopt;
    case Bound::layernorm_two:
    case Bound::layernorm_inf:
      return prenorm_reason(options, Prenorm::layernorm);
    case Bound::rmsnorm_two:
    case Bound::rmsnorm_inf:
      return prenorm_reason(options, Prenorm::rmsnorm);
    default:
      break;
  }
  if (options.sinkhorn_iterations != 1)
    return "Sinkhorn attention (--sinkhorn > 1) is outside the hypotheses of every attention bound";

  if (bound == Bound::kim_inf || bound == Bound::kim_two) {
    if (layer.kind != AttentionKind::l2)
      return "dot-product layer: Theorem 3.2 covers tied L2 attention only (dot-product attention is not "
             "globally Lipschitz, kim.thm31_dp_unbounded)";
    if (!layer.tied())
      return "untied L2 layer (W^K != W^Q or different query/key biases): outside Theorem 3.2, and not "
             "Lipschitz (kim.l2_necessity_untied)";
    if (setting.diagonal_masked)
      return "a mask hides the diagonal: outside Theorem 3.2, and not Lipschitz "
             "(kim.l2_necessity_masked_diag)";
    if (!setting.n) return "needs the sequence length n (--n)";
    if (*setting.n < 2) return "needs n >= 2 (hypothesis of Theorem 3.2)";
    return std::nullopt;
  }

  // Dot-product bounds (Castin et al., measure level).
  if (layer.kind != AttentionKind::dot)
    return "L2 layer: this bound is for dot-product scores x^T A y with values V y (see kim.*)";
  if (has_query_bias(layer))
    return "the query bias adds a key-dependent term to the scores (attention.md §1.2): outside the "
           "hypotheses";
  const bool measure = bound == Bound::mf_query || bound == Bound::mf_context || bound == Bound::mf_self ||
                       bound == Bound::mf_depth;
  if (measure && (options.causal || setting.diagonal_masked))
    return "masked mean field: no established constant (bounds.md §5.1)";
  if (bound == Bound::castin_local) {
    if (setting.input.size() == 0) return "needs an input X (--input)";
    return std::nullopt;
  }
  if (bound == Bound::castin_sqrt_n && !setting.n) return "needs the sequence length n (--n)";
  if (!prenorm && !setting.radius)
    return "needs a radius R (--radius) or a pre-norm: dot-product attention is not globally Lipschitz "
           "(kim.thm31_dp_unbounded)";
  if (bound == Bound::mf_depth && setting.depth < 2) return "needs a stack depth L >= 2 (--depth)";
  return std::nullopt;
}

std::string format(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

/// The parameters a bound was evaluated with, for the report.
std::string note_for(Bound bound, const AttentionLayer& layer, const AttentionOptions& options,
                     const BoundSetting& setting) {
  const bool prenorm = options.prenorm != Prenorm::none;
  const std::string radius =
      prenorm ? "R = " + format(prenorm_radius<double>(layer, options.prenorm)) + " (fixed by the pre-norm)"
              : (setting.radius ? "R = " + format(*setting.radius) : std::string());
  switch (bound) {
    case Bound::softmax_half:
      return "";
    case Bound::layernorm_two:
    case Bound::layernorm_inf:
    case Bound::rmsnorm_two:
    case Bound::rmsnorm_inf:
      return "d = " + std::to_string(layer.d) + ", eps = " + format(layer.norm_eps);
    case Bound::kim_inf:
    case Bound::kim_two:
      return "n = " + std::to_string(*setting.n) + ", Lambda_n = " + format(kim_lambda<double>(*setting.n)) +
             ", d_h = " + std::to_string(layer.head_dim);
    case Bound::castin_sqrt_n:
      return "n = " + std::to_string(*setting.n) + ", " + radius;
    case Bound::castin_local:
      return std::string("at the input, n = ") + std::to_string(setting.input.rows()) +
             (prenorm ? ", evaluated at N(X)" : "");
    case Bound::mf_context: {
      const double rq = setting.query_radius ? *setting.query_radius : (setting.radius ? *setting.radius : 0);
      return radius + (prenorm ? "" : ", R' = " + format(rq));
    }
    case Bound::mf_depth:
      return "L = " + std::to_string(setting.depth) + ", " + radius;
    default:
      return radius;
  }
}

}  // namespace

std::string to_string(Norm norm) { return norm == Norm::two ? "2" : "inf"; }

Norm parse_norm(const std::string& text, const std::string& subject) {
  if (text == "2") return Norm::two;
  if (text == "inf") return Norm::inf;
  throw InputError(subject, "must be 2 or inf, got '" + text + "'");
}

std::span<const Bound> all_bounds() { return bound_order; }

const BoundInfo& info(Bound bound) { return infos[index_of(bound)]; }

std::optional<std::string> refusal(Bound bound, const AttentionLayer& layer, const AttentionOptions& options,
                                   const BoundSetting& setting) {
  validate(layer, options, setting);
  return refusal_unchecked(bound, layer, options, setting);
}

template <class S>
S evaluate(Bound bound, const AttentionLayer& layer, const AttentionOptions& options,
           const BoundSetting& setting) {
  if (const auto reason = refusal(bound, layer, options, setting)) throw InputError(info(bound).id, *reason);
  detail::BoundEvaluator<S> evaluator(layer, options, setting);
  return evaluator(bound);
}

template <class S>
S kim_lambda(std::int64_t n) {
  if (n < 1 || n > max_n) throw InputError("n", "must be between 1 and 2^53, got " + std::to_string(n));
  return lambert_phi_inverse<S>(S(double(n - 1)));
}

template <class S>
S prenorm_radius(const AttentionLayer& layer, Prenorm prenorm) {
  if (prenorm == Prenorm::none) throw InputError("prenorm", "no pre-norm: the radius is not fixed");
  using std::sqrt;
  const double gamma = layer.norm_gamma.size() == 0 ? 1.0 : layer.norm_gamma.cwiseAbs().maxCoeff();
  S r = sqrt(S(double(layer.d))) * S(gamma);
  if (prenorm == Prenorm::layernorm && layer.norm_beta.size() != 0) {
    S sum(0);
    for (Eigen::Index i = 0; i < layer.norm_beta.size(); ++i)
      sum += S(layer.norm_beta(i)) * S(layer.norm_beta(i));
    r += sqrt(sum);
  }
  return r;
}

template <class S>
S kim_thm32_2_quoted_claim(const AttentionLayer& layer, const AttentionOptions& options,
                           const BoundSetting& setting) {
  if (const auto reason = refusal(Bound::kim_two, layer, options, setting))
    throw InputError("kim.thm32_2_quoted", *reason);
  if (options.residual || options.prenorm != Prenorm::none)
    throw InputError("kim.thm32_2_quoted",
                     "the quoted statement concerns the bare attention map (no residual, "
                     "no pre-norm)");
  detail::BoundEvaluator<S> evaluator(layer, options, setting);
  return evaluator.kim_two_quoted();
}

template <class S>
S castin_local_code_form_claim(const AttentionLayer& layer, const AttentionOptions& options,
                               const BoundSetting& setting) {
  if (const auto reason = refusal(Bound::castin_local, layer, options, setting))
    throw InputError("castin.local", *reason);
  if (options.residual || options.prenorm != Prenorm::none)
    throw InputError("castin.local",
                     "the code form concerns the bare attention map (no residual, no pre-norm)");
  detail::BoundEvaluator<S> evaluator(layer, options, setting);
  return evaluator.castin_local_code_form();
}

std::vector<BoundReport> theoretical_bounds(const AttentionLayer& layer, const AttentionOptions& options,
                                            const BoundSetting& setting, std::optional<Norm> norm,
                                            unsigned interval_bits) {
  validate(layer, options, setting);
  if (interval_bits < 53) throw InputError("interval_bits", "must be >= 53 (binary64 inputs exact)");
  const PrecisionGuard guard(interval_bits);
  detail::BoundEvaluator<double> estimate(layer, options, setting);
  detail::BoundEvaluator<interval> certified(layer, options, setting);
  std::vector<BoundReport> reports;
  for (const Bound bound : all_bounds()) {
    BoundReport r;
    r.bound = bound;
    std::optional<std::string> reason = refusal_unchecked(bound, layer, options, setting);
    if (!reason && norm && !covers(bound, *norm)) {
      const std::string& covered = info(bound).norm;
      reason = (covered == "2" || covered == "inf"
                    ? "covers the " + covered + "-norm only"
                    : "measure-level bound in " + covered + " with Euclidean ground cost, no inf-norm form") +
               " (--norm " + to_string(*norm) + " requested)";
    }
    if (reason) {
      r.reason = *reason;
    } else {
      r.applies = true;
      r.value = estimate(bound);
      r.certified_upper = detail::upper_as_double(certified(bound));
      r.note = note_for(bound, layer, options, setting);
      const auto append = [&r](const std::string& text) { r.note += (r.note.empty() ? "" : "; ") + text; };
      if (certified.last_used_loose_certificate())
        append("certified through looser spectral-norm bounds (large d)");
      if (!std::isfinite(r.value) || !std::isfinite(r.certified_upper))
        append("exceeds the double range (reported as +inf)");
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

#define REGATTA_LIP_BOUNDS(S)                                                                         \
  template S evaluate<S>(Bound, const AttentionLayer&, const AttentionOptions&, const BoundSetting&); \
  template S kim_lambda<S>(std::int64_t);                                                             \
  template S prenorm_radius<S>(const AttentionLayer&, Prenorm);                                       \
  template S kim_thm32_2_quoted_claim<S>(const AttentionLayer&, const AttentionOptions&,              \
                                         const BoundSetting&);                                        \
  template S castin_local_code_form_claim<S>(const AttentionLayer&, const AttentionOptions&,          \
                                             const BoundSetting&);
REGATTA_LIP_BOUNDS(double)
REGATTA_LIP_BOUNDS(::regatta::mpfr)
REGATTA_LIP_BOUNDS(::regatta::interval)
#undef REGATTA_LIP_BOUNDS

}  // namespace regatta::lip
