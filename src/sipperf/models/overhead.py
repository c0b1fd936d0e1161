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
(no clipping) unless ``clip_min`` is given.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models.mmck import MMcKResult, mmck

__all__ = ["BETA_COEFFS", "beta", "service_time_c", "thesis_drop_probability"]

_F = NDArray[np.float64]

#: eq. 5.6 coefficients: β = c_coef·c + lam_coef·λ[pkt/s] + const
BETA_COEFFS: dict[str, float] = {"c_coef": 0.174, "lam_coef": 0.923e-4, "const": -0.60}


def _check_c(c: NDArray) -> None:
    if np.any(c < 1) or np.any(c != np.floor(c)):
        raise ValueError("number of server threads c must be an integer >= 1")


def beta(lam_pps: ArrayLike, c: ArrayLike, *, clip_min: float | None = None) -> _F:
    """Thread-overhead factor β(λ, c), thesis eq. 5.6: 0.174c + 0.923e-4·λ - 0.60 (λ in pkt/s).

    Exactly as printed; ``clip_min`` (e.g. 1.0) optionally floors it.  Vectorised.
    """
    lam = np.asarray(lam_pps, dtype=float)
    c_ = np.asarray(c, dtype=float)
    if np.any(~np.isfinite(lam)) or np.any(lam < 0):
        raise ValueError("packet rate lam_pps must be finite and >= 0")
    _check_c(c_)
    b = BETA_COEFFS["c_coef"] * c_ + BETA_COEFFS["lam_coef"] * lam + BETA_COEFFS["const"]
    return b if clip_min is None else np.maximum(b, clip_min)


def service_time_c(x1: ArrayLike, c: ArrayLike, beta_: ArrayLike) -> _F:
    """Per-thread mean service time with c threads, thesis eq. 5.5: E[X_c] = β·c·E[X_1].

    Units follow ``x1``.  Raises ValueError for x1 ≤ 0, c < 1 or β ≤ 0.
    """
    x = np.asarray(x1, dtype=float)
    c_ = np.asarray(c, dtype=float)
    b = np.asarray(beta_, dtype=float)
    if np.any(~(x > 0)):
        raise ValueError("single-thread service time x1 must be > 0")
    _check_c(c_)
    if np.any(~(b > 0)):
        raise ValueError("beta must be > 0 (eq. 5.6 gives beta <= 0 outside its fitted range)")
    return b * c_ * x


def thesis_drop_probability(lam_pps: ArrayLike, c: ArrayLike, x1_us: ArrayLike, *, K: float = 200,
                            beta_: ArrayLike | None = None) -> MMcKResult:
    """The ch. 5 drop model: M/M/c/K (eq. 5.3/5.4) with μ = 1/E[X_c], E[X_c] from eq. 5.5.

    ``x1_us`` is E[X_1] (µs, α included); ``beta_`` defaults to eq. 5.6 at (λ, c).
    Returns the full :class:`~sipperf.models.mmck.MMcKResult` (rates in packets/s).
    """
    b = beta(lam_pps, c) if beta_ is None else np.asarray(beta_, dtype=float)
    xc_s = service_time_c(np.asarray(x1_us, dtype=float) * 1e-6, c, b)
    return mmck(lam_pps, 1.0 / xc_s, c, K)
