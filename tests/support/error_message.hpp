#pragma once
// The what() of the InputError that f throws, or "no error" when it throws none.
#include <functional>
#include <regatta/core/error.hpp>
#include <string>

namespace regatta::testing {

inline std::string error_message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace regatta::testing
