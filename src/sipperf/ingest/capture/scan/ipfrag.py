"""IP fragment reassembly (IPv4 and IPv6 alike): fragments are kept per (addresses, protocol
and family, identification) in at most ``MAX_FRAG_SLOTS`` slots of ``MAX_FRAGS`` fragments,
their bytes in a shared arena; a datagram is complete when the fragments cover
``[0, total)`` without a hole.  Later data at the same offset replaces earlier; the packets
of a datagram are counted with its outcome.  A slot keeps its fragments sorted by offset.

No allocation here (the copies are memcpy): :func:`_frag` runs inside the packet walk, which is
compiled without reference counting (:mod:`.packet`).
"""
from __future__ import annotations

from numba import njit

from .layout import (FR_NFRAG, FR_NFRAMES, FR_TOTAL, FR_USED, MAX_FRAGS, MAX_FRAG_SLOTS,
                     R_FRAG_LIMIT, ST_FARENA, ST_NFRAG)
from .primitives import _copy


@njit(cache=True)
def _frag(frs, frl, farena, st, cnt, k0, k1, k2, k3, k4, k5, off, more, a, ps, pe, w, dgram):
    """Add one fragment; returns (datagram length, frames) when complete, else (-1, 0)."""
    nslots = st[ST_NFRAG]
    slot = -1
    free = -1
    for i in range(nslots):
        if frs[i, FR_USED] == 0:
            if free < 0:
                free = i
            continue
        if frs[i, 0] == k0 and frs[i, 1] == k1 and frs[i, 2] == k2 and frs[i, 3] == k3 \
                and frs[i, 4] == k4 and frs[i, 5] == k5:
            slot = i
            break
    if slot < 0:
        if free < 0:
            if nslots >= MAX_FRAG_SLOTS:
                cnt[R_FRAG_LIMIT] += w
                return -1, 0
            free = nslots
            st[ST_NFRAG] = nslots + 1
        slot = free
        frs[slot, 0] = k0
        frs[slot, 1] = k1
        frs[slot, 2] = k2
        frs[slot, 3] = k3
        frs[slot, 4] = k4
        frs[slot, 5] = k5
        frs[slot, FR_TOTAL] = -1
        frs[slot, FR_NFRAG] = 0
        frs[slot, FR_NFRAMES] = 0
        frs[slot, FR_USED] = 1
    n = pe - ps
    nf = frs[slot, FR_NFRAG]
    j = -1
    for i in range(nf):
        if frl[slot, i, 0] == off:
            j = i
            break
    if j < 0:
        if nf >= MAX_FRAGS:
            cnt[R_FRAG_LIMIT] += w
            return -1, 0
        # the slot's fragments stay sorted by offset (offsets are unique: see above)
        j = nf
        while j > 0 and frl[slot, j - 1, 0] > off:
            frl[slot, j, 0] = frl[slot, j - 1, 0]
            frl[slot, j, 1] = frl[slot, j - 1, 1]
            frl[slot, j, 2] = frl[slot, j - 1, 2]
            j -= 1
        frs[slot, FR_NFRAG] = nf + 1
    o = st[ST_FARENA]
    _copy(farena, o, a, ps, n)
    st[ST_FARENA] = o + n
    frl[slot, j, 0] = off
    frl[slot, j, 1] = n
    frl[slot, j, 2] = o
    frs[slot, FR_NFRAMES] += w
    if not more:
        frs[slot, FR_TOTAL] = off + n
    total = frs[slot, FR_TOTAL]
    if total < 0:
        return -1, 0
    # complete? (in offset order, no hole)
    nf = frs[slot, FR_NFRAG]
    have = 0
    for i in range(nf):
        fo = frl[slot, i, 0]
        if fo > have:
            return -1, 0
        if fo + frl[slot, i, 1] > have:
            have = fo + frl[slot, i, 1]
    if have < total or have > dgram.shape[0]:
        return -1, 0
    for i in range(nf):
        _copy(dgram, frl[slot, i, 0], farena, frl[slot, i, 2], frl[slot, i, 1])
    frames = frs[slot, FR_NFRAMES]
    frs[slot, FR_USED] = 0
    live = 0
    for i in range(st[ST_NFRAG]):
        live += frs[i, FR_USED]
    if live == 0:
        st[ST_FARENA] = 0
        st[ST_NFRAG] = 0
    return have, frames
