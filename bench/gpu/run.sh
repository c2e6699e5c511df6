#!/usr/bin/env bash
# The GPU check of regatta's pairwise backend, in one run on a GPU machine (a few minutes on an H200 box):
#   1. preflight: a GPU, the tools (cmake, ninja or make, a C++ compiler, nvcc) and the C++ libraries the
#      repository needs; everything missing is listed at once, before anything is built;
#   2. build: bench/gpu as its own small CMake project (the repository's core with REGATTA_CUDA=ON, plus
#      the program gpu_check);
#   3. correctness: gpu_check compares cuda::reduce<float/double> with the CPU path for n = m ∈ {1024, 4096,
#      16384}, d = e = 64, dot / dot causal / neg_sq_dist, and times the kernel;
#   4. timing against torch.nn.functional.scaled_dot_product_attention on the same q, k, v, when python3 with
#      torch and CUDA is there (sdpa_compare.py); skipped with the reason otherwise.
# Results go to $OUT when it is set, else ./gpu-results: gpu-results.md (everything), correctness.md,
# timing.csv, sdpa.md, build.log.
#
# usage: bench/gpu/run.sh [--build-only] [N ...]
#   --build-only   preflight and build only: no GPU needed (to check the script on a machine without one)
#   N ...          other sizes n = m than 1024 4096 16384
# environment:
#   REGATTA_GPU_BUILD_DIR  build folder (default /tmp/regatta-gpu-build)
#   REGATTA_GPU_DEBS       a folder of .deb files (the -dev packages and their runtime libraries, from
#                          `apt-get download` on a Debian 12 / Ubuntu machine) to unpack with dpkg -x into a
#                          private prefix, for a GPU machine without the repository's apt dependencies
#   PYTHON                 the Python for the PyTorch comparison (default python3)
# exit status: 0 all checks passed, 1 a correctness check failed, 2 usage, 3 no GPU, 4 missing tools or
# libraries, 5 the build failed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
results=${OUT:-$PWD/gpu-results}
build=${REGATTA_GPU_BUILD_DIR:-/tmp/regatta-gpu-build}
dump=$build/dump
python=${PYTHON:-python3}
build_only=0
sizes=()
for argument in "$@"; do
  case $argument in
    --build-only) build_only=1 ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}"; exit 0 ;;
    ''|*[!0-9]*) echo "run.sh: unknown argument '$argument' (see --help)" >&2; exit 2 ;;
    *) sizes+=("$argument") ;;
  esac
done

say() { echo "run.sh: $*" >&2; }
started=$(date +%s)
mkdir -p "$results"

# ---- 1. preflight --------------------------------------------------------------------------------------
gpu_name=""
if [[ $build_only == 0 ]]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    if ! gpu_name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1) || [[ -z $gpu_name ]]; then
      say "no NVIDIA GPU found: nvidia-smi says: ${gpu_name:-nothing}"
      say "this script needs a GPU machine; '--build-only' checks the build alone"
      exit 3
    fi
  elif [[ -e /dev/nvidia0 || -e /proc/driver/nvidia/version ]]; then
    gpu_name="(nvidia-smi not installed; /dev/nvidia0 present)"
  else
    say "no NVIDIA GPU found (no nvidia-smi, no /dev/nvidia0, no /proc/driver/nvidia)"
    say "this script needs a GPU machine; '--build-only' checks the build alone"
    exit 3
  fi
  say "GPU: $gpu_name"
fi

