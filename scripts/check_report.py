#!/usr/bin/env python3
"""Recomputes numbers of a `regatta report` directory independently and compares them with its tables.

Independent means: no regatta code. Λ_N from scipy's Lambert W, Jacobians from torch.autograd on the attention
maps written out from their definitions (docs/math/attention.md), spectral norms from numpy's SVD. Checked:

  kim_lambda.csv     Λ_N = W0((N − 1)/e) lies in the certified bracket and equals the estimate;
  kim_tightness.csv  UB∞ = 4Λ_N + 1 and UB₂ = √N·UB∞; the family column max_t ‖J‖∞ over the docs/math/bounds.md#kim-tightness family
                     (L2 attention, d = H = 1, unit weights) recomputed by a bounded scalar search on autograd
                     Jacobians; every certified lower bound ≤ that maximum and ≤ UB;
  kim_dot_growth.csv (i) dot-product attention at X = (0, s, −s, s, −s): J₁₁ = 1/5 + 4s²/5 and the certified
                     lower bounds ≤ the exact ‖J‖∞ and ‖J‖₂ (autograd + SVD);
  castin_sqrt_n.csv  ‖J‖₂ on the Castin construction (d = 1, V = 1; causal too) by autograd + SVD for n ≤ 1024:
                     the estimate agrees and the certified lower bound does not exceed it; the √n bound
                     √3·|V|·(a²R⁴(4n + 1) + n)^½ is recomputed;
  proofs_check.csv   every verdict matches its expectation;
  robustness_vit_accuracy_at.csv  the counts recounted from robustness_vit.csv, each accuracy the exact k/n.

The page itself (index.html as a browser shows it) is checked by check_report_page.py.

Usage: check_report.py REPORT_DIR. Exit 0 when every check passes, 1 when one fails, 77 when numpy, scipy or
torch is missing (ctest reports the test as skipped). Needs python3-numpy, python3-scipy and python3-torch.
"""
import csv
import math
import re
import sys
from fractions import Fraction
from pathlib import Path

try:
    import numpy as np
    import scipy.optimize
    import scipy.special
    import torch
except ImportError as missing:  # pragma: no cover - depends on the machine
    print(f"check_report: skipped ({missing})")
    sys.exit(77)

torch.set_default_dtype(torch.float64)
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print("FAIL", what)


def rows(directory, name):
    with open(directory / "tables" / name, newline="") as f:
        reader = csv.reader(f)
        header = [h.split(" (")[0] for h in next(reader)]
        return [dict(zip(header, r)) for r in reader]


def close(a, b, rel):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def lambda_n(n):
    return float(scipy.special.lambertw((n - 1) / math.e).real)


def exact_fraction(k, n, places=10):
    """k/n as regatta prints a count of inputs: '0.85 (34/40)', or '0.6666666666 (20/30, rounded down)'."""
    q = Fraction(k, n)
    for decimals in range(0, 64):
        scaled = q * 10**decimals
        if scaled.denominator == 1:
            digits = str(scaled.numerator).rjust(decimals + 1, "0")
            text = digits if decimals == 0 else digits[:-decimals] + "." + digits[-decimals:]
            return f"{text} ({k}/{n})"
    cut = str(math.floor(q * 10**places)).rjust(places + 1, "0")
    return f"{cut[:-places]}.{cut[-places:]} ({k}/{n}, rounded down)"


# ---- attention maps written from their definitions (single head, d = 1) ----


def l2_unit(x):
    """Kim et al. L2 attention, d = H = 1, W^Q = W^K = W^V = W^O = 1: f_i = Σ_j softmax_j(−(x_i − x_j)²) x_j."""
    p = torch.softmax(-((x[:, None] - x[None, :]) ** 2), dim=1)
    return p @ x


def dot_head(a, causal=False):
    """f_i = Σ_j softmax_j(a x_i x_j) x_j (V = 1), optionally with a causal mask."""

    def f(x):
        s = a * x[:, None] * x[None, :]
        if causal:
            n = x.shape[0]
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        return torch.softmax(s, dim=1) @ x

    return f


def jacobian(f, x):
    return torch.autograd.functional.jacobian(f, torch.tensor(x)).numpy()


def inf_norm(J):
    return float(np.abs(J).sum(axis=1).max())


def two_norm(J):
    return float(np.linalg.svd(J, compute_uv=False)[0])


def family_inf(n):
    """max over t of ‖J‖∞ at x = (0, +√t × ⌈(n−1)/2⌉, −√t × ⌊(n−1)/2⌋) (docs/math/bounds.md#kim-tightness)."""
    up, down = (n - 1 + 1) // 2, (n - 1) // 2

    def value(t):
        r = math.sqrt(t)
        return inf_norm(jacobian(l2_unit, [0.0] + [r] * up + [-r] * down))

    grid = np.linspace(0.05, 12.0, 240)
    values = [value(t) for t in grid]
    k = int(np.argmax(values))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    best = scipy.optimize.minimize_scalar(lambda t: -value(t), bounds=(lo, hi), method="bounded",
                                          options={"xatol": 1e-10})
    return max(-best.fun, values[k])


