// Fixed-point inversion of residual blocks (inversion.hpp; docs/math/attention.md#residual-inversion).
#include <regatta/operators/inversion.hpp>

#include <cmath>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta::operators {

namespace {

template <class S>
double frobenius(const Matrix<S>& m) {
  // Sum of squares of the midpoints in double: a norm of a difference of iterates, reported as a number.
  double acc = 0;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      const double v = scalar_traits<S>::to_double(m(i, j));
      acc += v * v;
    }
  return std::sqrt(acc);
}

}  // namespace

template <class S>
InversionResult<S> invert_residual(const std::function<Matrix<S>(const Matrix<S>&)>& g, const Matrix<S>& Y,
                                   const InversionOptions& options) {
  const double L = options.lipschitz;
  if (!(L > 0 && L < 1))
    throw InputError("lipschitz",
                     "must lie in (0, 1) for the fixed-point inversion, got " + std::to_string(L));
  if (!(options.tolerance > 0) || !std::isfinite(options.tolerance))
    throw InputError("tolerance", "must be positive and finite");
  if (options.max_iterations < 1) throw InputError("max_iterations", "must be at least 1");
  check_nonempty("Y", Y.rows());
  for (Eigen::Index i = 0; i < Y.rows(); ++i)
    for (Eigen::Index j = 0; j < Y.cols(); ++j)
      if (!scalar_traits<S>::is_finite(Y(i, j))) throw InputError("Y", "has a non-finite entry");

  const auto step = [&](const Matrix<S>& X) {
    const Matrix<S> gx = g(X);
    if (gx.rows() != Y.rows() || gx.cols() != Y.cols())
      throw InputError("g", "returned a " + std::to_string(gx.rows()) + "x" + std::to_string(gx.cols()) +
                                " matrix for a " + std::to_string(Y.rows()) + "x" + std::to_string(Y.cols()) +
                                " input");
    return Matrix<S>(Y - gx);
  };

  InversionResult<S> r;
  Matrix<S> prev = Y;
  Matrix<S> X = step(prev);  // X⁽¹⁾
  const double first_step = frobenius<S>(Matrix<S>(X - prev));
  r.iterations = 1;
  r.iterations_needed_a_priori =
      first_step * (1 - L) <= options.tolerance
          ? 0
          : int(std::ceil(std::log(options.tolerance * (1 - L) / first_step) / std::log(L)));
  double last_step = first_step;
  while (true) {
    r.a_posteriori_bound = L / (1 - L) * last_step;
    if (r.a_posteriori_bound <= options.tolerance) {
      r.converged = true;
      break;
    }
    if (r.iterations >= options.max_iterations) break;
    prev = X;
    X = step(prev);
    last_step = frobenius<S>(Matrix<S>(X - prev));
    ++r.iterations;
  }
  const Matrix<S> next = step(X);
  r.residual = frobenius<S>(Matrix<S>(X - next));
  r.residual_bound = r.residual / (1 - L);
  r.a_priori_bound = std::pow(L, r.iterations) / (1 - L) * first_step;
  r.X = std::move(X);
  return r;
}

AttentionLayer scaled_layer(const AttentionLayer& layer, double c, double B) {
  if (!(c > 0 && c < 1)) throw InputError("c", "must lie in (0, 1), got " + std::to_string(c));
  if (!(B > 0) || !std::isfinite(B)) throw InputError("B", "must be positive and finite");
  AttentionLayer out = layer;
  out.WO *= c / B;
  if (out.bO.size() != 0) out.bO *= c / B;
  return out;
}

#define REGATTA_INVERSION(S)                                                                        \
  template InversionResult<S> invert_residual<S>(const std::function<Matrix<S>(const Matrix<S>&)>&, \
                                                 const Matrix<S>&, const InversionOptions&);
REGATTA_FOR_EACH_EXACT64_POINT_SCALAR(REGATTA_INVERSION)
#undef REGATTA_INVERSION

}  // namespace regatta::operators
