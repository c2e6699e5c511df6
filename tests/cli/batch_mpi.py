#!/usr/bin/env python3
"""`regatta verify --instances` and `regatta certify` over several processes and from checkpoints
(docs/verify.md#several-processes-mpi, docs/verify.md#checkpoints): the outputs of `mpiexec -n 2` are the
one process's (verify: every field but the wall times; certify: byte for byte, stdout and --out); a rerun
from a checkpoint holding only some results (a run stopped midway) writes the same outputs as the run that
finished; a checkpoint of another instance list, of other options or of the other command is refused with
exit 2 and one line naming it. Needs only the Python standard library.

    batch_mpi.py REGATTA MPIEXEC|- TEST_DATA_DIR WORK_DIR    (-: no MPI, the checkpoint checks only)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

REGATTA, MPIEXEC, DATA, WORK = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
failures = []


def run(args, ranks=1, expect=0):
    command = ([MPIEXEC, "-n", str(ranks)] if ranks > 1 else []) + [REGATTA] + args
    p = subprocess.run(command, capture_output=True, text=True, env=env)
    if p.returncode != expect:
        failures.append(f"{' '.join(command)}: exit {p.returncode} (expected {expect}): {p.stderr.strip()}")
    return p


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def drop_checkpoint_results(path, keep):
    """The checkpoint of a run stopped after the results `keep` (indices) had finished."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    j["results"] = {k: v for k, v in j["results"].items() if int(k) in keep}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f)


# verify: a batch of properties of the tiny MLP, boxes of several widths around several points (unsat where
# narrow, sat where a point of the box is misclassified, some decided by splitting), plus the fixtures.
lines = []
for k, (x0, x1, eps) in enumerate([(1, 0, 0.05), (1, 0, 0.6), (0.2, 0.9, 0.02), (0.5, 0.5, 0.3),
                                   (-1, 0.3, 0.1), (0.8, -0.4, 0.25), (0, 1, 0.4), (1.5, 0.2, 0.01)]):
    name = f"p{k}.vnnlib"
    with open(os.path.join(WORK, name), "w", encoding="utf-8") as f:
        f.write("(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
                "(declare-const Y_1 Real)\n"
                f"(assert (>= X_0 {x0 - eps}))\n(assert (<= X_0 {x0 + eps}))\n"
                f"(assert (>= X_1 {x1 - eps}))\n(assert (<= X_1 {x1 + eps}))\n"
                f"(assert (>= Y_{k % 2} Y_{1 - k % 2}))\n")
    lines.append(f"{DATA}/onnx/mlp_tiny.onnx,{name},20")
for name in ("mlp_unsat_small", "mlp_sat_compare", "mlp_unsat_split", "mlp_point_sat", "mlp_or_unsat"):
    lines.append(f"{DATA}/onnx/mlp_tiny.onnx,{DATA}/vnnlib/{name}.vnnlib,20")
