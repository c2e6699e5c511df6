#!/usr/bin/env bash
# The README's second command: install what is missing, build with tests, run every test (ctest), then
# install into a scratch prefix and build the consumer project under tests/buildsystem/ against it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${REGATTA_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
REGATTA_BUILD_DIR=$build "$root/scripts/build.sh" -DREGATTA_BUILD_TESTS=ON
(cd "$build" && ctest --output-on-failure -j "$(nproc)")

prefix=$(mktemp -d)
consumer=$(mktemp -d)
trap 'rm -rf "$prefix" "$consumer"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$root/tests/buildsystem" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$consumer" -j "$(nproc)" >/dev/null
"$consumer/regatta_consumer"
echo "consumer project: built against the installed package and ran"
