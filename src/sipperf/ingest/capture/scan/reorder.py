"""Out-of-order TCP data: the bytes a connection received beyond a hole, kept until the hole is
filled (:mod:`.tcp` places them).

A connection that has bytes waiting owns a **slot** of a pool shared by all connections:
``ob[slot]`` holds the bytes (at most :data:`~.layout.OOO_WINDOW`), ``op[slot, 0]`` the slot's
meta row (flow, pieces, fill, oldest capture time, used) and ``op[slot, 1 + k]`` its pieces:
absolute sequence number, length, offset in ``ob[slot]``, packets it stands for, frame and
capture time of the segment that brought it.  Pieces never overlap: a segment is stored only
where no byte is already waiting (**the first captured copy of a byte wins**, as for the bytes
already delivered: a later copy is a retransmission, even when its bytes differ), so a
segment may be stored as several pieces, or as none (a duplicate).

Bounds (a counted gap when exceeded, :mod:`.tcp`): bytes within ``OOO_WINDOW`` of the next
expected byte, at most ``OOO_PIECES`` pieces per connection, at most ``OOO_MAX_SLOTS``
connections waiting at once (the pool starts small and doubles: the compiled pass stops
when it is full, :meth:`sipperf.ingest.capture.fast._State.ensure` grows it).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import (OOO_PIECES, OOO_WINDOW, OS_FILL, OS_FLOW, OS_N, OS_T0, OS_USED, P_FRAME,
                     P_LEN, P_OFF, P_SEQ, P_TS, P_W, ST_OOO_ACTIVE)

M32 = 0xFFFFFFFF


@njit(cache=True, inline="always")
def _rel(x, nxt):
    """Distance of sequence number x ahead of nxt (mod 2^32)."""
    return (x - nxt) & M32


@njit(cache=True)
def slot_alloc(op, st, f, ts):
    """A free slot for flow f, or -1 when the pool is full."""
    for s in range(op.shape[0]):
        if op[s, 0, OS_USED] == 0:
            op[s, 0, OS_FLOW] = f
            op[s, 0, OS_N] = 0
            op[s, 0, OS_FILL] = 0
            op[s, 0, OS_T0] = ts
            op[s, 0, OS_USED] = 1
            st[ST_OOO_ACTIVE] += 1
            return s
    return -1


@njit(cache=True)
def slot_free(op, st, s):
    if op[s, 0, OS_USED]:
        op[s, 0, OS_USED] = 0
        op[s, 0, OS_N] = 0
        op[s, 0, OS_FILL] = 0
        st[ST_OOO_ACTIVE] -= 1


@njit(cache=True)
def oldest(op, s):
    """Capture time of the oldest piece waiting in slot s (or the meta value if none)."""
    n = op[s, 0, OS_N]
    if n == 0:
        return op[s, 0, OS_T0]
    t = op[s, 1, P_TS]
    for k in range(2, n + 1):
        if op[s, k, P_TS] < t:
            t = op[s, k, P_TS]
    op[s, 0, OS_T0] = t
    return t


@njit(cache=True)
def waiting(op, s):
    """Packets the pieces of slot s stand for."""
    w = 0
    for k in range(1, op[s, 0, OS_N] + 1):
        w += op[s, k, P_W]
    return w


@njit(cache=True)
def _compact(op, ob, s):
    """Move slot s's pieces to the front of its byte row (in offset order)."""
    n = op[s, 0, OS_N]
    offs = np.empty(n, np.int64)
    for k in range(n):
        offs[k] = op[s, 1 + k, P_OFF]
    order = np.argsort(offs)
    o = 0
    for t in range(n):
        k = 1 + order[t]
        src = op[s, k, P_OFF]
        ln = op[s, k, P_LEN]
        if src != o:
            for i in range(ln):  # dst < src: an ascending copy is safe
                ob[s, o + i] = ob[s, src + i]
            op[s, k, P_OFF] = o
        o += ln
    op[s, 0, OS_FILL] = o


