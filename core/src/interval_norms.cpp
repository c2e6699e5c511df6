// Certified norms of interval64 matrices (interval_norms.hpp).
#include <regatta/core/interval_norms.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace regatta {

namespace {

constexpr double unbounded_norm = std::numeric_limits<double>::infinity();

/// max over the rows of M (columns when `columns`) of the sum of magnitudes, each sum rounded up.
double largest_magnitude_sum(const Matrix<interval64>& M, bool columns) {
  if (!all_finite(M)) return unbounded_norm;
  const Eigen::Index lines = columns ? M.cols() : M.rows(), length = columns ? M.rows() : M.cols();
  double best = 0;
  for (Eigen::Index a = 0; a < lines; ++a) {
    interval64 sum(0.0);
    for (Eigen::Index b = 0; b < length; ++b) sum = sum + interval64(magnitude(columns ? M(b, a) : M(a, b)));
    best = std::max(best, sum.upper());
  }
  return best;
}

}  // namespace

bool all_finite(const Matrix<interval64>& M) {
  for (Eigen::Index k = 0; k < M.size(); ++k)
    if (!std::isfinite(M.data()[k].lower()) || !std::isfinite(M.data()[k].upper())) return false;
  return true;
}

double inf_norm_upper(const Matrix<interval64>& M) { return largest_magnitude_sum(M, false); }

double one_norm_upper(const Matrix<interval64>& M) { return largest_magnitude_sum(M, true); }

double frobenius_norm_upper(const Matrix<interval64>& M) {
  if (!all_finite(M)) return unbounded_norm;
  interval64 sum(0.0);
  for (Eigen::Index k = 0; k < M.size(); ++k) sum = sum + square(interval64(magnitude(M.data()[k])));
  return sqrt(interval64(sum.upper())).upper();
}

double spectral_norm_upper(const Matrix<interval64>& M) {
  if (!all_finite(M)) return unbounded_norm;
  return spectral_norm_upper_fast(M).upper;
}

CertifiedNormBound spectral_norm_bound(const Matrix<interval64>& M) {
  CertifiedNormBound two = spectral_norm_upper_fast(M);
  if (two.method != "binary64-cholesky") {
    const CertifiedNormBound slow = spectral_norm_upper_certified<interval64>(M);
    if (slow.upper < two.upper) two = slow;
  }
  return two;
}

}  // namespace regatta
