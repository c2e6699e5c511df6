#!/bin/sh
# `regatta lipschitz` checkpoints: a run stopped after a few batches and resumed, and a run killed with
# SIGKILL and resumed, end with the bracket, witness and box count of the uninterrupted run; a checkpoint
# edited after it was written, or of another domain, is refused (exit 2, one line naming why).
#   lipschitz_resume.sh REGATTA WORK_DIR
set -u
regatta=$1
work=$2
fail() {
  echo "lipschitz_resume: $*" >&2
  exit 1
}
rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
problem="lipschitz --kim-unit --n 3 --box 2 --gap 1e-3 --batch 16 --threads 1 --json"
# Everything but the time, the 'resumed' flag, the process count and the stop reason must agree.
fields() { grep -v -E '"(seconds|resumed|processes|stopped_by)"' "$1" | tr -d ' \n'; }

$regatta $problem >"$work/whole.json" 2>/dev/null || fail "the uninterrupted run failed"
$regatta $problem --max-steps 3 --checkpoint "$work/cp.json" >"$work/part.json" 2>/dev/null || fail "the stopped run failed"
grep -q '"gap_reached": false' "$work/part.json" || fail "the stopped run already reached the gap"
$regatta $problem --resume "$work/cp.json" --checkpoint "$work/cp.json" >"$work/resumed.json" 2>/dev/null ||
  fail "the resumed run failed"
[ "$(fields "$work/whole.json")" = "$(fields "$work/resumed.json")" ] ||
  fail "resumed run differs: $(fields "$work/whole.json") vs $(fields "$work/resumed.json")"

# Killed: checkpoints after every batch; SIGKILL at a random moment; the file is a complete state.
$regatta $problem --checkpoint "$work/killed.json" --checkpoint-every 0 >/dev/null 2>&1 &
pid=$!
sleep 0.3
kill -s KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -f "$work/killed.json" ]; then
  $regatta $problem --resume "$work/killed.json" >"$work/after_kill.json" 2>/dev/null || fail "resume after kill failed"
  [ "$(fields "$work/whole.json")" = "$(fields "$work/after_kill.json")" ] || fail "resume after kill differs"
fi
ls "$work" | grep -q '\.tmp' && fail "a temporary file was left behind"

# Edited after it was written (the lower end raised, as a hostile file would): refused by the checksum.
sed 's/"steps": *\([0-9]\)/"steps": 1\1/' "$work/cp.json" >"$work/edited.json"
cmp -s "$work/cp.json" "$work/edited.json" && fail "the edit of the checkpoint did not apply"
$regatta $problem --resume "$work/edited.json" >/dev/null 2>"$work/err"
rc=$?
[ "$rc" = 2 ] || fail "an edited checkpoint gave exit $rc, expected 2"
[ "$(wc -l <"$work/err")" = 1 ] || fail "stderr is not one line: $(cat "$work/err")"
grep -q "checksum" "$work/err" || fail "the message does not name the checksum: $(cat "$work/err")"

# Another domain: refused, naming it.
$regatta lipschitz --kim-unit --n 3 --box 3 --gap 1e-3 --batch 16 --resume "$work/cp.json" >/dev/null 2>"$work/err"
rc=$?
[ "$rc" = 2 ] || fail "a checkpoint of another domain gave exit $rc, expected 2"
[ "$(wc -l <"$work/err")" = 1 ] || fail "stderr is not one line: $(cat "$work/err")"
grep -q "domain differs" "$work/err" || fail "the message does not name the domain: $(cat "$work/err")"
exit 0
