"""Operational laws on measured intervals: utilisation, Little's law, service demand, PASTA.

These are the relations the book checks on the lab's timelines (ch. 2 and ch. 5).  They hold for
any observation window in which the quantities are measured, with no assumption about
distributions (Denning & Buzen's "operational" laws); queueing formulas such as
Pollaczek–Khinchine add distributional assumptions on top.

* Utilisation law: ``U = λ · E[X]``: busy fraction = throughput × mean service time.
* Service-demand law, the same read backwards: ``E[X] = U / λ``, the mean service time from a
  busy-time counter and a message counter, without timing any single message.  A server that
  also works when idle (timers, housekeeping) has ``U = U_0 + λ · D``; :func:`demand_with_background`
  separates the two from runs at several rates, where ``U / λ`` alone would charge ``U_0 / λ``
  to every completion.
* Little's law: ``L = λ · E[S]``: time-average number in a system = throughput × mean time in it.
* PASTA (Poisson arrivals see time averages): a Poisson stream that does not anticipate the
  system finds the server busy with probability U.  :func:`busy_at` tells, for any list of
  instants, whether the server was busy; its mean over arrival instants is the fraction of
  arrivals that find the server busy, over random (Poisson) instants it estimates U.

Intervals are half-open ``[start, end)``, in any consistent time unit (the timelines use ns);
overlapping intervals count once (their union) where a *busy* state is meant.  NaN or infinite
inputs raise ``ValueError``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["merge_intervals", "busy_at", "busy_fraction", "time_average_count",
           "interarrival_scv", "service_demand", "DemandFit", "demand_with_background", "saturation_throughput"]

_F = NDArray[np.float64]


def _arr(name: str, v: ArrayLike) -> _F:
    a = np.asarray(v, dtype=float).ravel()
    if np.any(~np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _intervals(starts: ArrayLike, ends: ArrayLike) -> tuple[_F, _F]:
    s, e = _arr("starts", starts), _arr("ends", ends)
    if s.shape != e.shape:
        raise ValueError("starts and ends must have the same length")
    if np.any(e < s):
        raise ValueError("every interval needs end >= start")
    return s, e


def merge_intervals(starts: ArrayLike, ends: ArrayLike) -> tuple[_F, _F]:
    """The union of the intervals ``[starts[i], ends[i])`` as sorted, disjoint intervals."""
    s, e = _intervals(starts, ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)              # furthest end seen so far
    new = np.concatenate(([True], s[1:] >= reach[:-1]))   # touching intervals stay apart
    block = np.cumsum(new) - 1
    m_s = s[new]
    m_e = np.full(m_s.size, -np.inf)
    np.maximum.at(m_e, block, e)
    return m_s, m_e


def busy_at(times: ArrayLike, starts: ArrayLike, ends: ArrayLike) -> NDArray[np.bool_]:
    """For each instant t, whether the server was busy *just before* t: some ``start < t < end``.

    Open at the start so that an arrival whose own service starts at its arrival instant does not
    count as finding the server busy.
    """
    t = _arr("times", times)
    m_s, m_e = merge_intervals(starts, ends)
    if m_s.size == 0:
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(m_s, t, side="left") - 1         # last merged start strictly before t
    return (k >= 0) & (t < m_e[np.clip(k, 0, None)])


def busy_fraction(starts: ArrayLike, ends: ArrayLike, t0: float, t1: float) -> float:
    """Fraction of the window ``[t0, t1)`` covered by the union of the intervals (the utilisation U)."""
    t0, t1 = (float(v) for v in _arr("window", [t0, t1]))
    if not t1 > t0:
        raise ValueError("the window needs t1 > t0")
    m_s, m_e = merge_intervals(starts, ends)
    covered = np.clip(np.minimum(m_e, t1) - np.maximum(m_s, t0), 0.0, None).sum()
    return float(covered / (t1 - t0))


def time_average_count(t_in: ArrayLike, t_out: ArrayLike, t0: float, t1: float) -> float:
    """Time-average number of items present in ``[t0, t1)``, item i being present in ``[t_in, t_out)``.

    ``(1/(t1-t0)) ∫ N(t) dt`` with ``N(t) = #{i : t_in_i <= t < t_out_i}``: each item contributes
    the part of its stay that lies in the window.  Overlapping stays all count (unlike
    :func:`busy_fraction`).
    """
    a, b = _intervals(t_in, t_out)
    t0, t1 = (float(v) for v in _arr("window", [t0, t1]))
    if not t1 > t0:
        raise ValueError("the window needs t1 > t0")
    inside = np.clip(np.minimum(b, t1) - np.maximum(a, t0), 0.0, None)
    return float(inside.sum() / (t1 - t0))


def interarrival_scv(times: ArrayLike) -> float:
    """Squared coefficient of variation c_a² = Var[τ]/E[τ]² of the gaps τ between sorted instants.

    1 for a Poisson stream, 0 for evenly spaced arrivals.  Needs at least three instants.
    """
    t = np.sort(_arr("times", times))
    if t.size < 3:
        raise ValueError("need at least three instants for an inter-arrival SCV")
    gaps = np.diff(t)
    m = gaps.mean()
    if m <= 0:
        raise ValueError("all instants are equal: no inter-arrival time")
    return float(gaps.var() / m ** 2)


def service_demand(utilization: ArrayLike, throughput: ArrayLike) -> _F:
    """Service-demand law: mean service time per completion ``E[X] = U / λ`` (λ the throughput).

    ``utilization`` is a busy fraction (0..1 per server), ``throughput`` completions per time unit;
    the result is in the reciprocal of the throughput's time unit (e.g. s for messages/s).
    """
    u, lam = np.asarray(utilization, dtype=float), np.asarray(throughput, dtype=float)
    if np.any(~np.isfinite(u)) or np.any(~np.isfinite(lam)):
        raise ValueError("utilization and throughput must be finite (no NaN or inf)")
    if np.any(u < 0) or np.any(lam <= 0):
        raise ValueError("need utilization >= 0 and throughput > 0")
    u, lam = np.broadcast_arrays(u, lam)
    return u / lam


@dataclass(frozen=True)
class DemandFit:
    """``U = background + rate · demand`` fitted by least squares, with standard errors."""

    demand: float                  #: busy time per completion (the throughput's reciprocal unit)
    demand_se: float
    background: float              #: busy fraction with no load
    background_se: float
    n: int                         #: runs in the fit

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval of the demand on ``n - 2`` degrees of freedom."""
        from scipy import stats as sps

        t = float(sps.t.ppf(0.5 + level / 2.0, self.n - 2))
        return self.demand - t * self.demand_se, self.demand + t * self.demand_se


