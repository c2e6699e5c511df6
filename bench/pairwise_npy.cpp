// regatta_pairwise_npy: dot-score attention softmax(s·Q·Kᵀ)·V through pairwise::reduce on .npy inputs, for
// side-by-side comparisons (bench/compare/attention_vs_torch.py).
//
//   regatta_pairwise_npy Q.npy K.npy V.npy [--out OUT.npy] [--dtype float32|float64] [--scale S]
//                        [--threads T] [--reps R] [--query-block B] [--key-block B]
//
// Runs reduce<float or double> R times (after one untimed warm-up) with Options::threads = T and prints one
// JSON object: shapes, dtype, threads, every time and the median in seconds. --out writes `out` (n×e) in the
// requested dtype; the inputs are released first so that the peak memory is the inputs plus one output.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/pairwise.hpp>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string q, k, v;
  std::optional<std::string> out;
  std::string dtype = "float64";
  std::optional<double> scale;
  int threads = 1;
  int reps = 5;
  Eigen::Index query_block = 0, key_block = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw regatta::InputError(s, "needs a value");
      return argv[++i];
    };
    if (s == "--out")
      a.out = value();
    else if (s == "--dtype")
      a.dtype = value();
    else if (s == "--scale")
      a.scale = std::stod(value());
    else if (s == "--threads")
      a.threads = std::stoi(value());
    else if (s == "--reps")
      a.reps = std::stoi(value());
    else if (s == "--query-block")
      a.query_block = std::stol(value());
    else if (s == "--key-block")
      a.key_block = std::stol(value());
    else
      positional.push_back(s);
  }
  if (positional.size() != 3) throw regatta::InputError("arguments", "expected Q.npy K.npy V.npy");
  if (a.dtype != "float32" && a.dtype != "float64")
    throw regatta::InputError("--dtype", "float32 or float64");
  if (a.threads < 1 || a.reps < 1) throw regatta::InputError("--threads/--reps", "must be >= 1");
  a.q = positional[0];
  a.k = positional[1];
  a.v = positional[2];
  return a;
}

template <class S>
int run(const Args& a) {
  // Each input is read, converted to S and the double copy dropped before the next is read.
  auto load = [](const std::string& path) -> regatta::Matrix<S> {
    return regatta::io::read_npy(path).matrix().cast<S>();
  };
  regatta::Matrix<S> q = load(a.q), k = load(a.k), v = load(a.v);
  const Eigen::Index n = q.rows(), m = k.rows(), d = q.cols(), e = v.cols();
  namespace pw = regatta::pairwise;
  pw::Problem<S> problem;
  problem.queries = &q;
  problem.keys = &k;
  problem.values = &v;
  const pw::Kernel kernel{pw::ScoreKind::dot, a.scale.value_or(1.0 / std::sqrt(double(d)))};
  const pw::Options options{a.query_block, a.key_block, a.threads};

  pw::Result<S> result = pw::reduce<S>(problem, kernel, {}, options);  // warm-up
  std::vector<double> times;
  for (int r = 0; r < a.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    result = pw::reduce<S>(problem, kernel, {}, options);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  q = {};
  k = {};
  v = {};
  if (a.out)
    regatta::io::write_npy(*a.out, result.out.template cast<double>().eval(),
                           sizeof(S) == 4 ? regatta::io::DType::f32 : regatta::io::DType::f64);
  std::printf(
      "{\"dtype\": \"%s\", \"n\": %ld, \"m\": %ld, \"d\": %ld, \"e\": %ld, \"scale\": %.17g, \"threads\": "
      "%d, "
      "\"reps\": %d, \"median_s\": %.9g, \"times_s\": [",
      a.dtype.c_str(), long(n), long(m), long(d), long(e), kernel.scale, a.threads, a.reps, median);
  for (std::size_t i = 0; i < times.size(); ++i) std::printf("%s%.9g", i ? ", " : "", times[i]);
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    omp_set_num_threads(a.threads);
    return a.dtype == "float32" ? run<float>(a) : run<double>(a);
  } catch (const std::exception& error) {
    std::cerr << "regatta_pairwise_npy: " << error.what() << "\n";
    return 2;
  }
}
