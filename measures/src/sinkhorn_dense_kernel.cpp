// The materialised stabilised Gibbs kernel of the scaling Sinkhorn iteration (sinkhorn_dense_kernel.hpp).
#include "sinkhorn_dense_kernel.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace regatta::measures::detail {

namespace {
/// Columns per block of the build: the double exponents (8 KB) stay in L1 between the FMA and exp passes.
constexpr Eigen::Index build_block = 1024;
}  // namespace

template <class T>
DenseGibbsKernel<T>::DenseGibbsKernel(const Matrix<double>& x, const Matrix<double>& y, int threads)
    : x_(x),
      yk_(y.transpose()),
      x_sq_(x.rowwise().squaredNorm()),
      y_sq_(y.rowwise().squaredNorm()),
      k_(x.rows(), y.rows()),
      threads_(std::max(1, threads)) {}

template <class T>
void DenseGibbsKernel<T>::build(const Vector<double>& alpha, const Vector<double>& beta, double epsilon) {
  const Eigen::Index n = x_.rows(), m = yk_.cols(), d = x_.cols();
  // (α_i + β_j − C_ij)/ε = (α_i − ‖x_i‖²)/ε + (β_j − ‖y_j‖²)/ε + Σ_k (2 x_ik/ε) y_jk.
  const Eigen::ArrayXd column = (beta - y_sq_).array() / epsilon;
  const double q = 2 / epsilon;
#pragma omp parallel num_threads(threads_)
  {
    Eigen::ArrayXd t(build_block);
    Eigen::ArrayXf tf(build_block);
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < n; ++i) {
      const double row = (alpha(i) - x_sq_(i)) / epsilon;
      for (Eigen::Index j0 = 0; j0 < m; j0 += build_block) {
        const Eigen::Index len = std::min(build_block, m - j0);
        auto tc = t.head(len);
        tc = column.segment(j0, len) + row;
        for (Eigen::Index k = 0; k < d; ++k)
          tc += (q * x_(i, k)) * yk_.row(k).segment(j0, len).transpose().array();
        if constexpr (std::is_same_v<T, double>) {
          k_.row(i).segment(j0, len) = tc.exp().matrix().transpose();
        } else {
          // Rounded to float first: Eigen vectorises exp on a plain float array, not on a cast expression.
          auto fc = tf.head(len);
          fc = tc.template cast<float>();
          k_.row(i).segment(j0, len) = fc.exp().matrix().transpose();
        }
      }
    }
  }
}

template <class T>
void DenseGibbsKernel<T>::apply(const Vector<double>& w, Vector<double>& out) const {
  const Eigen::Index n = k_.rows(), m = k_.cols();
  out.resize(n);
  const double* wp = w.data();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (Eigen::Index i = 0; i < n; ++i) {
    const T* row = k_.data() + i * m;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (Eigen::Index j = 0; j < m; ++j) acc += double(row[j]) * wp[j];
    out(i) = acc;
  }
}

template <class T>
void DenseGibbsKernel<T>::apply_transpose(const Vector<double>& w, Vector<double>& out) const {
  const Eigen::Index n = k_.rows(), m = k_.cols();
  out.resize(m);
  std::vector<std::vector<double>> partial(static_cast<std::size_t>(threads_));
#pragma omp parallel num_threads(threads_)
  {
    std::vector<double>& acc = partial[std::size_t(omp_get_thread_num())];
    acc.assign(std::size_t(m), 0.0);
    double* a = acc.data();
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < n; ++i) {
      const double wi = w(i);
      if (wi == 0) continue;
      const T* row = k_.data() + i * m;
#pragma omp simd
      for (Eigen::Index j = 0; j < m; ++j) a[j] += double(row[j]) * wi;
    }
#pragma omp for schedule(static)
    for (Eigen::Index j = 0; j < m; ++j) {
      double s = 0;
      for (const std::vector<double>& p : partial)
        if (!p.empty()) s += p[std::size_t(j)];
      out(j) = s;
    }
  }
}

template <class T>
void DenseGibbsKernel<T>::sweep(const Vector<double>& w, double omega, const Vector<double>& a,
                                Vector<double>& u, Vector<double>& row_sums, Vector<double>& col_sums) const {
  const Eigen::Index n = k_.rows(), m = k_.cols();
  row_sums.resize(n);
  col_sums.resize(m);
  std::vector<std::vector<double>> partial(static_cast<std::size_t>(threads_));
  const double* wp = w.data();
#pragma omp parallel num_threads(threads_)
  {
    std::vector<double>& acc = partial[std::size_t(omp_get_thread_num())];
    acc.assign(std::size_t(m), 0.0);
    double* c = acc.data();
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < n; ++i) {
      const T* row = k_.data() + i * m;
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (Eigen::Index j = 0; j < m; ++j) s += double(row[j]) * wp[j];
      row_sums(i) = s;
      u(i) = omega == 1 ? 1 / s : std::exp((1 - omega) * std::log(u(i)) - omega * std::log(s));
      const double wi = a(i) * u(i);
#pragma omp simd
      for (Eigen::Index j = 0; j < m; ++j) c[j] += double(row[j]) * wi;
    }
#pragma omp for schedule(static)
    for (Eigen::Index j = 0; j < m; ++j) {
      double s = 0;
      for (const std::vector<double>& p : partial)
        if (!p.empty()) s += p[std::size_t(j)];
      col_sums(j) = s;
    }
  }
}

template class DenseGibbsKernel<double>;
template class DenseGibbsKernel<float>;

}  // namespace regatta::measures::detail
