"""Lipschitz analyses from Python against the command line on the same layer and input (the same library
calls: the same numbers to the last bit), against an independent Jacobian (torch.autograd + NumPy's SVD), and
the interrupt / progress machinery of long searches."""
import math
import signal
import sys
import threading
import time
from decimal import Decimal

import numpy as np
import pytest

import regatta
from conftest import EPS, save

RANDOM = dict(d=4, heads=2, seed=5)
SPEC = "d=4,heads=2,seed=5"


def test_bounds_are_the_command_lines(cli):
    layer = regatta.Layer.random(**RANDOM)
    ours = {b.id: b for b in layer.bounds(6, radius=2.0)}
    theirs = cli("bound", "--random", SPEC, "--n", 6, "--radius", 2, "--json")
    assert [t["id"] for t in theirs] == list(ours)
    for t in theirs:
        b = ours[t["id"]]
        assert b.applies == t["applies"] and b.hypotheses == t["hypotheses"] and b.provenance == t["provenance"]
        if t["applies"]:
            assert float(b.estimate) == t["value"] and float(b.certified_upper) == t["certified_upper"]
            assert isinstance(b.certified_upper, regatta.Upper) and not b.estimate.certified
            assert Decimal(str(b.certified_upper)) >= Decimal(float(b.certified_upper))  # printed rounded up
        else:
            assert b.reason == t["reason"] and b.certified_upper is None


def test_local_norms_are_the_command_lines_and_enclose_the_svd(tmp_path, cli):
    layer = regatta.Layer.random(**RANDOM)
    X = np.random.default_rng(3).standard_normal((3, 4))
    r = layer.local(X, certify=True)
    t = cli("local", "--random", SPEC, "--input", save(tmp_path / "x.npy", X), "--certify", "--json")
    assert float(r.norm_2) == t["jacobian_norm_2"]
    assert float(r.norm_2_lower) == t["jacobian_norm_2_certified_lower"]
    assert float(r.norm_2_upper) == t["jacobian_norm_2_certified_upper"]
    assert float(r.norm_inf) == t["jacobian_norm_inf"]
    assert float(r.norm_inf_interval.lower) == t["jacobian_norm_inf_certified_lower"]
    assert float(r.norm_inf_interval.upper) == t["jacobian_norm_inf_certified_upper"]
    # Independent of the matrix-free and interval paths: the dense Jacobian (checked against torch.autograd in
    # test_layer.py), its SVD and its row sums in NumPy.
    J = layer.jacobian(X)
    sigma = np.linalg.svd(J, compute_uv=False)[0]
    row = np.abs(J).sum(axis=1).max()
    slack = 64 * J.shape[0] * EPS  # SVD and row sums in double: a few n*d eps relative
    assert r.norm_2_interval.lower <= sigma * (1 + slack) and sigma * (1 - slack) <= r.norm_2_interval.upper
    assert r.norm_inf_interval.lower <= row * (1 + slack) and row * (1 - slack) <= r.norm_inf_interval.upper
    assert abs(r.norm_2 - sigma) <= 1e-8 * sigma  # Lanczos to its relative tolerance 1e-10, with margin


