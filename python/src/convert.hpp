#pragma once
// NumPy arrays (and anything NumPy can view as an array: lists, torch tensors through __array__) into the
// library's row-major Matrix<double> / Vector<double>, with the checks and messages of the library
// (core/checks.hpp): the argument's Python name is the subject of every InputError.
//
// Copies. The forward passes (attend, attend_cross, kernel) take MatrixRef<double> views: a C-contiguous
// float64 array reaches the library in place through matrix_view, with no copy at all. Any other array
// (float32, Fortran order, strided views) is converted by NumPy into one C-ordered float64 buffer first
// (counted by conversion_count). Entry points that keep their input (a linearisation stores its point) or
// take an owning Matrix copy it once through matrix_arg (counted by input_copy_count). Outputs are not
// copied: the Matrix a library call returns is moved into the NumPy array (pybind11's Eigen caster), which
// owns it. A view is read while the GIL is released, as NumPy's own routines do: another Python thread
// writing the same array meanwhile races with the computation.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <regatta/core/eigen.hpp>
#include <regatta/core/io/array.hpp>

namespace regatta::python {

namespace py = pybind11;

/// A 2-D real array viewed in place (the view keeps the array alive; destroy it with the GIL held).
class MatrixView {
 public:
  explicit MatrixView(py::array_t<double, py::array::c_style> array)
      : array_(std::move(array)), map_(array_.data(), array_.shape(0), array_.shape(1)) {}
  const Eigen::Map<const Matrix<double>>& map() const { return map_; }

 private:
  py::array_t<double, py::array::c_style> array_;
  Eigen::Map<const Matrix<double>> map_;
};

/// A 2-D real array named `name` with `cols` columns (0: any), nonempty and finite, read in place when it is
/// C-contiguous float64.
MatrixView matrix_view(const py::handle& object, const std::string& name, Eigen::Index cols = 0);

/// The same, copied into an owning Matrix (for entry points that keep or own their input).
/// An array's shape as Python prints it: "(3, 4)", "(5,)".
std::string shape_text(const py::array& a);

/// `object` as a C-contiguous float64 array; real dtypes only (float16/32/64, integers; complex, bool,
/// object and strings refused with an InputError naming `name`).
py::array_t<double, py::array::c_style> as_doubles(const py::handle& object, const std::string& name);

Matrix<double> matrix_arg(const py::handle& object, const std::string& name, Eigen::Index cols = 0);

/// A 1-D real array named `name` of length `size` (0: any), finite.
Vector<double> vector_arg(const py::handle& object, const std::string& name, Eigen::Index size = 0);

/// Atoms of a measure: a 2-D array, or a 1-D array read as n atoms of dimension 1 (as the CLI reads files).
Matrix<double> atoms_arg(const py::handle& object, const std::string& name);

/// name -> array of a state dict (NumPy arrays; the Python layer converts torch tensors) as io::Arrays named
/// "collection:name". Integer and boolean tensors are listed unconverted, as the file readers do.
std::map<std::string, io::Array> tensors_of(const py::dict& tensors, const std::string& collection);

/// How many input arrays needed NumPy's conversion buffer (non-float64 or non-C-contiguous) since the module
/// was loaded: the zero-copy test reads it.
std::int64_t conversion_count();
/// How many arrays matrix_arg copied into an owning Matrix since the module was loaded.
std::int64_t input_copy_count();

/// A number or None (an optional result of the library).
inline py::object optional_number(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

/// The ends every bracket result shares (lip::Bracket, lip::MeasureBracket): the headline pair, whether it
/// is certified, the estimates and the certified ends when computed.
template <class Bracket>
void put_bracket_ends(py::dict& out, const Bracket& b) {
  out["lower"] = b.lower;
  out["upper"] = b.upper;
  out["ratio"] = b.ratio;
  out["certified"] = b.certified;
  out["lower_estimate"] = b.lower_estimate;
  out["upper_estimate"] = b.upper_estimate;
  out["lower_certified"] = optional_number(b.lower_certified);
  out["upper_certified"] = optional_number(b.upper_certified);
}

}  // namespace regatta::python
