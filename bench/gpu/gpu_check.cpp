// gpu_check — the GPU path of regatta::pairwise against the CPU path, and the time of its kernel.
//
//   gpu_check RESULTS_DIR DUMP_DIR [N ...]        (default N: 1024 4096 16384; n = m = N, d = e = 64)
//
// For each N, score and mask, random inputs rounded to S are reduced by cuda::reduce<S> (S = float, double)
// and by the CPU path pairwise::reduce<double> on the same numbers; the worst relative error |x̂ − x| /
// max(|x|, 1) of lse and out is compared with the thresholds (1e-5 float, 1e-12 double). Writes
//   RESULTS_DIR/correctness.md   the table (also printed)
//   RESULTS_DIR/timing.csv       n,mask,dtype,kernel_ms,end_to_end_ms,cpu_ms
//   DUMP_DIR/n<N>_{q,k,v}.f32, n<N>_out_<mask>.f32   float32 row-major inputs and GPU outputs (dot score,
//                                scale 1/√d) for the PyTorch comparison (sdpa_compare.py)
// Exit status: 0 all within tolerance, 1 a check failed, 2 no GPU path or bad usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/pairwise_cuda.hpp>
#include <regatta/core/random_matrix.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "pairwise_kernels.hpp"  // core/cuda: the kernel alone, for timing

namespace pw = regatta::pairwise;
using regatta::Matrix;
using regatta::Vector;

namespace {

constexpr Eigen::Index kDim = 64;
constexpr int kRepetitions = 10;

double relative_error(double approx, double exact) {
  return std::abs(approx - exact) / std::max(std::abs(exact), 1.0);
}

template <class S>
double tolerance() {
  return std::is_same_v<S, float> ? 1e-5 : 1e-12;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Matrix<double> rounded_random(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  regatta::RandomMatrixSpec spec;
  spec.rows = rows;
  spec.cols = cols;
  spec.seed = seed;
  return regatta::random_matrix(spec).cast<float>().cast<double>();
}

template <class T>
void dump(const std::filesystem::path& path, const Matrix<T>& m) {
  const Matrix<float> f = m.template cast<float>();
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(float)));
  if (!file) throw std::runtime_error("cannot write " + path.string());
}

struct Config {
  pw::ScoreKind score;
  pw::MaskKind mask;
};

struct Row {
  double lse_error = 0;
  double out_error = 0;
  double end_to_end_ms = 0;
  bool ok = false;
};

/// cuda::reduce<S> on the inputs rounded to S, against the CPU result.
template <class S>
Row check(const Matrix<double>& x, const Matrix<double>& y, const Matrix<double>& v, const pw::Kernel& kernel,
          const pw::Result<double>& cpu, pw::Result<S>* keep) {
  const Matrix<S> xs = x.cast<S>(), ys = y.cast<S>(), vs = v.cast<S>();
  pw::Problem<S> problem;
  problem.queries = &xs;
  problem.keys = &ys;
  problem.values = &vs;
  const auto start = std::chrono::steady_clock::now();
  pw::Result<S> gpu = pw::cuda::reduce<S>(problem, kernel);
  Row row;
  row.end_to_end_ms = 1e3 * seconds_since(start);
  for (Eigen::Index i = 0; i < cpu.lse.size(); ++i) {
    row.lse_error = std::max(row.lse_error, relative_error(gpu.lse(i), cpu.lse(i)));
    for (Eigen::Index k = 0; k < cpu.out.cols(); ++k)
      row.out_error = std::max(row.out_error, relative_error(gpu.out(i, k), cpu.out(i, k)));
  }
  // NaN errors fail too.
  row.ok = row.lse_error <= tolerance<S>() && row.out_error <= tolerance<S>();
  if (keep != nullptr) *keep = std::move(gpu);
  return row;
}

/// The kernel alone (inputs already on the device), mean of kRepetitions launches.
template <class S>
double kernel_ms(const Matrix<double>& x, const Matrix<double>& y, const Matrix<double>& v,
                 const pw::Kernel& kernel) {
  namespace detail = pw::cuda::detail;
  const Matrix<S> xs = x.cast<S>(), ys = y.cast<S>(), vs = v.cast<S>();
  Vector<S> lse(x.rows());
  Matrix<S> out(x.rows(), v.cols());
  detail::Shape shape;
  shape.n = x.rows();
  shape.m = y.rows();
  shape.d = x.cols();
  shape.e = v.cols();
  shape.score = kernel.score == pw::ScoreKind::dot ? detail::Score::dot : detail::Score::neg_sq_dist;
  shape.mask = kernel.mask == pw::MaskKind::causal ? detail::Mask::causal : detail::Mask::none;
  shape.scale = kernel.scale;
  shape.power = kernel.power;
  if constexpr (std::is_same_v<S, float>) {
    return detail::time_f32(xs.data(), ys.data(), nullptr, vs.data(), lse.data(), out.data(), shape,
                            kRepetitions);
  } else {
    return detail::time_f64(xs.data(), ys.data(), nullptr, vs.data(), lse.data(), out.data(), shape,
                            kRepetitions);
  }
}

