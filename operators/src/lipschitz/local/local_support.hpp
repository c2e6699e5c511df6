#pragma once
// Internal: the scalar helpers shared by the local-regularity sources (matrix_free.cpp, jacobian_norms.cpp,
// structured_rows.cpp, local.cpp, havens_ingredients.cpp, havens_delta.cpp). double and interval share the
// code below; nothing here is part of the public interface (local.hpp).
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>

#include <regatta/core/convert.hpp>
#include <regatta/core/detail/product.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/lipschitz/jacobian_norms.hpp>

namespace regatta::lip::detail {

using Eigen::Index;

template <class S>
constexpr bool is_interval_v = scalar_traits<S>::is_interval;

/// acc += a·b; for interval in place (no temporaries beyond `tmp`).
template <class S>
inline void add_product(S& acc, const S& a, const S& b, S& tmp) {
  if constexpr (std::is_same_v<S, interval>) {
    mpfi_mul(tmp.backend().data(), a.backend().data(), b.backend().data());
    mpfi_add(acc.backend().data(), acc.backend().data(), tmp.backend().data());
  } else {
    (void)tmp;
    acc += a * b;
  }
}

/// Σ |entries| (an enclosure for interval: |x| is enclosed by [mig x, mag x]).
template <class S>
S abs_sum(const Matrix<S>& G) {
  using std::abs;
  S sum(0);
  for (Index i = 0; i < G.rows(); ++i)
    for (Index j = 0; j < G.cols(); ++j) sum += abs(G(i, j));
  return sum;
}

/// ‖G‖_F (for interval the tight squares, then the square root of the enclosure).
template <class S>
S frobenius(const Matrix<S>& G) {
  using std::sqrt;
  S sum(0);
  for (Index i = 0; i < G.rows(); ++i)
    for (Index j = 0; j < G.cols(); ++j) sum += regatta::detail::square<S>(G(i, j));
  return sqrt(sum);
}

inline double lower_double(const interval& x) {
  return mpfr_get_d(lower_bound(x).backend().data(), MPFR_RNDD);
}
inline double upper_double(const interval& x) {
  return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU);
}

/// [lo, hi] from doubles (exact).
inline interval enclosure(double lo, double hi) { return make_interval(mpfr(lo), mpfr(hi)); }

/// The running maximum of a family of values with the index of the largest one (interval: the enclosure
/// [max of lower ends, max of upper ends] of the maximum, index of the largest upper end).
template <class S>
class RunningMax {
 public:
  void add(const S& value, Index index) {
    if constexpr (is_interval_v<S>) {
      const mpfr lo = lower_bound(value), hi = upper_bound(value);
      if (!seen_ || lo > lo_) lo_ = lo;
      if (!seen_ || hi > hi_) {
        hi_ = hi;
        index_ = index;
      }
    } else {
      if (!seen_ || value > value_) {
        value_ = value;
        index_ = index;
      }
    }
    seen_ = true;
  }
  InducedNorm<S> result() const {
    InducedNorm<S> r;
    r.index = index_;
    if constexpr (is_interval_v<S>) {
      r.value = seen_ ? make_interval(lo_, hi_) : S(0);
    } else {
      r.value = seen_ ? value_ : S(0);
    }
    return r;
  }

 private:
  bool seen_ = false;
  Index index_ = 0;
  S value_{};
  mpfr lo_, hi_;
};

/// A·B (the library's one product, core/detail/product.hpp).
template <class S>
Matrix<S> mul(const Matrix<S>& a, const Matrix<S>& b) {
  return regatta::detail::product<S>(a, b);
}

template <class S>
Matrix<S> cast(const Matrix<double>& m) {
  return matrix_cast<S>(m);
}

template <class S>
Vector<S> cast(const Vector<double>& v) {
  Vector<S> r(v.size());
  for (Index i = 0; i < v.size(); ++i) r(i) = scalar_cast<S>(v(i));
  return r;
}

inline Vector<double> flat(const Matrix<double>& M) {
  return Eigen::Map<const Vector<double>>(M.data(), M.size());
}
inline Matrix<double> shaped(const Vector<double>& v, Index rows, Index cols) {
  return Eigen::Map<const Matrix<double>>(v.data(), rows, cols);
}

inline void report(const Progress& progress, std::string_view stage, Index done, Index total) {
  if (progress) progress(stage, done, total);
}

/// The name of a progress stage, prefixed with "certified " for interval evaluations.
template <class S>
std::string stage_name(const char* what) {
  return is_interval_v<S> ? std::string("certified ") + what : std::string(what);
}

/// Calls `progress` about every 1/200 of `total`.
inline bool due(Index done, Index total) {
  const Index step = std::max<Index>(1, total / 200);
  return done % step == 0 || done == total;
}

/// Throws InputError naming "relative_tolerance" or "max_iterations" when `options` are invalid.
void check_spectral_options(const SpectralOptions& options);

}  // namespace regatta::lip::detail
