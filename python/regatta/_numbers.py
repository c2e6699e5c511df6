"""Numbers that know what they are.

Every number regatta reports is an *estimate* (a floating-point evaluation, printed rounded to nearest) or
*certified* (an endpoint of an outward-rounded interval evaluation). A certified lower bound prints rounded
down and a certified upper bound rounded up, so that the printed decimal is itself a valid bound; the digits
come from the library's exact MPFR conversion (core/decimal.hpp). The classes are floats: arithmetic on them
gives plain floats, which claim nothing.
"""
from ._regatta import decimal as _decimal

__all__ = ["Estimate", "Lower", "Upper", "Interval", "DIGITS"]

#: Significant digits of str(); repr() shows 17 (the binary value, still rounded in the stated direction).
DIGITS = 10


def _digits(spec, kind):
    """The significant digits of a format spec '' / '.N' / '.Ng' (other specs would round the wrong way)."""
    if spec == "":
        return DIGITS
    body = spec[1:] if spec.startswith(".") else None
    if body is not None and body.endswith("g"):
        body = body[:-1]
    if body is None or not body.isdigit() or not 1 <= int(body) <= 40:
        raise ValueError(f"a {kind} formats only as '', '.N' or '.Ng' (N significant digits, rounded in its "
                         f"own direction); got {spec!r}")
    return int(body)


class Estimate(float):
    """A floating-point estimate: not certified, printed rounded to nearest."""

    certified = False
    kind = "estimate"

    def __str__(self):
        return _decimal(float(self), DIGITS, "nearest")

    def __format__(self, spec):
        return _decimal(float(self), _digits(spec, "estimate"), "nearest")

    def __repr__(self):
        return f"Estimate({_decimal(float(self), 17, 'nearest')})"


class Lower(float):
    """A certified lower bound: the true value is >= this number; printed rounded down."""

    certified = True
    kind = "certified lower bound"

    def __str__(self):
        return _decimal(float(self), DIGITS, "down")

    def __format__(self, spec):
        return _decimal(float(self), _digits(spec, self.kind), "down")

    def __repr__(self):
        return f"Lower({_decimal(float(self), 17, 'down')})"


class Upper(float):
    """A certified upper bound: the true value is <= this number; printed rounded up."""

    certified = True
    kind = "certified upper bound"

    def __str__(self):
        return _decimal(float(self), DIGITS, "up")

    def __format__(self, spec):
        return _decimal(float(self), _digits(spec, self.kind), "up")

    def __repr__(self):
        return f"Upper({_decimal(float(self), 17, 'up')})"


class Interval:
    """A certified enclosure [lower, upper] of a real number (lower: Lower, upper: Upper)."""

    certified = True
    kind = "certified interval"
    __slots__ = ("lower", "upper")

    def __init__(self, lower, upper):
        if not lower <= upper:
            raise ValueError(f"an interval needs lower <= upper, got {lower!r} and {upper!r}")
        self.lower = Lower(lower)
        self.upper = Upper(upper)

    def __contains__(self, x):
        return self.lower <= x <= self.upper

    @property
    def width(self):
        """upper - lower (a float, rounded to nearest: not itself certified)."""
        return float(self.upper) - float(self.lower)

    def __str__(self):
        return f"[{self.lower}, {self.upper}]"

    def __format__(self, spec):
        return f"[{self.lower:{spec}}, {self.upper:{spec}}]"

    def __repr__(self):
        return f"Interval({_decimal(float(self.lower), 17, 'down')}, {_decimal(float(self.upper), 17, 'up')})"

    def __eq__(self, other):
        return isinstance(other, Interval) and (self.lower, self.upper) == (other.lower, other.upper)

    def __hash__(self):
        return hash((float(self.lower), float(self.upper)))


def estimate(x):
    return None if x is None else Estimate(x)


def lower(x):
    return None if x is None else Lower(x)


def upper(x):
    return None if x is None else Upper(x)