std::string format_error(double error) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << error;
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: gpu_check RESULTS_DIR DUMP_DIR [N ...]\n";
    return 2;
  }
  const std::filesystem::path results_dir = argv[1];
  const std::filesystem::path dump_dir = argv[2];
  std::vector<Eigen::Index> sizes;
  for (int a = 3; a < argc; ++a) sizes.push_back(std::atol(argv[a]));
  if (sizes.empty()) sizes = {1024, 4096, 16384};

  const pw::cuda::Availability gpu = pw::cuda::availability();
  if (!gpu.available) {
    std::cerr << "gpu_check: the GPU path is unavailable: " << gpu.reason << "\n";
    return 2;
  }
  std::filesystem::create_directories(results_dir);
  std::filesystem::create_directories(dump_dir);
  std::cerr << "gpu_check: device " << gpu.device_name << "\n";

  std::ostringstream table;
  table << "GPU path (`regatta::pairwise::cuda::reduce<S>`, " << gpu.device_name
        << ") against the CPU path (`regatta::pairwise::reduce<double>`) on the same inputs (rounded to S); "
           "d = e = 64; error = max |x̂ − x| / max(|x|, 1) over all rows.\n\n"
        << "| n = m | score | mask | dtype | error lse | error out | tolerance | GPU end-to-end ms | CPU ms "
           "| verdict |\n"
        << "|---:|---|---|---|---:|---:|---:|---:|---:|---|\n";
  std::ofstream timing(results_dir / "timing.csv");
  timing << "n,mask,dtype,kernel_ms,end_to_end_ms,cpu_ms\n";
  bool all_ok = true;

  const std::vector<Config> configs = {{pw::ScoreKind::dot, pw::MaskKind::none},
                                       {pw::ScoreKind::dot, pw::MaskKind::causal},
                                       {pw::ScoreKind::neg_sq_dist, pw::MaskKind::none}};
  for (const Eigen::Index n : sizes) {
    const Matrix<double> x = rounded_random(n, kDim, 1 + 10 * n);
    const Matrix<double> y = rounded_random(n, kDim, 2 + 10 * n);
    const Matrix<double> v = rounded_random(n, kDim, 3 + 10 * n);
    const std::string prefix = "n" + std::to_string(n);
    dump(dump_dir / (prefix + "_q.f32"), x);
    dump(dump_dir / (prefix + "_k.f32"), y);
    dump(dump_dir / (prefix + "_v.f32"), v);
    for (const Config& config : configs) {
      const double scale =
          config.score == pw::ScoreKind::dot ? 1.0 / std::sqrt(double(kDim)) : 1.0 / double(kDim);
      const pw::Kernel kernel{config.score, scale, 1.0, config.mask};
      pw::Problem<double> problem;
      problem.queries = &x;
      problem.keys = &y;
      problem.values = &v;
      const auto start = std::chrono::steady_clock::now();
      const pw::Result<double> cpu = pw::reduce<double>(problem, kernel);
      const double cpu_ms = 1e3 * seconds_since(start);

      pw::Result<float> gpu_float;
      const Row rows[2] = {check<float>(x, y, v, kernel, cpu, &gpu_float),
                           check<double>(x, y, v, kernel, cpu, nullptr)};
      const char* dtypes[2] = {"float32", "float64"};
      const double tolerances[2] = {tolerance<float>(), tolerance<double>()};
      for (int t = 0; t < 2; ++t) {
        all_ok = all_ok && rows[t].ok;
        table << "| " << n << " | " << pw::to_string(config.score) << " | " << pw::to_string(config.mask)
              << " | " << dtypes[t] << " | " << format_error(rows[t].lse_error) << " | "
              << format_error(rows[t].out_error) << " | " << format_error(tolerances[t]) << " | "
              << std::fixed << std::setprecision(2) << rows[t].end_to_end_ms << " | " << cpu_ms << " | "
              << (rows[t].ok ? "pass" : "**FAIL**") << " |\n";
        table.unsetf(std::ios::fixed);
      }
      if (config.score == pw::ScoreKind::dot) {
        dump(dump_dir / (prefix + "_out_" + pw::to_string(config.mask) + ".f32"), gpu_float.out);
        const double ms[2] = {kernel_ms<float>(x, y, v, kernel), kernel_ms<double>(x, y, v, kernel)};
        for (int t = 0; t < 2; ++t) {
          timing << n << "," << pw::to_string(config.mask) << "," << dtypes[t] << "," << ms[t] << ","
                 << rows[t].end_to_end_ms << "," << cpu_ms << "\n";
        }
      }
      std::cerr << "gpu_check: n = " << n << ", " << pw::to_string(config.score) << ", "
                << pw::to_string(config.mask) << ": " << (rows[0].ok && rows[1].ok ? "pass" : "FAIL") << "\n";
    }
  }
  std::ofstream(results_dir / "correctness.md") << table.str();
  std::cout << table.str();
  return all_ok ? 0 : 1;
}
