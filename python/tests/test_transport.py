"""Wasserstein distances from Python against POT (an independent network simplex, its 1-D formula) and against
`regatta wasserstein` on the same files (the same library calls: the same bits); the claims checker against
`regatta proofs-check`."""
import numpy as np
import pytest

import regatta
from conftest import EPS, save


@pytest.fixture(scope="module")
def ot():
    return pytest.importorskip("ot")


@pytest.fixture
def measures():
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((7, 3)), rng.standard_normal((5, 3)) + 0.5
    wa = rng.random(7)
    return a, b, wa / wa.sum(), None


def cost_matrix(a, b, p):
    return np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2) ** p


def test_exact_matches_pot_and_the_certified_bracket_encloses_it(measures, ot):
    a, b, wa, _ = measures
    for p in (1.0, 2.0):
        r = regatta.wasserstein(a, b, weights_a=wa, p=p, certify=True)
        pot = ot.emd2(wa, np.full(5, 1 / 5), cost_matrix(a, b, p)) ** (1 / p)
        # Two optimal plans of one LP: the costs agree to the rounding of two sums of n + m - 1 terms.
        tol = 16 * (7 + 5) * EPS * pot
        assert abs(r.value - pot) <= tol
        assert r.certified and r.bracket.lower <= pot + tol and pot - tol <= r.bracket.upper
        assert isinstance(r.bracket.upper, regatta.Upper) and not r.value.certified


def test_one_dimensional_matches_pot(ot):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(9), rng.standard_normal(4)
    wb = rng.random(4)
    wb /= wb.sum()
    r = regatta.wasserstein(a, b, weights_b=wb, p=2, method="1d")
    pot = ot.wasserstein_1d(a, b, np.full(9, 1 / 9), wb, p=2)  # W_p^p
    assert abs(r.cost - pot) <= 16 * 13 * EPS * max(1.0, pot)


@pytest.mark.parametrize("method,extra", [
    ("exact", ["--certify"]), ("sinkhorn", ["--epsilon", 0.05]), ("sliced", ["--directions", 20, "--seed", 3]),
])
def test_every_method_is_the_command_lines(measures, tmp_path, cli, method, extra):
    a, b, wa, _ = measures
    kwargs = {"exact": dict(certify=True), "sinkhorn": dict(epsilon=0.05), "sliced": dict(directions=20, seed=3)}
    r = regatta.wasserstein(a, b, weights_a=wa, method=method, **kwargs[method])
    t = cli("wasserstein", save(tmp_path / "a.npy", a), save(tmp_path / "b.npy", b), "--weights-a",
            save(tmp_path / "wa.npy", wa), "--method", method, *extra, "--json")
    assert float(r.value) == t["value"] and float(r.cost) == t["cost"] and r.status == t["status"]
    if method == "exact":
        assert float(r.bracket.lower) == t["lower"] and float(r.bracket.upper) == t["upper"]


def weighted_uniform(rng, n, d):
    w = rng.uniform(0.2, 1.0, n)
    return rng.random((n, d)), w / w.sum()


