"""Interning tables (open addressing, linear probing, sizes a power of two): an address
(hi, lo, family) -> a small id, and a TCP flow (5 keys) -> its row in the flow state ``fs``.

The caller grows the tables between calls so that one call cannot fill them
(:meth:`sipperf.ingest.capture.fast._State.ensure`), moving the entries with the ``rehash_*``
functions.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import NF, ST_NADDR, ST_NFLOW


@njit(cache=True, inline="always")
def _mix(h, v):
    h ^= v + np.int64(0x9E3779B97F4A7C15) + (h << 6) + (h >> 2)
    return h


@njit(cache=True)
def _addr_id(ak, av, alist, st, hi, lo, fam):
    """Id of an address (hi, lo, family) in the interning table; new ones are appended."""
    m = ak.shape[0] - 1
    h = _mix(_mix(_mix(np.int64(fam), hi), lo), np.int64(0)) & m
    while True:
        v = av[h]
        if v < 0:
            n = st[ST_NADDR]
            av[h] = n
            ak[h, 0] = hi
            ak[h, 1] = lo
            ak[h, 2] = fam
            alist[n, 0] = hi
            alist[n, 1] = lo
            alist[n, 2] = fam
            st[ST_NADDR] = n + 1
            return n
        if ak[h, 0] == hi and ak[h, 1] == lo and ak[h, 2] == fam:
            return v
        h = (h + 1) & m


@njit(cache=True)
def rehash_addr(ak, av, nak, nav):
    m = nak.shape[0] - 1
    for i in range(ak.shape[0]):
        v = av[i]
        if v >= 0:
            h = _mix(_mix(_mix(ak[i, 2], ak[i, 0]), ak[i, 1]), np.int64(0)) & m
            while nav[h] >= 0:
                h = (h + 1) & m
            nav[h] = v
            nak[h, 0] = ak[i, 0]
            nak[h, 1] = ak[i, 1]
            nak[h, 2] = ak[i, 2]


@njit(cache=True)
def _flow_id(tk, tv, fs, st, k0, k1, k2, k3, k4):
    m = tk.shape[0] - 1
    h = _mix(_mix(_mix(_mix(_mix(np.int64(0), k0), k1), k2), k3), k4) & m
    while True:
        v = tv[h]
        if v < 0:
            n = st[ST_NFLOW]
            tv[h] = n
            tk[h, 0] = k0
            tk[h, 1] = k1
            tk[h, 2] = k2
            tk[h, 3] = k3
            tk[h, 4] = k4
            for j in range(NF):
                fs[n, j] = 0
            st[ST_NFLOW] = n + 1
            return n
        if tk[h, 0] == k0 and tk[h, 1] == k1 and tk[h, 2] == k2 and tk[h, 3] == k3 and tk[h, 4] == k4:
            return v
        h = (h + 1) & m


@njit(cache=True)
def rehash_flows(tk, tv, ntk, ntv):
    m = ntk.shape[0] - 1
    for i in range(tk.shape[0]):
        v = tv[i]
        if v >= 0:
            h = _mix(_mix(_mix(_mix(_mix(np.int64(0), tk[i, 0]), tk[i, 1]), tk[i, 2]), tk[i, 3]),
                     tk[i, 4]) & m
            while ntv[h] >= 0:
                h = (h + 1) & m
            ntv[h] = v
            for j in range(5):
                ntk[h, j] = tk[i, j]
