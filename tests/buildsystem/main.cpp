// Uses the installed headers and libraries: a stable log-sum-exp, a certified interval enclosure and the
// precision guard. Exits non-zero when a result is wrong.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <vector>

int main() {
  const std::vector<double> logits = {700.0, 700.0};
  const double lse = regatta::logsumexp<double>(logits);
  const double expected = 700.0 + std::log(2.0);
  if (std::abs(lse - expected) > 1e-12) {
    std::cerr << "logsumexp: got " << lse << ", expected " << expected << "\n";
    return 1;
  }
  regatta::PrecisionGuard guard(128);
  const std::vector<regatta::interval> x = {regatta::interval(0), regatta::interval(0)};
  const regatta::interval enclosure = regatta::logsumexp<regatta::interval>(x);
  const regatta::mpfr log2 = log(regatta::mpfr(2));
  if (!regatta::contains(enclosure, log2)) {
    std::cerr << "interval logsumexp does not enclose log 2\n";
    return 1;
  }
  // A certified spectral-norm bracket of diag(3, 4) (norm exactly 4), through a .npy round trip.
  regatta::Matrix<double> m = regatta::Matrix<double>::Zero(2, 2);
  m(0, 0) = 3;
  m(1, 1) = 4;
  const auto path = std::filesystem::temp_directory_path() / "regatta_consumer_matrix.npy";
  regatta::io::write_npy(path, m);
  const regatta::Matrix<double> back = regatta::io::read_npy(path).matrix();
  std::filesystem::remove(path);
  const regatta::CertifiedNormBound b = regatta::spectral_norm_upper_certified<double>(back);
  if (!(b.lower <= 4.0 && 4.0 <= b.upper && b.upper - b.lower < 1e-9)) {
    std::cerr << "spectral norm bracket [" << b.lower << ", " << b.upper << "] does not pin down 4\n";
    return 1;
  }
  std::cout << "regatta consumer: logsumexp(700, 700) = " << lse << "; log 2 enclosed in " << enclosure
            << "\n";
  return 0;
}
