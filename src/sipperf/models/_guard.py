"""Input checks shared by the model functions: every public model refuses NaN, ±inf and
out-of-range numbers with a ValueError that names the argument, instead of returning NaN or a
plausible-looking wrong number."""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["finite", "count"]


def finite(name: str, x: ArrayLike, *, ge: float | None = None, gt: float | None = None,
           integer: bool = False, allow_nan: bool = False) -> NDArray[np.float64]:
    """``x`` as a float array, after checking that every element is finite (not NaN, not ±inf;
    NaN only if ``allow_nan``), ≥ ``ge`` / > ``gt`` and, if ``integer``, a whole number."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {x!r}") from None
    bad = np.isinf(a) if allow_nan else ~np.isfinite(a)
    if np.any(bad):
        raise ValueError(f"{name} must be finite (no NaN or infinity), got {_show(a)}")
    ok = ~np.isnan(a)
    if ge is not None and np.any(a[ok] < ge):
        raise ValueError(f"{name} must be >= {ge:g}, got {_show(a)}")
    if gt is not None and np.any(a[ok] <= gt):
        raise ValueError(f"{name} must be > {gt:g}, got {_show(a)}")
    if integer and np.any(a[ok] != np.floor(a[ok])):
        raise ValueError(f"{name} must be a whole number, got {_show(a)}")
    return a


def count(name: str, x, *, ge: int = 1) -> int:
    """A whole number ≥ ``ge`` (Python or numpy int, or an integral float), as ``int``."""
    if isinstance(x, bool):
        raise ValueError(f"{name} must be a whole number >= {ge}, got {x!r}")
    a = finite(name, x, ge=ge, integer=True)
    if a.ndim != 0:
        raise ValueError(f"{name} must be a single whole number, got {x!r}")
    return int(a)


def _show(a: NDArray) -> str:
    return repr(float(a)) if a.ndim == 0 else f"an array containing {a.ravel()[:6].tolist()}"
