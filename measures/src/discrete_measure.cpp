#include <regatta/measures/discrete_measure.hpp>

#include <string>

#include <regatta/core/precision.hpp>

namespace regatta::measures {

namespace {

template <class S>
S larger(const S& a, const S& b) {
  if constexpr (scalar_traits<S>::is_interval) {
    // The max of two sets of reals lies in [max of lowers, max of uppers].
    const mpfr lo = lower_bound(a) > lower_bound(b) ? lower_bound(a) : lower_bound(b);
    const mpfr hi = upper_bound(a) > upper_bound(b) ? upper_bound(a) : upper_bound(b);
    return make_interval(lo, hi);
  } else {
    return a < b ? b : a;
  }
}

template <class S>
void check_atoms(const Matrix<S>& atoms) {
  check_nonempty("atoms", atoms.rows());
  if (atoms.cols() == 0) throw InputError("atoms", "has zero columns (dimension 0)");
  check_finite("atoms", atoms);
}

}  // namespace

template <class S>
DiscreteMeasure<S>::DiscreteMeasure(Matrix<S> atoms, Vector<S> weights)
    : atoms_(std::move(atoms)), weights_(std::move(weights)) {
  check_atoms(atoms_);
  check_rows("weights", weights_.size(), atoms_.rows());
  check_normalized("weights", weights_);
}

template <class S>
DiscreteMeasure<S> DiscreteMeasure<S>::empirical(Matrix<S> atoms) {
  check_atoms(atoms);
  const Eigen::Index n = atoms.rows();
  Vector<S> w(n);
  const S one_over_n = S(1) / S(static_cast<double>(n));
  for (Eigen::Index i = 0; i < n; ++i) w(i) = one_over_n;
  return DiscreteMeasure(Unchecked{}, std::move(atoms), std::move(w));
}

template <class S>
DiscreteMeasure<S> DiscreteMeasure<S>::from_weights(Matrix<S> atoms, Vector<S> weights, bool normalize) {
  if (!normalize) return DiscreteMeasure(std::move(atoms), std::move(weights));
  check_atoms(atoms);
  check_rows("weights", weights.size(), atoms.rows());
  check_nonnegative("weights", weights);
  S total(0);
  for (Eigen::Index i = 0; i < weights.size(); ++i) total += weights(i);
  if (!(scalar_traits<S>::upper(total) > 0)) throw InputError("weights", "are all zero");
  for (Eigen::Index i = 0; i < weights.size(); ++i) weights(i) /= total;
  if (!scalar_traits<S>::is_finite(total) || !(scalar_traits<S>::lower(total) > 0))
    throw InputError("weights", "have a sum that is not a positive finite number");
  return DiscreteMeasure(Unchecked{}, std::move(atoms), std::move(weights));
}

template <class S>
S DiscreteMeasure<S>::support_radius() const {
  using std::sqrt;
  S r = sqrt(S(atoms_.row(0).squaredNorm()));
  for (Eigen::Index i = 1; i < size(); ++i) r = larger(r, S(sqrt(S(atoms_.row(i).squaredNorm()))));
  return r;
}

template <class S>
Vector<S> DiscreteMeasure<S>::mean() const {
  Vector<S> m = Vector<S>::Zero(dim());
  for (Eigen::Index i = 0; i < size(); ++i) m += weights_(i) * atoms_.row(i).transpose();
  return m;
}

template <class S>
S DiscreteMeasure<S>::second_moment() const {
  S s(0);
  for (Eigen::Index i = 0; i < size(); ++i) s += weights_(i) * S(atoms_.row(i).squaredNorm());
  return s;
}

template <class S>
DiscreteMeasure<S> DiscreteMeasure<S>::mixture(std::span<const DiscreteMeasure> measures,
                                               const Vector<S>& coefficients) {
  check_nonempty("measures", static_cast<Eigen::Index>(measures.size()));
  check_rows("coefficients", coefficients.size(), static_cast<Eigen::Index>(measures.size()));
  check_normalized("coefficients", coefficients);
  const Eigen::Index d = measures[0].dim();
  Eigen::Index total = 0;
  for (std::size_t k = 0; k < measures.size(); ++k) {
    if (measures[k].dim() != d)
      throw InputError("measures", "measure " + std::to_string(k) + " has dimension " +
                                       std::to_string(measures[k].dim()) + ", expected " + std::to_string(d));
    total += measures[k].size();
  }
  Matrix<S> atoms(total, d);
  Vector<S> weights(total);
  Eigen::Index row = 0;
  for (std::size_t k = 0; k < measures.size(); ++k) {
    const auto& mk = measures[k];
    atoms.middleRows(row, mk.size()) = mk.atoms();
    for (Eigen::Index i = 0; i < mk.size(); ++i)
      weights(row + i) = coefficients(Eigen::Index(k)) * mk.weights()(i);
    row += mk.size();
  }
  return DiscreteMeasure(Unchecked{}, std::move(atoms), std::move(weights));
}

#define REGATTA_DEFINE_DISCRETE_MEASURE(S) template class DiscreteMeasure<S>;
REGATTA_FOR_EACH_SCALAR(REGATTA_DEFINE_DISCRETE_MEASURE)
#undef REGATTA_DEFINE_DISCRETE_MEASURE

}  // namespace regatta::measures
