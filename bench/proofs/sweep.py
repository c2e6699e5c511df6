#!/usr/bin/env python3
"""Soundness sweep of `regatta proofs-check`: every claim over many seeds, verdicts counted per claim.

Runs `regatta proofs-check --samples N --seed S --json` once per seed (every registered claim, or the
--claim ones), counts the verdicts of each claim over the seeds and flags every verdict that differs from the
catalogue's expectation (a "refuted" conjecture that is refuted matches; a claim expected to hold that comes
out refuted or inconclusive does not). Prints the verdict table (Markdown) and the seconds; exit 0 when
every verdict matches, 1 when any differs, 2 on bad input or a run that failed (exit code other than 0/1, or
output that is not the JSON list).

  python3 bench/proofs/sweep.py --regatta build/cli/regatta --seeds 20 --samples 64
  python3 bench/proofs/sweep.py --seeds 3 --first-seed 100 --samples 4 --jobs 2   # the CI version

Only the Python standard library; the counterexample files of each run go to a scratch directory that is
removed at the end (--keep DIR keeps them).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

VERDICTS = ["holds", "refuted", "identity", "unbounded", "inconclusive"]


def fail(message):
    print(f"sweep.py: {message}", file=sys.stderr)
    sys.exit(2)


def run_seed(regatta, seed, samples, claims, out_dir, timeout):
    """One proofs-check run; returns (seed, results list, wall seconds)."""
    command = [regatta, "proofs-check", "--samples", str(samples), "--seed", str(seed), "--json",
               "--out", os.path.join(out_dir, f"seed{seed}")]
    for c in claims:
        command += ["--claim", c]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return seed, None, f"timed out after {timeout} s", time.monotonic() - start
    wall = time.monotonic() - start
    if done.returncode not in (0, 1):
        last = done.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        return seed, None, f"exit {done.returncode}: {last[0]}", wall
    try:
        results = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        return seed, None, f"output is not JSON ({e})", wall
    if not isinstance(results, list):
        return seed, None, "output is not a JSON list", wall
    mismatch_exit = any(not r.get("matches", False) for r in results)
    if mismatch_exit != (done.returncode == 1):
        return seed, None, f"exit {done.returncode} disagrees with the verdicts", wall
    return seed, results, None, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regatta", default=os.path.join("build", "cli", "regatta"),
                        help="the regatta executable (default build/cli/regatta)")
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds (default 20)")
    parser.add_argument("--first-seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--samples", type=int, default=64, help="--samples of each run (default 64)")
    parser.add_argument("--claim", action="append", default=[], help="only this claim (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run (default 3600)")
    parser.add_argument("--markdown", help="also write the verdict table to this file")
    parser.add_argument("--keep", help="keep the counterexample files under this directory")
    args = parser.parse_args()
    if args.seeds < 1:
        fail("--seeds must be >= 1")
    if args.first_seed < 0:
        fail("--first-seed must be >= 0")
    if args.samples < 1:
        fail("--samples must be >= 1")
    if args.jobs < 1:
        fail("--jobs must be >= 1")
    if not (args.timeout > 0):
        fail("--timeout must be > 0")
    if not (os.path.isfile(args.regatta) and os.access(args.regatta, os.X_OK)):
        fail(f"--regatta: {args.regatta} is not an executable file")

    out_dir = args.keep or tempfile.mkdtemp(prefix="regatta-sweep-")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    start = time.monotonic()
    runs = {}
    errors = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_seed, args.regatta, s, args.samples, args.claim, out_dir, args.timeout)
                       for s in seeds]
            for f in concurrent.futures.as_completed(futures):
                seed, results, error, wall = f.result()
                if error:
                    errors.append(f"seed {seed}: {error}")
                else:
                    runs[seed] = (results, wall)
                    bad = sum(not r["matches"] for r in results)
                    print(f"seed {seed}: {len(results)} claims, {bad} unexpected, {wall:.1f} s", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    total = time.monotonic() - start
    if errors:
        for e in errors:
            print(f"sweep.py: {e}", file=sys.stderr)
        sys.exit(2)

    # Per claim: expected verdict, counts, certified count, unexpected seeds, search seconds.
    table = {}
    order = []
    for seed in seeds:
        for r in runs[seed][0]:
            row = table.get(r["id"])
            if row is None:
                row = table[r["id"]] = {"expected": r["expected"], "counts": dict.fromkeys(VERDICTS, 0),
                                        "certified": 0, "unexpected": [], "seconds": 0.0}
                order.append(r["id"])
            row["counts"][r["verdict"]] += 1
            row["certified"] += bool(r["certified"])
            row["seconds"] += r["seconds"]
            if not r["matches"]:
                row["unexpected"].append(f"{seed}:{r['verdict']}")

    lines = [f"| claim | expected | {' | '.join(VERDICTS)} | certified | unexpected (seed:verdict) | "
             "search s |", "|---|---|" + "---:|" * len(VERDICTS) + "---:|---|---:|"]
    unexpected = 0
    for cid in order:
        row = table[cid]
        unexpected += len(row["unexpected"])
        counts = " | ".join(str(row["counts"][v]) for v in VERDICTS)
        flagged = ", ".join(row["unexpected"]) if row["unexpected"] else "—"
        lines.append(f"| `{cid}` | {row['expected']} | {counts} | {row['certified']} | {flagged} | "
                     f"{row['seconds']:.1f} |")
    walls = [runs[s][1] for s in seeds]
    summary = (f"{len(order)} claims x {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}) = "
               f"{len(order) * len(seeds)} verdicts at --samples {args.samples}; {unexpected} unexpected; "
               f"{total:.0f} s wall ({args.jobs} at a time; per run {min(walls):.0f}–{max(walls):.0f} s)")
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    sys.exit(1 if unexpected else 0)


if __name__ == "__main__":
    main()
