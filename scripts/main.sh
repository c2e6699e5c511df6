#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job.
# The main job is `regatta report` (the default study: docs/report.md), written to $REGATTA_REPORT_DIR
# (default report/ in the repository; REGATTA_REPORT_ARGS=--quick for the small sizes). Before it, two quick
# checks of the numerical foundations that the report does not show: certified spectral-norm brackets
# [lower, upper] for the random matrix families that stress the certified method, and Wasserstein distances
# between two small weighted measures by every method (exact with a certified bracket, entropic, sliced, 1-D).
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

data=$root/tests/data/transport
echo "== W_2 between two weighted measures in R^3 (6 vs 5 atoms): exact with certified bracket, entropic, sliced =="
"$regatta" wasserstein "$data/a_6x3.npy" "$data/b_5x3.npy" --weights-a "$data/w_a.npy" --certify
echo
"$regatta" wasserstein "$data/a_6x3.npy" "$data/b_5x3.npy" --weights-a "$data/w_a.npy" --method sinkhorn --epsilon 0.01
echo
"$regatta" wasserstein "$data/a_6x3.npy" "$data/b_5x3.npy" --weights-a "$data/w_a.npy" --method sliced --directions 500
echo
echo "== W_1 on the line: quantile formula vs network simplex =="
"$regatta" wasserstein "$data/line_a.npy" "$data/line_b.npy" --weights-b "$data/w_line_b.npy" --p 1 --method 1d
echo
"$regatta" wasserstein "$data/line_a.npy" "$data/line_b.npy" --weights-b "$data/w_line_b.npy" --p 1 --certify
echo
report_dir=${REGATTA_REPORT_DIR:-$root/report}
echo "== regatta report: the default study (progress on stderr) =="
# shellcheck disable=SC2086  # REGATTA_REPORT_ARGS holds options to split, e.g. "--quick --seed 2"
"$regatta" report --out "$report_dir" ${REGATTA_REPORT_ARGS:-}
echo "open $report_dir/index.html (or read $report_dir/summary.md)"
