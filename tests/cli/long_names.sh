#!/bin/sh
# Output names of 250 and 255 bytes (NAME_MAX) are written by every command that writes: the temporary file
# or folder beside the target has a short name of its own, so any name the file system accepts works, and
# nothing temporary is left behind. A name a command derives from an option (W_direction.npy, PREFIX_mu.npy)
# that exceeds the limit is refused before any work: exit 2, one line naming the option.
#   long_names.sh REGATTA WORK_DIR DATA_DIR
set -u
regatta=$1
work=$2
data=$3
fail() {
  echo "long_names: $*" >&2
  exit 1
}
rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
# A name of $1 bytes: 'a' repeated, then the suffix $2.
name() { printf '%s%s' "$(head -c $(($1 - ${#2})) /dev/zero | tr '\0' a)" "$2"; }
# Runs regatta; fails unless the exit code is $1.
expect() {
  code=$1
  shift
  "$regatta" "$@" >"$work/stdout" 2>"$work/stderr"
  rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc, expected $code: regatta $* ($(cat "$work/stderr"))"
}
tokens="$data/hostile_cli/tokens_3x2.npy"

for length in 250 255; do
  out="$work/$(name $length .npy)"
  expect 0 attend --random d=2,heads=1,seed=1 --input "$tokens" --out "$out"
  [ -s "$out" ] || fail "attend --out: no file of $length bytes written"

  checkpoint="$work/$(name $length .json)"
  expect 0 lipschitz --kim-unit --n 1 --box 1 --max-steps 2 --checkpoint "$checkpoint"
  [ -s "$checkpoint" ] || fail "lipschitz --checkpoint: no file of $length bytes written"

  dir="$work/$(name $length .d)"
  expect 0 flow --model sphere --init sphere,n=4,d=3,seed=0 --horizon 0.1 --step 0.1 --out "$dir"
  [ -s "$dir/flow.json" ] || fail "flow --out: no folder of $length bytes written"

  docs="$work/$(name $length .md)"
  expect 0 proofs-check --claim havens.xi_exact --samples 1 --docs "$docs"
  [ -s "$docs" ] || fail "proofs-check --docs: no file of $length bytes written"

  # --plot is a report-style output folder (staged, then swapped in): report --out uses the same code.
  plot="$work/$(name $length .plot)"
  result="$work/$(name $length .csv)"
  expect 0 certify --model "$data/vit_digits/vit_digits.safetensors" --data "$data/vit_digits/test_set.npz" \
    --limit 1 --radii 0 --out "$result" --plot "$plot"
  [ -s "$result" ] && [ -d "$plot" ] || fail "certify --out/--plot: nothing of $length bytes written"
done

# bracket writes W and W_direction.npy: the longest usable W is 245 bytes (241 + "_direction.npy" = 255).
expect 0 bracket --random d=2,heads=1,seed=1 --n 2 --radius 1 --budget 0.1 --evaluations 20 \
  --witness "$work/$(name 245 .npy)"
[ -s "$work/$(name 255 _direction.npy)" ] || fail "bracket: the 255-byte direction file was not written"
expect 2 bracket --random d=2,heads=1,seed=1 --n 2 --radius 1 --witness "$work/$(name 255 .npy)"
grep -q -e "--witness: the file name .* is 265 bytes long" "$work/stderr" || fail "bracket: $(cat "$work/stderr")"
[ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "bracket: more than one line on stderr"

# measure-lipschitz writes PREFIX_mu.npy and PREFIX_nu.npy: the longest usable PREFIX is 248 bytes.
expect 0 measure-lipschitz --random d=2,heads=1,seed=1 --n 2 --radius 1 --budget 1 --evaluations 50 \
  --witness "$work/$(name 248 '')"
[ -s "$work/$(name 255 _mu.npy)" ] || fail "measure-lipschitz: the 255-byte witness was not written"
expect 2 measure-lipschitz --random d=2,heads=1,seed=1 --n 2 --radius 1 --witness "$work/$(name 249 '')"
grep -q -e "--witness: the file name .* is 256 bytes long" "$work/stderr" ||
  fail "measure-lipschitz: $(cat "$work/stderr")"

leftover=$(ls -A "$work" | grep -E '\.tmp-|partial')
[ -z "$leftover" ] || fail "temporary files left behind: $leftover"
echo "long_names: every name up to 255 bytes written"
