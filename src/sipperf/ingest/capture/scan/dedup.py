"""Copies of one datagram seen twice: :func:`_seen_before`.

A capture taken on a SPAN or mirror port, on two taps, on ``-i any`` where a packet crosses a
bridge, or on a proxy host that also sends HEP copies of its traffic to a Homer collector, holds
some packets twice: the same bytes between the same addresses, microseconds apart.  Read as
they are, each message counts twice and the second copy looks like a retransmission.  A
retransmission is a new datagram from the sender, sent at the earliest T1 = 500 ms later (RFC
3261 §17.1.1.2 with the default timers); a copy is the same datagram, seen again.

The rule: a message is a duplicate when a message with the same content hash (its bytes, its
addresses, ports and transport) was read no more than the window ``st[X_DUP_WINDOW]`` earlier
or later (default :data:`~.layout.DUP_WINDOW_NS`, 50 ms), and the two do not carry different
IPv4 identifications (a different non-zero IP ID is another datagram, whatever the timing; a
zero ID, IPv6 and a HEP copy carry none).  The first copy read is kept.

The table of recent messages lives at the end of ``st`` (``DUP_SLOTS`` rows of hash, time, IP
id; open addressing, ``DUP_PROBES`` probes, a row older than the window is free again): at
tens of thousands of messages a second it holds every message of the last window.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import (DEDUP_CHECK, DUP_PROBES, DUP_SLOTS, X_DEDUP, X_DUP_DTMAX, X_DUP_DTSUM,
                     X_DUP_HEP, X_DUP_N, X_DUP_WINDOW, X_IPID, XDT)
from .primitives import _ld64

_M = np.uint64(0x9E3779B97F4A7C15)
#: the IPv4-id slot of a message that came in a HEP packet (it carries no original IP id)
HEP_IPID = -2


@njit(cache=True, inline="always")
def _mix(h, w):
    h = (h ^ w) * _M
    return h ^ (h >> np.uint64(29))


@njit(cache=True)
def content_hash(a, s, e, src_id, dst_id, sport, dport, transport):
    """64-bit hash of the bytes a[s:e] and the message's addresses, ports and transport (never 0)."""
    h = _mix(_M, np.uint64(e - s))
    p = s
    while p + 8 <= e:
        h = _mix(h, _ld64(a, p))
        p += 8
    w = np.uint64(0)
    while p < e:
        w = (w << np.uint64(8)) | np.uint64(a[p])
        p += 1
    h = _mix(h, w)
    h = _mix(h, (np.uint64(src_id) << np.uint64(32)) ^ np.uint64(dst_id))
    h = _mix(h, (np.uint64(sport) << np.uint64(24)) ^ (np.uint64(dport) << np.uint64(8)) ^ np.uint64(transport))
    k = np.int64(h)
    return k if k != 0 else np.int64(1)


@njit(cache=True)
def _seen_before(a, s, e, src_id, dst_id, sport, dport, transport, ts, st):
    """True when the message a[s:e] is a copy of one read within the window (then counted in
    ``st``); else it is remembered (``st[X_DEDUP]`` says whether to check or only remember)."""
    win = st[X_DUP_WINDOW]
    if win <= 0:
        return False
    hk = content_hash(a, s, e, src_id, dst_id, sport, dport, transport)
    ipid = st[X_IPID]
    mask = np.int64(DUP_SLOTS - 1)
    free = -1
    oldest = -1
    oldest_t = np.iinfo(np.int64).max
    for j in range(DUP_PROBES):
        o = XDT + 3 * ((hk + j) & mask)
        k = st[o]
        if k == hk:
            dt = ts - st[o + 1]
            if dt < 0:
                dt = -dt
            other = st[o + 2]
            if st[X_DEDUP] == DEDUP_CHECK and dt <= win and not (ipid > 0 and other > 0 and ipid != other):
                st[X_DUP_N] += 1
                st[X_DUP_DTSUM] += dt
                if dt > st[X_DUP_DTMAX]:
                    st[X_DUP_DTMAX] = dt
                if ipid == HEP_IPID or other == HEP_IPID:
                    st[X_DUP_HEP] += 1
                return True
            # the same content again, but another datagram: it is the copy to compare with now
            st[o + 1] = ts
            st[o + 2] = ipid
            return False
        t = st[o + 1]
        d = ts - t
        if d < 0:
            d = -d
        if k == 0 or d > win:
            if free < 0:
                free = o
        elif t < oldest_t:
            oldest_t = t
            oldest = o
    o = free if free >= 0 else oldest
    st[o] = hk
    st[o + 1] = ts
    st[o + 2] = ipid
    return False