def test_region_and_robustness_are_the_command_lines(tmp_path, cli):
    layer = regatta.Layer.random(d=2, heads=1, seed=1)
    X = np.random.default_rng(4).standard_normal((3, 2))
    r = layer.local(X, certify=True, ball=1e-3)
    t = cli("local", "--random", "d=2,heads=1,seed=1", "--input", save(tmp_path / "x.npy", X), "--certify",
            "--ball", 1e-3, "--json")["region"]
    assert float(r.region.sup_norm_2) == t["sup_jacobian_norm_2_certified_upper"]
    assert float(r.region.sup_norm_inf) == t["sup_jacobian_norm_inf_certified_upper"]
    assert r.region.sup_norm_2 >= r.norm_2_lower  # sup over the ball >= the value at its centre
    assert float(r.region.sup_norm_2_lower) == t["sup_jacobian_norm_2_certified_lower"]
    assert float(r.region.sup_norm_inf_lower) == t["sup_jacobian_norm_inf_certified_lower"]
    assert isinstance(r.region.sup_norm_2_lower, regatta.Lower)
    # The lower end is ||J(X')||_2 at a point of the ball that the ascent moved to: the double Jacobian's SVD
    # there is at least that, and it beats the centre.
    w = r.region.witness_2
    assert np.linalg.norm(w["input"] - X) <= w["distance"] <= 1e-3
    assert isinstance(w["distance"], regatta.Upper) and isinstance(w["lower"], regatta.Lower)
    sigma = np.linalg.svd(layer.jacobian(w["input"]), compute_uv=False)[0]
    assert float(r.region.sup_norm_2_lower) <= sigma * (1 + 64 * 6 * EPS)
    assert r.region.sup_norm_2_lower > r.norm_2_lower
    assert r.region.sup_norm_2_lower <= r.region.sup_norm_2
    # region_pieces is --region-pieces: the same bound and the same counts as the command line.
    p = layer.local(X, certify=True, ball=1e-2, region_pieces=3)
    t = cli("local", "--random", "d=2,heads=1,seed=1", "--input", save(tmp_path / "x.npy", X), "--certify",
            "--ball", 1e-2, "--region-pieces", 3, "--json")["region"]
    assert float(p.region.sup_norm_2) == t["sup_jacobian_norm_2_certified_upper"]
    assert p.region.radius_pieces == t["second_order"]["radius_pieces"] == 3
    assert p.region.taylor_pieces == t["second_order"]["taylor_pieces"] == 3
    for bad in (0, -2, 257, 2.5, True, "4"):
        with pytest.raises(regatta.InputError, match="region_pieces"):
            layer.local(X, ball=1e-2, region_pieces=bad)
    m = layer.local(X, certify=True, margin=0.5)
    t = cli("local", "--random", "d=2,heads=1,seed=1", "--input", save(tmp_path / "x.npy", X), "--certify",
            "--margin", 0.5, "--json")["region"]
    assert float(m.robustness.radius) == t["robustness_radius_certified"]
    assert isinstance(m.robustness.radius, regatta.Lower)


def test_bracket_is_the_command_lines(tmp_path, cli):
    layer = regatta.Layer.random(**RANDOM)
    r = layer.bracket(5, radius=1.5, certify=True, budget=0, evaluations=300, seed=1)
    witness = tmp_path / "w.npy"
    t = cli("bracket", "--random", SPEC, "--n", 5, "--radius", 1.5, "--certify", "--budget", 0,
            "--evaluations", 300, "--seed", 1, "--witness", witness, "--json")
    # The same search, compiled into two programs: with -march=native the compiler may fuse a multiply and an
    # add differently in each (a change of the CLI's unity batches did), so the search's witness and the
    # certified lower end at it agree to rounding, not bit for bit. Each end is certified on its own.
    assert float(r.lower) == pytest.approx(t["lower"], rel=1e-12) and r.certified == t["certified"]
    assert float(r.upper) == pytest.approx(t["upper"], rel=1e-12)
    assert r.bound == t["bound_name"] and r.evaluations == t["evaluations"]
    assert np.allclose(np.load(witness), r.witness, rtol=1e-6, atol=1e-5)  # an ascent end in a flat direction
    assert r.certified and isinstance(r.lower, regatta.Lower) and isinstance(r.upper, regatta.Upper)
    assert r.interval.lower <= r.interval.upper
    # The witness attains the lower end: ||J(X) v|| at the returned (X, v), by the layer's JVP.
    value = np.linalg.norm(layer.jvp(r.witness, r.witness_direction))
    assert abs(value - r.lower_estimate) <= 64 * r.witness.size * EPS * value


