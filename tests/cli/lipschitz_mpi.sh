#!/bin/sh
# `mpiexec -n K regatta lipschitz` gives the same bracket, witness and box count as one process (K = 2, 3;
# oversubscribed on small machines), and rank 0 alone writes the checkpoint.
#   lipschitz_mpi.sh REGATTA MPIEXEC WORK_DIR
set -u
regatta=$1
mpiexec=$2
work=$3
fail() {
  echo "lipschitz_mpi: $*" >&2
  exit 1
}
rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
problem="lipschitz --kim-unit --n 3 --box 2 --gap 1e-3 --batch 16 --json"
fields() { grep -v -E '"(seconds|resumed|processes|stopped_by)"' "$1" | tr -d ' \n'; }
$regatta $problem --threads 1 >"$work/one.json" 2>/dev/null || fail "the one-process run failed"
for k in 2 3; do
  $mpiexec -n $k $regatta $problem --checkpoint "$work/cp$k.json" >"$work/mpi$k.json" 2>"$work/err$k" ||
    fail "mpiexec -n $k failed: $(cat "$work/err$k")"
  grep -q "\"processes\": $k" "$work/mpi$k.json" || fail "-n $k did not run $k processes: $(cat "$work/mpi$k.json")"
  [ "$(fields "$work/one.json")" = "$(fields "$work/mpi$k.json")" ] ||
    fail "-n $k differs: $(fields "$work/one.json") vs $(fields "$work/mpi$k.json")"
  [ -f "$work/cp$k.json" ] || fail "-n $k wrote no checkpoint"
done
exit 0
