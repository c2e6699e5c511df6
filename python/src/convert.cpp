// NumPy arrays into library matrices (convert.hpp).
#include "convert.hpp"

#include <atomic>
#include <sstream>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>

namespace regatta::python {

namespace {

std::atomic<std::int64_t> conversions{0};
std::atomic<std::int64_t> input_copies{0};

}  // namespace

std::string shape_text(const py::array& a) {
  std::ostringstream os;
  os << "(";
  for (py::ssize_t k = 0; k < a.ndim(); ++k) os << (k ? ", " : "") << a.shape(k);
  os << (a.ndim() == 1 ? ",)" : ")");
  return os.str();
}

/// `object` as a C-contiguous float64 array; real dtypes only (float16/32/64, integers, bool refused).
py::array_t<double, py::array::c_style> as_doubles(const py::handle& object, const std::string& name) {
  if (object.is_none())
    throw InputError(name, "expected an array (NumPy array, torch tensor or nested list), got None");
  py::array a = py::array::ensure(object);
  if (!a) {
    PyErr_Clear();
    throw InputError(name, "expected an array (NumPy array, torch tensor or nested list), got " +
                               std::string(py::str(py::type::handle_of(object).attr("__name__"))));
  }
  const char kind = a.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u')
    throw InputError(name, "has dtype " + std::string(py::str(a.dtype())) +
                               ", expected a real floating-point (or integer) array");
  using Doubles = py::array_t<double, py::array::c_style>;
  if (py::isinstance<Doubles>(a)) return py::reinterpret_borrow<Doubles>(a);
  ++conversions;
  auto converted = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!converted) throw py::error_already_set();
  return converted;
}

std::int64_t conversion_count() { return conversions.load(); }
std::int64_t input_copy_count() { return input_copies.load(); }

MatrixView matrix_view(const py::handle& object, const std::string& name, Eigen::Index cols) {
  auto a = as_doubles(object, name);
  if (a.ndim() != 2) throw InputError(name, "expected a 2-D array (n x d), got shape " + shape_text(a));
  const Eigen::Index rows = a.shape(0), columns = a.shape(1);
  if (rows == 0 || columns == 0) throw InputError(name, "is empty (shape " + shape_text(a) + ")");
  if (cols != 0 && columns != cols)
    throw InputError(
        name, "has " + std::to_string(columns) + " columns, the layer expects d = " + std::to_string(cols));
  MatrixView view(std::move(a));
  check_finite(name, view.map());
  return view;
}

Matrix<double> matrix_arg(const py::handle& object, const std::string& name, Eigen::Index cols) {
  const MatrixView view = matrix_view(object, name, cols);
  ++input_copies;
  return view.map();
}

Vector<double> vector_arg(const py::handle& object, const std::string& name, Eigen::Index size) {
  const auto a = as_doubles(object, name);
  if (a.ndim() != 1) throw InputError(name, "expected a 1-D array, got shape " + shape_text(a));
  const Eigen::Index n = a.shape(0);
  if (size != 0 && n != size)
    throw InputError(name, "has length " + std::to_string(n) + ", expected " + std::to_string(size));
  const Eigen::Map<const Vector<double>> view(a.data(), n);
  check_finite(name, view);
  return view;
}

Matrix<double> atoms_arg(const py::handle& object, const std::string& name) {
  const auto a = as_doubles(object, name);
  if (a.ndim() == 1) {
    if (a.shape(0) == 0) throw InputError(name, "has no atoms (empty array)");
    const Eigen::Map<const Matrix<double>> view(a.data(), a.shape(0), 1);
    check_finite(name, view);
    return view;
  }
  if (a.ndim() != 2)
    throw InputError(name, "atoms must be a 1-D or 2-D array (n x d), got shape " + shape_text(a));
  return matrix_arg(a, name);
}

/// name -> array of a state dict (NumPy arrays; the Python layer converts torch tensors) as io::Arrays named
/// "collection:name". Integer and boolean tensors are listed unconverted, as the file readers do.
std::map<std::string, io::Array> tensors_of(const py::dict& tensors, const std::string& collection) {
  std::map<std::string, io::Array> out;
  for (const auto& [key, value] : tensors) {
    if (!py::isinstance<py::str>(key)) throw InputError(collection, "tensor names must be strings");
    const std::string name = key.cast<std::string>();
    io::Array a;
    a.source = collection + ":" + name;
    py::array array = py::array::ensure(value);
    if (!array) {
      PyErr_Clear();
      throw InputError(a.source, "is not an array");
    }
    for (py::ssize_t k = 0; k < array.ndim(); ++k) a.shape.push_back(std::size_t(array.shape(k)));
    const char kind = array.dtype().kind();
    if (kind != 'f') {
      a.unconverted_dtype = py::str(array.dtype());
    } else {
      const auto itemsize = array.dtype().itemsize();
      a.source_dtype = itemsize == 2 ? io::DType::f16 : itemsize == 4 ? io::DType::f32 : io::DType::f64;
      auto doubles = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
      if (!doubles) throw py::error_already_set();
      a.data.assign(doubles.data(), doubles.data() + doubles.size());
    }
    out.emplace(name, std::move(a));
  }
  return out;
}

}  // namespace regatta::python
