// libFuzzer target: the safetensors reader (length prefix, JSON header under its limits, tiling, decoding).
#include <regatta/core/io/safetensors.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  try {
    for (const auto& [name, a] : io::parse_safetensors(fuzz::bytes_of(data, size), "fuzz.safetensors"))
      if (a.converted() && a.data.size() != a.size()) std::abort();
  } catch (const InputError& e) {
    fuzz::check_message(e);
  }
  return 0;
}
