// regatta._regatta: the compiled part of the Python module (python/CMakeLists.txt). Bad input raises
// regatta.InputError, a ValueError whose message is the library's one line (regatta::InputError::what()).
#include <pybind11/pybind11.h>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include "bindings.hpp"
#include "convert.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_regatta, m) {
  m.doc() = "regatta's C++ library (certified Lipschitz analysis of attention); use the package `regatta`";
  py::register_exception<regatta::InputError>(m, "InputError", PyExc_ValueError);

  m.def(
      "decimal",
      [](double x, int digits, const std::string& rounding) {
        regatta::Rounding r;
        if (rounding == "down")
          r = regatta::Rounding::down;
        else if (rounding == "up")
          r = regatta::Rounding::up;
        else if (rounding == "nearest")
          r = regatta::Rounding::nearest;
        else
          throw regatta::InputError("rounding",
                                    "must be down, up or nearest, got " + regatta::quoted(rounding));
        if (digits < 1 || digits > 40) throw regatta::InputError("digits", "must lie in [1, 40]");
        return regatta::to_decimal(x, digits, r);
      },
      py::arg("x"), py::arg("digits") = 10, py::arg("rounding") = "nearest",
      "x as decimal text with `digits` significant digits, rounded down, up or to nearest (exact, MPFR)");
  m.def("_conversion_count", &regatta::python::conversion_count,
        "Input arrays that needed a conversion buffer (not C-contiguous float64) since the module loaded");
  m.def("_input_copy_count", &regatta::python::input_copy_count,
        "Input arrays copied into an owning library matrix since the module loaded (the forward passes read "
        "C-contiguous float64 inputs in place and copy none)");

  regatta::python::bind_layer(m);
  regatta::python::bind_lipschitz(m);
  regatta::python::bind_transport(m);
  regatta::python::bind_proofs(m);
  regatta::python::bind_model(m);
  regatta::python::bind_measure(m);
  regatta::python::bind_graph(m);
}
