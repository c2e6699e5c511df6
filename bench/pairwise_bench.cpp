// Pairwise-kernel benchmarks: the streamed attention reduction pairwise::reduce<S> (dot score, lse + out,
// values of width e = d) on the blocked CPU path, and the GEMM rate of this machine for the same shape
// family, so that the kernel's FLOP rate (4·n·m·d flops: the two GEMMs Q·Kᵀ and P·V) can be read as a
// fraction of it. Thread count: the last benchmark argument, handed to Options::threads (and to the GEMM
// benchmarks). Command and results: bench/RESULTS.md, section "Pairwise kernel".
#include <benchmark/benchmark.h>
#include <omp.h>

#include <regatta/core/pairwise.hpp>
#include <regatta/core/random_matrix.hpp>

namespace {

using Eigen::Index;

template <class S>
regatta::Matrix<S> gaussian(Index rows, Index cols, std::uint64_t seed) {
  return regatta::random_matrix({rows, cols, regatta::RandomMatrixKind::gaussian, 1, 1.0, seed}).cast<S>();
}

/// reduce<S>: n = m = range(0), d = e = range(1), threads = range(2); scale 1/√d.
template <class S>
void BM_attention(benchmark::State& state) {
  const Index n = state.range(0), d = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const regatta::Matrix<S> q = gaussian<S>(n, d, 1), k = gaussian<S>(n, d, 2), v = gaussian<S>(n, d, 3);
  regatta::pairwise::Problem<S> problem;
  problem.queries = &q;
  problem.keys = &k;
  problem.values = &v;
  const regatta::pairwise::Kernel kernel{regatta::pairwise::ScoreKind::dot, 1.0 / std::sqrt(double(d))};
  regatta::pairwise::Options options;
  options.threads = threads;
  for (auto _ : state) {
    auto result = regatta::pairwise::reduce<S>(problem, kernel, {}, options);
    benchmark::DoNotOptimize(result.out.data());
  }
  const double flops = 4.0 * double(n) * double(n) * double(d);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void attention_args(benchmark::internal::Benchmark* b) {
  for (Index n : {256, 1024, 4096, 16384})
    for (Index d : {16, 64, 128}) b->Args({n, d, 2});
  b->Args({4096, 64, 1});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_attention<float>)->Apply(attention_args);
BENCHMARK(BM_attention<double>)->Apply(attention_args);

/// Eigen's GEMM C = A·B with A: rows×depth, B: depth×cols (row-major, as regatta stores matrices).
/// range(3) = 0: one product, Eigen's own OpenMP parallelisation over `threads` threads.
/// range(3) = 1: `threads` independent single-threaded products at once (one per thread, the rate per core
///               times the core count; the upper reference, since Eigen's parallel GEMM scales imperfectly).
template <class S>
void BM_gemm(benchmark::State& state) {
  const Index rows = state.range(0), depth = state.range(1), cols = state.range(2);
  const bool independent = state.range(3) == 1;
  const int threads = static_cast<int>(state.range(4));
  using M = regatta::Matrix<S>;
  std::vector<M> a(threads, gaussian<S>(rows, depth, 4)), b(threads, gaussian<S>(depth, cols, 5)),
      c(threads, M(rows, cols));
  const int saved = Eigen::nbThreads();
  for (auto _ : state) {
    if (independent) {
#pragma omp parallel num_threads(threads)
      {
        omp_set_num_threads(1);  // no nested Eigen parallelism inside each product
        const int t = omp_get_thread_num();
        c[t].noalias() = a[t] * b[t];
      }
    } else {
      Eigen::setNbThreads(threads);
      c[0].noalias() = a[0] * b[0];
    }
    benchmark::ClobberMemory();
  }
  Eigen::setNbThreads(saved);
  const double flops = 2.0 * double(rows) * double(depth) * double(cols) * (independent ? threads : 1);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void gemm_args(benchmark::internal::Benchmark* b) {
  for (int independent : {0, 1}) {
    b->Args({4096, 64, 4096, independent, 2});  // Q·Kᵀ of the 4096, d = 64 case
    b->Args({4096, 4096, 64, independent, 2});  // P·V
    b->Args({128, 64, 512, independent, 2});    // one score block of the blocked path
    b->Args({128, 512, 64, independent, 2});    // one P·V block
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_gemm<float>)->Apply(gemm_args);
BENCHMARK(BM_gemm<double>)->Apply(gemm_args);

}  // namespace
