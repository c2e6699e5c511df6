#pragma once
// Shared by the libFuzzer targets: run a parser on the input; InputError (bad input, reported in one line)
// is the expected outcome for most inputs, anything else that escapes is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include <regatta/core/error.hpp>

namespace regatta::fuzz {

inline std::span<const std::byte> bytes_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

/// An InputError's message must be one printable line of bounded length.
inline void check_message(const InputError& e) {
  const std::string message = e.what();
  if (message.find('\n') != std::string::npos || message.size() > max_message_bytes + 40 ||
      printable(message) != message) {
    std::fprintf(stderr, "bad InputError message: %s\n", message.c_str());
    std::abort();
  }
}

}  // namespace regatta::fuzz
