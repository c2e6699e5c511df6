// libFuzzer target: the .npz reader (libzip archive, member list checks, each member's .npy).
#include <regatta/core/io/npz.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  try {
    // A 64 MiB member limit keeps a lucky mutation from spending the run inflating a large member.
    for (const auto& [name, a] : io::parse_npz(fuzz::bytes_of(data, size), "fuzz.npz", 64u << 20))
      if (a.converted() && a.data.size() != a.size()) std::abort();
  } catch (const InputError& e) {
    fuzz::check_message(e);
  }
  return 0;
}
