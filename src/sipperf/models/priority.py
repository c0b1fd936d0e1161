"""Priority queues: the M/G/1 queue with classes served by priority (chapter "Priorities").

Not in seed 000 (its proxy serves every message first come, first served).  Class 1 is the
highest priority; within a class, FCFS.  Per class k: arrival rate λ_k (Poisson), service time
X_k with E[X_k] and E[X_k²], ρ_k = λ_k E[X_k], σ_k = ρ_1 + … + ρ_k (σ_0 = 0), and the mean
residual work an arrival finds in service, ``R = Σ_i λ_i E[X_i²] / 2`` (over all classes).

* **Non-preemptive** (Cobham 1954; Kleinrock 1976): a started service is never
  interrupted, so every class waits for the residual R of whatever is in service::

      W_k = R / ((1 - σ_{k-1}) (1 - σ_k))

* **Preemptive resume** (Kleinrock 1976): class k does not see lower classes at all; it
  waits for the work of classes 1..k present at its arrival, and its service is stretched by
  the higher classes arriving during it::

      T_k = E[X_k] / (1 - σ_{k-1}) + R_k / ((1 - σ_{k-1}) (1 - σ_k)),   R_k = Σ_{i ≤ k} λ_i E[X_i²] / 2

  and the wait is reported as ``W_k = T_k - E[X_k]`` (the extra time over the bare service).
* **Conservation law** (Kleinrock 1965; 1976): for any work-conserving non-preemptive
  discipline that does not look at service times, ``Σ_k ρ_k W_k = ρ R / (1 - ρ)`` -- the
  ρ-weighted wait is that of FCFS (:func:`conservation_rhs`): priorities move waiting between
  classes, they do not remove it.

Rates in 1/s, times in s.  Arrays: the last axis is the class (highest first); leading axes
broadcast.  A class with σ_k ≥ 1 has no finite mean (``W_k = T_k = inf``, ``stable`` False);
higher classes may still be stable.  NaN, ±inf and negative inputs raise ``ValueError``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite

__all__ = ["PriorityResult", "priority_mg1", "conservation_rhs"]

_F = NDArray[np.float64]


@dataclass(frozen=True)
class PriorityResult:
    """Per class (last axis): mean wait ``W_s``, mean sojourn ``T_s = W_s + E[X]``, load ``rho``
    and cumulative load ``sigma``; ``stable`` where σ_k < 1."""

    W_s: _F
    T_s: _F
    rho: _F
    sigma: _F
    stable: NDArray[np.bool_]


def _check(lam_pps, ex_s, ex2_s2):
    lam = finite("lam_pps", lam_pps, ge=0)
    ex = finite("ex_s", ex_s, gt=0)
    ex2 = finite("ex2_s2", ex2_s2, gt=0)
    lam, ex, ex2 = np.broadcast_arrays(np.atleast_1d(lam), np.atleast_1d(ex), np.atleast_1d(ex2))
    if np.any(ex2 < ex**2 * (1 - 1e-12)):
        raise ValueError("ex2_s2 must be >= ex_s**2 (a second moment below the squared mean is impossible)")
    return lam, ex, ex2


def priority_mg1(lam_pps: ArrayLike, ex_s: ArrayLike, ex2_s2: ArrayLike, preemptive: bool = False) -> PriorityResult:
    """Mean wait and sojourn per class of the priority M/G/1 queue: Cobham's formula
    (``preemptive=False``) or preemptive resume (``True``); see the module docstring."""
    lam, ex, ex2 = _check(lam_pps, ex_s, ex2_s2)
    rho = lam * ex
    sigma = np.cumsum(rho, axis=-1)
    before = sigma - rho                                   # σ_{k-1}
    half = lam * ex2 / 2.0
    r_all = np.sum(half, axis=-1, keepdims=True)
    r_upto = np.cumsum(half, axis=-1)
    stable = sigma < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        den = np.where(stable, (1.0 - before) * (1.0 - sigma), 1.0)
        if preemptive:
            t = ex / np.where(stable, 1.0 - before, 1.0) + r_upto / den
            w = t - ex
        else:
            w = np.broadcast_to(r_all, den.shape) / den
            t = w + ex
    return PriorityResult(W_s=np.where(stable, w, np.inf), T_s=np.where(stable, t, np.inf), rho=rho,
                          sigma=sigma, stable=stable)


def conservation_rhs(lam_pps: ArrayLike, ex_s: ArrayLike, ex2_s2: ArrayLike) -> _F:
    """The right side of Kleinrock's conservation law, ``ρ R / (1 - ρ)`` = ρ times the FCFS
    (Pollaczek–Khinchine) wait of the merged stream; +inf where ρ ≥ 1."""
    lam, ex, ex2 = _check(lam_pps, ex_s, ex2_s2)
    rho = np.sum(lam * ex, axis=-1)
    r = np.sum(lam * ex2, axis=-1) / 2.0
    with np.errstate(divide="ignore"):
        return np.where(rho < 1.0, rho * r / np.where(rho < 1.0, 1.0 - rho, 1.0), np.inf)