def test_sinkhorn_dense_and_streamed_kernels_agree_and_match_pot(ot):
    """The two paths of method='sinkhorn' (dense scaling iteration, streamed log-domain iteration) against each
    other and against POT's sinkhorn_log on the same absolute epsilon. Plans feasible to L1 row errors d1, d2
    (columns exact; POT's rows exact, its columns off by its own L1 error) differ in <P, C> by at most
    (d1 + d2) max C; the rounding of the n m terms is added."""
    rng = np.random.default_rng(21)
    for d in (2, 3):
        (x, wa), (y, wb) = weighted_uniform(rng, 50, d), weighted_uniform(rng, 40, d)
        M = cost_matrix(x, y, 2)
        rounding = 64 * M.size * EPS * M.max()
        for relative in (1.0, 0.1, 0.03):
            eps = relative * M.mean()
            runs = {k: regatta.wasserstein(x, y, weights_a=wa, weights_b=wb, method="sinkhorn", epsilon=eps,
                                           tolerance=1e-9, kernel=k) for k in ("auto", "dense", "streamed")}
            assert [runs[k].raw["kernel"] for k in runs] == ["dense", "dense", "streamed"]
            assert runs["auto"].raw["kernel_requested"] == "auto"
            dense, streamed = runs["dense"].raw, runs["streamed"].raw
            assert dense["converged"] and streamed["converged"]
            assert dense["handed_over"] is False and "handed_over" not in streamed
            assert float(runs["auto"].cost) == dense["cost"]
            bound = (dense["marginal_error"] + streamed["marginal_error"]) * M.max() + rounding
            assert abs(dense["cost"] - streamed["cost"]) <= bound, (d, relative)
            G = ot.sinkhorn(wa, wb, M, eps, method="sinkhorn_log", stopThr=1e-9 / np.sqrt(len(wb)),
                            numItermax=100000)
            pot_error = max(np.abs(G.sum(1) - wa).sum(), np.abs(G.sum(0) - wb).sum())
            pot_cost = float(np.sum(G * M))
            for r in (dense, streamed):
                assert abs(r["cost"] - pot_cost) <= (r["marginal_error"] + pot_error) * M.max() + rounding, \
                    (d, relative, r["kernel"])


def test_sinkhorn_kernel_is_the_command_lines(tmp_path, cli):
    rng = np.random.default_rng(22)
    (x, wa), (y, _) = weighted_uniform(rng, 30, 3), weighted_uniform(rng, 20, 3)
    files = [save(tmp_path / "x.npy", x), save(tmp_path / "y.npy", y), "--weights-a", save(tmp_path / "wa.npy", wa)]
    for kernel in ("auto", "dense", "streamed"):
        r = regatta.wasserstein(x, y, weights_a=wa, method="sinkhorn", epsilon=0.05, kernel=kernel)
        t = cli("wasserstein", *files, "--method", "sinkhorn", "--epsilon", 0.05, "--sinkhorn-kernel", kernel,
                "--json")
        assert (float(r.cost), r.raw["kernel"], r.raw["iterations"]) == (t["cost"], t["kernel"], t["iterations"])
    text = cli("wasserstein", *files, "--method", "sinkhorn", "--epsilon", 0.05).stdout
    assert "kernel            dense (scaling iteration on the materialised 30 x 20 Gibbs kernel" in text


@pytest.mark.parametrize("kwargs,start", [
    (dict(method="sinkhorn", kernel="gpu"), "kernel: must be 'auto', 'dense' or 'streamed', got 'gpu'"),
    (dict(method="sinkhorn", kernel="dense", p=1.5), "kernel: dense: the dense kernel needs p = 2"),
    (dict(kernel="dense"), "kernel: applies to method='sinkhorn' only"),
    (dict(weights_a=np.full(7, 0.2)), "weights_a (use normalize=True to rescale)"),
    (dict(p=0.5), "p: must be a finite number >= 1"),
    (dict(method="emd"), "method: must be exact, sinkhorn, sliced or 1d"),
    (dict(certify=True, method="sliced"), "certify: applies to method='exact' only"),
    (dict(epsilon=0.1), "epsilon: applies to method='sinkhorn' only"),
    (dict(method="1d"), "method: 1d needs one-dimensional atoms"),
    (dict(weights_a=-np.ones(7) / 7), "weights_a"),
])
def test_bad_input_raises_input_error(measures, kwargs, start):
    a, b, _, _ = measures
    with pytest.raises(regatta.InputError) as info:
        regatta.wasserstein(a, b, **kwargs)
    assert str(info.value).startswith(start), str(info.value)


