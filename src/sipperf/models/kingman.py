"""One server, general arrivals (G/G/1): the Lindley recursion, Kingman's bound and approximation.

Used in ch. 5 to explain why the thesis's Poisson (Table 4.4) and deterministic (Table 4.5) call
arrivals give different waits at the same utilisation; the thesis itself applies the M/G/1
formula (its eq. 4.2) to both.

Notation (book glossary): λ arrival rate, τ inter-arrival time (E[τ] = 1/λ), X service time,
ρ = λE[X] < 1, c_a² = Var[τ]/E[τ]² and c_s² = Var[X]/E[X]² the squared coefficients of variation.

* **Lindley recursion** for the wait of the n-th arrival of a FCFS single-server queue,
  ``W_1 = 0``, ``W_{n+1} = max(0, W_n + X_n - τ_{n+1})``.  With ``Δ_n = X_n - τ_{n+1}`` and
  partial sums ``S_0 = 0``, ``S_n = Δ_1 + … + Δ_n`` its solution is
  ``W_{n+1} = S_n - min_{0 ≤ k ≤ n} S_k`` (a running minimum: no Python loop).
* **Kingman's bound** (Kingman 1962), from squaring the recursion in steady state,
  ``W ≤ λ (σ_τ² + σ_X²) / (2 (1 - ρ))`` with ``σ_τ² = c_a²/λ²`` and ``σ_X² = c_s² E[X]²``.
* **Kingman's approximation** ("VUT" form), exact for M/G/1 (c_a² = 1, the Pollaczek–Khinchine
  formula) and asymptotically exact as ρ → 1:
  ``W ≈ (c_a² + c_s²)/2 · ρ/(1 - ρ) · E[X]``.

Units: rates in 1/s, times in s (any consistent unit works).  Where ρ ≥ 1 the mean wait does not
exist and the functions return +inf.  NaN or infinite inputs raise ``ValueError``.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["lindley_waits", "kingman_wait", "kingman_bound", "implied_ca2"]

_F = NDArray[np.float64]


def _finite(name: str, v: ArrayLike) -> _F:
    a = np.asarray(v, dtype=float)
    if np.any(~np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _check(lam_pps: ArrayLike, ex_s: ArrayLike, ca2: ArrayLike, cs2: ArrayLike):
    lam, ex, a2, s2 = (_finite(n, v) for n, v in
                       (("lam_pps", lam_pps), ("ex_s", ex_s), ("ca2", ca2), ("cs2", cs2)))
    if np.any(lam < 0):
        raise ValueError("arrival rate lam_pps must be >= 0")
    if np.any(ex <= 0):
        raise ValueError("mean service time ex_s must be > 0")
    if np.any(a2 < 0) or np.any(s2 < 0):
        raise ValueError("squared coefficients of variation ca2, cs2 must be >= 0")
    return np.broadcast_arrays(lam, ex, a2, s2)


def lindley_waits(interarrival_s: ArrayLike, service_s: ArrayLike) -> _F:
    """Waiting time of every arrival of a FCFS single-server queue that starts empty.

    ``interarrival_s[n]`` is the gap between arrival n-1 and arrival n (the first entry is not
    used: arrival 0 finds the queue empty), ``service_s[n]`` the service time of arrival n.
    Returns ``W`` with ``W[0] = 0`` and ``W[n+1] = max(0, W[n] + X[n] - τ[n+1])`` (Lindley),
    computed as partial sums minus their running minimum.
    """
    a = _finite("interarrival_s", interarrival_s).ravel()
    x = _finite("service_s", service_s).ravel()
    if a.shape != x.shape:
        raise ValueError("interarrival_s and service_s must have the same length")
    if np.any(a < 0) or np.any(x < 0):
        raise ValueError("inter-arrival and service times must be >= 0")
    if a.size == 0:
        return np.zeros(0)
    s = np.concatenate(([0.0], np.cumsum(x[:-1] - a[1:])))
    return s - np.minimum.accumulate(s)


def kingman_wait(lam_pps: ArrayLike, ex_s: ArrayLike, ca2: ArrayLike, cs2: ArrayLike) -> _F:
    """Kingman's G/G/1 approximation of the mean wait, ``(c_a²+c_s²)/2 · ρ/(1-ρ) · E[X]``.

    Exact for Poisson arrivals (c_a² = 1: Pollaczek–Khinchine, thesis eq. 4.2).  +inf where
    ρ = λE[X] ≥ 1.  Broadcasts over all arguments.
    """
    lam, ex, a2, s2 = _check(lam_pps, ex_s, ca2, cs2)
    rho = lam * ex
    stable = rho < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(stable, 0.5 * (a2 + s2) * rho / (1.0 - np.where(stable, rho, 0.0)) * ex, np.inf)
    return w


def kingman_bound(lam_pps: ArrayLike, ex_s: ArrayLike, ca2: ArrayLike, cs2: ArrayLike) -> _F:
    """Kingman's upper bound on the G/G/1 mean wait, ``λ(σ_τ² + σ_X²) / (2(1-ρ))``.

    ``σ_τ² = c_a²/λ²`` and ``σ_X² = c_s² E[X]²``.  Needs λ > 0; +inf where ρ ≥ 1.
    """
    lam, ex, a2, s2 = _check(lam_pps, ex_s, ca2, cs2)
    if np.any(lam <= 0):
        raise ValueError("kingman_bound needs lam_pps > 0 (the inter-arrival variance is c_a²/λ²)")
    rho = lam * ex
    stable = rho < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(stable, (a2 / lam + lam * s2 * ex ** 2) / (2.0 * (1.0 - np.where(stable, rho, 0.0))),
                     np.inf)
    return w


def implied_ca2(lam_pps: ArrayLike, ex_s: ArrayLike, w_s: ArrayLike, cs2: ArrayLike) -> _F:
    """The c_a² for which Kingman's approximation gives the mean wait ``w_s``.

    ``c_a² = 2W(1-ρ)/(ρE[X]) - c_s²``: the "effective burstiness" of an arrival stream as seen by
    the queue.  NaN where ρ ≥ 1 or ρ = 0 (no finite wait to match).
    """
    lam, ex, _, s2 = _check(lam_pps, ex_s, 0.0, cs2)
    w = _finite("w_s", w_s)
    if np.any(w < 0):
        raise ValueError("mean wait w_s must be >= 0")
    lam, ex, w, s2 = np.broadcast_arrays(lam, ex, w, s2)
    rho = lam * ex
    ok = (rho > 0) & (rho < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, 2.0 * w * (1.0 - rho) / (rho * ex) - s2, np.nan)