def demand_with_background(utilization: ArrayLike, throughput: ArrayLike) -> DemandFit:
    """The utilisation law with a load-independent part, ``U = U_0 + λ · D``, fitted by ordinary
    least squares over runs at different throughputs (at least three; all below saturation, where
    the law is linear).  ``D`` is the service demand per completion, ``U_0`` what the server is
    busy with at no load; ``U / λ`` (:func:`service_demand`) equals ``D + U_0 / λ``."""
    u, lam = np.asarray(utilization, dtype=float), np.asarray(throughput, dtype=float)
    if u.shape != lam.shape or u.ndim != 1:
        raise ValueError("utilization and throughput must be 1-d arrays of one length")
    if np.any(~np.isfinite(u)) or np.any(~np.isfinite(lam)):
        raise ValueError("utilization and throughput must be finite (no NaN or inf)")
    if len(u) < 3 or np.ptp(lam) <= 0:
        raise ValueError("need at least three runs at two or more throughputs")
    x = np.column_stack([np.ones_like(lam), lam])
    coef, *_ = np.linalg.lstsq(x, u, rcond=None)
    resid = u - x @ coef
    s2 = float(resid @ resid) / (len(u) - 2)
    cov = s2 * np.linalg.inv(x.T @ x)
    return DemandFit(float(coef[1]), float(np.sqrt(cov[1, 1])), float(coef[0]), float(np.sqrt(cov[0, 0])),
                     len(u))


def saturation_throughput(demand: ArrayLike, background: ArrayLike = 0.0, servers: ArrayLike = 1.0) -> _F:
    """The throughput at which the utilisation law ``U = U_0 + λ · D`` reaches ``servers`` (all
    of them busy): ``λ* = (servers − U_0) / D``, in the reciprocal of ``demand``'s unit.

    No queue is stable beyond λ*: it is an upper bound on any knee, which a proxy with bursty
    arrivals, a finite buffer or a deadline reaches earlier.  With ``demand`` the CPU per call
    (s) of a proxy on ``servers`` CPUs, λ* is in calls/s; a handshake per new connection enters
    as part of the demand (CPU per call = CPU of its messages + new connections per call × CPU
    per handshake).
    """
    d, u0, c = (np.asarray(v, dtype=float) for v in (demand, background, servers))
    if np.any(~np.isfinite(d)) or np.any(~np.isfinite(u0)) or np.any(~np.isfinite(c)):
        raise ValueError("demand, background and servers must be finite (no NaN or inf)")
    if np.any(d <= 0) or np.any(u0 < 0) or np.any(c <= 0):
        raise ValueError("need demand > 0, background >= 0 and servers > 0")
    if np.any(u0 >= c):
        raise ValueError("the background alone keeps every server busy: no throughput is left")
    return (c - u0) / d
