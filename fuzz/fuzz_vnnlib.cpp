// libFuzzer target: the VNNLIB reader (graph/src/vnnlib.cpp, docs/verify.md). Bad input must be one
// InputError line; an accepted property must keep its invariants (finite boxes, inner inside outer, output
// indices in range).
#include <cmath>
#include <cstdlib>

#include <regatta/graph/vnnlib.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  graph::VnnlibLimits limits;
  limits.max_variables = 1 << 16;
  limits.max_disjuncts = 1 << 10;
  limits.max_atoms = 1 << 14;
  try {
    const graph::Property p = graph::parse_vnnlib(std::string_view(reinterpret_cast<const char*>(data), size),
                                                  "fuzz.vnnlib", limits);
    for (std::size_t k = 0; k < p.input_count; ++k) {
      const bool ok = std::isfinite(p.outer_lower[k]) && std::isfinite(p.outer_upper[k]) &&
                      p.outer_lower[k] <= p.outer_upper[k] && p.outer_lower[k] <= p.inner_lower[k] &&
                      p.inner_upper[k] <= p.outer_upper[k];
      if (!ok) std::abort();
    }
    for (const auto& d : p.disjuncts)
      for (const auto& a : d)
        for (const graph::Term* t : {&a.greater, &a.smaller})
          if (t->output >= static_cast<int>(p.output_count) ||
              (t->output < 0 &&
               !(std::isfinite(t->constant.lower) && t->constant.lower <= t->constant.upper)))
            std::abort();
    try {
      graph::check_property_size(p, p.input_count + 1, p.output_count);
      std::abort();  // the counts differ: must be refused
    } catch (const InputError& e) {
      fuzz::check_message(e);
    }
  } catch (const InputError& e) {
    fuzz::check_message(e);
  }
  return 0;
}
