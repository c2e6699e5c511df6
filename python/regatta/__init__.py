"""regatta — certified Lipschitz analysis of attention, from Python.

The C++ library (regatta._regatta) does every computation; this package converts NumPy arrays and PyTorch
objects into its inputs and its results into objects whose certified numbers know which way they round
(Lower prints rounded down, Upper rounded up, Interval outward; Estimate to nearest). Bad input raises
InputError (a ValueError) with the command line's one-line message. See docs/python.md.
"""
from ._regatta import InputError, Linearization, CrossLinearization, decimal
from ._numbers import Estimate, Interval, Lower, Upper
from ._layer import Layer, array
from ._model import Model, RobustnessRow
from ._graph_model import GraphModel
from ._results import BoundResult, BracketResult, ClaimResult, LocalResult, MeasureBracketResult, RegionResult, \
    RobustnessResult, WassersteinResult
from ._transport import claims, proofs_check, wasserstein

__all__ = [
    "InputError", "Layer", "Model", "GraphModel", "RobustnessRow", "Linearization", "CrossLinearization", "Estimate", "Lower", "Upper", "Interval",
    "BoundResult", "BracketResult", "MeasureBracketResult", "LocalResult", "RegionResult", "RobustnessResult", "WassersteinResult",
    "ClaimResult", "wasserstein", "claims", "proofs_check", "decimal", "array",
]
