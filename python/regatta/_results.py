"""Result objects of the Lipschitz analyses and transport: each field is an Estimate or a certified Lower /
Upper / Interval (_numbers.py), or plain data (names, counts, arrays). `raw` keeps the library's values."""
import math

from ._numbers import Estimate, Interval, Lower, Upper, estimate, lower, upper


def _fmt(x):
    return "none" if x is None else str(x)


class BoundResult:
    """One theoretical Lipschitz upper bound (`regatta bound`): the claim ID, its hypotheses, whether it
    applies, the formula in double (`estimate`) and its certified upper bound (`certified_upper`)."""

    def __init__(self, raw):
        self.raw = raw
        self.id = raw["id"]
        self.name = raw["name"]
        self.norm = raw["norm"]
        self.applies = raw["applies"]
        self.estimate = estimate(raw["value"])
        self.certified_upper = upper(raw["certified_upper"])
        self.reason = raw["reason"]
        self.note = raw["note"]
        self.provenance = raw["provenance"]
        self.hypotheses = raw["hypotheses"]
        self.source = raw["source"]

    def __repr__(self):
        if not self.applies:
            return f"<BoundResult {self.id} ({self.norm}): refused: {self.reason}>"
        return (f"<BoundResult {self.id} ({self.norm}): certified upper {self.certified_upper}, "
                f"estimate {self.estimate} [{self.provenance}]>")


def _region_witness(raw):
    """The point behind a lower end: `input` (X', an array), `lower` (certified ||J(X')||, None if not verified,
    with `reason`), `estimate`, `distance` (certified upper bound of ||X' - X||_F for a ball, max |X' - X| for a
    box) and `origin` (the ascent's start)."""
    if raw is None:
        return None
    return dict(raw, lower=lower(raw["lower"]), estimate=Estimate(raw["estimate"]), distance=Upper(raw["distance"]))


class RegionResult:
    """The certified sup of ||J|| over a Frobenius ball or a box around X (region enclosure)."""

    def __init__(self, raw):
        self.raw = raw
        self.shape = raw["shape"]
        self.radius = raw["radius"]
        self.status = raw["status"]
        self.certified = raw["certified"]
        self.sup_norm_2 = upper(raw["two_upper"])
        self.sup_norm_2_method = raw["two_upper_method"]
        self.sup_norm_inf = upper(raw["inf_upper"])
        self.relative_width = Estimate(raw["relative_width"])
        # The segment pieces the second-order forms used (0: the form did not run; taylor 0: no Taylor form).
        self.radius_pieces = raw["radius_pieces"]
        self.taylor_pieces = raw["taylor_pieces"]
        # Certified lower ends of the sup: the larger of the centre's certified norm and ||J(X')|| at a point X'
        # of the region found by ascent (the witness: its input, certified distance, estimate, origin).
        self.sup_norm_2_lower = lower(raw["two_lower"])
        self.sup_norm_inf_lower = lower(raw["inf_lower"])
        self.witness_2 = _region_witness(raw["two_witness"])
        self.witness_inf = _region_witness(raw["inf_witness"])
        closed = lambda c: None if c is None else dict(c, upper=Upper(c["upper"]))  # noqa: E731
        self.closed_form_2 = closed(raw["closed_form_2"])
        self.closed_form_inf = closed(raw["closed_form_inf"])

    def __repr__(self):
        return (f"<RegionResult {self.shape} radius {self.radius}: sup ||J||_2 in "
                f"[{_fmt(self.sup_norm_2_lower)}, {_fmt(self.sup_norm_2)}], sup ||J||_inf in "
                f"[{_fmt(self.sup_norm_inf_lower)}, {_fmt(self.sup_norm_inf)}] ({self.status})>")


