"""The record walk: :func:`scan`, the entry point of the compiled pass, and
:func:`pending_frames` for the final account.

Records: pcap (µs/ns, either byte order, Kuznetzov's 24-byte record headers) and pcapng (SHB
per section and byte order, IDB with ``if_tsresol``/``if_tsoffset``, EPB, obsolete PB; an SPB
has no timestamp and is a counted skip).  Before each packet :func:`scan` makes room for what
it can produce (output columns, string data, the TCP arena, the fragment arena), then hands it
to :func:`.packet._packet` with every array borrowed (no reference counting per call), and a
TCP segment the packet walk hands back to :func:`.packet._segment`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import (DONE, ERR_CORRUPT, ERR_TRUNC, F_PEND, FMT_PCAP, FR_NFRAMES, FR_USED, IF_DEN,
                     IF_GCD, IF_LAST, IF_LINK, IF_MAXBACK, IF_NBACK, IF_NPKT, IF_NUM, IF_NZERO, IF_OFF,
                     IF_T0, MAX_HDR, MAX_IF, MAX_PCAP_RECORD, MAX_PCAPNG_BLOCK,
                     MORE_RECORDS, NEED_DATA, NI, NS, NSEG, OOO_HOLD_NS, OOO_MAX_SLOTS, OOO_WINDOW,
                     OS_USED, R_NO_TS, R_UNDEF_IF, SEG_DGRAM, ST_ARENA, ST_BIG, ST_ERR, ST_ERR_FRAME,
                     ST_ERR_POS, ST_FARENA, ST_FMT, ST_FRAME, ST_LINK, ST_MAXPEND, ST_NADDR,
                     ST_NFLOW, ST_NIF, ST_NR, ST_OOO_ACTIVE, ST_OOO_T0MIN, ST_RECHDR, ST_SECTIONS,
                     ST_TSMUL, ST_TS_NONZERO, ST_TS_ZERO, ST_UNDEF_POS, X_IFACE, X_IFBASE)
from .packet import TCP_SEGMENT, _packet, _segment
from .primitives import _borrow, _u16, _u32
from .reorder import waiting
from .tcp import compact_arena, expire_one


@njit(cache=True)
def _ts_ns(raw_hi, raw_lo, num, den):
    """(hi << 32 | lo) ticks * num / den, exactly when it fits in int64."""
    raw = (np.uint64(raw_hi) << np.uint64(32)) | np.uint64(raw_lo)
    if den == 1:
        return np.int64(raw) * num
    q = raw // np.uint64(den)
    r = raw % np.uint64(den)
    if num == 1:
        return np.int64(q)
    if r < np.uint64(1 << 34):
        return np.int64(q) * num + np.int64((r * np.uint64(num)) // np.uint64(den))
    return np.int64(q) * num + np.int64(float(r) * num / den)


@njit(cache=True, inline="always")
def _clock(ifs, k, ts):
    """What the stamps of interface ``k`` show, one packet more: a stamp of zero or less, else the
    greatest common divisor of the distances to the first stamp (the clock's real step) and the
    steps back from the packet before."""
    if ts <= 0:
        ifs[k, IF_NZERO] += 1
        return
    if ifs[k, IF_NPKT] == 0:
        ifs[k, IF_T0] = ts
    else:
        d = ts - ifs[k, IF_T0]
        if d < 0:
            d = -d
        g = ifs[k, IF_GCD]
        if g != 1 and d != 0:
            while d != 0:
                g, d = d, g % d
            ifs[k, IF_GCD] = g
        last = ifs[k, IF_LAST]
        if ts < last:
            ifs[k, IF_NBACK] += 1
            if last - ts > ifs[k, IF_MAXBACK]:
                ifs[k, IF_MAXBACK] = last - ts
    ifs[k, IF_LAST] = ts
    ifs[k, IF_NPKT] += 1


@njit(cache=True, inline="always")
def _stop(st, err, pos):
    """The walk stops at the record starting at ``pos`` (the next frame) with error ``err``."""
    st[ST_ERR] = err
    st[ST_ERR_POS] = pos
    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
    return DONE


@njit(cache=True)
def _room(st, I, O, V, D, dl, cl):
    """Output columns with room for what cl bytes of SIP can produce (grown when needed)."""
    cap = I.shape[1]
    r = st[ST_NR]
    if r + cl // 8 + 16 > cap:
        cap2 = max(2 * cap, r + cl // 8 + 16)
        I2 = np.empty((NI, cap2), np.int64)
        O2 = np.empty((NS, cap2 + 1), np.int64)
        V2 = np.empty((NS, cap2), np.uint8)
        I2[:, :r] = I[:, :r]
        O2[:, :r + 1] = O[:, :r + 1]
        V2[:, :r] = V[:, :r]
        I = I2
        O = O2
        V = V2
    need = cl + MAX_HDR + 65536
    dmax = 0
    for c in range(NS):
        if dl[c] > dmax:
            dmax = dl[c]
    if dmax + need > D.shape[1]:
        D2 = np.empty((NS, 2 * D.shape[1] + need), np.uint8)
        for c in range(NS):
            D2[c, :dl[c]] = D[c, :dl[c]]
        D = D2
    return I, O, V, D


@njit(cache=True)
def scan(buf, pos, end, eof, max_records, max_rows, st, cnt, ifs, ak, av, alist, tk, tv, fs,
         arena, frs, frl, farena, scr, hs, he, dgram, I, O, V, D, op, ob):
    """Walk the records of buf[pos:end] (the file's bytes from some record boundary).

    Stops after ``max_records`` records or ``max_rows`` rows (MORE_RECORDS; also before a
    record that could overflow the address table or the out-of-order pool: the caller grows
    them), at a record that is not complete in
    the buffer (NEED_DATA; at ``eof`` a truncation error instead), or at the end (DONE: the
    TCP bytes still waiting out of order are then replayed past their holes).  The rows go to
    I, O, V, D (reused between calls; grown when needed).
    Returns (pos, status, nrows, I, O, V, D, arena, farena, op, ob)."""
    for c in range(NS):
        O[c, 0] = 0
    dl = np.zeros(NS, np.int64)
    seg = np.zeros(NSEG, np.int64)  # a TCP segment handed back by the packet walk
    st[ST_NR] = 0  # rows written by this call
    recs = 0
    status = DONE
    fmt = st[ST_FMT]
    # Two loops, so that the records loop never reassigns an array: a loop-carried array costs
    # an atomic reference count increment and decrement per packet each.  The outer loop grows
    # what the next packet needs room for (grow_cl bytes), the inner one walks the records.
    grow_cl = -1
    while True:
        if grow_cl >= 0:
            cl = grow_cl
            I, O, V, D = _room(st, I, O, V, D, dl, cl)
            room = 4 * (st[ST_MAXPEND] + cl) + 512
            if st[ST_ARENA] + room > arena.shape[0]:
                arena, used, mx = compact_arena(fs, st[ST_NFLOW], arena, 2 * room)
                st[ST_ARENA] = used
                st[ST_MAXPEND] = mx
            if st[ST_FARENA] + cl > farena.shape[0]:
                fa2 = np.empty(2 * farena.shape[0] + cl, np.uint8)
                fa2[:st[ST_FARENA]] = farena[:st[ST_FARENA]]
                farena = fa2
            grow_cl = -1
        while True:
            if recs >= max_records or st[ST_NR] >= max_rows:
                status = MORE_RECORDS
                break
            rec_pos = pos
            if fmt == FMT_PCAP:
                hl = st[ST_RECHDR]
                big = st[ST_BIG] != 0
                if pos >= end:
                    status = DONE if eof else NEED_DATA
                    break
                if pos + hl > end:
                    if eof:
                        status = _stop(st, ERR_TRUNC, pos)
                    else:
                        status = NEED_DATA
                    break
                sec = _u32(buf, pos, big)
                frac = _u32(buf, pos + 4, big)
                incl = _u32(buf, pos + 8, big)
                if incl > MAX_PCAP_RECORD:
                    status = _stop(st, ERR_CORRUPT, pos)
                    break
                if pos + hl + incl > end:
                    if eof:
                        status = _stop(st, ERR_TRUNC, pos)
                    else:
                        status = NEED_DATA
                    break
                data = pos + hl
                caplen = incl
                ts = sec * 1_000_000_000 + frac * st[ST_TSMUL]
                link = st[ST_LINK]
                pos += hl + incl
                ifx = 0
                has_pkt = True
                no_ts = False
                undef = False
            else:
                if pos >= end:
                    status = DONE if eof else NEED_DATA
                    break
                if pos + 12 > end:
                    if eof:
                        status = _stop(st, ERR_TRUNC, pos)
                    else:
                        status = NEED_DATA
                    break
                if buf[pos] == 0x0A and buf[pos + 1] == 0x0D and buf[pos + 2] == 0x0D and buf[pos + 3] == 0x0A:
                    b8 = buf[pos + 8]
                    if b8 == 0x4D and buf[pos + 9] == 0x3C:
                        st[ST_BIG] = 0
                    elif b8 == 0x1A and buf[pos + 9] == 0x2B:
                        st[ST_BIG] = 1
                    else:
                        status = _stop(st, ERR_CORRUPT, pos)
                        break
                big = st[ST_BIG] != 0
                btype = _u32(buf, pos, big)
                blen = _u32(buf, pos + 4, big)
                if blen < 12 or (blen & 3) != 0 or blen > MAX_PCAPNG_BLOCK:
                    status = _stop(st, ERR_CORRUPT, pos)
                    break
                if pos + blen > end:
                    if eof:
                        status = _stop(st, ERR_TRUNC, pos)
                    else:
                        status = NEED_DATA
                    break
                if _u32(buf, pos + blen - 4, big) != blen:
                    status = _stop(st, ERR_CORRUPT, pos)
                    break
                has_pkt = False
                no_ts = False
                undef = False
                ifx = 0
                data = 0
                caplen = 0
                ts = np.int64(0)
                link = 0
                if btype == 0x0A0D0D0A:
                    st[X_IFBASE] += st[ST_NIF]  # a new section: its interfaces are numbered on
                    st[ST_NIF] = 0
                    st[ST_SECTIONS] += 1
                elif btype == 1:
                    if blen < 20:
                        status = _stop(st, ERR_CORRUPT, pos)
                        break
                    lk = _u16(buf, pos + 8, big)
                    if lk == 12 or lk == 14:
                        lk = 101
                    res = 6
                    tsoff = np.int64(0)
                    o = pos + 16
                    while o + 4 <= pos + blen - 4:
                        code = _u16(buf, o, big)
                        olen = _u16(buf, o + 2, big)
                        if code == 0:
                            break
                        if o + 4 + olen > pos + blen - 4:
                            break
                        if code == 9 and olen >= 1:
                            res = buf[o + 4]
                        elif code == 14 and olen >= 8:
                            lo = _u32(buf, o + 4, big)
                            hi = _u32(buf, o + 8, big)
                            if big:
                                lo, hi = hi, lo
                            tsoff = np.int64((np.uint64(hi) << np.uint64(32)) | np.uint64(lo))
                        o += 4 + ((olen + 3) & ~3)
                    if res & 0x80:
                        num = np.int64(1_000_000_000)
                        k = res & 0x7F
                        den = np.int64(1) << np.int64(min(k, 62))
                    elif res <= 9:
                        num = np.int64(10) ** (9 - res)
                        den = np.int64(1)
                    else:
                        num = np.int64(1)
                        den = np.int64(10) ** min(res - 9, 18)
                    k = st[ST_NIF]
                    if k < MAX_IF:
                        ifs[k, IF_LINK] = lk
                        ifs[k, IF_NUM] = num
                        ifs[k, IF_DEN] = den
                        ifs[k, IF_OFF] = tsoff * 1_000_000_000
                        ifs[k, IF_LAST] = 0  # a new section's interface: no step back from the last one
                    st[ST_NIF] = k + 1
                elif btype == 6 or btype == 2:   # enhanced / obsolete packet block
                    if blen < 32:
                        status = _stop(st, ERR_CORRUPT, pos)
                        break
                    iface = _u32(buf, pos + 8, big) if btype == 6 else _u16(buf, pos + 8, big)
                    caplen = _u32(buf, pos + 20, big)
                    if caplen > blen - 32:
                        status = _stop(st, ERR_CORRUPT, pos)
                        break
                    has_pkt = True
                    data = pos + 28
                    if iface >= st[ST_NIF] or iface >= MAX_IF:
                        undef = True
                    else:
                        ifx = iface
                        link = ifs[iface, IF_LINK]
                        ts = _ts_ns(_u32(buf, pos + 12, big), _u32(buf, pos + 16, big),
                                    ifs[iface, IF_NUM], ifs[iface, IF_DEN]) + ifs[iface, IF_OFF]
                elif btype == 3:
                    has_pkt = True
                    no_ts = True
                pos += blen
            if not has_pkt:
                continue
            # new addresses this packet may add: two, and two per HEP packet a TCP segment of
            # this size may complete; if the table could overflow, or the out-of-order pool is
            # full, stop before this record (the caller grows them, fast._State.ensure, and
            # comes back)
            na = st[ST_NADDR] + 2 + caplen // 32
            if na > alist.shape[0] or 2 * na > ak.shape[0] or (st[ST_OOO_ACTIVE] >= op.shape[0]
                                                                and op.shape[0] < OOO_MAX_SLOTS):
                pos = rec_pos
                status = MORE_RECORDS
                break
            # room for whatever this packet can produce (a reassembled datagram may exceed
            # caplen; a TCP gap declared before it replays up to a window of waiting bytes):
            # when short, leave the record for after the outer loop has grown the arrays
            cl = max(caplen, 131072) + OOO_WINDOW
            dmax = 0
            for c in range(NS):
                if dl[c] > dmax:
                    dmax = dl[c]
            if (st[ST_NR] + cl // 8 + 16 > I.shape[1] or dmax + cl + MAX_HDR + 65536 > D.shape[1]
                    or st[ST_ARENA] + 4 * (st[ST_MAXPEND] + cl) + 512 > arena.shape[0]
                    or st[ST_FARENA] + cl > farena.shape[0]):
                pos = rec_pos
                grow_cl = cl
                break
            recs += 1
            st[ST_FRAME] += 1
            frame = st[ST_FRAME]
            if no_ts:
                cnt[R_NO_TS] += 1
                continue
            if undef:
                cnt[R_UNDEF_IF] += 1
                if st[ST_UNDEF_POS] < 0:
                    st[ST_UNDEF_POS] = pos - _u32(buf, pos - 4, st[ST_BIG] != 0)
                continue
            if ts == 0:
                st[ST_TS_ZERO] += 1
            else:
                st[ST_TS_NONZERO] += 1
            _clock(ifs, ifx, ts)
            # the interface a message row names, as tshark numbers them (0 in a pcap)
            st[X_IFACE] = ifx if fmt == FMT_PCAP else st[X_IFBASE] + ifx
            # a hole that waited too long is a gap (one per packet; the room above covers it)
            if st[ST_OOO_ACTIVE] > 0 and ts - st[ST_OOO_T0MIN] > OOO_HOLD_NS:
                expire_one(ts, False, _borrow(fs), _borrow(arena), _borrow(st), _borrow(cnt), _borrow(I),
                           _borrow(O), _borrow(V), _borrow(D), _borrow(dl), _borrow(scr), _borrow(hs),
                           _borrow(he), _borrow(ak), _borrow(av), _borrow(alist), _borrow(op), _borrow(ob))
            if _packet(_borrow(buf), data, caplen, link, frame, ts, _borrow(st), _borrow(cnt), _borrow(I),
                       _borrow(O), _borrow(V), _borrow(D), _borrow(dl), _borrow(scr), _borrow(hs),
                       _borrow(he), _borrow(ak), _borrow(av), _borrow(alist), _borrow(frs), _borrow(frl),
                       _borrow(farena), _borrow(dgram), _borrow(seg)) == TCP_SEGMENT:
                if seg[SEG_DGRAM]:  # the segment came in a reassembled datagram
                    _segment(_borrow(dgram), _borrow(seg), frame, ts, _borrow(st), _borrow(cnt),
                             _borrow(I), _borrow(O), _borrow(V), _borrow(D), _borrow(dl), _borrow(scr),
                             _borrow(hs), _borrow(he), _borrow(ak), _borrow(av), _borrow(alist),
                             _borrow(tk), _borrow(tv), _borrow(fs), _borrow(arena), _borrow(op),
                             _borrow(ob))
                else:
                    _segment(_borrow(buf), _borrow(seg), frame, ts, _borrow(st), _borrow(cnt),
                             _borrow(I), _borrow(O), _borrow(V), _borrow(D), _borrow(dl), _borrow(scr),
                             _borrow(hs), _borrow(he), _borrow(ak), _borrow(av), _borrow(alist),
                             _borrow(tk), _borrow(tv), _borrow(fs), _borrow(arena), _borrow(op),
                             _borrow(ob))
        if grow_cl < 0:
            break
    if status == DONE:
        # the end of the capture: what still waits for missing bytes never gets them
        for _i in range(op.shape[0] * 70):
            if st[ST_OOO_ACTIVE] == 0:
                break
            I, O, V, D = _room(st, I, O, V, D, dl, 131072 + OOO_WINDOW)
            arena, did = _expire(np.iinfo(np.int64).max, True, st, cnt, I, O, V, D, dl, scr,
                                 hs, he, ak, av, alist, fs, arena, op, ob)
            if not did:
                break
    return pos, status, st[ST_NR], I, O, V, D, arena, farena, op, ob


@njit(cache=True)
def _expire(now, force, st, cnt, I, O, V, D, dl, scr, hs, he,
            ak, av, alist, fs, arena, op, ob):
    """Declare one hole that waited too long (any if ``force``) a gap, after making room in the
    arena (the caller made room in the columns: one hole replays at most a window of bytes).
    Returns (arena, whether a hole was declared)."""
    room = 4 * (st[ST_MAXPEND] + OOO_WINDOW) + 512
    if st[ST_ARENA] + room > arena.shape[0]:
        arena, used, mx = compact_arena(fs, st[ST_NFLOW], arena, 2 * room)
        st[ST_ARENA] = used
        st[ST_MAXPEND] = mx
    did = expire_one(now, force, _borrow(fs), _borrow(arena), _borrow(st), _borrow(cnt),
                     _borrow(I), _borrow(O), _borrow(V), _borrow(D), _borrow(dl),
                     _borrow(scr), _borrow(hs), _borrow(he), _borrow(ak), _borrow(av),
                     _borrow(alist), _borrow(op), _borrow(ob))
    return arena, did


@njit(cache=True)
def pending_frames(fs, nflow, frs, nfrag):
    """Packets still waiting in TCP buffers or fragment tables (for the final account; those
    waiting out of order: :func:`pending_out_of_order`)."""
    n = 0
    for f in range(nflow):
        n += fs[f, F_PEND]
    for i in range(nfrag):
        if frs[i, FR_USED]:
            n += frs[i, FR_NFRAMES]
    return n


@njit(cache=True)
def pending_out_of_order(op):
    """Packets whose TCP bytes still wait in the out-of-order pool."""
    n = 0
    for s in range(op.shape[0]):
        if op[s, 0, OS_USED]:
            n += waiting(op, s)
    return n
