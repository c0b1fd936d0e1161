"""Multi-thread overheads of thesis ch. 5 (§5.3.2): β(λ, c) and the c-thread service time.

With c server threads on one core the thesis inflates the single-thread service time E[X_1]
(which already contains the interrupt overhead α, eq. 4.4) to

    E[X_c] = β(λ, c) · (E[X_1] · c)                          (eq. 5.5)

and fits β as a multi-linear function of the thread count c and the packet rate λ (packets/s):

    β = 0.174 c + 0.923·10⁻⁴ λ - 0.60                         (eq. 5.6)

E[X_c] is then the mean service time of each of the c servers of the M/M/c/K drop model
(eq. 5.3/5.4, :mod:`sipperf.models.mmck`) with K = 200.

Notes from checking eq. 5.6 against the thesis's own tables: with λ in packets/s eq. 5.6
reproduces the β printed in the *last* column of each of Tables 5.2–5.6 (2: 1.077 at 14 400;
4: 1.314 at 13 200; 6: 1.4408 at 10 800; 8: 1.678 at 9 600; 16: 2.737 at 6 000 pkt/s) but
not the other columns, whose β *decrease* with λ while eq. 5.6 increases with λ.  Eq. 5.6 can
also give β < 1 (or ≤ 0) outside the fitted region; :func:`beta` returns the value as written
(no clipping) unless ``clip_min`` is given, while :func:`thesis_drop_probability` floors it at 1
by default (one thread is β = 1 in the thesis; see its docstring).
"""
from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite
from sipperf.models.mmck import MMcKResult, mmck

__all__ = ["BETA_COEFFS", "beta", "service_time_c", "thesis_drop_probability"]

_F = NDArray[np.float64]

#: eq. 5.6 coefficients: β = c_coef·c + lam_coef·λ[pkt/s] + const
BETA_COEFFS: dict[str, float] = {"c_coef": 0.174, "lam_coef": 0.923e-4, "const": -0.60}


def _check_c(c: NDArray) -> None:
    finite("number of server threads c", c, ge=1, integer=True)


def beta(lam_pps: ArrayLike, c: ArrayLike, *, clip_min: float | None = None) -> _F:
    """Thread-overhead factor β(λ, c), thesis eq. 5.6: 0.174c + 0.923e-4·λ - 0.60 (λ in pkt/s).

    Exactly as printed; ``clip_min`` (e.g. 1.0) optionally floors it.  Vectorised.
    """
    lam = finite("packet rate lam_pps", lam_pps, ge=0)
    c_ = finite("number of server threads c", c, ge=1, integer=True)
    b = BETA_COEFFS["c_coef"] * c_ + BETA_COEFFS["lam_coef"] * lam + BETA_COEFFS["const"]
    return b if clip_min is None else np.maximum(b, float(finite("clip_min", clip_min)))


def service_time_c(x1: ArrayLike, c: ArrayLike, beta_: ArrayLike) -> _F:
    """Per-thread mean service time with c threads, thesis eq. 5.5: E[X_c] = β·c·E[X_1].

    Units follow ``x1``.  Raises ValueError for x1 ≤ 0, c < 1 or β ≤ 0.
    """
    x = finite("single-thread service time x1", x1, gt=0)
    c_ = finite("number of server threads c", c, ge=1, integer=True)
    b = finite("beta", beta_)
    if np.any(~(b > 0)):
        raise ValueError("beta must be > 0 (eq. 5.6 gives beta <= 0 outside its fitted range)")
    return b * c_ * x


def thesis_drop_probability(lam_pps: ArrayLike, c: ArrayLike, x1_us: ArrayLike, *, K: float = 200,
                            beta_: ArrayLike | None = None, beta_floor: float | None = 1.0) -> MMcKResult:
    """The ch. 5 drop model: M/M/c/K (eq. 5.3/5.4) with μ = 1/E[X_c], E[X_c] from eq. 5.5.

    ``x1_us`` is E[X_1] (µs, α included); ``beta_`` defaults to eq. 5.6 at (λ, c), **floored at
    ``beta_floor`` = 1**.  Eq. 5.6 has no floor of its own: for one thread it gives
    β = 0.923e-4·λ − 0.426 (0.68 at λ = 12 000 pkt/s) where the thesis itself uses β = 1 (Table 5.1,
    §5.3.3), and at c = 2, λ = 6000 pkt/s it gives 0.30, i.e. two threads sharing one core three
    times faster than one thread, which eq. 5.5's own reasoning (each thread gets 1/c of the core,
    plus overhead) rules out.  The fit was made on the highest-rate column of each 2–16-thread
    table (λ = 6000–14 400 pkt/s, β = 1.08–2.74), so β < 1 is always an extrapolation.  Pass
    ``beta_floor=None`` for the raw eq. 5.6 (a UserWarning is then issued where it is below 1, and
    a ValueError where it is ≤ 0).  An explicit ``beta_`` is used as given.
    Returns the full :class:`~sipperf.models.mmck.MMcKResult` (rates in packets/s).
    """
    if beta_ is None:
        b = beta(lam_pps, c)
        if beta_floor is None:
            if np.any(b < 1):
                warnings.warn("eq. 5.6 gives beta < 1 here (outside its fitted range, where c threads on one "
                              "core would beat one thread); the thesis uses beta = 1 for one thread",
                              UserWarning, stacklevel=2)
        else:
            b = np.maximum(b, float(finite("beta_floor", beta_floor, gt=0)))
    else:
        b = finite("beta_", beta_)
    xc_s = service_time_c(finite("x1_us", x1_us, gt=0) * 1e-6, c, b)
    return mmck(lam_pps, 1.0 / xc_s, c, finite("system capacity K", K, ge=1))
