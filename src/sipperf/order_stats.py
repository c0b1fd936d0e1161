"""Exact order statistics without sorting: ``np.median`` / ``np.percentile`` (linear) results,
bit for bit, from a radix selection (numba) that reads its input once per pass and never
reorders it.

The float64 values are mapped to order-preserving uint64 keys (sign bit flipped for
positives, all bits for negatives); one pass finds the keys' range, one counts a 16-bit
digit below their common prefix, one copies the values of the digit buckets that hold the
wanted ranks; the (small) buckets are refined the same way.  The median and the percentile
are then formed from the selected order statistics with numpy's own arithmetic (mean of the
two middle values; ``_lerp`` of the neighbours of the virtual index ``(n - 1) q``).

Finite input only (callers drop NaN first), as numpy's NaN handling is not reproduced.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_SIGN = np.uint64(1) << np.uint64(63)
_DIGIT_BITS = 16


@njit(cache=True, inline="always")
def _to_key(bits):
    if bits >> np.uint64(63):
        return ~bits
    return bits | (np.uint64(1) << np.uint64(63))


@njit(cache=True, inline="always")
def _from_key(k):
    if k >> np.uint64(63):
        return k ^ (np.uint64(1) << np.uint64(63))
    return ~k


@njit(cache=True, inline="always")
def _shift_for(mn, mx):
    d = mn ^ mx
    top = 0
    while top < 63 and (d >> np.uint64(top + 1)) != 0:
        top += 1
    s = top + 1 - _DIGIT_BITS
    return s if s > 0 else 0


@njit(cache=True, nogil=True)
def _select_one(a, r):
    """Key of rank ``r`` (0-based) in the uint64 key array ``a`` (not modified)."""
    while True:
        n = a.shape[0]
        mn = a[0]
        mx = a[0]
        for i in range(1, n):
            v = a[i]
            if v < mn:
                mn = v
            if v > mx:
                mx = v
        if mn == mx:
            return mn
        if n <= 64:
            return np.sort(a)[r]
        sh = np.uint64(_shift_for(mn, mx))
        hist = np.zeros(1 << _DIGIT_BITS, np.int64)
        m = np.uint64((1 << _DIGIT_BITS) - 1)
        for i in range(n):
            hist[(a[i] >> sh) & m] += 1
        c = 0
        d = 0
        while c + hist[d] <= r:
            c += hist[d]
            d += 1
        r -= c
        b = np.empty(hist[d], np.uint64)
        j = 0
        dd = np.uint64(d)
        for i in range(n):
            if (a[i] >> sh) & m == dd:
                b[j] = a[i]
                j += 1
        a = b


@njit(cache=True, nogil=True)
def select(x, ranks):
    """Values of ``x`` (float64, finite) at the 0-based ``ranks`` (int64, ascending) of its
    sorted order, like ``np.sort(x)[ranks]`` but in O(n) and without a copy of ``x``."""
    u = x.view(np.uint64)
    n = u.shape[0]
    out = np.empty(ranks.shape[0], np.float64)
    keys = np.empty(ranks.shape[0], np.uint64)
    mn = _to_key(u[0])
    mx = mn
    for i in range(1, n):
        v = _to_key(u[i])
        if v < mn:
            mn = v
        if v > mx:
            mx = v
    if mn == mx:
        for t in range(ranks.shape[0]):
            keys[t] = mn
    else:
        sh = np.uint64(_shift_for(mn, mx))
        m = np.uint64((1 << _DIGIT_BITS) - 1)
        hist = np.zeros(1 << _DIGIT_BITS, np.int64)
        for i in range(n):
            hist[(_to_key(u[i]) >> sh) & m] += 1
        # bucket and rank inside it of every wanted rank
        bk = np.empty(ranks.shape[0], np.int64)
        rin = np.empty(ranks.shape[0], np.int64)
        c = 0
        d = 0
        for t in range(ranks.shape[0]):
            while c + hist[d] <= ranks[t]:
                c += hist[d]
                d += 1
            bk[t] = d
            rin[t] = ranks[t] - c
        # copy each distinct bucket once (one pass for all of them), then refine
        nd = 0
        dist = np.empty(ranks.shape[0], np.int64)
        for t in range(ranks.shape[0]):
            if nd == 0 or dist[nd - 1] != bk[t]:
                dist[nd] = bk[t]
                nd += 1
        start = np.zeros(nd + 1, np.int64)
        for k in range(nd):
            start[k + 1] = start[k] + hist[dist[k]]
        slot = np.full(1 << _DIGIT_BITS, -1, np.int64)
        for k in range(nd):
            slot[dist[k]] = k
        buf = np.empty(start[nd], np.uint64)
        pos = start[:nd].copy()
        for i in range(n):
            v = _to_key(u[i])
            k = slot[(v >> sh) & m]
            if k >= 0:
                buf[pos[k]] = v
                pos[k] += 1
        for t in range(ranks.shape[0]):
            k = 0
            while dist[k] != bk[t]:
                k += 1
            keys[t] = _select_one(buf[start[k]:start[k + 1]], rin[t])
    bits = np.empty(ranks.shape[0], np.uint64)
    for t in range(ranks.shape[0]):
        bits[t] = _from_key(keys[t])
    f = bits.view(np.float64)
    for t in range(ranks.shape[0]):
        out[t] = f[t]
    return out


def median_percentile(x: np.ndarray, q_pct: float) -> tuple[float, float]:
    """``(float(np.median(x)), float(np.percentile(x, q_pct)))`` for finite float64 ``x``
    (len >= 1), computed from two or four order statistics; ``x`` is not modified."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = len(x)
    med_r = [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2]
    q = np.true_divide(np.float64(q_pct), 100)
    virtual = (n - 1) * q  # numpy's 'linear' virtual index
    if virtual >= n - 1:
        prev, nxt, prev_idx = n - 1, n - 1, -1  # numpy takes arr[-1] (the maximum)
    elif virtual < 0:
        prev, nxt, prev_idx = 0, 0, 0
    else:
        prev = int(math.floor(virtual))
        nxt, prev_idx = prev + 1, prev
    ranks = np.array(sorted(set(med_r + [prev, nxt])), np.int64)
    vals = dict(zip(ranks.tolist(), select(x, ranks).tolist()))
    if len(med_r) == 2:
        med = (np.float64(vals[med_r[0]]) + np.float64(vals[med_r[1]])) / np.intp(2)
    else:
        med = np.float64(vals[med_r[0]]) / np.intp(1)
    a, b = np.float64(vals[prev]), np.float64(vals[nxt])
    gamma = np.float64(virtual - np.intp(prev_idx))
    diff = b - a
    res = a + diff * gamma
    if gamma >= 0.5:
        res = b - diff * (1 - gamma)
    return float(med), float(res)
