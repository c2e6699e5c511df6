#!/usr/bin/env bash
# The README's second command: install what is missing, build with tests (and benchmarks, so that they keep
# compiling), run every test with ctest, install into a scratch prefix and build the consumer project under
# tests/buildsystem/ against it, then rebuild with clang and rerun the suite under AddressSanitizer (+ UBSan on the
# file readers and the CLI) with the library's assertions enabled (no NDEBUG: the only pass in which they run;
# without the Python module: an ASan extension needs the runtime preloaded into the interpreter), and finally
# a short libFuzzer run of every parser (scripts/fuzz-smoke.sh).
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
  phase "the same suite under AddressSanitizer (+ UndefinedBehaviorSanitizer on the file readers and the CLI)"
  # Built with clang: it compiles this template-heavy code at -O0/-O1 in about 60 % of GCC's time (three
  # heavy files: 52 → 38 s, 28 → 15 s, 35 → 15 s), so the two passes also cover two compilers. The libFuzzer
  # targets are built in the same directory (they compile their own instrumented copy of the parsers).
  # No debug info (stack traces still name functions); -O0 except for the numerical libraries, which
  # CMakeLists.txt builds at -O1 under REGATTA_SANITIZE: the fastest build whose tests still run quickly.
  # Without NDEBUG, so regatta's own assert()s run; Eigen's internal index checks stay off (EIGEN_NO_DEBUG),
  # which would multiply the run time of the -O1 kernels.
  REGATTA_BUILD_DIR="$build-sanitize" "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DEIGEN_NO_DEBUG" -DREGATTA_SANITIZE=ON \
    -DREGATTA_BUILD_TESTS=ON -DREGATTA_BUILD_BENCHMARKS=OFF -DREGATTA_BUILD_FUZZERS=ON -DREGATTA_BUILD_PYTHON=OFF \
    -DREGATTA_MPI=OFF  # mpirun under ASan reports the MPI library's own allocations; MPI runs in the Release pass
  # The operators_* and proofs_check_* unit batteries are not built here (tests/CMakeLists.txt); five heavy
  # CLI / numerical cases run in the Release pass only (20-35 s each at -O0 under ASan; report_quick covers
  # the report code, the certify bad-input tests the certify parsing, the other SpectralNormFast cases it, the
  # other cli.lipschitz_* tests the branch and bound; cli.lipschitz_resume runs the search to a 1e-3 gap 4 times;
  # cli.report_interrupted reruns the quick report to interrupt it, 86 s under ASan).
  heavy='^(cli\.report_quick_user_layer|cli\.report_quick_user_layer_files|cli\.certify_one_input|cli\.lipschitz_resume|cli\.report_interrupted|SpectralNormFast\.PointBracketContainsReferenceAndIsTight)$'
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
