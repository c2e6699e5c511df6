#!/bin/sh
# An interrupted `regatta report` leaves its --out directory as it was: a previous complete report stays whole
# (same files, same seed), a new directory is not created, and no staging directory or *.tmp file remains;
# a completed re-run with another seed replaces the whole report (nothing of the previous run's seed left).
#   report_interrupted.sh REGATTA COMPLETE_REPORT_DIR WORK_DIR
set -u
regatta=$1
complete=$2
work=$3
fail() {
  echo "report_interrupted: $*" >&2
  exit 1
}
rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
[ -f "$complete/summary.md" ] || fail "no complete report in $complete"

leftovers() {
  ls -A "$work" | grep -q '\.partial-' && fail "$1: a staging directory was left behind: $(ls -A "$work")"
  [ -z "$(find "$work" -name '*.tmp')" ] || fail "$1: temporary files left: $(find "$work" -name '*.tmp')"
}

for sig in INT TERM; do
  cp -R "$complete" "$work/report" || fail "cannot copy $complete"
  "$regatta" report --quick --no-progress --seed 2 --out "$work/report" >"$work/stdout" 2>"$work/stderr" &
  pid=$!
  sleep 2
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$sig" = INT ] && want=130 || want=143
  [ "$rc" -eq "$want" ] || fail "SIG$sig: exit code $rc, expected $want; stderr: $(cat "$work/stderr")"
  leftovers "SIG$sig"
  diff -r "$complete" "$work/report" >/dev/null || fail "SIG$sig: the previous report was changed"
  rm -rf "$work/report"
done

"$regatta" report --quick --no-progress --out "$work/new" >/dev/null 2>&1 &
pid=$!
sleep 2
kill -s INT "$pid"
wait "$pid"
[ ! -e "$work/new" ] || fail "an interrupted first run created $work/new"
leftovers "first run"

# A completed run with seed 2 into the seed-1 report: one run's report, seed 2 throughout.
cp -R "$complete" "$work/report" || fail "cannot copy $complete"
touch "$work/report/tables/stale_table_of_an_older_version.csv"
"$regatta" report --quick --no-progress --seed 2 --out "$work/report" >"$work/stdout" 2>"$work/stderr" ||
  fail "the seed-2 run failed: $(cat "$work/stderr")"
leftovers "seed-2 run"
grep -q '"seed": 2' "$work/report/report.json" || fail "report.json does not record seed 2"
grep -q '"seed": 1,' "$work/report/report.json" && fail "report.json still records seed 1"
[ ! -e "$work/report/tables/stale_table_of_an_older_version.csv" ] || fail "a stale table survived the re-run"
exit 0
