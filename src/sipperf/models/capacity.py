"""Capacity planning: thesis §7.6 (paper_ch7 §V), the tcp paper's traffic model, and a
"highest rate with drop probability ≤ target" search over any model.

§7.6: with p processors and c cores available to the SPS, the best thread count is
``T_{1,c} ≈ c + 2`` (one processor) and ``T_{p,c} ≈ c`` for p ≥ 2, and the capacity is

    C_{p,c} = T_{p,c} × C_{1,1}                                (eq. 7.1)

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

__all__ = ["threads_for_capacity", "capacity", "TrafficLoad", "traffic_requests_per_s", "max_rate"]


def threads_for_capacity(p: int, c: int) -> int:
    """T_{p,c}: c + 2 threads on one processor, c threads when cores span p ≥ 2 processors (§7.6)."""
    if p < 1 or c < 1 or p > c:
        raise ValueError("need 1 <= p (processors) <= c (cores)")
    return c + 2 if p == 1 else c


def capacity(p: int, c: int, c11: float = 1000.0) -> float:
    """C_{p,c} = T_{p,c} × C_{1,1} (thesis eq. 7.1), in the unit of ``c11`` (calls/s)."""
    if not (c11 > 0):
        raise ValueError("baseline capacity c11 must be > 0")
    return threads_for_capacity(p, c) * float(c11)


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
    if subscribers < 0 or erlang_per_sub < 0:
        raise ValueError("subscribers and erlang_per_sub must be >= 0")
    if not (holding_s > 0) or not (reg_interval_s > 0):
        raise ValueError("holding_s and reg_interval_s must be > 0 (seconds)")
    if mid_call_requests < 0 or messages_per_call < 0 or messages_per_registration < 0:
        raise ValueError("message counts must be >= 0")
    reg = subscribers / reg_interval_s
    calls = subscribers * erlang_per_sub / holding_s
    creq = calls * (1 + mid_call_requests)
    return TrafficLoad(registrations_per_s=reg, calls_per_s=calls, call_requests_per_s=creq,
                       requests_per_s=reg + creq, registration_bhca=reg * 3600.0, call_bhca=calls * 3600.0,
                       packets_per_s=calls * messages_per_call + reg * messages_per_registration)


def max_rate(model_fn: Callable[[float], float], target_pdr: float, lo: float, hi: float, *,
             rtol: float = 1e-9, max_iter: int = 200) -> float:
    """Highest rate x in [lo, hi] with ``model_fn(x) ≤ target_pdr``, by bisection.

    ``model_fn`` must be non-decreasing in x (e.g. ``lambda lam: float(mmck(lam, mu, c, K).p_block)``).
    Returns ``hi`` if even ``model_fn(hi)`` meets the target; raises ValueError if ``model_fn(lo)``
    already exceeds it or the bracket is invalid.
    """
    if not (0 <= target_pdr <= 1):
        raise ValueError("target_pdr must be in [0, 1]")
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise ValueError("need finite 0 <= lo < hi")
    if float(model_fn(lo)) > target_pdr:
        raise ValueError(f"drop probability at lo={lo} already exceeds target {target_pdr}")
    if float(model_fn(hi)) <= target_pdr:
        return float(hi)
    a, b = float(lo), float(hi)  # invariant: f(a) <= target < f(b)
    for _ in range(max_iter):
        if b - a <= rtol * max(abs(b), 1e-300):
            break
        mid = 0.5 * (a + b)
        if float(model_fn(mid)) <= target_pdr:
            a = mid
        else:
            b = mid
    return a
