#pragma once
// Long library calls from Python: the GIL is released around them, and the library's progress / poll hooks
// come back here, at most every `interval`, to take the GIL briefly, run Python's signal handlers
// (PyErr_CheckSignals: a Ctrl-C becomes KeyboardInterrupt) and call the user's progress callback. A pending
// Python exception (KeyboardInterrupt, or one raised by the callback) is thrown as py::error_already_set,
// which unwinds the computation (the library lets exceptions other than InputError through its loops and
// owns no threads across calls) and reaches Python unchanged.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>

namespace regatta::python {

namespace py = pybind11;

class Interrupter {
 public:
  /// `progress`: None or a callable progress(stage: str, done: int, total: int).
  explicit Interrupter(py::object progress,
                       std::chrono::milliseconds interval = std::chrono::milliseconds(25));
  ~Interrupter();
  Interrupter(const Interrupter&) = delete;
  Interrupter& operator=(const Interrupter&) = delete;

  /// Called by the library without the GIL; throws py::error_already_set on a pending exception.
  void poll(std::string_view stage, std::int64_t done, std::int64_t total);
  /// The same without the time throttle (the end of a computation, or between claims); GIL held or not.
  void report(std::string_view stage, std::int64_t done, std::int64_t total);

 private:
  void call(std::string_view stage, std::int64_t done, std::int64_t total);
  py::object progress_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace regatta::python
