#include <regatta/core/io/array.hpp>

#include <cassert>
#include <cmath>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>

namespace regatta::io {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

std::string shape_repr(const std::vector<std::size_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

std::size_t Array::size() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;  // readers guarantee the product fits (it equals data.size())
  return n;
}

namespace {

std::string array_description(const Array& a) {
  return "is an array of shape " + shape_repr(a.shape) + " (" + std::to_string(a.shape.size()) + "-D)";
}

}  // namespace

void require_converted(const Array& a) {
  if (!a.converted())
    throw InputError(a.source, "is a tensor of " + a.unconverted_dtype +
                                   "; only float16, bfloat16, float32 and float64 arrays can be used");
}

Matrix<double> Array::matrix() const {
  require_converted(*this);
  assert(data.size() == size());
  Eigen::Index rows = 0, cols = 0;
  if (shape.size() == 2) {
    rows = static_cast<Eigen::Index>(shape[0]);
    cols = static_cast<Eigen::Index>(shape[1]);
  } else if (shape.size() == 1) {
    rows = static_cast<Eigen::Index>(shape[0]);
    cols = 1;
  } else {
    throw InputError(source, array_description(*this) + "; expected a matrix (2-D) or a vector (1-D)");
  }
  Matrix<double> m(rows, cols);
  for (std::size_t i = 0; i < data.size(); ++i) m.data()[i] = data[i];  // both row-major
  return m;
}

Vector<double> Array::vector() const {
  require_converted(*this);
  assert(data.size() == size());
  const bool ok = shape.size() == 1 || (shape.size() == 2 && (shape[0] == 1 || shape[1] == 1));
  if (!ok) throw InputError(source, array_description(*this) + "; expected a vector (1-D, 1 x n or n x 1)");
  Vector<double> v(static_cast<Eigen::Index>(data.size()));
  for (std::size_t i = 0; i < data.size(); ++i) v[static_cast<Eigen::Index>(i)] = data[i];
  return v;
}

Array from_matrix(const Matrix<double>& m, std::string source) {
  Array a;
  a.shape = {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
  a.data.assign(m.data(), m.data() + m.size());  // row-major storage is C order
  a.source_dtype = DType::f64;
  a.source = std::move(source);
  return a;
}

void require_finite(const Array& a) {
  require_converted(a);
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if (std::isfinite(a.data[i])) continue;
    // Multi-index of flat position i in C order.
    std::vector<std::size_t> index(a.shape.size());
    std::size_t rest = i;
    for (std::size_t k = a.shape.size(); k-- > 0;) {
      index[k] = rest % a.shape[k];
      rest /= a.shape[k];
    }
    std::string where = "entry " + std::to_string(i);
    if (a.shape.size() > 1) where += " (index " + shape_repr(index) + ")";
    throw InputError(a.source, where + (std::isnan(a.data[i]) ? " is NaN" : " is infinite") +
                                   "; all values must be finite");
  }
}

}  // namespace regatta::io
