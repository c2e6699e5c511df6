#pragma once
// NumPy arrays (and anything NumPy can view as an array: lists, torch tensors through __array__) into the
// library's row-major Matrix<double> / Vector<double>, with the checks and messages of the library
// (core/checks.hpp): the argument's Python name is the subject of every InputError.
//
// Copies. The library's entry points take `const Matrix<double>&`, an owning row-major matrix, so every
// input is copied once into one; a C-contiguous float64 array is read in place for that copy (no conversion
// buffer), any other array (float32, Fortran order, strided views) is converted by NumPy into one C-ordered
// float64 buffer first. Outputs are not copied: the Matrix a library call returns is moved into the NumPy
// array (pybind11's Eigen caster), which then owns it.
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

/// A 2-D real array named `name` with `cols` columns (0: any), nonempty and finite.
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