def test_estimates_print_as_estimates():
    r = regatta.Layer.random(d=2, heads=1, seed=1).bracket(3, radius=1.0, budget=0, evaluations=50)
    assert not r.certified and isinstance(r.lower, regatta.Estimate) and r.interval is None


def test_progress_callback_sees_the_search():
    calls = []
    layer = regatta.Layer.random(d=8, heads=2, seed=2)
    layer.bracket(16, radius=1.0, budget=0, evaluations=400, progress=lambda *a: calls.append(a))
    assert calls and all(stage == "search" and total > 0 for stage, _, total in calls)
    done = [c[1] for c in calls]
    assert done == sorted(done) and done[-1] == calls[-1][2]  # the last call reports completion


def test_an_exception_in_the_callback_stops_the_search():
    def boom(stage, done, total):
        raise RuntimeError("stop here")

    layer = regatta.Layer.random(d=8, heads=2, seed=2)
    with pytest.raises(RuntimeError, match="stop here"):
        layer.bracket(32, radius=1.0, budget=0, evaluations=10**9, progress=boom)


def assert_ctrl_c_stops_within_a_second(call, after=0.5):
    """SIGINT to the main thread `after` seconds into call() (which would run for minutes): KeyboardInterrupt
    within 1 s of the signal, no thread left behind."""
    threads = threading.active_count()
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(after, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        call()
    caught = time.monotonic()
    timer.join()
    assert sent and caught - sent[0] < 1.0, caught - sent[0]
    assert threading.active_count() == threads  # nothing left running


def test_bracket_reprs_label_each_end_by_its_kind():
    """A certified lower end beside an absent upper one (no radius: no bound applies) was summarised as
    'estimates'; each end is now labelled by its own type."""
    layer = regatta.Layer.random(d=4, heads=2)
    r = layer.bracket(3, budget=0.5, evaluations=100, certify=True)
    assert isinstance(r.lower, regatta.Lower) and r.upper is None
    assert "(lower certified, upper absent)" in repr(r)
    r = layer.bracket(3, radius=1.0, budget=0.5, evaluations=100, certify=True)
    assert "(lower certified, upper certified; upper from " in repr(r)
    r = layer.bracket(3, radius=1.0, budget=0.5, evaluations=100)
    assert "(lower estimate, upper estimate; upper from " in repr(r)


def test_ctrl_c_interrupts_a_long_bracket_search_within_a_second():
    layer = regatta.Layer.random(d=16, heads=4, seed=2)
    assert_ctrl_c_stops_within_a_second(
        lambda: layer.bracket(48, radius=1.0, budget=0, evaluations=10**9))  # minutes without the interrupt
    # The module still works afterwards.
    assert np.isfinite(layer(np.zeros((2, 16)))).all()


def test_ctrl_c_interrupts_a_long_measure_search_within_a_second():
    layer = regatta.Layer.random(d=16, heads=4, seed=2)
    assert_ctrl_c_stops_within_a_second(
        lambda: layer.measure_lipschitz(48, radius=1.0, budget=0, evaluations=10**9, restarts=5000))  # minutes otherwise
    assert np.isfinite(layer(np.zeros((2, 16)))).all()


def test_measure_search_reports_progress_and_a_callback_exception_stops_it():
    layer = regatta.Layer.random(d=4, heads=2, seed=2)
    calls = []
    r = layer.measure_lipschitz(8, radius=1.0, budget=0, evaluations=300, progress=lambda *c: calls.append(c))
    assert calls and all(stage == "search" and total == 300 for stage, _, total in calls)
    assert calls[-1][1] == r.evaluations  # the last call reports completion

    def boom(stage, done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        layer.measure_lipschitz(32, radius=1.0, budget=0, evaluations=10**9, restarts=5000, progress=boom)


@pytest.mark.parametrize("call,start", [
    (lambda l: l.bracket(0), "n: must lie in [1, 2^20]"),
    (lambda l: l.bracket(4, norm="3"), "norm"),
    (lambda l: l.bracket(4, radius=-1.0), "radius"),
    (lambda l: l.bracket(4, precision=20, certify=True), None),
    (lambda l: l.bracket(4, progress="yes"), "progress: must be None, True or a callable"),
    (lambda l: l.bounds(radius=float("inf")), "radius"),
    (lambda l: l.local(np.zeros((2, 3))), "X: has 3 columns"),
    (lambda l: l.local(np.zeros((2, 4)), margin=1.0), "margin: needs certify=True"),
    (lambda l: l.local(np.zeros((2, 4)), method="qr"), "method"),
])
def test_bad_options_raise_input_error(call, start):
    with pytest.raises(regatta.InputError) as info:
        call(regatta.Layer.random(**RANDOM))
    assert "\n" not in str(info.value)
    if start is not None:
        assert str(info.value).startswith(start), str(info.value)


def test_certified_numbers_round_outward():
    x = 0.1  # not a decimal: the directions matter
    assert Decimal(str(regatta.Lower(x))) < Decimal(x) < Decimal(str(regatta.Upper(x)))
    assert Decimal(f"{regatta.Upper(x):.3}") >= Decimal(x) and f"{regatta.Upper(x):.3}" == "0.101"
    assert f"{regatta.Lower(2 / 3):.3}" == "0.666" and f"{regatta.Estimate(2 / 3):.3}" == "0.667"
    i = regatta.Interval(1 / 3, 2 / 3)
    assert str(i) == f"[{regatta.Lower(1 / 3)}, {regatta.Upper(2 / 3)}]" and 0.5 in i
    with pytest.raises(ValueError):
        f"{regatta.Upper(x):.3f}"  # fixed-point formats would round to nearest
    assert type(regatta.Upper(1.0) + 1) is float  # derived numbers claim nothing
    rng = np.random.default_rng(0)
    for v in rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200):
        assert Decimal(regatta.decimal(v, 7, "down")) <= Decimal(v) <= Decimal(regatta.decimal(v, 7, "up"))
    assert math.isinf(float(regatta.decimal(math.inf, 5, "up")))


@pytest.mark.parametrize("cross,extra", [(None, []), ("context", ["--cross", "context", "--m", 3])])
def test_measure_lipschitz_is_the_command_lines(tmp_path, cli, cross, extra):
    layer = regatta.Layer.random(d=2, heads=1, seed=4)
    kwargs = dict(cross=cross, m=3) if cross else {}
    r = layer.measure_lipschitz(4, radius=1.0, certify=True, budget=0, evaluations=60, seed=2, **kwargs)
    t = cli("measure-lipschitz", "--random", "d=2,heads=1,seed=4", "--n", 4, *extra, "--radius", 1, "--certify",
            "--budget", 0, "--evaluations", 60, "--seed", 2, "--witness", tmp_path / "w", "--json")
    assert float(r.lower) == t["lower"] and float(r.upper) == t["upper"] and r.certified == t["certified"]
    assert r.bound == t["bound_name"] and r.evaluations == t["evaluations"] and r.argument == t["argument"]
    assert np.array_equal(np.load(tmp_path / "w_mu.npy"), r.witness[0])
    with pytest.raises(regatta.InputError, match="^m: applies to cross-attention only"):
        layer.measure_lipschitz(4, m=3)


def test_progress_true_draws_a_tqdm_bar_on_stderr(capsys):
    pytest.importorskip("tqdm")
    layer = regatta.Layer.random(d=8, heads=2, seed=2)
    layer.bracket(16, radius=1.0, budget=0, evaluations=400, progress=True)
    err = capsys.readouterr().err
    assert "search:" in err and "it/s" in err  # a tqdm bar: the stage as its description, tqdm's rate field


def test_progress_true_without_tqdm_is_quiet(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # makes `import tqdm...` raise ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    layer = regatta.Layer.random(d=8, heads=2, seed=2)
    layer.bracket(16, radius=1.0, budget=0, evaluations=400, progress=True)
    assert capsys.readouterr().err == ""