lines.append(f"{DATA}/onnx/vit_vnncomp_like.onnx,{DATA}/vnnlib/vit_like_eps_unsat.vnnlib,20")
instances = os.path.join(WORK, "instances.csv")
with open(instances, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def verify(tag, ranks=1, extra=(), expect=0):
    """stdout rows, JSON and --out table, wall times removed; the raw texts too."""
    out = os.path.join(WORK, f"verify_{tag}.csv")
    rows = run(["verify", "--instances", instances, "--out", out, *extra], ranks, expect)
    js = run(["verify", "--instances", instances, "--json", *extra], ranks, expect)
    if expect != 0:
        return None
    strip = lambda text: [",".join(line.split(",")[:3]) for line in text.splitlines()]
    try:
        results = json.loads(js.stdout)
    except json.JSONDecodeError:
        failures.append(f"verify {tag}: stdout is not JSON: {js.stdout[:200]!r}")
        return None
    for r in results:
        r.pop("seconds")
    return {"rows": strip(rows.stdout), "table": strip(read(out)), "json": results}


one = verify("one")
if one is None:
    sys.exit("FAIL: " + "; ".join(failures))
verdicts = [r["result"] for r in one["json"]]
if len(one["rows"]) != len(lines) or one["rows"] != one["table"]:
    failures.append(f"verify: the stdout rows and --out table differ: {one['rows']} vs {one['table']}")
if "unsat" not in verdicts or "sat" not in verdicts:
    failures.append(f"verify: the batch should hold both verdicts: {verdicts}")

# Checkpoints: a full run's checkpoint reproduces it without recomputing; one holding every other result
# (a run stopped midway) is completed to the same output.
checkpoint = os.path.join(WORK, "verify.checkpoint")
full = verify("cp", extra=["--checkpoint", checkpoint])
if full != one:
    failures.append("verify --checkpoint: the output differs from the run without one")
saved = read(checkpoint)
drop_checkpoint_results(checkpoint, keep=range(0, len(lines), 2))
resumed = verify("resumed", extra=["--checkpoint", checkpoint])  # --out completes it, --json replays it
with open(checkpoint, encoding="utf-8") as f:
    if sorted(json.load(f)["results"]) != sorted(json.loads(saved)["results"]):
        failures.append("verify: the resumed run did not complete the checkpoint")
if resumed != one:
    failures.append("verify: the run resumed from a partial checkpoint differs from the one that finished")

# Refused: another option, another instance list, another command's checkpoint; the file is left alone.
before = read(checkpoint)
for args, why in ((["--seed", "2"], "options"), (["--timeout", "5"], "options")):
    p = run(["verify", "--instances", instances, "--checkpoint", checkpoint, *args], expect=2)
    if p.stderr.count("\n") != 1 or checkpoint not in p.stderr or why not in p.stderr:
        failures.append(f"verify {args}: not one line naming the checkpoint and its {why}: {p.stderr!r}")
shorter = os.path.join(WORK, "shorter.csv")
with open(shorter, "w", encoding="utf-8") as f:
    f.write("\n".join(lines[:-1]) + "\n")
p = run(["verify", "--instances", shorter, "--checkpoint", checkpoint], expect=2)
if p.stderr.count("\n") != 1 or checkpoint not in p.stderr or "instances" not in p.stderr:
    failures.append(f"verify, another list: not one line naming the checkpoint: {p.stderr!r}")
if read(checkpoint) != before:
    failures.append("verify: a refused checkpoint was changed")

# certify: the tiny GPT-2 text model (tests/data/text_models), every input.
model = os.path.join(DATA, "text_models", "gpt2", "model.safetensors")
data = os.path.join(DATA, "text_models", "gpt2", "test_set.npz")


def certify(tag, ranks=1, extra=(), expect=0):
    out = os.path.join(WORK, f"certify_{tag}.json")
    p = run(["certify", "--model", model, "--data", data, "--tolerance", "0.5", "--radii", "0,0.01",
             "--out", out, *extra], ranks, expect)
    return (p.stdout, read(out) if os.path.exists(out) else None) if expect == 0 else p


c_one = certify("one")
c_checkpoint = os.path.join(WORK, "certify.checkpoint")
if certify("cp", extra=["--checkpoint", c_checkpoint]) != c_one:
    failures.append("certify --checkpoint: the output differs from the run without one")
drop_checkpoint_results(c_checkpoint, keep={1, 2, 5})
if certify("resumed", extra=["--checkpoint", c_checkpoint]) != c_one:
    failures.append("certify: the run resumed from a partial checkpoint differs from the one that finished")
p = certify("other", extra=["--checkpoint", c_checkpoint, "--limit", "6"], expect=2)
if p.stderr.count("\n") != 1 or c_checkpoint not in p.stderr or "options" not in p.stderr:
    failures.append(f"certify, other options: not one line naming the checkpoint: {p.stderr!r}")
p = run(["verify", "--instances", instances, "--checkpoint", c_checkpoint], expect=2)
if p.stderr.count("\n") != 1 or c_checkpoint not in p.stderr or "not a checkpoint" not in p.stderr:
    failures.append(f"verify on certify's checkpoint: not one line naming it: {p.stderr!r}")

# certify on an ONNX graph (cli/certify_graph.cpp): the tiny MLP on 12 points of the plane, l-inf.
def npy(array, dtype, shape):
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    code = {"<f8": "d", "<i8": "q"}[dtype]
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
            struct.pack("<" + code * len(array), *array))


points = [(0.1 * k - 0.5, 0.7 - 0.13 * k) for k in range(12)]
graph_data = os.path.join(WORK, "plane.npz")
with zipfile.ZipFile(graph_data, "w") as z:
    z.writestr("images.npy", npy([v for p in points for v in p], "<f8", (12, 2)))
    z.writestr("labels.npy", npy([k % 2 for k in range(12)], "<i8", (12,)))


def certify_graph(tag, ranks=1, extra=()):
    out = os.path.join(WORK, f"graph_{tag}.csv")
    p = run(["certify", "--model", os.path.join(DATA, "onnx", "mlp_tiny.onnx"), "--data", graph_data,
             "--norm", "inf", "--radii", "0,0.1", "--out", out, *extra], ranks)
    return p.stdout, read(out) if os.path.exists(out) else None


g_one = certify_graph("one")
g_checkpoint = os.path.join(WORK, "graph.checkpoint")
certify_graph("cp", extra=["--checkpoint", g_checkpoint])
drop_checkpoint_results(g_checkpoint, keep={3, 4, 11})
if certify_graph("resumed", extra=["--checkpoint", g_checkpoint]) != g_one:
    failures.append("certify on an ONNX graph: the run resumed from a partial checkpoint differs")

if MPIEXEC != "-":
    for ranks in (2, 3):
        if certify_graph(f"mpi{ranks}", ranks) != g_one:
            failures.append(f"certify on an ONNX graph: mpiexec -n {ranks} differs from one process")
    for ranks in (2, 3):
        if verify(f"mpi{ranks}", ranks) != one:
            failures.append(f"verify: mpiexec -n {ranks} differs from one process")
        if certify(f"mpi{ranks}", ranks) != c_one:
            failures.append(f"certify: mpiexec -n {ranks} differs from one process (stdout or --out)")
    # Under mpiexec with a partial checkpoint: the same outputs again.
    drop_checkpoint_results(checkpoint, keep={0, 3, 4})
    if verify("mpi_resumed", 2, extra=["--checkpoint", checkpoint]) != one:
        failures.append("verify: mpiexec -n 2 from a partial checkpoint differs")
    drop_checkpoint_results(c_checkpoint, keep={0})
    if certify("mpi_resumed", 2, extra=["--checkpoint", c_checkpoint]) != c_one:
        failures.append("certify: mpiexec -n 2 from a partial checkpoint differs")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failure(s); verdicts {verdicts}")
sys.exit(1 if failures else 0)
