// The fast certified scalar: interval64 (binary64 endpoints, outward rounding) against MPFI at 128 bits on
// the same work, side by side — the dense Jacobian enclosure of one attention block (the structured rows
// of operators/lipschitz/local.hpp, what `regatta local --certify` encloses), a dot product, and a
// log-sum-exp; and the certified lower bound on ‖J‖₂ at BERT size by the interval64 JVP. Figures and the
// command are in bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <regatta/core/convert.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/fast_jvp.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <string>
#include <vector>

namespace {

using regatta::interval;
using regatta::interval64;

constexpr unsigned mpfi_bits = 128;

/// d = 64, 4 heads, n = state.range(0) tokens, softmax dot attention with biases.
template <class S>
void BM_block_dense_jacobian(benchmark::State& state) {
  const regatta::PrecisionGuard guard(mpfi_bits);
  regatta::operators::RandomLayerSpec spec;
  spec.d = 64;
  spec.heads = 4;
  spec.biases = true;
  spec.seed = 7;
  const regatta::operators::AttentionLayer layer = regatta::operators::random_layer(spec);
  const regatta::operators::AttentionOptions options;
  const auto n = state.range(0);
  regatta::RandomMatrixSpec xs;
  xs.rows = n;
  xs.cols = spec.d;
  xs.seed = 3;
  const regatta::Matrix<double> X = regatta::random_matrix(xs);
  for (auto _ : state) {
    const regatta::Matrix<S> J = regatta::lip::block_dense_jacobian<S>(layer, options, X);
    benchmark::DoNotOptimize(J.data());
  }
  state.counters["n*d"] = static_cast<double>(n * spec.d);
}
BENCHMARK(BM_block_dense_jacobian<interval64>)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_block_dense_jacobian<interval>)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_block_dense_jacobian<double>)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);

/// What `regatta local --certify --dense-limit 512` computes at n·d = 512 (d = 64, 4 heads, n = 8): the
/// Lanczos estimate, the certified lower bound (MPFI JVP), the dense Jacobian enclosure (interval64 first)
/// and the interval Cholesky of θ²I − JᵀJ.
void BM_local_certify_512(benchmark::State& state) {
  regatta::operators::RandomLayerSpec spec;
  spec.d = 64;
  spec.heads = 4;
  spec.biases = true;
  spec.seed = 7;
  const regatta::operators::AttentionLayer layer = regatta::operators::random_layer(spec);
  regatta::RandomMatrixSpec xs;
  xs.rows = 8;
  xs.cols = spec.d;
  xs.seed = 3;
  const regatta::Matrix<double> X = regatta::random_matrix(xs);
  regatta::lip::LocalNormOptions local;
  local.certify = true;
  local.dense_limit = 512;
  std::string scalar;
  for (auto _ : state) {
    const regatta::lip::LocalNormReport r = regatta::lip::local_jacobian_norms(layer, {}, X, local);
    benchmark::DoNotOptimize(r.two_upper);
    scalar = r.jacobian_scalar;
  }
  state.SetLabel("Jacobian enclosed in " + scalar);
}
BENCHMARK(BM_local_certify_512)->Unit(benchmark::kMillisecond);

/// The certified lower bound on ‖J(X)‖₂ at BERT size (d = 768, 12 heads, n = state.range(0)): the
/// interval64 JVP by midpoint–radius products at one direction w and ‖J w‖/‖w‖ (fast_jvp.hpp), the
/// certified part of `regatta local --lower-bound-only` (its Lanczos witness costs about as much again in
/// double). Label: the certified lower end.
void BM_certified_lower_bert(benchmark::State& state) {
  regatta::operators::RandomLayerSpec spec;
  spec.d = 768;
  spec.heads = 12;
  spec.seed = 1;
  const regatta::operators::AttentionLayer layer = regatta::operators::random_layer(spec);
  regatta::RandomMatrixSpec xs;
  xs.rows = state.range(0);
  xs.cols = spec.d;
  xs.seed = 3;
  const regatta::Matrix<double> X = regatta::random_matrix(xs);
  xs.seed = 4;
  const regatta::Matrix<double> w = regatta::random_matrix(xs);
  double lower = 0;
  for (auto _ : state) lower = regatta::lip::jacobian_ratio_fast(layer, {}, X, w).lower();
  state.SetLabel("certified ||Jw||/||w|| >= " + std::to_string(lower));
}
BENCHMARK(BM_certified_lower_bert)->Arg(2)->Arg(128)->Unit(benchmark::kMillisecond);

template <class S>
void BM_dot(benchmark::State& state) {
  const regatta::PrecisionGuard guard(mpfi_bits);
  const auto n = state.range(0);
  const regatta::Vector<double> a = regatta::standard_normal(n, 1), b = regatta::standard_normal(n, 2);
  std::vector<S> x, y;
  for (Eigen::Index k = 0; k < n; ++k) {
    x.push_back(regatta::scalar_cast<S>(a(k)));
    y.push_back(regatta::scalar_cast<S>(b(k)));
  }
  for (auto _ : state) {
    S acc(0);
    for (std::size_t k = 0; k < x.size(); ++k) acc += x[k] * y[k];
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_dot<interval64>)->Arg(4096);
BENCHMARK(BM_dot<interval>)->Arg(4096);
BENCHMARK(BM_dot<double>)->Arg(4096);

template <class S>
void BM_logsumexp(benchmark::State& state) {
  const regatta::PrecisionGuard guard(mpfi_bits);
  const auto n = state.range(0);
  const regatta::Vector<double> z = regatta::standard_normal(n, 1) * 30.0;
  std::vector<S> x;
  for (Eigen::Index k = 0; k < n; ++k) x.push_back(regatta::scalar_cast<S>(z(k)));
  for (auto _ : state) benchmark::DoNotOptimize(regatta::logsumexp<S>(std::span<const S>(x)));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_logsumexp<interval64>)->Arg(4096);
BENCHMARK(BM_logsumexp<interval>)->Arg(4096);

}  // namespace
