"""M/M/c/K: exact, vectorised and numerically stable (thesis eq. 5.3 and 5.4).

The thesis (ch. 5, §5.3) models a multi-threaded SIP proxy as a queue with ``c`` server threads
and room for ``K`` packets *in the system* (socket buffer, ``K = 200``), and takes the drop
probability from the M/M/c/K closed form

    p_K = (λ/μ)^K / (c^{K-c} c!) · p_0                                      (eq. 5.3)
    p_0 = [ Σ_{n<c} (λ/μ)^n / n! + (λ/μ)^c / c! · (1 - ρ^{K-c+1}) / (1 - ρ) ]^{-1}   (eq. 5.4)

with ρ = λ/(cμ).  Evaluated literally, eq. 5.3/5.4 overflow (``(λ/μ)^K`` for K = 10⁵) and lose
all precision near ρ = 1.  This module evaluates the same distribution as

* ``B = ErlangB(c, a)`` (``a = λ/μ``) by the standard recursion ``B_n = a B_{n-1}/(n + a B_{n-1})``,
  carried in log space so that ``B`` never underflows to 0 (c ≤ 1000 and tiny ``a`` are fine);
* the geometric tail ``G = Σ_{j=0}^{m} ρ^j`` (``m = K - c``) in log space with ``expm1`` (exact
  at ρ = 1, no cancellation near it, no overflow for ρ up to 10 and m up to 10⁵);
* ``p_c = 1 / (1/B - 1 + G)``, ``p_K = p_c ρ^m``, ``1 - p_K = p_c (1/B - 1 + G_{m-1})``,
  ``P(N ≥ c) = p_c G`` and
  ``L_q = P(N ≥ c) · E[j | tail]`` with the truncated-geometric mean written without cancellation.

``K`` may be any real number ≥ c (the M/G/c/K correction in :mod:`sipperf.models.mgck` uses a
non-integer effective waiting room); for integer K the result is the exact M/M/c/K.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite

__all__ = ["MMcKResult", "mmck", "erlang_b", "erlang_c", "mmc"]

_F = NDArray[np.float64]


@dataclass(frozen=True)
class MMcKResult:
    """Stationary M/M/c/K measures (arrays broadcast over the inputs).

    Times are in the reciprocal unit of the rates (seconds if rates are per second).
    ``p_block`` = p_K (eq. 5.3), the probability an arrival is dropped (PASTA).
    ``throughput`` = λ(1 - p_K); ``utilisation`` = throughput / (c μ) (mean fraction of busy
    servers); ``L``/``Lq`` mean number in system/queue; ``W``/``Wq`` mean sojourn/wait of
    *admitted* packets (Little: W = L / throughput).  ``p_wait`` = P(N ≥ c), the probability an
    arrival finds every server busy (it is then queued or dropped).
    """

    lam: _F
    mu: _F
    c: _F
    K: _F
    rho: _F
    p_block: _F
    p_wait: _F
    L: _F
    Lq: _F
    W: _F
    Wq: _F
    throughput: _F
    utilisation: _F


def _check(lam: _F, mu: _F, c: _F, K: _F) -> None:
    finite("arrival rate lam", lam, ge=0)
    finite("service rate mu", mu, gt=0)
    finite("number of servers c", c, ge=1, integer=True)
    if np.any(~np.isfinite(K)) or np.any(K < c):
        raise ValueError("system capacity K must be finite and >= c (K counts packets in service too)")


def _log_erlang_b(c: _F, a: _F) -> _F:
    """log ErlangB(c, a), elementwise, by the recursion in log space (c ≤ a few thousand)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_a = np.log(a)
        lb = np.zeros(np.broadcast(c, a).shape)  # B_0 = 1
        cmax = int(np.max(c)) if np.size(c) else 0
        for n in range(1, cmax + 1):
            ab = np.exp(log_a + lb)  # a * B_{n-1}, may underflow to 0: fine
            new = log_a + lb - np.log(n + ab)
            lb = np.where(n <= c, new, lb)
        # a == 0: B = 0 for c >= 1
        lb = np.where(a == 0, -np.inf, lb)
    return lb


def erlang_b(c: ArrayLike, a: ArrayLike) -> _F:
    """Erlang-B loss probability B(c, a) for c servers and offered load a = λ/μ (M/M/c/c)."""
    c_ = finite("number of servers c", c, ge=1, integer=True)
    a_ = finite("offered load a", a, ge=0)
    return np.exp(_log_erlang_b(c_, a_))