class RobustnessResult:
    """The certified robustness radius from region enclosures: every X' with ||X' - X||_F < radius keeps a
    positive margin. `radius` is certified (printed rounded down); `first_order_limit` an estimate."""

    def __init__(self, raw):
        self.raw = raw
        self.radius = Lower(raw["radius"])
        self.sup_norm_2_at_radius = Upper(raw["sup_two_at_radius"]) if raw["radius"] > 0 else None
        self.first_order_limit = Estimate(raw["first_order_limit"])
        self.first_failure = raw["first_failure"]
        self.steps = raw["steps"]

    def __repr__(self):
        return f"<RobustnessResult certified radius {self.radius} (first-order limit {self.first_order_limit})>"


class LocalResult:
    """Local Jacobian norms of a layer at X (`regatta local`): ||J(X)||_2 (Lanczos estimate from below, a
    certified lower bound, a certified upper bound for small n*d) and ||J(X)||_inf (the exact row-sum formula in
    double, and its certified enclosure with certify=True)."""

    def __init__(self, raw):
        self.raw = raw
        self.norm_2 = Estimate(raw["two_estimate"])
        self.norm_2_lower = lower(raw["two_lower"])
        self.norm_2_upper = upper(raw["two_upper"])
        self.norm_2_upper_method = raw["two_upper_method"] or raw["two_upper_note"]
        self.norm_2_interval = (Interval(raw["two_lower"], raw["two_upper"])
                                if raw["two_lower"] is not None and raw["two_upper"] is not None else None)
        self.norm_2_converged = raw["two_converged"]
        self.norm_2_iterations = raw["two_iterations"]
        self.witness = raw["two_witness"]
        self.norm_inf = Estimate(raw["inf_estimate"])
        self.norm_inf_row = raw["inf_row"]
        self.norm_inf_interval = (Interval(raw["inf_lower"], raw["inf_upper"])
                                  if raw["inf_lower"] is not None else None)
        self.jacobian_scalar = raw["jacobian_scalar"]
        self.region_refused = raw["region_refused"]
        self.region = RegionResult(raw["region"]) if raw["region"] is not None else None
        self.robustness = RobustnessResult(raw["robustness"]) if raw["robustness"] is not None else None

    def __repr__(self):
        two = self.norm_2_interval if self.norm_2_interval is not None else f">= {_fmt(self.norm_2_lower)}"
        inf = self.norm_inf_interval if self.norm_inf_interval is not None else "(not certified)"
        return (f"<LocalResult ||J||_2 estimate {self.norm_2}, certified {two}; ||J||_inf estimate "
                f"{self.norm_inf}, certified {inf}>")


def _ends(lower, upper, bound):
    """'[lower, upper] (lower certified, upper estimate; upper from BOUND)': each end labelled by its own
    type (a certified lower end beside an estimated or absent upper one was once called 'estimates')."""
    def kind(x):
        return "absent" if x is None else "certified" if isinstance(x, (Lower, Upper)) else "estimate"
    source = f"; upper from {bound}" if upper is not None and bound else ""
    return f"[{lower}, {_fmt(upper)}] (lower {kind(lower)}, upper {kind(upper)}{source})"


class BracketResult:
    """[lower, upper] for the Lipschitz constant on sequences of length n (`regatta bracket`). With
    certify=True and success both ends are certified (Lower, Upper, and `interval`); otherwise they are
    estimates. The witness X (and direction) attains the lower end."""

    def __init__(self, raw):
        self.raw = raw
        self.certified = raw["certified"]
        lo, hi = raw["lower"], raw["upper"]
        self.lower = Lower(lo) if raw["lower_certified"] is not None else Estimate(lo)
        self.upper = (Upper(hi) if raw["upper_certified"] is not None else Estimate(hi)) if math.isfinite(hi) else None
        # lower > upper would be a certified contradiction of the bound (reported in raw, never an interval).
        self.interval = Interval(lo, hi) if self.certified and lo <= hi else None
        self.ratio = Estimate(raw["ratio"])
        self.lower_estimate = Estimate(raw["lower_estimate"])
        self.upper_estimate = Estimate(raw["upper_estimate"])
        self.bound = raw["bound_name"] or None
        self.bound_description = raw["bound_description"]
        self.refused = raw["refused"]
        self.witness = raw["witness"]
        self.witness_direction = raw["witness_direction"]
        self.witness_row = raw["witness_row"] if raw["witness_row"] >= 0 else None
        self.witness_origin = raw["witness_origin"]
        self.evaluations = raw["evaluations"]
        self.stopped_by_budget = raw["stopped_by_budget"]
        self.stopped_by_evaluations = raw["stopped_by_evaluations"]
        self.note = raw["note"]
        self.region_upper = upper(raw["region_upper"])
        self.region_note = raw["region_note"]
        self.norm = raw["norm"]
        self.n = raw["n"]
        self.radius = raw["radius"]

    def __repr__(self):
        return (f"<BracketResult n={self.n} norm {self.norm}: {_ends(self.lower, self.upper, self.bound)}, "
                f"ratio {self.ratio}>")


