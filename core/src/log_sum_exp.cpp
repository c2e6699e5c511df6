#include <regatta/core/log_sum_exp.hpp>

namespace regatta {

template <class S>
S logsumexp(std::span<const S> x) {
  auto acc = LogSumExp<S>::identity();
  for (const S& v : x) acc.push(v);
  return acc.finalize();
}

template <class S>
S logaddexp(const S& a, const S& b) {
  auto acc = LogSumExp<S>::identity();
  acc.push(a);
  acc.push(b);
  return acc.finalize();
}

template <class S>
Vector<S> softmax(const Vector<S>& x) {
  using std::exp;
  auto acc = LogSumExp<S>::identity();
  for (Eigen::Index k = 0; k < x.size(); ++k) acc.push(x(k));
  Vector<S> p(x.size());
  if (!acc.has_mass()) {
    // Empty / all -inf: the zero vector. +inf: the mass sits on the +inf entries, split evenly.
    // NaN: NaN everywhere.
    Eigen::Index n_inf = 0;
    for (Eigen::Index k = 0; k < x.size(); ++k) n_inf += ReductionOps<S>::is_pos_inf(x(k)) ? 1 : 0;
    for (Eigen::Index k = 0; k < x.size(); ++k) {
      if (acc.nan)
        p(k) = scalar_traits<S>::quiet_nan();
      else if (acc.positive_infinity)
        p(k) = ReductionOps<S>::is_pos_inf(x(k)) ? S(1) / S(static_cast<double>(n_inf)) : S(0);
      else
        p(k) = S(0);
    }
    return p;
  }
  for (Eigen::Index k = 0; k < x.size(); ++k) {
    if (ReductionOps<S>::is_neg_inf(x(k)))
      p(k) = S(0);
    else
      p(k) = exp(x(k) - acc.shift) / acc.scaled_sum;
  }
  return p;
}

template <class S>
Vector<S> log_softmax(const Vector<S>& x) {
  const S lse = logsumexp<S>(std::span<const S>(x.data(), static_cast<std::size_t>(x.size())));
  Vector<S> out(x.size());
  for (Eigen::Index k = 0; k < x.size(); ++k) {
    if (ReductionOps<S>::is_neg_inf(x(k)))
      out(k) = -scalar_traits<S>::infinity();
    else
      out(k) = x(k) - lse;
  }
  return out;
}

template <class S>
Vector<S> logsumexp_rows(const Matrix<S>& x) {
  Vector<S> out(x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    auto acc = LogSumExp<S>::identity();
    for (Eigen::Index j = 0; j < x.cols(); ++j) acc.push(x(i, j));
    out(i) = acc.finalize();
  }
  return out;
}

template <class S>
Matrix<S> softmax_rows(const Matrix<S>& x) {
  Matrix<S> out(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    out.row(i) = softmax<S>(Vector<S>(x.row(i).transpose())).transpose();
  return out;
}

#define REGATTA_INSTANTIATE_LSE(S)                        \
  template struct LogSumExp<S>;                           \
  template S logsumexp<S>(std::span<const S>);            \
  template S logaddexp<S>(const S&, const S&);            \
  template Vector<S> softmax<S>(const Vector<S>&);        \
  template Vector<S> log_softmax<S>(const Vector<S>&);    \
  template Vector<S> logsumexp_rows<S>(const Matrix<S>&); \
  template Matrix<S> softmax_rows<S>(const Matrix<S>&);
REGATTA_FOR_EACH_SCALAR(REGATTA_INSTANTIATE_LSE)
#undef REGATTA_INSTANTIATE_LSE

}  // namespace regatta
