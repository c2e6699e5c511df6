#pragma once
// Internal: how a claim file registers its claims. One line per claim, in the claim's own file:
//
//   REGATTA_REGISTER_CLAIM(MyClaim);                 // default constructor
//   REGATTA_REGISTER_CLAIM(CastinBound, Which::local);  // constructor arguments
//
// The registry (registry.cpp) constructs every registered claim once and orders them by ID; nothing else
// lists claims. docs/adding-a-claim.md walks through a new claim file.
//
// Static linking: an object file of a static library that nothing references is dropped by the linker, and
// with it its registrations. Every claim file is therefore compiled with REGATTA_CLAIM_FILE=<its name> (see
// proofs-check/CMakeLists.txt, REGATTA_CLAIM_FILES), which makes this header define one function per file,
// regatta_claim_file_<name>; CMake generates claim_files.cpp, which calls all of them from the registry, so
// every claim file is linked wherever the registry is. tests/proofs-check/engine_test.cpp checks that every
// claim of docs/claims.md is present.
#include <regatta/proofs/claim.hpp>

namespace regatta::proofs::detail {

using ClaimFactory = ClaimPtr (*)();
/// Adds a factory to the registry (during static initialisation); returns true.
bool register_claim(ClaimFactory factory);

}  // namespace regatta::proofs::detail

#define REGATTA_PROOFS_CONCAT_(a, b) a##b
#define REGATTA_PROOFS_CONCAT(a, b) REGATTA_PROOFS_CONCAT_(a, b)

/// Registers the claim `Type` constructed with the remaining arguments (none: default constructor).
#define REGATTA_REGISTER_CLAIM(Type, ...)                                                            \
  [[maybe_unused]] static const bool REGATTA_PROOFS_CONCAT(regatta_claim_registered_, __COUNTER__) = \
      ::regatta::proofs::detail::register_claim(                                                     \
          []() -> ::regatta::proofs::ClaimPtr { return std::make_unique<Type>(__VA_ARGS__); })

#ifdef REGATTA_CLAIM_FILE
/// The link anchor of this claim file (called by the generated claim_files.cpp).
extern "C" void REGATTA_PROOFS_CONCAT(regatta_claim_file_, REGATTA_CLAIM_FILE)() {}
#endif