def main():
    if len(sys.argv) != 2:
        print("usage: check_report.py REPORT_DIR", file=sys.stderr)
        return 2
    d = Path(sys.argv[1])
    if not (d / "tables").is_dir():
        print(f"check_report: {d}: no tables/ folder (not a report directory)", file=sys.stderr)
        return 2

    for r in rows(d, "kim_lambda.csv"):
        n = int(r["n"])
        ref = lambda_n(n)
        lo, hi, est = float(r["lambda_lower"]), float(r["lambda_upper"]), float(r["lambda"])
        check(lo <= ref * (1 + 1e-14) and ref <= hi * (1 + 1e-14), f"Λ_{n}: scipy {ref!r} outside [{lo!r}, {hi!r}]")
        check(close(est, ref, 1e-13), f"Λ_{n}: estimate {est!r} vs scipy {ref!r}")

    for r in rows(d, "kim_tightness.csv"):
        n = int(r["n"])
        ub_inf = 4 * lambda_n(n) + 1
        check(close(float(r["ub_inf"]), ub_inf, 1e-13), f"UB∞({n}) {r['ub_inf']} vs {ub_inf!r}")
        check(close(float(r["ub_two"]), math.sqrt(n) * ub_inf, 1e-13), f"UB₂({n}) {r['ub_two']}")
        lower_inf, lower_two = float(r["lower_inf"]), float(r["lower_two"])
        check(lower_inf <= ub_inf * (1 + 1e-12) and lower_two <= math.sqrt(n) * ub_inf,
              f"N = {n}: a certified lower bound exceeds its upper bound")
        check(close(float(r["ratio_inf"]), lower_inf / float(r["ub_inf"]), 1e-12), f"ratio_inf({n})")
        if n <= 200:  # autograd Jacobians of the family at larger N take too long for a routine check
            fam = family_inf(n)
            check(close(float(r["family_inf"]), fam, 1e-7), f"family max ‖J‖∞ at N = {n}: {r['family_inf']} vs {fam!r}")
            print(f"kim N = {n:4d}: family max ‖J‖∞ {fam:.10f} (report {float(r['family_inf']):.10f}), "
                  f"certified lower {lower_inf:.10f}")

    for r in rows(d, "kim_dot_growth.csv"):
        s = float(r["s"])
        J = jacobian(dot_head(1.0), [0.0, s, -s, s, -s])
        check(close(J[0, 0], 0.2 + 0.8 * s * s, 1e-12), f"J₁₁ at s = {s}: {J[0, 0]!r}")
        check(close(float(r["closed_form"]), 0.2 + 0.8 * s * s, 1e-12), f"closed form at s = {s}")
        exact_inf, exact_two = inf_norm(J), two_norm(J)
        check(float(r["inf_one"]) <= exact_inf * (1 + 1e-12) and close(float(r["inf_one"]), exact_inf, 1e-9),
              f"‖J‖∞ at s = {s}: certified lower {r['inf_one']} vs autograd {exact_inf!r}")
        check(float(r["two_one"]) <= exact_two * (1 + 1e-12), f"‖J‖₂ at s = {s}: {r['two_one']} > {exact_two!r}")

    for r in rows(d, "castin_sqrt_n.csv"):
        config, n = r["config"], int(r["n"])
        a = 1.0 if "A = +1" in config else -1.0
        R = 4.0 if "R = 4" in config else 2.0
        causal = "causal" in config
        bound = math.sqrt(3) * math.sqrt(a * a * R**4 * (4 * n + 1) + n)
        check(close(float(r["bound"]), bound, 1e-12), f"{config}, n = {n}: bound {r['bound']} vs {bound!r}")
        if n > 1024:
            continue
        x = [-R] + [R] * (n - 1) if a < 0 else [R] + [R / 2] * (n - 1)
        exact = two_norm(jacobian(dot_head(a, causal), x))
        check(close(float(r["two_est"]), exact, 1e-6), f"{config}, n = {n}: estimate {r['two_est']} vs SVD {exact!r}")
        if r["two"]:
            check(float(r["two"]) <= exact * (1 + 1e-12), f"{config}, n = {n}: certified {r['two']} > SVD {exact!r}")
        print(f"castin {config:22s} n = {n:4d}: ||J||_2 by SVD {exact:.12g} (report estimate {float(r['two_est']):.12g})")

    # The true constant (section 8): sup over the domain of ||J||_2 sampled on a grid with torch.autograd must
    # lie below the certified upper end, and (for N = 2, where a 41 x 41 grid is fine enough) near or above
    # the certified lower end; the published bound is recomputed from its formula and must lie above both.
    for name, f, bound_of in (
        ("true_constant_l2.csv", l2_unit,
         lambda n, R: math.sqrt(n) * (4 * lambda_n(n) + 1)),  # kim.thm32_2, d = d_h = 1, unit weights
        ("true_constant_dot.csv", dot_head(1.0),
         lambda n, R: math.sqrt(3) * math.sqrt(R**4 * (4 * n + 1) + n)),  # castin.sqrt_n, A = V = 1
    ):
        if not (d / "tables" / name).exists():
            check(False, f"{name} missing")
            continue
        for r in rows(d, name):
            n, R = int(r["n"]), float(r["R"])
            lower, upper = float(r["lower"]), float(r["upper"])
            check(lower <= upper, f"{name} N = {n}, R = {R}: lower {lower} > upper {upper}")
            bound = bound_of(n, R)
            check(close(float(r["bound_value"]), bound, 1e-12), f"{name} N = {n}, R = {R}: bound {r['bound_value']} vs {bound!r}")
            check(bound >= upper * (1 - 1e-12), f"{name} N = {n}, R = {R}: published bound {bound!r} below the true constant {upper}")
            rng = np.random.default_rng(n * 100 + int(R * 10))
            if n == 2:
                g = np.linspace(-R, R, 41)
                points = [np.array([a, b]) for a in g for b in g]
            else:
                points = list(rng.uniform(-R, R, size=(400, n)))
            sampled = max(two_norm(jacobian(f, [float(v) for v in x])) for x in points)
            check(sampled <= upper * (1 + 1e-12), f"{name} N = {n}, R = {R}: sampled ||J||_2 {sampled!r} > certified upper {upper}")
            if n == 2:
                check(sampled >= lower * (1 - 5e-2), f"{name} N = 2, R = {R}: grid max {sampled!r} far below the certified lower {lower}")
            print(f"true constant {name[14:-4]:3s} N = {n}, R = {R:3g}: sampled max {sampled:.6g} in [{lower:.6g}, {upper:.6g}]? bound {bound:.6g}")

    for r in rows(d, "proofs_check.csv"):
        check(r["verdict"] == r["expected"] or (r["expected"] == "identity" and r["verdict"] == "identity"),
              f"proofs-check {r['id']}: verdict {r['verdict']}, expected {r['expected']}")

    # Section 9: a certified radius (or the naive one) is at most the true radius, which an adversarial point
    # at the attack radius bounds from above; the certified margin is at most the margin.
    for r in rows(d, "robustness_vit.csv") if (d / "tables" / "robustness_vit.csv").exists() else []:
        attack = float(r["attack"])
        check(float(r["certified"]) <= attack, f"robustness image {r['index']}: certified {r['certified']} > attack {attack}")
        check(float(r["naive"]) <= attack, f"robustness image {r['index']}: naive {r['naive']} > attack {attack}")
        check(float(r["margin_lower"]) <= float(r["margin"]), f"robustness image {r['index']}: certified margin above the margin")

    # Section 9's accuracies: the counts recounted from the per-image rows, and each accuracy printed as the
    # exact fraction k/n (the decimal of k/n, rounded down and said so when it does not terminate).
    at = d / "tables" / "robustness_vit_accuracy_at.csv"
    if (d / "tables" / "robustness_vit.csv").exists():
        check(at.exists(), "robustness_vit_accuracy_at.csv missing beside robustness_vit.csv")
    images = rows(d, "robustness_vit.csv") if at.exists() else []
    for r in rows(d, "robustness_vit_accuracy_at.csv") if at.exists() else []:
        radius, n = float(r["radius"]), int(r["inputs"])
        correct = [i for i in images if int(float(i["label"])) == int(float(i["prediction"]))]
        certified = sum(float(i["margin_lower"]) > 0 and float(i["certified"]) >= radius for i in correct)
        unbroken = sum(float(i["attack"]) > radius for i in correct)
        check(n == len(images), f"accuracy at r = {radius}: {n} images, the per-image table has {len(images)}")
        check(int(r["certified_count"]) == certified, f"certified count at r = {radius}: {r['certified_count']}, recounted {certified}")
        check(int(r["attack_count"]) == unbroken, f"attack count at r = {radius}: {r['attack_count']}, recounted {unbroken}")
        for key, k in (("certified_accuracy", certified), ("attack_accuracy", unbroken)):
            check(r[key] == exact_fraction(k, n), f"{key} at r = {radius}: {r[key]!r}, expected {exact_fraction(k, n)!r}")

    # summary.md says "plot not rendered" exactly for the figures that have no SVG.
    summary = (d / "summary.md").read_text()
    for m in re.finditer(r"\(plot not rendered: [^;]*; data in `plots/([^`]+)\.dat`\)", summary):
        check(not (d / "plots" / f"{m.group(1)}.svg").exists(), f"summary.md says {m.group(1)} was not rendered, but its SVG is there")
    for m in re.finditer(r"!\[[^\]]*\]\(plots/([^)]+)\.svg\)", summary):
        check((d / "plots" / f"{m.group(1)}.svg").exists(), f"summary.md shows plots/{m.group(1)}.svg, which is missing")

    print(f"check_report: {checks} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
