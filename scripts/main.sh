#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job.
# Until `regatta report` exists, the main job is the richest study the built commands can run: certified
# spectral-norm brackets [lower, upper] for the random matrix families that stress the certified method.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
REGATTA_BUILD_DIR=${REGATTA_BUILD_DIR:-$root/build} REGATTA_TARGETS=regatta_cli "$root/scripts/build.sh"
regatta=${REGATTA_BUILD_DIR:-$root/build}/cli/regatta
"$regatta" --version
echo
echo "== Spectral norms: power-iteration estimate and certified bracket (interval arithmetic) =="
for spec in "64x64,seed=1" "128x32,kind=lowrank,rank=3,seed=2" "64x64,kind=illcond,cond=1e12,seed=3" \
            "256x256,seed=4"; do
  "$regatta" norm --random "$spec"
  echo
done
