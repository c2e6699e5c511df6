// Helpers shared by the report sections (see common.hpp).
#include "common.hpp"

#include <mpfr.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <regatta/core/decimal.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta::cli::report {

std::vector<double> log_grid(double lo, double hi, int count) {
  std::vector<double> g;
  const double a = std::log(lo), b = std::log(hi);
  for (int k = 0; k < count; ++k) {
    const double v = k == 0 ? lo : k == count - 1 ? hi : std::exp(a + (b - a) * k / (count - 1));
    // short decimals in the tables; the spacing is unchanged
    g.push_back(k == 0 || k == count - 1 ? v : std::strtod(nearest_decimal(v).c_str(), nullptr));
  }
  return g;
}

std::vector<std::int64_t> integer_log_grid(std::int64_t lo, std::int64_t hi, int count) {
  std::vector<std::int64_t> g;
  for (double v : log_grid(double(lo), double(hi), count)) {
    const std::int64_t k = std::llround(v);
    if (g.empty() || k > g.back()) g.push_back(k);
  }
  if (g.back() != hi) g.push_back(hi);
  return g;
}

operators::AttentionLayer scalar_layer(operators::AttentionKind kind, double q, double k, double v,
                                       double o) {
  operators::AttentionLayer layer;
  layer.d = 1;
  layer.heads = 1;
  layer.head_dim = 1;
  layer.value_dim = 1;
  layer.kind = kind;
  layer.WQ = {Matrix<double>::Constant(1, 1, q)};
  layer.WK = {Matrix<double>::Constant(1, 1, k)};
  layer.WV = {Matrix<double>::Constant(1, 1, v)};
  layer.WO = Matrix<double>::Constant(1, 1, o);
  layer.validate();
  return layer;
}

double lower_double(const interval& x) { return mpfr_get_d(lower_bound(x).backend().data(), MPFR_RNDD); }
double upper_double(const interval& x) { return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU); }

std::string said(double value, Kind kind, int digits) {
  return format_number(value, kind, digits) + " (" + to_string(kind) + ")";
}

}  // namespace regatta::cli::report
