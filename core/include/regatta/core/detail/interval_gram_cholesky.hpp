#pragma once
// Internal: the interval Gram matrix and interval Cholesky behind spectral_norm_upper_certified.
//
// Written on raw mpfi_t at a fixed precision with preallocated storage: the O(N²K + N³) inner loops then do
// no allocation (a Boost number temporary costs an mpfi_init2/mpfi_clear pair per operation).
#include <mpfi.h>
#include <mpfr.h>

#include <cstddef>
#include <memory>

namespace regatta::detail {

/// A fixed-size array of initialised mpfi_t at one precision.
class MpfiArray {
 public:
  MpfiArray(std::size_t size, mpfr_prec_t precision) : size_(size), data_(new __mpfi_struct[size]) {
    for (std::size_t i = 0; i < size_; ++i) mpfi_init2(&data_[i], precision);
  }
  ~MpfiArray() {
    for (std::size_t i = 0; i < size_; ++i) mpfi_clear(&data_[i]);
  }
  MpfiArray(const MpfiArray&) = delete;
  MpfiArray& operator=(const MpfiArray&) = delete;
  mpfi_ptr operator[](std::size_t i) { return &data_[i]; }
  mpfi_srcptr operator[](std::size_t i) const { return &data_[i]; }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_;
  std::unique_ptr<__mpfi_struct[]> data_;
};

/// True when every entry is a point interval [x, x].
inline bool all_points(const MpfiArray& a) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!mpfr_equal_p(&a[i]->left, &a[i]->right)) return false;
  return true;
}

/// G(i, j) ⊇ Σ_k F_i[k] F_j[k] for j ≤ i (lower triangle of an N×N row-major array), where F_i is the i-th of
/// N vectors of length K stored contiguously (factor[i*K + k]). Rows are shared among OpenMP threads.
/// Point factors (double, float, mpfr inputs) take a fast path: each product is formed once, rounded to
/// nearest, and used for both endpoints when MPFR reports it exact (always so for binary64 entries at
/// >= 106 bits); otherwise it is recomputed rounded down and up. The sums are rounded down / up. Interval
/// factors use MPFI, with mpfi_sqr on the diagonal so that it stays nonnegative when entries contain 0.
inline void interval_gram_lower(const MpfiArray& factor, std::size_t n, std::size_t k_len, MpfiArray& gram,
                                mpfr_prec_t precision) {
  const bool points = all_points(factor);
  const auto rows = static_cast<long>(n);
  // Threads only pay off beyond ~10^6 multiply-adds (N = 128 square); below, start-up and contention
  // dominate.
  const bool parallel = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(k_len) > 2e6;
#pragma omp parallel if (parallel)
  {
    MpfiArray scratch(2, precision);  // per thread; as points: lo/hi sums in [0], products in [1]
    mpfr_ptr lo = &scratch[0]->left;
    mpfr_ptr hi = &scratch[0]->right;
    mpfr_ptr prod = &scratch[1]->left;
    mpfr_ptr prod_up = &scratch[1]->right;
#pragma omp for schedule(dynamic, 4)
    for (long row = 0; row < rows; ++row) {
      const auto i = static_cast<std::size_t>(row);
      for (std::size_t j = 0; j <= i; ++j) {
        if (points) {
          mpfr_set_ui(lo, 0, MPFR_RNDN);
          mpfr_set_ui(hi, 0, MPFR_RNDN);
          for (std::size_t k = 0; k < k_len; ++k) {
            mpfr_srcptr a = &factor[i * k_len + k]->left;
            mpfr_srcptr b = &factor[j * k_len + k]->left;
            if (mpfr_mul(prod, a, b, MPFR_RNDN) == 0) {
              mpfr_add(lo, lo, prod, MPFR_RNDD);
              mpfr_add(hi, hi, prod, MPFR_RNDU);
            } else {
              mpfr_mul(prod, a, b, MPFR_RNDD);
              mpfr_mul(prod_up, a, b, MPFR_RNDU);
              mpfr_add(lo, lo, prod, MPFR_RNDD);
              mpfr_add(hi, hi, prod_up, MPFR_RNDU);
            }
          }
          mpfi_interv_fr(gram[i * n + j], lo, hi);
        } else {
          mpfi_ptr acc = scratch[0];
          mpfi_ptr term = scratch[1];
          mpfi_set_ui(acc, 0);
          for (std::size_t k = 0; k < k_len; ++k) {
            if (i == j)
              mpfi_sqr(term, factor[i * k_len + k]);
            else
              mpfi_mul(term, factor[i * k_len + k], factor[j * k_len + k]);
            mpfi_add(acc, acc, term);
          }
          mpfi_set(gram[i * n + j], acc);
        }
      }
    }
  }
}

/// Interval Cholesky of A = θ²I − G (lower triangle of `gram`, N×N row-major), left-looking, into `work`.
/// Returns true iff every pivot radicand A_jj − Σ_k L_jk² has a strictly positive lower endpoint; then every
/// symmetric matrix in A is positive definite (Alefeld & Mayer 1993: each real Cholesky quantity of a member
/// of A lies in the computed interval, by inclusion isotonicity). Stops at the first non-positive pivot.
inline bool shifted_interval_cholesky_succeeds(const MpfiArray& gram, std::size_t n, double theta,
                                               MpfiArray& work, mpfr_prec_t precision) {
  MpfiArray scratch(3, precision);
  mpfi_ptr theta_sq = scratch[0];
  mpfi_ptr term = scratch[1];
  mpfi_ptr acc = scratch[2];
  mpfi_set_d(theta_sq, theta);
  mpfi_sqr(theta_sq, theta_sq);
  for (std::size_t j = 0; j < n; ++j) {
    // Pivot: θ² − G_jj − Σ_{k<j} L_jk².
    mpfi_sub(acc, theta_sq, gram[j * n + j]);
    for (std::size_t k = 0; k < j; ++k) {
      mpfi_sqr(term, work[j * n + k]);
      mpfi_sub(acc, acc, term);
    }
    if (mpfi_is_strictly_pos(acc) <= 0) return false;
    mpfi_sqrt(work[j * n + j], acc);
    // Column j below the pivot: (−G_ij − Σ_{k<j} L_ik L_jk) / L_jj.
    for (std::size_t i = j + 1; i < n; ++i) {
      mpfi_neg(acc, gram[i * n + j]);
      for (std::size_t k = 0; k < j; ++k) {
        mpfi_mul(term, work[i * n + k], work[j * n + k]);
        mpfi_sub(acc, acc, term);
      }
      mpfi_div(work[i * n + j], acc, work[j * n + j]);
    }
  }
  return true;
}

}  // namespace regatta::detail