def _log_geom(ell: _F, m: _F) -> _F:
    """log Σ_{j=0}^{m} e^{ℓ j} (m ≥ 0 real: the closed form), stable for any ℓ."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        neg = ell < 0
        # ℓ < 0: (1 - e^{ℓ(m+1)}) / (1 - e^{ℓ})
        r_neg = np.expm1(ell * (m + 1)) / np.expm1(ell)
        # ℓ > 0: e^{ℓ m} (1 - e^{-ℓ(m+1)}) / (1 - e^{-ℓ})
        r_pos = np.expm1(-ell * (m + 1)) / np.expm1(-ell)
        out = np.where(neg, np.log(r_neg), ell * m + np.log(r_pos))
        out = np.where(ell == 0, np.log(m + 1), out)
        out = np.where(np.isneginf(ell), 0.0, out)  # ρ = 0: only the j = 0 term
    return out


def _trunc_geom_mean(ell: _F, m: _F) -> _F:
    """Mean of j ∈ {0..m} with weights e^{ℓ j}: 1/(e^{-ℓ}-1) - (m+1)/(e^{-ℓ(m+1)}-1)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exact = 1.0 / np.expm1(-ell) - (m + 1) / np.expm1(-ell * (m + 1))
        # near ℓ = 0 the two terms cancel; the Taylor series (odd central moments of the
        # discrete uniform vanish, so the error is O((ℓ m)^3) relative) takes over
        series = m / 2.0 + ell * m * (m + 2) / 12.0
        small = np.abs(ell) * (m + 1) < 1e-4
        out = np.where(small, series, exact)
        out = np.where(np.isneginf(ell) | (m == 0), 0.0, out)
    return out


def mmck(lam: ArrayLike, mu: ArrayLike, c: ArrayLike, K: ArrayLike) -> MMcKResult:
    """Exact M/M/c/K measures (thesis eq. 5.3/5.4), broadcast over all arguments.

    Parameters
    ----------
    lam : arrival rate (e.g. packets/s), ≥ 0.
    mu : service rate of one server (1/E[X], same time unit), > 0.
    c : number of servers (threads), integer ≥ 1 (≤ ~1000 for speed).
    K : system capacity — maximum packets in the system including those in service, K ≥ c.

    Stable for c ≤ 1000, K ≤ 1e5 and ρ = λ/(cμ) up to (at least) 10; see the module docstring.
    Raises ValueError for negative rates, c < 1 or K < c.
    """
    lam_, mu_, c_, K_ = (np.asarray(x, dtype=float) for x in (lam, mu, c, K))
    _check(lam_, mu_, c_, K_)
    lam_, mu_, c_, K_ = np.broadcast_arrays(lam_, mu_, c_, K_)
    a = lam_ / mu_
    rho = a / c_
    m = K_ - c_
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lb = _log_erlang_b(c_, a)
        b = np.exp(lb)
        log_head = np.log1p(-b) - lb  # log(1/B - 1) = log Σ_{n<c} p_n / p_c
        ell = np.log(rho)
        log_g = _log_geom(ell, m)
        log_pc = -np.logaddexp(log_head, log_g)
        log_pk = log_pc + np.where(m == 0, 0.0, m * ell)
        p_block = np.exp(log_pk)
        p_wait = np.exp(log_pc + log_g)
        lq = p_wait * _trunc_geom_mean(ell, m)
        # 1 - p_K = p_c (1/B - 1 + G(ρ, m-1)) computed directly: no cancellation when p_K → 1
        log_g1 = np.where(m == 0, -np.inf, _log_geom(ell, m - 1.0))
        not_blocked = np.where(a == 0, 1.0, np.exp(log_pc + np.logaddexp(log_head, log_g1)))
        thr = lam_ * not_blocked
        busy = a * not_blocked  # mean number of busy servers
        L = lq + busy
        W = np.where(thr > 0, L / thr, 1.0 / mu_)
        Wq = np.where(thr > 0, lq / thr, 0.0)
    p_block = np.where(lam_ == 0, 0.0, p_block)
    p_wait = np.where(lam_ == 0, 0.0, p_wait)
    return MMcKResult(lam=lam_, mu=mu_, c=c_, K=K_, rho=rho, p_block=p_block, p_wait=p_wait,
                      L=L, Lq=lq, W=W, Wq=Wq, throughput=thr, utilisation=busy / c_)


def erlang_c(c: ArrayLike, a: ArrayLike) -> _F:
    """Erlang-C probability of waiting in M/M/c (a = λ/μ < c), via C = cB/(c - a(1 - B))."""
    c_ = finite("number of servers c", c, ge=1, integer=True)
    a_ = finite("offered load a", a, ge=0)
    if np.any(a_ >= c_):
        raise ValueError("Erlang C needs a = λ/μ < c (stable M/M/c)")
    b = erlang_b(c_, a_)
    return c_ * b / (c_ - a_ * (1.0 - b))


@dataclass(frozen=True)
class MMcResult:
    """M/M/c (infinite buffer) measures; ``stable`` False where λ ≥ cμ (then Lq = Wq = inf)."""

    stable: NDArray[np.bool_]
    p_wait: _F
    Lq: _F
    Wq: _F
    W: _F
    L: _F


def mmc(lam: ArrayLike, mu: ArrayLike, c: ArrayLike) -> MMcResult:
    """M/M/c: Wq = C(c, a) / (cμ - λ), the K → ∞ limit of :func:`mmck` (for λ < cμ)."""
    lam_, mu_, c_ = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (lam, mu, c)))
    _check(lam_, mu_, c_, c_)
    a = lam_ / mu_
    stable = a < c_
    a_s = np.where(stable, a, 0.0)
    pw = np.where(stable, erlang_c(c_, a_s), 1.0)
    with np.errstate(divide="ignore"):
        wq = np.where(stable, pw / (c_ * mu_ - lam_ * stable), np.inf)
    return MMcResult(stable=stable, p_wait=pw, Lq=lam_ * wq, Wq=wq, W=wq + 1.0 / mu_,
                     L=lam_ * wq + a)