class MeasureBracketResult:
    """[lower, upper] for the W_p Lipschitz constant on measures (`regatta measure-lipschitz`): lower from the
    witness measures (mu, nu[, shared]) of the search, upper the mean-field bound; certified with certify=True
    where both ends could be (`interval`), estimates otherwise."""

    def __init__(self, raw):
        self.raw = raw
        self.certified = raw["certified"]
        lo, hi = raw["lower"], raw["upper"]
        self.lower = Lower(lo) if raw["lower_certified"] is not None else Estimate(lo)
        self.upper = (Upper(hi) if raw["upper_certified"] is not None else Estimate(hi)) if math.isfinite(hi) else None
        self.interval = Interval(lo, hi) if self.certified and lo <= hi else None
        self.ratio = Estimate(raw["ratio"])
        self.argument = raw["argument"]
        self.bound = raw["bound_name"] or None
        self.refused = raw["refused"]
        self.witness = (raw["witness_mu"], raw["witness_nu"], raw["witness_shared"])
        self.witness_origin = raw["witness_origin"]
        self.evaluations = raw["evaluations"]
        self.note = raw["note"]

    def __repr__(self):
        return (f"<MeasureBracketResult {self.argument}: {_ends(self.lower, self.upper, self.bound)}, "
                f"ratio {self.ratio}>")


class WassersteinResult:
    """W_p between two discrete measures (`regatta wasserstein`): `value` is an estimate (a floating-point
    evaluation for exact / 1d, an entropic or Monte-Carlo estimate otherwise); with certify=True `bracket` is
    the certified enclosure of W_p and `cost_bracket` of W_p^p."""

    def __init__(self, raw):
        self.raw = raw
        self.method = raw["method"]
        self.p = raw["p"]
        self.value = Estimate(raw["value"])
        self.cost = Estimate(raw["cost"])
        self.status = raw["status"]
        self.converged = raw["converged"]
        self.estimate_kind = raw["estimate_kind"]
        self.certified = bool(raw.get("certified", False))
        self.bracket = Interval(raw["lower"], raw["upper"]) if "lower" in raw and self.certified else None
        self.cost_bracket = (Interval(raw["cost_lower"], raw["cost_upper"])
                             if "cost_lower" in raw and self.certified else None)
        self.plan = raw.get("plan")
        self.standard_error = raw.get("standard_error")
        self.iterations = raw.get("iterations")
        self.marginal_error = raw.get("marginal_error")

    def __repr__(self):
        extra = f", certified {self.bracket}" if self.bracket is not None else ""
        return f"<WassersteinResult {self.method} W_{self.p:g} = {self.value} [{self.estimate_kind}]{extra}>"


class ClaimResult:
    """The verdict on one catalogued claim (`regatta proofs-check`); `raw` is the command's JSON document."""

    def __init__(self, raw):
        self.raw = raw
        self.id = raw.get("id")
        self.expected = raw.get("expected")
        self.verdict = raw.get("verdict")
        self.certified = raw.get("certified")
        self.matches = raw.get("matches")
        self.note = raw.get("note", "")

    def __repr__(self):
        return (f"<ClaimResult {self.id}: {self.verdict} (expected {self.expected}, "
                f"{'certified' if self.certified else 'not certified'})>")
