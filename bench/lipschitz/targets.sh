#!/usr/bin/env bash
# The targets of issue #18 for `regatta lipschitz` (docs/branch-and-bound.md): prints one markdown row per run
# (setting, certified bracket, relative gap, boxes, seconds, processes) for bench/RESULTS.md.
#   bench/lipschitz/targets.sh [REGATTA] [WHICH...]    WHICH: l2 (N = 2, 3, 4 on [-R, R]^N, R = 1, 2, 3),
#   l2big (N = 5, 6, R = 3, two ranks, time limit; N = 6 on [-1, 1]^6 closes to 1 % in about 8 minutes with
#   one process: `lipschitz --kim-unit --n 6 --box 1`), dot (d <= 2, n <= 3 on balls: random layers, and the
#   isotropic d = 2 layer with the rotation reduction), mpi (speed-up of mpirun -n 2 over one process on a run
#   of >= 60 s: N = 5 on [-1.75, 1.75]^5, 113 s for one process on this machine). Default: all.
set -euo pipefail
regatta=${1:-build/cli/regatta}
shift || true
which=${*:-l2 l2big dot mpi}
limit=${BNB_TIME_LIMIT:-600}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "load: $(uptime)"
row() {  # row LABEL JSON_FILE
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
from decimal import Decimal, ROUND_CEILING, ROUND_FLOOR
label, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
# Certified ends printed outward at 6 decimals: the exact binary value, rounded down / up.
six = Decimal("0.000001")
lower = Decimal(j["lower"]).quantize(six, rounding=ROUND_FLOOR)
upper = Decimal(j["upper"]).quantize(six, rounding=ROUND_CEILING)
def up4(x):  # a certified upper bound at 4 significant digits, rounded up
    d = Decimal(x)
    return str(d.quantize(Decimal(1).scaleb(d.adjusted() - 3), rounding=ROUND_CEILING))
bounds = "; ".join(f"{b['id']} {up4(b['certified_upper'])}" for b in j["published_bounds"]) or "none"
gap = j["relative_gap"]
print(f"| {label} | [{lower}, {upper}] | {gap:.2e} | {'yes' if j['gap_reached'] else 'no: ' + str(j['stopped_by'])} "
      f"| {j['boxes_evaluated']} | {j['seconds']:.1f} | {j['processes']} | {bounds} |")
PY
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| setting | certified bracket (lower down, upper up at 6 digits) | rel. gap | gap reached | boxes | s | processes | published bounds (certified) |"
echo "|---|---|---|---|---|---|---|---|"
for w in $which; do
  case $w in
    l2)
      for n in 2 3 4; do
        for R in 1 2 3; do
          "$regatta" lipschitz --kim-unit --n $n --box $R --time-limit $limit --json >"$tmp/o.json" 2>/dev/null
          row "L2 unit, d = 1, N = $n, box R = $R, 2-norm" "$tmp/o.json"
        done
      done ;;
    l2big)
      for n in ${BNB_BIG_N:-5 6}; do
        mpirun -n 2 "$regatta" lipschitz --kim-unit --n $n --box 3 --time-limit $limit --checkpoint "$tmp/cp$n.json" \
          --json >"$tmp/o.json" 2>/dev/null
        row "L2 unit, d = 1, N = $n, box R = 3, 2-norm" "$tmp/o.json"
      done ;;
    dot)
      for run in "d=1,heads=1,seed=1 --n 2 --ball 1" "d=1,heads=1,seed=1 --n 3 --ball 1" \
                 "d=1,heads=1,seed=1 --n 3 --ball 2" "d=2,heads=1,seed=1 --n 2 --ball 1" \
                 "d=2,heads=1,seed=1 --n 3 --ball 0.5" "d=2,heads=1,seed=1 --n 3 --ball 0.75" \
                 "d=2,heads=1,seed=1 --n 3 --ball 1"; do
        # shellcheck disable=SC2086
        "$regatta" lipschitz --random $run --time-limit $limit --json >"$tmp/o.json" 2>/dev/null
        row "dot random $run, 2-norm" "$tmp/o.json"
      done
      # The isotropic layer WQ = WK = WV = WO = I (d = 2): the rotation reduction applies (polar boxes).
      /usr/bin/python3 -c "import numpy as np; I = np.eye(2); np.savez('$tmp/iso.npz', in_proj_weight=np.vstack([I, I, I]), **{'out_proj.weight': I})"
      for run in "--n 2 --ball 1" "--n 3 --ball 0.5" "--n 3 --ball 1"; do
        # shellcheck disable=SC2086
        "$regatta" lipschitz --layer "$tmp/iso.npz" --heads 1 $run --time-limit $limit --json >"$tmp/o.json" 2>/dev/null
        row "dot isotropic d=2 $run, 2-norm" "$tmp/o.json"
      done ;;
    mpi)
      args=(lipschitz --kim-unit --n ${BNB_SPEEDUP_N:-5} --box ${BNB_SPEEDUP_R:-1.75} --gap ${BNB_SPEEDUP_GAP:-1e-2} --json)
      "$regatta" "${args[@]}" --threads 1 >"$tmp/one.json" 2>/dev/null
      row "speed-up baseline: ${args[*]:1} (1 process, 1 thread)" "$tmp/one.json"
      mpirun -n 2 "$regatta" "${args[@]}" >"$tmp/two.json" 2>/dev/null
      row "speed-up: mpirun -n 2 ${args[*]:1}" "$tmp/two.json"
      /usr/bin/python3 -c "import json,sys; a=json.load(open('$tmp/one.json')); b=json.load(open('$tmp/two.json')); \
print(f'speed-up {a[\"seconds\"]/b[\"seconds\"]:.2f}x; identical bracket: {(a[\"lower\"],a[\"upper\"],a[\"boxes_evaluated\"])==(b[\"lower\"],b[\"upper\"],b[\"boxes_evaluated\"])}')" ;;
  esac
done
echo "load: $(uptime)"