# Optional private prefix of unpacked .deb files.
prefix=""
if [[ -n ${REGATTA_GPU_DEBS:-} ]]; then
  if ! command -v dpkg >/dev/null 2>&1; then say "REGATTA_GPU_DEBS is set but dpkg is missing"; exit 4; fi
  shopt -s nullglob
  debs=("$REGATTA_GPU_DEBS"/*.deb)
  shopt -u nullglob
  if [[ ${#debs[@]} == 0 ]]; then say "REGATTA_GPU_DEBS=$REGATTA_GPU_DEBS holds no .deb files"; exit 4; fi
  prefix=$build/deps
  mkdir -p "$prefix"
  for deb in "${debs[@]}"; do dpkg -x "$deb" "$prefix"; done
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  # pkg-config files name prefix=/usr: point them at the private prefix.
  for pc in "$prefix"/usr/lib/"$multiarch"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
    [[ -f $pc ]] && sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" "$pc"
  done
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$prefix/usr/lib/$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  say "unpacked ${#debs[@]} .deb files into $prefix"
fi

missing=()
# Tools. The Python environment's bin folder (pip's cmake and ninja) is searched too.
python_bin=$(dirname "$(command -v "$python" 2>/dev/null || echo /nonexistent/python3)")
find_tool() {
  local name=$1 found
  found=$(command -v "$name" 2>/dev/null || true)
  [[ -z $found && -x $python_bin/$name ]] && found=$python_bin/$name
  echo "$found"
}
cmake_bin=$(find_tool cmake)
if [[ -z $cmake_bin ]]; then
  missing+=("cmake (>= 3.25)")
else
  cmake_version=$("$cmake_bin" --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
  if [[ $(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -1) != 3.25 ]]; then
    missing+=("cmake >= 3.25 (found $cmake_version)")
  fi
fi
generator=()
ninja_bin=$(find_tool ninja)
if [[ -n $ninja_bin ]]; then
  generator=(-G Ninja -DCMAKE_MAKE_PROGRAM="$ninja_bin")
elif ! command -v make >/dev/null 2>&1; then
  missing+=("ninja or make")
fi
cxx=${CXX:-$(command -v g++ || command -v c++ || true)}
[[ -z $cxx ]] && missing+=("a C++20 compiler (g++ >= 12)")
nvcc=${CUDACXX:-$(command -v nvcc || true)}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -z $nvcc ]] && missing+=("nvcc (CUDA toolkit; not on PATH nor in /usr/local/cuda/bin)")

# Libraries: a header each (and libzip through pkg-config, as CMake looks for it), OpenMP by a test compile.
include_dirs=(/usr/include /usr/local/include /usr/include/"$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)")
[[ -n $prefix ]] && include_dirs+=("$prefix/usr/include")
has_header() {
  local dir
  for dir in "${include_dirs[@]}"; do [[ -f $dir/$1 ]] && return 0; done
  return 1
}
check_header() {  # header debian-packages
  has_header "$1" || missing+=("$1 (Debian: $2)")
}
check_header eigen3/Eigen/Core "libeigen3-dev"
check_header boost/multiprecision/mpfr.hpp "libboost-dev"
check_header gmp.h "libgmp-dev libgmp10 libgmpxx4ldbl"
check_header mpfr.h "libmpfr-dev libmpfr6"
check_header mpfi.h "libmpfi-dev libmpfi0"
check_header nlohmann/json.hpp "nlohmann-json3-dev"
check_header zip.h "libzip-dev libzip4"
if ! command -v pkg-config >/dev/null 2>&1; then
  missing+=("pkg-config (Debian: pkg-config or pkgconf)")
elif ! pkg-config --exists libzip 2>/dev/null; then
  missing+=("libzip.pc for pkg-config (Debian: libzip-dev)")
fi
if [[ -n $cxx ]]; then
  openmp_test=$(mktemp -d)
  echo '#include <omp.h>
int main() { return omp_get_max_threads() > 0 ? 0 : 1; }' >"$openmp_test/omp.cpp"
  "$cxx" -fopenmp "$openmp_test/omp.cpp" -o "$openmp_test/omp" >/dev/null 2>&1 || missing+=("OpenMP for $cxx (Debian: libgomp1 / libomp-dev)")
  rm -rf "$openmp_test"
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  say "cannot build: missing"
  for item in "${missing[@]}"; do echo "  - $item" >&2; done
  say "on a machine without a package registry, bring the Debian packages as .deb files (apt-get download ...,"
  say "dev packages and their runtime libraries) in a folder of the repository and set REGATTA_GPU_DEBS to it"
  exit 4
fi

# ---- 2. build ------------------------------------------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 4)
say "building in $build (log: $results/build.log)"
if ! { "$cmake_bin" -S "$repo/bench/gpu" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CUDA_COMPILER="$nvcc" &&
       "$cmake_bin" --build "$build" --target gpu_check -j "$jobs"; } >"$results/build.log" 2>&1; then
  tail -n 40 "$results/build.log" >&2
  say "the build failed (full log: $results/build.log)"
  exit 5
fi
say "built gpu_check in $(($(date +%s) - started)) s"
if [[ $build_only == 1 ]]; then
  say "--build-only: done"
  exit 0
fi

# ---- 3. correctness and kernel time --------------------------------------------------------------------
rm -rf "$dump"
status=0
"$build/gpu_check" "$results" "$dump" "${sizes[@]}" || status=$?
if [[ $status == 2 ]]; then
  say "gpu_check found no usable GPU path (see above)"
  exit 3
fi

# ---- 4. PyTorch comparison -----------------------------------------------------------------------------
if command -v "$python" >/dev/null 2>&1; then
  timeout 180 "$python" "$repo/bench/gpu/sdpa_compare.py" "$dump" "$results/timing.csv" "$results/sdpa.md" ||
    printf '## Timing against PyTorch scaled_dot_product_attention\n\nFailed: sdpa_compare.py exited with %s.\n' \
      "$?" >"$results/sdpa.md"
else
  printf '## Timing against PyTorch scaled_dot_product_attention\n\nSkipped: %s not found.\n' "$python" \
    >"$results/sdpa.md"
fi

# ---- report --------------------------------------------------------------------------------------------
{
  echo "# regatta GPU check ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "- GPU: $gpu_name"
  echo "- nvcc: $("$nvcc" --version | tail -n 1)"
  echo "- commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "- command: bench/gpu/run.sh $*; $(($(date +%s) - started)) s in all"
  echo
  echo "## Correctness: GPU path against the CPU path"
  echo
  cat "$results/correctness.md" 2>/dev/null || echo "gpu_check wrote no table (exit status $status)."
  echo
  cat "$results/sdpa.md"
} >"$results/gpu-results.md"
cat "$results/gpu-results.md"
if [[ $status != 0 ]]; then say "a correctness check FAILED (gpu_check exit status $status)"; exit 1; fi
say "all checks passed; results in $results"
