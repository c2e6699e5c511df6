// Norms of the Jacobian of a block or stack from its JVPs and VJPs (see jacobian_norms.hpp;
// docs/math/jacobian.md#matrix-free-norms).
#include <regatta/operators/lipschitz/jacobian_norms.hpp>

#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>

#include "../local/local_support.hpp"

namespace regatta::lip {

namespace {
using Eigen::Index;
using namespace detail;
using operators::Linearization;
}  // namespace

SpectralEstimate jacobian_norm_2(const Linearization<double>& lin, const SpectralOptions& options) {
  return matrix_free_norm_2([&](const Matrix<double>& V) { return lin.jvp(V); },
                            [&](const Matrix<double>& U) { return lin.vjp(U); }, lin.rows(), lin.input_cols(),
                            options);
}

interval jacobian_ratio_enclosure(const Linearization<interval>& lin, const Matrix<double>& w) {
  check_shape("witness", w.rows(), w.cols(), lin.rows(), lin.input_cols());
  check_finite("witness", w);
  if (w.cwiseAbs().maxCoeff() == 0) throw InputError("witness", "is zero");
  const Matrix<interval> wi = cast<interval>(w);
  const Matrix<interval> image = lin.jvp(wi);
  return frobenius<interval>(image) / frobenius<interval>(wi);
}

// ---------------------------------------------------------------------------------------------------------
// ‖J‖∞ and ‖J‖₁ from VJPs / JVPs
// ---------------------------------------------------------------------------------------------------------

template <class S>
InducedNorm<S> jacobian_norm_inf(const Linearization<S>& lin, const Progress& progress) {
  const Index n = lin.rows(), e = lin.value().cols();
  RunningMax<S> best;
  Matrix<S> E = Matrix<S>::Zero(n, e);
  const Index total = n * e;
  const std::string stage = stage_name<S>("norm-inf rows (VJPs)");
  report(progress, stage, 0, total);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < e; ++a) {
      E(i, a) = S(1);
      best.add(abs_sum<S>(lin.vjp(E)), i * e + a);
      E(i, a) = S(0);
      if (due(i * e + a + 1, total)) report(progress, stage, i * e + a + 1, total);
    }
  return best.result();
}

template <class S>
InducedNorm<S> jacobian_norm_one(const Linearization<S>& lin, const Progress& progress) {
  const Index n = lin.rows(), d = lin.input_cols();
  RunningMax<S> best;
  Matrix<S> E = Matrix<S>::Zero(n, d);
  const Index total = n * d;
  const std::string stage = stage_name<S>("norm-1 columns (JVPs)");
  report(progress, stage, 0, total);
  for (Index j = 0; j < n; ++j)
    for (Index b = 0; b < d; ++b) {
      E(j, b) = S(1);
      best.add(abs_sum<S>(lin.jvp(E)), j * d + b);
      E(j, b) = S(0);
      if (due(j * d + b + 1, total)) report(progress, stage, j * d + b + 1, total);
    }
  return best.result();
}

// ---- explicit instantiations ----

#define REGATTA_LOCAL_GENERIC(S)                                                          \
  template InducedNorm<S> jacobian_norm_inf<S>(const Linearization<S>&, const Progress&); \
  template InducedNorm<S> jacobian_norm_one<S>(const Linearization<S>&, const Progress&);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_LOCAL_GENERIC)
#undef REGATTA_LOCAL_GENERIC

}  // namespace regatta::lip
