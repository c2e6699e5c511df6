#pragma once
// Discrete probability measures mu = sum_i a_i delta_{x_i} on R^d (docs/math/transport.md#setting).
//
// A DiscreteMeasure<S> owns its atoms (an n x d row-major matrix, row i is x_i) and its weights a (n >= 1,
// a_i >= 0, finite, sum a = 1 within normalisation_tolerance(n)). Every constructor validates its input and
// throws InputError naming the argument ("atoms", "weights", "coefficients", "measures") on bad input:
// empty measures, zero dimension, NaN/Inf atoms, negative/NaN weights, wrong lengths, unnormalised weights.
// Zero weights are allowed (such atoms carry no mass). Instantiated for float, double, mpfr and interval.
#include <cstddef>
#include <span>
#include <utility>

#include <regatta/core/checks.hpp>
#include <regatta/core/eigen.hpp>

namespace regatta::measures {

template <class S>
class DiscreteMeasure {
 public:
  /// mu = sum_i weights_i delta_{atoms.row(i)}; validated as described above (no rescaling).
  DiscreteMeasure(Matrix<S> atoms, Vector<S> weights);

  /// The empirical measure (1/n) sum_i delta_{x_i}.
  static DiscreteMeasure empirical(Matrix<S> atoms);
  /// Weighted measure. With normalize = true the weights are divided by their sum instead of being
  /// rejected when they do not sum to 1; negative, NaN/Inf or all-zero weights are still rejected.
  static DiscreteMeasure from_weights(Matrix<S> atoms, Vector<S> weights, bool normalize = false);

  Eigen::Index size() const { return atoms_.rows(); }
  Eigen::Index dim() const { return atoms_.cols(); }
  const Matrix<S>& atoms() const { return atoms_; }
  const Vector<S>& weights() const { return weights_; }

  /// max_i ||x_i|| over *all* atoms (zero-weight atoms included). For interval: an enclosure of the max.
  S support_radius() const;
  /// sum_i a_i x_i.
  Vector<S> mean() const;
  /// sum_i a_i ||x_i||^2.
  S second_moment() const;

  /// T_# mu = sum_i a_i delta_{T(x_i)}; `map` takes a Vector<S> (one atom) and returns a Vector<S> of any
  /// fixed length d' >= 1 (the same for every atom; checked). Non-finite images throw InputError("map").
  template <class Map>
  DiscreteMeasure push_forward(Map&& map) const;

  /// sum_k coefficients_k measures_k: all measures of the same dimension, coefficients a probability
  /// vector (validated like weights). The atoms are concatenated (duplicates are not merged).
  static DiscreteMeasure mixture(std::span<const DiscreteMeasure> measures, const Vector<S>& coefficients);

 private:
  struct Unchecked {};
  DiscreteMeasure(Unchecked, Matrix<S> atoms, Vector<S> weights)
      : atoms_(std::move(atoms)), weights_(std::move(weights)) {}

  Matrix<S> atoms_;
  Vector<S> weights_;
};

template <class S>
template <class Map>
DiscreteMeasure<S> DiscreteMeasure<S>::push_forward(Map&& map) const {
  Matrix<S> out;
  for (Eigen::Index i = 0; i < size(); ++i) {
    const Vector<S> xi = atoms_.row(i).transpose();
    const Vector<S> yi = map(xi);
    if (i == 0) {
      if (yi.size() == 0) throw InputError("map", "returned an empty vector");
      out.resize(size(), yi.size());
    } else if (yi.size() != out.cols()) {
      throw InputError("map", "returned vectors of different lengths (" + std::to_string(out.cols()) +
                                  " and " + std::to_string(yi.size()) + ")");
    }
    out.row(i) = yi.transpose();
  }
  check_finite("map", out);
  return DiscreteMeasure(Unchecked{}, std::move(out), weights_);
}

#define REGATTA_DECLARE_DISCRETE_MEASURE(S) extern template class DiscreteMeasure<S>;
REGATTA_FOR_EACH_SCALAR(REGATTA_DECLARE_DISCRETE_MEASURE)
#undef REGATTA_DECLARE_DISCRETE_MEASURE

}  // namespace regatta::measures
