// The public face of the bound table (bound_table.cpp): descriptions, refusals after validation, evaluation
// in a scalar type, and the list of every bound for one configuration (see bounds.hpp; mathematics in
// docs/math/bounds.md).
#include <regatta/operators/lipschitz/bounds.hpp>

#include <array>
#include <cmath>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include "bound_evaluator.hpp"
#include "bound_table.hpp"
#include "matrix_norms.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

/// Largest n accepted: every integer up to 2^53 is exact in binary64.
constexpr std::int64_t max_n = std::int64_t(1) << 53;
constexpr int max_depth = 1000000;

std::size_t index_of(Bound bound) { return static_cast<std::size_t>(bound); }

/// Every Bound, in table order.
constexpr std::array<Bound, static_cast<std::size_t>(Bound::count)> bound_order = [] {
  std::array<Bound, static_cast<std::size_t>(Bound::count)> order{};
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Bound>(i);
  return order;
}();

/// The public descriptions, made once from the table.
const std::vector<BoundInfo>& infos() {
  static const std::vector<BoundInfo> all = [] {
    std::vector<BoundInfo> v;
    for (const detail::BoundRow& r : detail::bound_rows())
      v.push_back({std::string(r.id), std::string(r.name), std::string(r.norm), std::string(r.provenance),
                   std::string(r.hypotheses), std::string(r.source)});
    return v;
  }();
  return all;
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

std::optional<std::string> refusal_unchecked(Bound bound, const AttentionLayer& layer,
                                             const AttentionOptions& options, const BoundSetting& setting) {
  return detail::row(bound).refusal({layer, options, setting});
}

}  // namespace

std::string to_string(Norm norm) { return norm == Norm::two ? "2" : "inf"; }

Norm parse_norm(const std::string& text, const std::string& subject) {
  if (text == "2") return Norm::two;
  if (text == "inf") return Norm::inf;
  throw InputError(subject, "must be 2 or inf, got '" + text + "'");
}

std::span<const Bound> all_bounds() { return bound_order; }

const BoundInfo& info(Bound bound) { return infos().at(index_of(bound)); }

bool covers(Bound bound, Norm norm) { return detail::covers(detail::row(bound), norm); }

bool is_sequence_bound(Bound bound) { return detail::row(bound).sequence; }

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
      r.note = detail::row(bound).note({layer, options, setting});
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
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_LIP_BOUNDS)
#undef REGATTA_LIP_BOUNDS

}  // namespace regatta::lip
