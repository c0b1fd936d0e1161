"""M/G/c/K: a two-moment correction of the exact M/M/c/K (thesis ch. 5, §5.3).

The thesis (§5.3) points to Smith's M/G/c/K blocking approximations (thesis ref. [38]) but then
uses the M/M/c/K closed form, i.e. it ignores the service-time variability.  This module adds the
variability back with a *heavy-traffic effective waiting room*:

    P_B^{M/G/c/K}(λ, μ, c_s²) ≈ P_B^{M/M/c/K'}(λ, μ),   K' = c + (K - c) · 2 / (1 + c_s²)

where c_s² = Var[S]/E[S]² is the squared coefficient of variation (SCV) of the service time.
Rationale: in heavy traffic the queue length of a GI/G/c queue is that of the corresponding
M/M/c queue scaled by (c_a² + c_s²)/2 (Kingman; the state-space scaling of Whitt's diffusion
approximation for the G/GI/n/m queue, W. Whitt, "A diffusion approximation for the G/GI/n/m
queue", Operations Research 52(6), 2004), so a waiting room of K - c places behaves like an
exponential-service waiting room of (K - c)·2/(1 + c_s²) places (Poisson arrivals, c_a² = 1).
This is the same "replace the buffer by an effective buffer" idea as Smith's M/G/1/K and
M/G/c/K effective-capacity approximations, but it is **not** Smith's published formula: it is our
simple, transparent generalisation, and its accuracy is measured, not assumed —
``bench/mgck_validation.py`` compares it with simulation for c ∈ {1, 2, 8, 16}, K ∈ {10, 200},
c_s² ∈ {0.5, 1, 4} (gamma service) and writes ``datasets/precomputed/mgck_validation.csv``.

Properties by construction: at c_s² = 1 it *is* M/M/c/K (K' = K); at K = c it is Erlang B,
which is exact for M/G/c/c (insensitivity); as K → ∞ with ρ < 1 P_B → 0 and for ρ > 1
P_B → 1 - 1/ρ, as for any M/G/c/K.  The queue length is mapped back with the same scale:
Lq ≈ Lq^{M/M/c/K'} · (1 + c_s²)/2, L = Lq + a(1 - P_B), W and Wq by Little's law.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite
from sipperf.models.mmck import mmck

__all__ = ["MGcKResult", "effective_capacity", "mgck"]

_F = NDArray[np.float64]


@dataclass(frozen=True)
class MGcKResult:
    """Approximate M/G/c/K measures; fields as :class:`~sipperf.models.mmck.MMcKResult`, plus
    ``scv`` and ``K_eff`` (the effective M/M/c/K capacity used)."""

    lam: _F
    mean_s: _F
    scv: _F
    c: _F
    K: _F
    K_eff: _F
    rho: _F
    p_block: _F
    L: _F
    Lq: _F
    W: _F
    Wq: _F
    throughput: _F
    utilisation: _F


def effective_capacity(c: ArrayLike, K: ArrayLike, scv: ArrayLike) -> _F:
    """K' = c + (K - c)·2/(1 + c_s²): the exponential-service capacity equivalent to K."""
    c_ = finite("number of servers c", c, ge=1, integer=True)
    K_ = finite("system capacity K", K)
    s = finite("service-time SCV", scv, ge=0)
    if np.any(K_ < c_):
        raise ValueError("system capacity K must be >= c (K counts packets in service too)")
    return c_ + (K_ - c_) * 2.0 / (1.0 + s)


def mgck(lam: ArrayLike, mean_s: ArrayLike, scv: ArrayLike, c: ArrayLike, K: ArrayLike) -> MGcKResult:
    """Two-moment M/G/c/K approximation (effective waiting room, see module docstring).

    lam : arrival rate (1/s); mean_s : mean service time E[S] (s); scv : Var[S]/E[S]² ≥ 0;
    c : servers (integer ≥ 1); K : system capacity including packets in service (≥ c).
    Vectorised (broadcast).  At scv = 1 the result equals :func:`~sipperf.models.mmck.mmck`.
    """
    lam_, m_, s_, c_, K_ = np.broadcast_arrays(
        finite("arrival rate lam", lam, ge=0), finite("mean service time mean_s", mean_s, gt=0),
        finite("service-time SCV scv", scv, ge=0), finite("number of servers c", c, ge=1, integer=True),
        finite("system capacity K", K))
    k_eff = effective_capacity(c_, K_, s_)
    r = mmck(lam_, 1.0 / m_, c_, k_eff)  # validates lam, c, K (K' >= c iff K >= c)
    scale = (1.0 + s_) / 2.0
    lq = r.Lq * scale
    busy = r.throughput * m_
    L = lq + busy
    with np.errstate(divide="ignore", invalid="ignore"):
        W = np.where(r.throughput > 0, L / r.throughput, m_)
        Wq = np.where(r.throughput > 0, lq / r.throughput, 0.0)
    return MGcKResult(lam=lam_, mean_s=m_, scv=s_, c=c_, K=K_, K_eff=k_eff, rho=r.rho, p_block=r.p_block,
                      L=L, Lq=lq, W=W, Wq=Wq, throughput=r.throughput, utilisation=busy / c_)
