"""Wasserstein distances and the claims checker."""
import json

from . import _regatta
from ._args import flag, integer, optional_integer
from ._layer import array
from ._progress import hook
from ._results import ClaimResult, WassersteinResult


def wasserstein(a, b, *, weights_a=None, weights_b=None, p=2.0, method="exact", certify=False, epsilon=None,
                tolerance=None, max_iterations=None, directions=None, seed=None, normalize=False, progress=None,
                kernel=None):
    """W_p between mu = sum_i weights_a[i] delta_{a[i]} and nu (uniform weights by default), as
    `regatta wasserstein`: method 'exact' (network simplex; certify=True adds the certified bracket),
    'sinkhorn' (entropic estimate, epsilon / tolerance / max_iterations; kernel 'auto' (None) runs the dense
    scaling iteration on the materialised n x m kernel for p = 2 when it fits in memory, else the streamed
    log-domain iteration, 'dense' or 'streamed' force one; raw['kernel'] says which ran), 'sliced' (Monte-Carlo,
    directions / seed) or '1d'. Atoms: n x d, or 1-D for d = 1. The exact and Sinkhorn methods stop on Ctrl-C
    (KeyboardInterrupt) within about a second and report their pivots / iterations to `progress` (a callable
    or True for a tqdm bar); the sliced and 1-D methods (sorting, O(n log n) per direction) run to their end."""
    opt = lambda x: None if x is None else array(x)  # noqa: E731
    with hook(progress) as callback:
        raw = _regatta.wasserstein(array(a), array(b), opt(weights_a), opt(weights_b), float(p), str(method),
                                   flag(certify, "certify"), epsilon, tolerance,
                                   optional_integer(max_iterations, "max_iterations"),
                                   optional_integer(directions, "directions"), optional_integer(seed, "seed"),
                                   flag(normalize, "normalize"), callback,
                                   None if kernel is None else str(kernel))
    return WassersteinResult(raw)


def claims():
    """The catalogued claims: registered ones (id, expected verdict, families) and the missing ones (reason)."""
    return _regatta.claims()


def proofs_check(claims=(), *, families=(), budget=0.0, samples=0, seed=0, precision=128, out_dir="",
                 progress=None):
    """Checks catalogued claims (all by default) as `regatta proofs-check`: a ClaimResult per claim with the
    verdict, whether it is certified, and the command's JSON document in .raw. Ctrl-C stops between claims."""
    if isinstance(claims, str):
        claims = [claims]
    if isinstance(families, str):
        families = [families]
    with hook(progress) as callback:
        docs = _regatta.proofs_check(list(claims), list(families), float(budget),
                                     integer(samples, "samples"), integer(seed, "seed"),
                                     integer(precision, "precision"), str(out_dir), callback)
    return [ClaimResult(json.loads(d)) for d in docs]