@njit(cache=True)
def insert(op, ob, s, a, ps, n, seq, nxt, frame, ts):
    """Store the segment a[ps:ps+n] (sequence number seq, at or after nxt) in slot s where no
    byte waits yet.  Returns the number of pieces stored (0: every byte already waiting), or
    -1 when it does not fit (beyond the window, or too many pieces): nothing is stored then."""
    r0 = _rel(seq, nxt)
    r1 = r0 + n
    if r1 > OOO_WINDOW:
        return -1
    m = op[s, 0, OS_N]
    # the existing pieces, by position
    st_ = np.empty(m, np.int64)
    for k in range(m):
        st_[k] = _rel(op[s, 1 + k, P_SEQ], nxt)
    order = np.argsort(st_)
    # the uncovered runs of [r0, r1)
    runs = np.empty((m + 1, 2), np.int64)
    nr = 0
    cur = r0
    for t in range(m):
        k = 1 + order[t]
        ks = st_[order[t]]
        ke = ks + op[s, k, P_LEN]
        if ke <= cur:
            continue
        if ks >= r1:
            break
        if ks > cur:
            runs[nr, 0] = cur
            runs[nr, 1] = ks
            nr += 1
        cur = max(cur, ke)
        if cur >= r1:
            break
    if cur < r1:
        runs[nr, 0] = cur
        runs[nr, 1] = r1
        nr += 1
    if nr == 0:
        return 0
    if m + nr > OOO_PIECES:
        return -1
    need = 0
    for i in range(nr):
        need += runs[i, 1] - runs[i, 0]
    if op[s, 0, OS_FILL] + need > ob.shape[1]:
        _compact(op, ob, s)
    o = op[s, 0, OS_FILL]
    for i in range(nr):
        ln = runs[i, 1] - runs[i, 0]
        src = ps + runs[i, 0] - r0
        ob[s, o:o + ln] = a[src:src + ln]
        k = 1 + m + i
        op[s, k, P_SEQ] = (nxt + runs[i, 0]) & M32
        op[s, k, P_LEN] = ln
        op[s, k, P_OFF] = o
        op[s, k, P_W] = 0
        op[s, k, P_FRAME] = frame
        op[s, k, P_TS] = ts
        o += ln
    op[s, 0, OS_FILL] = o
    op[s, 0, OS_N] = m + nr
    if m == 0 or ts < op[s, 0, OS_T0]:
        op[s, 0, OS_T0] = ts
    return nr


@njit(cache=True)
def next_piece(op, s, nxt, limit):
    """Row of the piece of slot s that starts at nxt (and arrived at or before frame
    ``limit``), or -1."""
    for k in range(1, op[s, 0, OS_N] + 1):
        if op[s, k, P_SEQ] == nxt and op[s, k, P_FRAME] <= limit:
            return k
    return -1


@njit(cache=True)
def remove(op, s, k):
    """Drop piece row k of slot s (the last one takes its place)."""
    n = op[s, 0, OS_N]
    if k != n:
        for j in range(6):
            op[s, k, j] = op[s, n, j]
    op[s, 0, OS_N] = n - 1
    if n - 1 == 0:
        op[s, 0, OS_FILL] = 0


@njit(cache=True)
def first_seq(op, s, nxt):
    """Sequence number of the piece nearest ahead of nxt."""
    best = -1
    bs = 0
    for k in range(1, op[s, 0, OS_N] + 1):
        r = _rel(op[s, k, P_SEQ], nxt)
        if best < 0 or r < best:
            best = r
            bs = op[s, k, P_SEQ]
    return bs


@njit(cache=True)
def set_weight(op, s, frame, w):
    """Give the packet of ``frame`` (stored as one or more pieces) its weight, on one piece."""
    for k in range(1, op[s, 0, OS_N] + 1):
        if op[s, k, P_FRAME] == frame:
            op[s, k, P_W] += w
            return True
    return False
