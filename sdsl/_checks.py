"""The public API's shared input checks: an argument that must be a number, an array of numbers or a count
(batch, k) is read here, so every bad input raises one :class:`~sdsl.errors.InvalidInputError` sentence that
names the argument (not a numpy ValueError, and never a NaN or a silently rounded value)."""

from __future__ import annotations

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = ["numbers", "numbers_1d", "whole", "count", "draft_length", "non_negative", "positive", "positive_int",
           "index", "one_or_many", "broadcast_shapes", "month_days", "valid_date"]


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def numbers(value, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """``value`` as a float array: a number or a (nested) sequence or array of numbers, at least one of them
    unless ``allow_empty`` (a per-position acceptance of a zero-length draft)."""
    if value is None:
        raise InvalidInputError(f"{name} must be a number or an array of numbers; got None.")
    if isinstance(value, (str, bytes)):
        raise InvalidInputError(f"{name} must be a number or an array of numbers; got the string {_shown(value)}.")
    try:
        raw = np.asarray(value)
        if raw.dtype.kind in "USOVcMm" and (raw.dtype.kind != "O" or any(
                v is None or isinstance(v, (str, bytes)) for v in raw.ravel())):
            raise TypeError
        a = raw.astype(float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number or an array of numbers; got {_shown(value)}.") from None
    if a.size == 0 and not allow_empty:
        raise InvalidInputError(f"{name} is empty; give at least one value.")
    return a


def numbers_1d(value, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """:func:`numbers` of a number or any iterable of numbers (a range, a generator), as a 1-D float array."""
    if hasattr(value, "__iter__") and not isinstance(value, (str, bytes, np.ndarray)):
        value = list(value)
    return np.atleast_1d(numbers(value, name, allow_empty=allow_empty))


def _first_bad(a: np.ndarray, bad: np.ndarray) -> str:
    return f"{float(a[bad].ravel()[0]):g}"


def whole(value, name: str, *, minimum: int, what: str) -> np.ndarray:
    """``value`` as a float array of whole numbers >= ``minimum`` (booleans and fractions refused);
    ``what`` completes "{name} must be ..." in the error."""
    a = numbers(value, name)
    if np.asarray(value).dtype == bool:
        raise InvalidInputError(f"{name} must be {what}; got the boolean {_shown(value)}.")
    bad = ~np.isfinite(a) | (a < minimum) | (a != np.round(a))
    if np.any(bad):
        raise InvalidInputError(f"{name} must be {what}; got {_first_bad(a, bad)}.")
    return a


def count(value, name: str = "batch") -> np.ndarray:
    """A batch: a positive whole number of sequences (number or array)."""
    return whole(value, name, minimum=1, what="a positive whole number of sequences")


def draft_length(value, name: str = "gamma") -> np.ndarray:
    """A chain length k (γ): a non-negative whole number of draft tokens (number or array)."""
    return whole(value, name, minimum=0, what="a non-negative whole number of draft tokens")


def non_negative(value, name: str, what: str = "a finite non-negative number") -> np.ndarray:
    """A finite non-negative number or array (a context in tokens, seconds)."""
    a = numbers(value, name)
    bad = ~np.isfinite(a) | (a < 0)
    if np.any(bad):
        raise InvalidInputError(f"{name} must be {what}; got {_first_bad(a, bad)}.")
    return a


def positive(value, name: str, what: str = "a finite positive number") -> np.ndarray:
    """A finite positive number or array."""
    a = numbers(value, name)
    bad = ~np.isfinite(a) | (a <= 0)
    if np.any(bad):
        raise InvalidInputError(f"{name} must be {what}; got {_first_bad(a, bad)}.")
    return a


def positive_int(value, name: str, *, minimum: int = 1) -> int:
    """One whole number >= ``minimum`` (a tree's steps, a maximum batch), as a Python int; 8.0 is 8, 2.5 and
    True are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)) or (
            not float(value).is_integer() or value < minimum):
        raise InvalidInputError(f"{name} must be an integer >= {minimum}; got {_shown(value)}.")
    return int(value)


def index(value, name: str, n: int, what: str) -> int:
    """One index into ``n`` ``what`` (proposers, acceptance levels): an integer in [0, n)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value < n:
        raise InvalidInputError(f"{name} must be an integer from 0 to {n - 1} ({what}: {n}); got {_shown(value)}.")
    return int(value)


def one_or_many(value, single=(str,)) -> list:
    """``value`` as a list: an instance of ``single`` (a name, one object) is one item, not a sequence of them."""
    return [value] if isinstance(value, single) else list(value)


def broadcast_shapes(**arrays) -> tuple:
    """The common shape of the named arrays, or an error naming the first two that do not broadcast."""
    shapes = {name: np.shape(a) for name, a in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        names = list(shapes)
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                try:
                    np.broadcast_shapes(shapes[x], shapes[y])
                except ValueError:
                    raise InvalidInputError(f"{x} (shape {shapes[x]}) and {y} (shape {shapes[y]}) do not broadcast "
                                            "together; give arrays of matching shapes.") from None
        raise  # unreachable: shapes that broadcast pairwise broadcast together


def month_days(y: int, m: int) -> int:
    """Days in month ``m`` of year ``y`` (Gregorian, as ``calendar.monthrange(y, m)[1]``, without importing calendar)."""
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    return 29 if m == 2 and leap else (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[m - 1]


def valid_date(text: str) -> bool:
    """True when ``text`` is a calendar date written YYYY-MM-DD."""
    parts = str(text).split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return False
    y, m, d = (int(p) for p in parts)
    return 1 <= m <= 12 and 1 <= d <= month_days(y, m)
