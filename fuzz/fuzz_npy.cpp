// libFuzzer target: the .npy reader (header literal, dtype, shape, data), with both non-float policies.
#include <regatta/core/io/npy.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  for (const auto policy : {io::NonFloat::reject, io::NonFloat::list}) {
    try {
      const io::Array a = io::parse_npy(fuzz::bytes_of(data, size), "fuzz.npy", policy);
      if (a.converted() && a.data.size() != a.size()) std::abort();  // the Array contract
      if (!a.converted() && !a.data.empty()) std::abort();
    } catch (const InputError& e) {
      fuzz::check_message(e);
    }
  }
  return 0;
}
