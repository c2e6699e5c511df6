// δ(X, ε) of Havens et al., its naive variants, the gradient-norm comparator and the certified radius from
// the ingredients (see havens.hpp; docs/math/bounds.md#havens-delta to
// docs/math/bounds.md#havens-certified-radius).
#include <regatta/operators/lipschitz/havens.hpp>

#include <cmath>
#include <limits>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>

#include "local_support.hpp"

namespace regatta::lip {

namespace {
using namespace detail;
}  // namespace

namespace {

template <class S>
S sqrt_of(double v) {
  using std::sqrt;
  return sqrt(scalar_cast<S>(v));
}

/// δ with the given ξ, κ_h and the factor ‖X W^VO_h‖₂ + ε‖W^VO_h‖₂ (docs/math/bounds.md#havens-delta), ε as
/// S.
template <class S, class Kappa, class Values>
S delta_form(const HavensIngredients<S>& q, const S& eps, const S& xi, Kappa kappa, Values value_factor) {
  S sum(0);
  for (int h = 0; h < q.heads; ++h) sum += (eps * kappa(h) + eps * eps * q.score[h]) * value_factor(h);
  return eps * xi + sum / S(2);
}

template <class S>
S delta_at(const HavensIngredients<S>& q, const S& eps) {
  return delta_form<S>(
      q, eps, q.xi, [&](int h) { return q.kappa[h]; },
      [&](int h) { return S(q.input_values[h] + eps * q.values[h]); });
}

void check_epsilon(double epsilon) { check_positive("epsilon", epsilon); }

}  // namespace

template <class S>
std::array<S, 3> havens_delta_coefficients(const HavensIngredients<S>& q) {
  S c1 = q.xi, c2(0), c3(0);
  for (int h = 0; h < q.heads; ++h) {
    c1 += q.kappa[h] * q.input_values[h] / S(2);
    c2 += (q.kappa[h] * q.values[h] + q.score[h] * q.input_values[h]) / S(2);
    c3 += q.score[h] * q.values[h] / S(2);
  }
  return {c1, c2, c3};
}

template <class S>
S havens_delta(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  return delta_at<S>(q, scalar_cast<S>(epsilon));
}

template <class S>
S havens_delta_naive_kernel(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S eps = scalar_cast<S>(epsilon);
  S xi = q.skip;
  for (int h = 0; h < q.heads; ++h) xi += q.kernel[h] * q.values[h];
  return delta_form<S>(
      q, eps, xi, [&](int h) { return q.kappa_split[h]; },
      [&](int h) { return S(q.values[h] * (q.input_two + eps)); });
}

template <class S>
S havens_delta_naive_weights(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S eps = scalar_cast<S>(epsilon);
  const S sqrt_n = sqrt_of<S>(double(q.n));
  S factors(0);
  for (int h = 0; h < q.heads; ++h) factors += q.value_factors[h];
  const S xi = q.skip + sqrt_n * factors;
  return delta_form<S>(
      q, eps, xi, [&](int h) { return S(S(2) * q.input_two * q.score[h] + sqrt_n * q.query_bias[h]); },
      [&](int h) { return S(q.values[h] * (q.input_two + eps)); });
}

template <class S>
S havens_gradnorm_lipschitz(const HavensIngredients<S>& q, double epsilon) {
  check_epsilon(epsilon);
  const S B = q.input_frobenius + scalar_cast<S>(epsilon);
  const S sqrt_n = sqrt_of<S>(double(q.n));
  S sum = q.skip;
  for (int h = 0; h < q.heads; ++h)
    sum += q.values[h] * (sqrt_n + q.query_key[h] * B * B + sqrt_n * q.query_bias[h] * B / S(2));
  return sum;
}

template <class S>
RadiusResult havens_certified_radius(const HavensIngredients<S>& q, const MarginSetting& setting) {
  check_positive("margin", setting.margin);
  if (!(std::isfinite(setting.readout_lipschitz) && setting.readout_lipschitz >= 0))
    throw InputError("readout_lipschitz", "must be finite and >= 0");
  if (!(std::isfinite(setting.embedding_lipschitz) && setting.embedding_lipschitz >= 0))
    throw InputError("embedding_lipschitz", "must be finite and >= 0");
  if (!(setting.relative_tolerance > 0 && setting.relative_tolerance < 1))
    throw InputError("relative_tolerance", "must lie in (0, 1)");
  RadiusResult out;
  const S sqrt2_out = sqrt_of<S>(2.0) * scalar_cast<S>(setting.readout_lipschitz);
  const S L_in = scalar_cast<S>(setting.embedding_lipschitz);
  // safe(ε): √2·L_out·δ(X, L_in·ε) < m, decided on the upper end for interval (certified).
  const auto safe = [&](double epsilon) {
    ++out.steps;
    const S value = sqrt2_out * delta_at<S>(q, S(L_in * scalar_cast<S>(epsilon)));
    if constexpr (is_interval_v<S>) {
      return upper_bound(value) < mpfr(setting.margin);
    } else {
      return value < setting.margin;
    }
  };
  constexpr int max_exponent = 1000;
  double lo = 0, hi = 1;
  if (safe(1.0)) {
    lo = 1;
    int e = 0;
    while (e < max_exponent && safe(std::ldexp(1.0, e + 1))) lo = std::ldexp(1.0, ++e);
    if (e == max_exponent) {
      out.radius = std::numeric_limits<double>::infinity();
      out.first_failure = std::numeric_limits<double>::infinity();
      return out;
    }
    hi = std::ldexp(1.0, e + 1);
  } else {
    int e = 0;
    while (e > -max_exponent && !safe(std::ldexp(1.0, e - 1))) hi = std::ldexp(1.0, --e);
    if (e == -max_exponent) {
      out.radius = 0;
      out.first_failure = hi;
      return out;
    }
    lo = std::ldexp(1.0, e - 1);
  }
  while (hi - lo > setting.relative_tolerance * lo) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (safe(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  out.radius = lo;
  out.first_failure = hi;
  return out;
}

// ---- explicit instantiations ----

#define REGATTA_HAVENS_DELTA(S)                                                        \
  template std::array<S, 3> havens_delta_coefficients<S>(const HavensIngredients<S>&); \
  template S havens_delta<S>(const HavensIngredients<S>&, double);                     \
  template S havens_delta_naive_kernel<S>(const HavensIngredients<S>&, double);        \
  template S havens_delta_naive_weights<S>(const HavensIngredients<S>&, double);       \
  template S havens_gradnorm_lipschitz<S>(const HavensIngredients<S>&, double);        \
  template RadiusResult havens_certified_radius<S>(const HavensIngredients<S>&, const MarginSetting&);
REGATTA_FOR_EACH_CERTIFYING_SCALAR(REGATTA_HAVENS_DELTA)
#undef REGATTA_HAVENS_DELTA

}  // namespace regatta::lip
