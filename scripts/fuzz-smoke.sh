#!/bin/sh
# Short libFuzzer run of every parser target (fuzz/): builds them with clang in build-fuzz/ (its own build
# directory), seeds each from tests/data, runs each for FUZZ_SECONDS (default 15) and exits non-zero when a
# target crashes, leaks, trips a sanitizer or aborts on a malformed error message.
#   scripts/fuzz-smoke.sh                 all four targets, 15 s each (about 60 s of fuzzing, plus the build)
#   FUZZ_SECONDS=600 scripts/fuzz-smoke.sh
set -eu
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-15}
cxx=${FUZZ_CXX:-$(command -v clang++ || echo /usr/bin/clang++)}
# FUZZ_CONFIGURE=0: $build is already configured with clang and REGATTA_BUILD_FUZZERS=ON (scripts/test.sh
# reuses its clang sanitizer build, whose configuration the fuzz targets do not depend on: they compile their
# own instrumented copy of the parsers).
if [ "${FUZZ_CONFIGURE:-1}" = 1 ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DREGATTA_BUILD_FUZZERS=ON -DREGATTA_BUILD_TESTS=OFF -DREGATTA_BUILD_CLI=OFF -DREGATTA_BUILD_BENCHMARKS=OFF \
    -DREGATTA_NATIVE=OFF >/dev/null
fi
cmake --build "$build" --target regatta_fuzzers
status=0
# fuzz_onnx exists when libonnx-dev was found (fuzz/CMakeLists.txt).
targets="npy npz safetensors spec vnnlib"
if [ -x "$build/fuzz/fuzz_onnx" ]; then targets="$targets onnx"; fi
for target in $targets; do
  work="$build/fuzz/smoke_$target"
  rm -rf "$work" && mkdir -p "$work/corpus"
  echo "fuzz_$target: $seconds s"
  if ! (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
        "../fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        corpus "../corpus_$target" >log 2>&1); then
    echo "fuzz_$target FAILED; the input is in $work (crash-*, leak-*, timeout-*), the log in $work/log"
    tail -40 "$work/log"
    status=1
  else
    grep -E "stat::number_of_executed_units" "$work/log" || true
  fi
done
exit $status
