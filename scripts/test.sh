#!/usr/bin/env bash
# The README's second command: install what is missing, build with tests (and benchmarks, so that they keep
# compiling), run every test with ctest, install into a scratch prefix and build the consumer project under
# tests/buildsystem/ against it, then rebuild the core, measures and graph libraries with clang and rerun their
# batteries under AddressSanitizer (+ UBSan on the file readers) with the library's assertions enabled (no
# NDEBUG), and finally a short libFuzzer run of every parser (scripts/fuzz-smoke.sh).
# REGATTA_SKIP_SANITIZE=1 skips the sanitizer pass (it roughly doubles the time); REGATTA_SKIP_FUZZ=1 the fuzzing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${REGATTA_BUILD_DIR:-$root/build}
jobs=$(nproc)
start=$SECONDS
phase() { echo "== $* (at $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s) =="; }
"$root/scripts/install-deps.sh"

phase "build and test ($build)"
REGATTA_BUILD_DIR=$build "$root/scripts/build.sh" -DREGATTA_BUILD_TESTS=ON -DREGATTA_BUILD_BENCHMARKS=ON
phase "ctest"
(cd "$build" && ctest --output-on-failure -j "$jobs")

phase "consumer project against the installed package"
prefix=$(mktemp -d)
consumer=$(mktemp -d)
trap 'rm -rf "$prefix" "$consumer"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$root/tests/buildsystem" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$consumer" -j "$jobs" >/dev/null
"$consumer/regatta_consumer"

if [[ "${REGATTA_SKIP_SANITIZE:-0}" != 1 ]]; then
  phase "core, measures and graph under AddressSanitizer (+ UndefinedBehaviorSanitizer on the file readers)"
  # Scope: the layers with the hand-written memory handling: the file readers (also fuzzed below), the blocked
  # pairwise kernels, interval arithmetic and spectral norms (core), the transport solvers (measures), and the
  # ONNX importer, the graph's evaluation, derivatives and verify (graph), with their batteries. Not the operators, proofs-check and the CLI: building them again under ASan and
  # running the CLI suite took 11 of CI's 38 minutes (bench/RESULTS.md, "CI time"), and the 30-minute budget on
  # 2 cores cannot carry it; they run in the Release pass above, and every parser the CLI uses is fuzzed.
  # Run the same on everything with: cmake -DREGATTA_SANITIZE=ON (docs/getting-started.md).
  # Built with clang: it compiles this template-heavy code at -O0/-O1 in about 60 % of GCC's time (three
  # heavy files: 52 → 38 s, 28 → 15 s, 35 → 15 s), so the two passes also cover two compilers. The libFuzzer
  # targets are built in the same directory (they compile their own instrumented copy of the parsers).
  # No debug info (stack traces still name functions); -O0 except for the numerical libraries, which
  # CMakeLists.txt builds at -O1 under REGATTA_SANITIZE: the fastest build whose tests still run quickly.
  # Without NDEBUG, so regatta's own assert()s run; Eigen's internal index checks stay off (EIGEN_NO_DEBUG),
  # which would multiply the run time of the -O1 kernels.
  REGATTA_BUILD_DIR="$build-sanitize" "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DEIGEN_NO_DEBUG" -DREGATTA_SANITIZE=ON \
    -DREGATTA_BUILD_TESTS=ON -DREGATTA_BUILD_CLI=OFF -DREGATTA_BUILD_BENCHMARKS=OFF -DREGATTA_BUILD_FUZZERS=ON \
    -DREGATTA_BUILD_PYTHON=OFF -DREGATTA_MPI=OFF
  # Four heavy cases run in the Release pass only (14–30 s each at -O1 under ASan; the last three were a fifth
  # of this pass's ctest time on 2 cores): they repeat arithmetic on values, with no memory handling of their
  # own, many times over, and the other cases of their batteries run the same code under ASan (Interval64: the
  # sampled-points and corner cases; SpectralNorm and SpectralNormFast: the bracket and lower-bound cases).
  heavy='^(SpectralNormFast\.PointBracketContainsReferenceAndIsTight|SpectralNormFast\.IntervalBoxBoundsEveryMember'
  heavy+='|Interval64\.EnclosesMpfi256OnAMillionRandomAndCornerOperations'
  heavy+='|SpectralNorm\.PowerIterationMatchesReferenceInEveryPointType)$'
  phase "ctest under the sanitizers"
  (cd "$build-sanitize" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs" -E "$heavy")
fi
if [[ "${REGATTA_SKIP_FUZZ:-0}" != 1 ]]; then
  phase "fuzz smoke: every parser under libFuzzer for a few seconds"
  if [[ "${REGATTA_SKIP_SANITIZE:-0}" != 1 ]]; then  # the fuzz targets are in the clang sanitizer build
    FUZZ_BUILD_DIR="$build-sanitize" FUZZ_CONFIGURE=0 FUZZ_SECONDS=${FUZZ_SECONDS:-4} "$root/scripts/fuzz-smoke.sh"
  else
    FUZZ_BUILD_DIR="$build-fuzz" FUZZ_SECONDS=${FUZZ_SECONDS:-4} "$root/scripts/fuzz-smoke.sh"
  fi
fi
phase "all tests passed"
