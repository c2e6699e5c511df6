"""Checks of scalar arguments shared by the wrappers: counts, indices and seeds must be integers (Python or
NumPy; a bool or a float is refused, not truncated), flags must be bools."""
import numbers

import numpy as np

from . import _regatta


def integer(value, name):
    """`value` as an int; InputError naming `name` for a bool, a float (even 2.0), a string or None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise _regatta.InputError(f"{name}: must be an integer, got {value!r}")
    return int(value)


def optional_integer(value, name):
    """None, or `value` as an int (as integer)."""
    return None if value is None else integer(value, name)


def flag(value, name):
    """`value` as a bool; InputError naming `name` for anything but True / False (NumPy bools included)."""
    if not isinstance(value, (bool, np.bool_)):
        raise _regatta.InputError(f"{name}: must be True or False, got {value!r}")
    return bool(value)
