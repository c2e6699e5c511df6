// Interrupts and progress of long library calls (interrupt.hpp).
#include "interrupt.hpp"

#include <utility>

namespace regatta::python {

Interrupter::Interrupter(py::object progress, std::chrono::milliseconds interval)
    : progress_(std::move(progress)), interval_(interval), last_(std::chrono::steady_clock::now()) {}

Interrupter::~Interrupter() {
  // The callback is a Python object: drop the reference with the GIL held, whichever thread state we are in.
  if (PyGILState_Check()) {
    progress_ = py::object();
  } else {
    py::gil_scoped_acquire gil;
    progress_ = py::object();
  }
}

void Interrupter::call(std::string_view stage, std::int64_t done, std::int64_t total) {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  if (progress_ && !progress_.is_none()) progress_(py::str(std::string(stage)), done, total);
}

void Interrupter::poll(std::string_view stage, std::int64_t done, std::int64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < interval_) return;
  last_ = now;
  py::gil_scoped_acquire gil;
  call(stage, done, total);
}

void Interrupter::report(std::string_view stage, std::int64_t done, std::int64_t total) {
  if (PyGILState_Check()) {
    call(stage, done, total);
  } else {
    py::gil_scoped_acquire gil;
    call(stage, done, total);
  }
}

}  // namespace regatta::python
