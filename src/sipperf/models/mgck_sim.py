"""A small discrete-event simulator of the M/G/c/K FCFS queue (validation of :mod:`.mgck`).

Poisson arrivals, gamma service times with a given mean and SCV (shape 1/SCV; SCV = 1 is
exponential), c servers, at most K packets in the system (arrivals finding K are dropped).
FCFS with a heap of server-free instants (the Kiefer–Wolfowitz workload recursion) and a heap of
departure instants of the packets in the system.  Pure Python loop over pre-drawn numpy samples:
about 1–2 µs per packet.  Statistics are collected after a warm-up and split into batches so
that a batch-means confidence interval can be reported.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from sipperf.models._guard import count, finite

__all__ = ["SimResult", "simulate_mgck"]


@dataclass(frozen=True)
class SimResult:
    """Simulation estimates: blocking probability with a 95 % batch-means half-width, and the
    mean number in system (time average) and mean sojourn of admitted packets."""

    p_block: float
    p_block_hw: float
    L: float
    W: float
    arrivals: int


def simulate_mgck(lam: float, mean_s: float, scv: float, c: int, K: int, *, n: int = 200_000,
                  warmup: int | None = None, batches: int = 20, seed: int = 0) -> SimResult:
    """Simulate ``n`` arrivals (after ``warmup``, default n/10) of M/G/c/K; gamma service."""
    lam, mean_s, scv = (float(finite(nm, v, gt=0)) for nm, v in (("arrival rate lam", lam),
                                                                  ("mean service time mean_s", mean_s),
                                                                  ("service-time SCV scv", scv)))
    c, K, n, batches = count("servers c", c), count("capacity K", K), count("n", n), count("batches", batches, ge=2)
    if warmup is not None:
        warmup = count("warmup", warmup, ge=0)
    if K < c or n < batches:
        raise ValueError("need K >= c and n >= batches")
    rng = np.random.default_rng(seed)
    warm = n // 10 if warmup is None else warmup
    total = warm + n
    arr = np.cumsum(rng.exponential(1.0 / lam, total)).tolist()
    shape = 1.0 / scv
    svc = rng.gamma(shape, mean_s / shape, total).tolist()
    free = [0.0] * c  # server-free instants (a heap)
    insys: list[float] = []  # departure instants of packets in the system (a heap)
    hpush, hpop, hreplace = heapq.heappush, heapq.heappop, heapq.heapreplace
    blocked = np.zeros(batches)
    offered = np.zeros(batches)
    area = 0.0  # ∫ N(t) dt over the measured period, via sum of admitted sojourns
    soj = 0.0
    admitted = 0
    per = n // batches
    for i in range(total):
        t = arr[i]
        while insys and insys[0] <= t:
            hpop(insys)
        measured = i >= warm
        if measured:
            b = min((i - warm) // per, batches - 1)
            offered[b] += 1
        if len(insys) >= K:
            if measured:
                blocked[b] += 1
            continue
        f = free[0]
        start = t if t > f else f
        dep = start + svc[i]
        hreplace(free, dep)
        hpush(insys, dep)
        if measured:
            soj += dep - t
            admitted += 1
    span = arr[-1] - arr[warm]
    pb_b = blocked / np.maximum(offered, 1)
    pb = float(blocked.sum() / offered.sum())
    hw = float(1.96 * pb_b.std(ddof=1) / np.sqrt(batches))
    W = soj / max(admitted, 1)
    area = soj  # Little: L ≈ (admitted/span)·W
    return SimResult(p_block=pb, p_block_hw=hw, L=area / span, W=W, arrivals=int(offered.sum()))
