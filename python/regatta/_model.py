"""regatta.Model: a whole trained vision transformer (timm layout, operators/model.hpp), as `regatta certify`
reads it: logits (double, and certified enclosures) and the per-input l2 robustness (certified radius from
region enclosures through every block, attack radius)."""
import math

from . import _regatta
from ._layer import array
from ._numbers import Estimate, Interval, Lower


class RobustnessRow:
    """One input of `regatta certify`: prediction, margin (estimate) and its certified lower bound, the attack
    radius (an estimate: an upper bound on the true robustness radius; None when no attack succeeded) and the
    certified radius (a certified lower bound on it; 0 when none could be certified)."""

    def __init__(self, raw):
        self.raw = raw
        self.label = raw["label"]
        self.prediction = raw["prediction"]
        self.margin = Estimate(raw["margin"])
        self.margin_lower = Lower(raw["margin_lower"])
        self.attack_radius = Estimate(raw["attack_radius"]) if math.isfinite(raw["attack_radius"]) else None
        self.certified_radius = Lower(raw["certified_radius"])
        self.refuted_radius = raw["refuted_radius"]
        self.region_checks = raw["region_checks"]

    def __repr__(self):
        return (f"<RobustnessRow label {self.label} prediction {self.prediction}: certified radius "
                f"{self.certified_radius}, attack radius {self.attack_radius}>")


class Model:
    """A whole vision transformer in timm's layout (docs/models.md)."""

    __slots__ = ("_core",)

    def __init__(self, core):
        self._core = core

    @classmethod
    def from_file(cls, path, config=None):
        """From a .safetensors file in timm naming and its JSON config (default: config.json beside it)."""
        return cls(_regatta.load_model(str(path), "" if config is None else str(config)))

    classes = property(lambda self: self._core.classes)
    input_shape = property(lambda self: self._core.input_shape)
    depth = property(lambda self: self._core.depth)
    width = property(lambda self: self._core.width)

    def __repr__(self):
        c = self._core
        return f"<regatta.Model ViT depth={c.depth} width={c.width} input={c.input_shape} classes={c.classes} from {c.source}>"

    def __call__(self, image):
        """The logits of one image (any shape with C*H*W entries, C-order): a double evaluation (estimates)."""
        return self._core.logits(array(image))

    logits = __call__

    def logits_enclosure(self, image):
        """Certified enclosures of the exact logits of the binary64 weights and image, one Interval per class."""
        lower, upper = self._core.logits_enclosure(array(image))
        return [Interval(lo, hi) for lo, hi in zip(lower, upper)]

    def robustness(self, image, label, *, tolerance=0.01):
        """The l2 robustness of one labelled input, as one row of `regatta certify` (seconds per input; the
        GIL is released but the call is not interruptible)."""
        return RobustnessRow(self._core.robustness(array(image), int(label), float(tolerance)))
