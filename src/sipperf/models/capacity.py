"""Capacity planning: thesis §7.6 (paper_ch7 §V), the tcp paper's traffic model, and a
"highest rate with drop probability ≤ target" search over any model.

§7.6: with p processors and m cores available to the SPS, the best thread count is
``T_{1,m} ≈ m + 2`` (one processor) and ``T_{p,m} ≈ m`` for p ≥ 2, and the capacity is

    C_{p,m} = T_{p,m} × C_{1,1}                                (eq. 7.1)

(the thesis writes c for the cores; this package and the book keep c for the server threads).

with C_{1,1} the single-core single-thread capacity (1000 cps in the thesis), giving 4000 cps
(2 cores), 6000 cps (4 cores, one processor) and 6000 cps (6 cores on two processors).

Traffic model (seed ``tcp``, §4): S subscribers, each registering every R seconds and offering
e erlangs of calls of mean holding time h seconds: registrations S/R per s, call attempts S·e/h
per s (BHCA = 3600 × that); e.g. 300 000 subscribers, R = 3600 s, e = 0.1, h = 180 s give 83.3
registrations/s and 166.7 calls/s, and 833 requests/s if four mid-call requests are counted per
call (PRACK, ACK, UPDATE, BYE).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from sipperf.models._guard import count, finite

__all__ = ["threads_for_capacity", "capacity", "TrafficLoad", "traffic_requests_per_s", "servers_needed", "max_rate"]


def threads_for_capacity(p: int, m: int) -> int:
    """T_{p,m}: m + 2 threads when the m cores sit on one processor, m threads when they span
    p ≥ 2 processors (§7.6, where the thesis writes c for cores; the book keeps c for threads)."""
    p, m = count("processors p", p), count("cores m", m)
    if p > m:
        raise ValueError("need 1 <= p (processors) <= m (cores)")
    return m + 2 if p == 1 else m


def capacity(p: int, m: int, c11: float = 1000.0) -> float:
    """C_{p,m} = T_{p,m} × C_{1,1} (thesis eq. 7.1, written C_{p,c} there), in the unit of ``c11``
    (calls/s)."""
    c11 = float(finite("baseline capacity c11", c11, gt=0))
    return threads_for_capacity(p, m) * c11


@dataclass(frozen=True)
class TrafficLoad:
    """Offered SIP load of a subscriber population (all rates per second)."""

    registrations_per_s: float
    calls_per_s: float
    call_requests_per_s: float
    requests_per_s: float
    registration_bhca: float
    call_bhca: float
    packets_per_s: float


def traffic_requests_per_s(subscribers: float, erlang_per_sub: float, holding_s: float,
                           reg_interval_s: float, *, mid_call_requests: int = 0,
                           messages_per_call: int = 6, messages_per_registration: int = 2) -> TrafficLoad:
    """Subscribers → request and packet rates (seed ``tcp`` traffic model).

    ``calls_per_s = subscribers·erlang_per_sub/holding_s``; ``registrations_per_s =
    subscribers/reg_interval_s``; ``call_requests_per_s = calls_per_s·(1 + mid_call_requests)``;
    ``requests_per_s`` = registrations + call requests.  ``packets_per_s`` counts SIP messages
    through the proxy: ``messages_per_call`` (6 for the thesis's INVITE/180/200/ACK/BYE/200 flow)
    per call plus ``messages_per_registration`` (REGISTER + 200 OK) per registration.
    """
    subscribers = float(finite("subscribers", subscribers, ge=0))
    erlang_per_sub = float(finite("erlang_per_sub", erlang_per_sub, ge=0))
    holding_s = float(finite("holding_s (seconds)", holding_s, gt=0))
    reg_interval_s = float(finite("reg_interval_s (seconds)", reg_interval_s, gt=0))
    mid_call_requests = count("mid_call_requests", mid_call_requests, ge=0)
    messages_per_call = count("messages_per_call", messages_per_call, ge=0)
    messages_per_registration = count("messages_per_registration", messages_per_registration, ge=0)
    reg = subscribers / reg_interval_s
    calls = subscribers * erlang_per_sub / holding_s
    creq = calls * (1 + mid_call_requests)
    return TrafficLoad(registrations_per_s=reg, calls_per_s=calls, call_requests_per_s=creq,
                       requests_per_s=reg + creq, registration_bhca=reg * 3600.0, call_bhca=calls * 3600.0,
                       packets_per_s=calls * messages_per_call + reg * messages_per_registration)


def servers_needed(subscribers: float | np.ndarray, p: int, m: int, *, c11_cps: float = 1000.0,
                   headroom: float = 0.8, erlang_per_sub: float = 0.1, holding_s: float = 180.0,
                   reg_interval_s: float = 3600.0, messages_per_call: int = 6) -> np.ndarray:
    """Servers with m cores on p processors needed for a subscriber population (NaN if p > m).

    The offered SIP messages/s of :func:`traffic_requests_per_s` (seed ``tcp``) in *call
    equivalents* (messages / ``messages_per_call``: every message costs the proxy the same),
    divided by the usable capacity ``headroom`` × C_{p,m} (eq. 7.1) of one server, rounded up.
    ``subscribers`` is a scalar or an array; returns a float array of the same length.
    """
    subs = np.atleast_1d(finite("subscribers", subscribers, ge=0))
    p, m = count("processors p", p), count("cores m", m)
    messages_per_call = count("messages_per_call", messages_per_call)
    finite("c11_cps", c11_cps, gt=0), finite("headroom", headroom, gt=0)
    finite("erlang_per_sub", erlang_per_sub, ge=0), finite("holding_s", holding_s, gt=0)
    finite("reg_interval_s", reg_interval_s, gt=0)
    if p > m:
        return np.full(subs.shape, np.nan)
    cap = headroom * capacity(p, m, c11_cps)
    out = np.empty(subs.shape)
    for i, s in enumerate(subs):
        load = traffic_requests_per_s(s, erlang_per_sub, holding_s, reg_interval_s)
        out[i] = math.ceil(load.packets_per_s / messages_per_call / cap) if s > 0 else 0
    return out


def max_rate(model_fn: Callable[[float], float], target_pdr: float, lo: float, hi: float, *,
             rtol: float = 1e-9, max_iter: int = 200) -> float:
    """Highest rate x in [lo, hi] with ``model_fn(x) ≤ target_pdr``, by bisection.

    ``model_fn`` must be non-decreasing in x (e.g. ``lambda lam: float(mmck(lam, mu, c, K).p_block)``).
    Returns ``hi`` if even ``model_fn(hi)`` meets the target; raises ValueError if ``model_fn(lo)``
    already exceeds it or the bracket is invalid.
    """
    target_pdr = float(finite("target_pdr", target_pdr, ge=0))
    if target_pdr > 1:
        raise ValueError("target_pdr must be in [0, 1]")
    lo, hi = float(finite("lo", lo, ge=0)), float(finite("hi", hi, ge=0))
    rtol = float(finite("rtol", rtol, gt=0))
    if not (lo < hi):
        raise ValueError("need finite 0 <= lo < hi")

    def f(x: float) -> float:
        v = float(model_fn(x))
        if not math.isfinite(v):
            raise ValueError(f"model_fn({x:g}) returned {v!r}; a drop probability must be finite")
        return v

    if f(lo) > target_pdr:
        raise ValueError(f"drop probability at lo={lo} already exceeds target {target_pdr}")
    if f(hi) <= target_pdr:
        return float(hi)
    a, b = float(lo), float(hi)  # invariant: f(a) <= target < f(b)
    for _ in range(max_iter):
        if b - a <= rtol * max(abs(b), 1e-300):
            break
        mid = 0.5 * (a + b)
        if f(mid) <= target_pdr:
            a = mid
        else:
            b = mid
    return a
