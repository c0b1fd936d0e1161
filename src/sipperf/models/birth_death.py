"""Finite birth–death queues with state-dependent service rates (thesis ch. 5, §5.3).

Chapter 6 of the book uses this module twice: to check the M/M/c/K formulas (eq. 5.3/5.4) by a
second, independent route, and to compare the thesis's reading of eq. 5.5 ("c workers on one
core are c servers, each c times slower") with a *work-conserving* core, on which a packet that is
alone in the proxy gets the whole CPU.

The queue holds n = 0, 1, …, K packets.  Packets arrive at rate λ while n < K and leave at rate
μ_n in state n (n = 1, …, K).  Cutting the chain between states n − 1 and n, the flow across the
cut must balance in steady state (the *cut* or *detailed balance* equations):

    λ p_{n−1} = μ_n p_n        ⇒   p_n = p_0 ∏_{i=1}^{n} λ/μ_i,
    p_0 = [ Σ_{n=0}^{K} ∏_{i=1}^{n} λ/μ_i ]^{−1}.

With Poisson arrivals an arrival sees the time-average state (PASTA), so the blocking (drop)
probability is P_B = p_K.  Throughput λ(1 − p_K), mean number L = Σ n p_n, mean sojourn of an
admitted packet W = L / (λ(1 − p_K)) (Little's law).

Special cases: μ_n = min(n, c)·μ is M/M/c/K (eq. 5.3/5.4, see :mod:`sipperf.models.mmck`);
μ_n = μ is M/M/1/K.  The products are formed as cumulative sums of log(λ/μ_i) and normalised with a
log-sum-exp, so nothing overflows for K up to 10⁵ and loads far above capacity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["BirthDeathResult", "birth_death", "slow_server_rates", "work_conserving_rates"]

_F = NDArray[np.float64]


@dataclass(frozen=True)
class BirthDeathResult:
    """Stationary measures of a finite birth–death queue (arrays broadcast over λ).

    ``p`` has the states 0..K on its last axis; ``p_block`` = p_K; ``throughput`` = λ(1 − p_K);
    ``L`` mean number in system; ``W`` mean sojourn of admitted packets (time unit = 1/rate unit).
    """

    lam: _F
    p: _F
    p_block: _F
    throughput: _F
    L: _F
    W: _F


def birth_death(lam: ArrayLike, mu_n: ArrayLike) -> BirthDeathResult:
    """Stationary distribution of the birth–death queue with arrival rate λ and departure
    rates ``mu_n[..., n-1]`` = μ_n in states n = 1..K (K = ``mu_n.shape[-1]``).

    ``lam`` (≥ 0) broadcasts against ``mu_n[..., 0]``.  Raises ValueError for non-finite or
    negative λ, non-finite or non-positive μ_n, or an empty rate vector.
    """
    lam_ = np.asarray(lam, dtype=float)
    mu = np.asarray(mu_n, dtype=float)
    if mu.ndim == 0 or mu.shape[-1] == 0:
        raise ValueError("mu_n must hold at least one departure rate (K >= 1)")
    if np.any(~np.isfinite(lam_)) or np.any(lam_ < 0):
        raise ValueError("arrival rate lam must be finite and >= 0")
    if np.any(~np.isfinite(mu)) or np.any(mu <= 0):
        raise ValueError("departure rates mu_n must be finite and > 0")
    lam_b = np.broadcast_to(lam_, np.broadcast_shapes(lam_.shape, mu.shape[:-1]))
    mu_b = np.broadcast_to(mu, lam_b.shape + mu.shape[-1:])
    with np.errstate(divide="ignore"):
        log_ratio = np.log(lam_b)[..., None] - np.log(mu_b)          # log(λ/μ_i), -inf if λ = 0
    log_w = np.concatenate([np.zeros(lam_b.shape + (1,)), np.cumsum(log_ratio, axis=-1)], axis=-1)
    top = np.max(log_w, axis=-1, keepdims=True)
    log_p = log_w - (top + np.log(np.sum(np.exp(log_w - top), axis=-1, keepdims=True)))
    p = np.exp(log_p)
    n = np.arange(p.shape[-1], dtype=float)
    p_block = p[..., -1]
    not_blocked = np.sum(p[..., :-1], axis=-1)  # 1 - p_K without cancellation
    thr = lam_b * not_blocked
    L = np.sum(n * p, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        W = np.where(thr > 0, L / np.where(thr > 0, thr, 1.0), 1.0 / mu_b[..., 0])
    return BirthDeathResult(lam=np.asarray(lam_b, dtype=float), p=p, p_block=p_block, throughput=thr, L=L, W=W)


def _check_core(mu1: float, c: int, K: int, beta: float) -> None:
    if not (np.isfinite(mu1) and mu1 > 0):
        raise ValueError("single-worker service rate mu1 must be finite and > 0")
    if int(c) != c or c < 1:
        raise ValueError("number of workers c must be an integer >= 1")
    if int(K) != K or K < c:
        raise ValueError("capacity K must be an integer >= c")
    if not (np.isfinite(beta) and beta >= 1):
        raise ValueError("overhead factor beta must be finite and >= 1")


def slow_server_rates(mu1: float, c: int, K: int, beta: float = 1.0) -> _F:
    """Departure rates of the thesis's model (eq. 5.5 read as c slow servers):
    μ_n = min(n, c) · μ₁ / (β c), n = 1..K.  With these rates :func:`birth_death` is exactly
    M/M/c/K with μ = 1/E[X_c], E[X_c] = β c E[X_1]."""
    _check_core(mu1, c, K, beta)
    n = np.arange(1, int(K) + 1, dtype=float)
    return np.minimum(n, c) * mu1 / (beta * c)


def work_conserving_rates(mu1: float, c: int, K: int, beta: float = 1.0) -> _F:
    """Departure rates of c workers sharing one work-conserving core: the core serves at the
    single-worker rate μ₁ whenever a packet is present, and the thread overhead β slows it only
    when at least two workers are runnable (n ≥ 2, c ≥ 2): μ_1 = μ₁, μ_n = μ₁/β for n ≥ 2.
    With β = 1 (or c = 1) this is M/M/1/K whatever c is: with exponential service, how the core
    is shared among the packets in service (in turn, or processor sharing) does not change the
    number in system."""
    _check_core(mu1, c, K, beta)
    rates = np.full(int(K), float(mu1))
    if c >= 2:
        rates[1:] = mu1 / beta
    return rates
