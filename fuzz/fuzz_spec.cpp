// libFuzzer target: the CLI's spec-string parser (cli/spec.cpp) and its typed getters.
#include "spec.hpp"

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const cli::Spec spec("--random", text,
                         {"kind", "rank", "seed", "d", "heads", "head_dim", "scale", "x", "y", "z"});
    (void)spec.positional();
    try {
      (void)spec.get_int("rank", 1, 1, 1 << 20);
    } catch (const InputError& e) {
      fuzz::check_message(e);
    }
    try {
      (void)spec.get_seed("seed", 0);
    } catch (const InputError& e) {
      fuzz::check_message(e);
    }
    try {
      (void)spec.get_double("scale", 1.0, -1e300, 1e300);
    } catch (const InputError& e) {
      fuzz::check_message(e);
    }
    (void)spec.get_string("kind", "dense");
  } catch (const InputError& e) {
    fuzz::check_message(e);
  }
  return 0;
}