def test_weights_stored_in_half_precision_get_a_bounded_tolerance():
    """float16 weights carry one rounding each, so a sum within 4 n 2^-11 of 1 is rounding — but never more
    than 2^-7: 600 weights of 1/300 summing to 2 were accepted and silently halved (4 n u = 1.17)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((600, 2))
    b = a[:3] + 1
    with pytest.raises(regatta.InputError, match="weights_a .*sum to 1"):
        regatta.wasserstein(a, b, weights_a=np.full(600, 1 / 300, dtype=np.float16))
    ok = regatta.wasserstein(a[:6], b, weights_a=np.full(6, 1 / 6, dtype=np.float16))  # rounding only
    assert float(ok.value) > 0


def test_dimension_mismatch(measures):
    a, _, _, _ = measures
    with pytest.raises(regatta.InputError, match="^b: atoms have dimension 2, a has 3"):
        regatta.wasserstein(a, np.zeros((2, 2)))


def test_proofs_check_is_the_command_lines(cli):
    ids = [c["id"] for c in regatta.claims() if c["checkable"]]
    assert len(ids) >= 50
    claim = "softmax.half" if "softmax.half" in ids else ids[0]
    ours = regatta.proofs_check([claim], samples=20, seed=1)
    theirs = cli("proofs-check", "--claim", claim, "--samples", 20, "--seed", 1, "--json", expect=0)
    theirs = theirs if isinstance(theirs, list) else theirs.get("claims", [theirs])
    assert len(ours) == 1 and ours[0].id == claim
    t = next(x for x in theirs if x.get("id") == claim)
    assert (ours[0].verdict, ours[0].certified, ours[0].raw.get("max_ratio")) == \
        (t["verdict"], t["certified"], t.get("max_ratio"))
    with pytest.raises(regatta.InputError, match="^claims: unknown claim ID 'no.such'"):
        regatta.proofs_check(["no.such"])


def test_ctrl_c_interrupts_a_long_exact_wasserstein_within_a_second():
    from test_lipschitz import assert_ctrl_c_stops_within_a_second

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((20000, 2)), rng.standard_normal((20000, 2)) + 0.3  # minutes of pivots
    assert_ctrl_c_stops_within_a_second(lambda: regatta.wasserstein(a, b, certify=True), after=1.0)
    # The module still works afterwards.
    assert float(regatta.wasserstein(a[:3], b[:3]).value) > 0


def test_ctrl_c_interrupts_a_long_sinkhorn_within_a_second():
    from test_lipschitz import assert_ctrl_c_stops_within_a_second

    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3000, 2)), rng.standard_normal((3000, 2)) + 0.3
    # A small epsilon, an unreachable tolerance and no iteration limit to speak of: minutes of iterations of
    # a few tens of milliseconds each.
    assert_ctrl_c_stops_within_a_second(
        lambda: regatta.wasserstein(a, b, method="sinkhorn", epsilon=1e-4, tolerance=1e-15,
                                    max_iterations=10**9), after=1.0)
    # Progress: 150 iterations on 1,000 atoms a side (an unreachable tolerance), about half a second, against
    # reports throttled to one per 25 ms.
    calls = []
    r = regatta.wasserstein(a[:1000], b[:1000], method="sinkhorn", epsilon=1e-3, tolerance=1e-15,
                            max_iterations=150, progress=lambda *c: calls.append(c))
    assert r.raw["iterations"] == 150
    assert calls and {c[0] for c in calls} == {"wasserstein: sinkhorn iterations"}
    # 0: the dense path also reports after building its kernel, before the first iteration.
    assert all(0 <= c[1] <= 150 and c[2] == 150 for c in calls) and calls[-1][1] > 0


def test_exact_wasserstein_reports_its_pivots():
    # Reports are throttled to one per 25 ms: 1,500 atoms a side take ~0.25 s (~30,000 pivots).
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((1500, 2)), rng.standard_normal((1500, 2))
    calls = []
    regatta.wasserstein(a, b, progress=lambda *c: calls.append(c))
    assert {c[0] for c in calls} == {"wasserstein: network simplex pivots"}
    calls.clear()
    regatta.wasserstein(a[:50], b[:50], certify=True, progress=lambda *c: calls.append(c))
    assert ("wasserstein: certifying the bracket", 1, 1) in calls
    pivots = [c[1] for c in calls if c[0] == "wasserstein: network simplex pivots"]
    assert pivots == sorted(pivots) and all(p % 1024 == 0 for p in pivots)
