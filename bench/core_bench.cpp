// Foundation benchmarks: the cost of certification. Stable log-sum-exp per scalar type (what a certified
// enclosure costs against double), and the certified spectral-norm bracket against its power-iteration
// estimate.
#include <benchmark/benchmark.h>

#include <cmath>
#include <regatta/core/convert.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <vector>

namespace {

template <class S>
void BM_logsumexp(benchmark::State& state) {
  regatta::PrecisionGuard guard(static_cast<unsigned>(state.range(1)));
  const auto n = state.range(0);
  const regatta::Vector<double> z = regatta::standard_normal(n, 1) * 30.0;
  std::vector<S> x;
  for (Eigen::Index k = 0; k < n; ++k) x.push_back(regatta::scalar_cast<S>(z(k)));
  for (auto _ : state) benchmark::DoNotOptimize(regatta::logsumexp<S>(std::span<const S>(x)));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_logsumexp<float>)->Args({4096, 53});
BENCHMARK(BM_logsumexp<double>)->Args({4096, 53});
BENCHMARK(BM_logsumexp<regatta::mpfr>)->Args({4096, 53})->Args({4096, 256});
BENCHMARK(BM_logsumexp<regatta::interval>)->Args({4096, 53})->Args({4096, 256});

regatta::Matrix<double> gaussian(Eigen::Index n) {
  regatta::RandomMatrixSpec spec;
  spec.rows = spec.cols = n;
  spec.seed = 1;
  return regatta::random_matrix(spec);
}

void BM_spectral_norm_power(benchmark::State& state) {
  const auto m = gaussian(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(regatta::spectral_norm_power<double>(m).estimate);
}
BENCHMARK(BM_spectral_norm_power)->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_spectral_norm_certified(benchmark::State& state) {
  const auto m = gaussian(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(regatta::spectral_norm_upper_certified<double>(m).upper);
}
BENCHMARK(BM_spectral_norm_certified)->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond);

// The MPFI (106-bit Gram + interval Cholesky) and the binary64 certificate side by side, on a Gaussian matrix
// and on an interval64 box around it (relative radius 2^-40, as for an enclosed Jacobian). Counters: the
// certified upper bound over the power-iteration estimate σ̃, minus 1.
void BM_spectral_upper_mpfi(benchmark::State& state) {
  const auto m = gaussian(state.range(0));
  const regatta::Matrix<regatta::interval> box = regatta::matrix_cast<regatta::interval>(
      regatta::Matrix<regatta::interval64>(m.cast<regatta::interval64>()));
  regatta::CertifiedNormBound b;
  for (auto _ : state) b = regatta::spectral_norm_upper_certified<regatta::interval>(box);
  state.counters["upper/estimate-1"] = b.upper / b.estimate - 1;
}
void BM_spectral_upper_fast(benchmark::State& state) {
  const auto m = gaussian(state.range(0));
  const regatta::Matrix<regatta::interval64> box = m.cast<regatta::interval64>();
  regatta::CertifiedNormBound b;
  for (auto _ : state) b = regatta::spectral_norm_upper_fast(box);
  state.counters["upper/estimate-1"] = b.upper / b.estimate - 1;
}
void BM_spectral_upper_fast_box(benchmark::State& state) {
  const auto m = gaussian(state.range(0));
  regatta::Matrix<regatta::interval64> box(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      const double r = std::fabs(m(i, j)) * 0x1.0p-40;
      box(i, j) = regatta::interval64::hull(m(i, j) - 2 * r, m(i, j) + 2 * r);
    }
  regatta::CertifiedNormBound b;
  for (auto _ : state) b = regatta::spectral_norm_upper_fast(box);
  state.counters["upper/estimate-1"] = b.upper / b.estimate - 1;
}
BENCHMARK(BM_spectral_upper_mpfi)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_spectral_upper_fast)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_spectral_upper_fast_box)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

}  // namespace
