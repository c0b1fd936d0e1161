"""The observer effect of tracing, through the thesis's own M/G/1 model (seed 000 §4.3).

A tracer that runs code on the proxy's CPU for every packet (a bpftrace probe, a patched
kernel writing a log line, a capture tap) lengthens the service time X by some δ per packet.
The question for a measurement is how much that changes the quantity being measured — the
socket-queue wait W — and the load at which the proxy saturates.

The undisturbed service-time moments come from Table 4.4/4.5 (``datasets/thesis``): E[X] as
printed, and E[X²] recovered from the printed model wait by inverting Pollaczek–Khinchine
(eq. 4.2): E[X²] = 2(1-ρ)W/λ.  With a constant extra cost δ per packet,
E[X+δ] = E[X] + δ and E[(X+δ)²] = E[X²] + 2δE[X] + δ².
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

__all__ = ["thesis_moments", "traced_wait_us", "saturation_cps"]

_F = NDArray[np.float64]


def thesis_moments(arrivals: str = "poisson") -> pd.DataFrame:
    """Per call rate of Table 4.4 (Poisson) / 4.5 (deterministic) where the printed model W exists:
    cps, lam_pps, ex_us, ex2_us2 (from eq. 4.2 inverted), scv = E[X²]/E[X]² - 1."""
    from sipperf.thesis import wide

    t = {"poisson": "4.4", "deterministic": "4.5"}[arrivals]
    m = wide(t)
    m = m[m["w_model_us"].notna()].copy()
    lam_per_us = m["lam_pps"] * 1e-6
    rho = lam_per_us * m["ex_us"]
    ex2 = 2.0 * (1.0 - rho) * m["w_model_us"] / lam_per_us
    out = pd.DataFrame({"cps": m["cps"].astype(int).to_numpy(), "lam_pps": m["lam_pps"].to_numpy(),
                        "ex_us": m["ex_us"].to_numpy(), "ex2_us2": ex2.to_numpy()})
    out["scv"] = out["ex2_us2"] / out["ex_us"] ** 2 - 1.0
    return out


def traced_wait_us(cps: ArrayLike, delta_us: float, arrivals: str = "poisson",
                   messages_per_call: int = 6) -> _F:
    """M/G/1 mean wait (µs, eq. 4.2) at call rate ``cps`` when each packet costs ``delta_us`` more.

    E[X] and E[X²] are interpolated linearly in cps between the Table 4.4/4.5 rates (and held
    constant outside them); NaN where ρ ≥ 1.
    """
    if delta_us < 0:
        raise ValueError("delta_us must be >= 0")
    mom = thesis_moments(arrivals)
    c = np.asarray(cps, dtype=float)
    ex = np.interp(c, mom["cps"], mom["ex_us"])
    ex2 = np.interp(c, mom["cps"], mom["ex2_us2"])
    ex_t = ex + delta_us
    ex2_t = ex2 + 2.0 * delta_us * ex + delta_us ** 2
    lam = messages_per_call * c * 1e-6  # packets per µs
    rho = lam * ex_t
    with np.errstate(divide="ignore", invalid="ignore"):
        w = lam * ex2_t / (2.0 * (1.0 - rho))
    return np.where(rho < 1.0, w, np.nan)


def saturation_cps(ex_us: ArrayLike, messages_per_call: int = 6) -> _F:
    """Call rate at which ρ = λE[X] reaches 1: 1 / (messages_per_call · E[X])."""
    ex = np.asarray(ex_us, dtype=float)
    if np.any(ex <= 0):
        raise ValueError("ex_us must be > 0")
    return 1e6 / (messages_per_call * ex)
