"""HEP (Homer Encapsulation Protocol): what a Homer capture agent, Kamailio's ``siptrace`` or
OpenSIPS's ``proto_hep`` sends to a collector -- a copy of each SIP packet with its original
addresses, ports and capture time.  :func:`_hep` decodes one HEP packet and emits the SIP it
carries as if it had been captured where the agent captured it.

* **HEPv3 / EEP** (``"HEP3"``, then the total length, then chunks of vendor id, type id and
  length, all big-endian): generic chunks (vendor 0) 0x0001 IP family (2 IPv4, 10 IPv6),
  0x0002 IP protocol (17 UDP, 6 TCP), 0x0003/0x0004 IPv4 source/destination,
  0x0005/0x0006 IPv6 source/destination, 0x0007/0x0008 ports, 0x0009 seconds, 0x000a
  microseconds, 0x000b payload type (1 = SIP), 0x000c capture agent id, 0x000f payload,
  0x0010 compressed payload; chunks of other vendors and types are skipped.
* **HEPv1 / HEPv2** (first byte 1 or 2, then header length, family, protocol, the two ports
  big-endian, the two addresses; HEPv2 then carries seconds, microseconds and a 16-bit agent
  id, little-endian as the senders write them, in a 12-byte block): recognised when the
  header is consistent and a SIP start line follows it.

Time: the agent's capture time (the time chunks) is the message's time, not the time the HEP
packet reached the collector (the packet's own pcap time); HEPv1 has no time, so the
collector's is used and counted.  The difference is kept per agent (``st[XA...]``).

The payload of a UDP packet is one SIP message (its size the payload's length, as for a
datagram); that of a TCP segment may hold several (:func:`.messages._emit_span`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .dedup import HEP_IPID
from .layout import (AG_DMAX, AG_DMIN, AG_DSUM, AG_ID, AG_N, C_PARSED, DEDUP_CHECK, NAG, NAGENT,
                     R_HEP_BAD, R_HEP_COMPRESSED, R_HEP_NOT_SIP, TR_TCP, TR_UDP, X_DEDUP,
                     X_HEP_MSGS, X_HEP_NOTIME, X_HEP_V1, X_HEP_V2, X_HEP_V3, X_IPID, XA, XB)
from .messages import _emit_span, _line_start_sip
from .primitives import _be16, _be32, _be64, _u32
from .sip import _emit
from .tables import _addr_id


@njit(cache=True, inline="always")
def is_hep3(a, p, e):
    return e - p >= 6 and a[p] == 0x48 and a[p + 1] == 0x45 and a[p + 2] == 0x50 and a[p + 3] == 0x33


@njit(cache=True)
def hep2_len(a, p, e):
    """Header length of a HEPv1/v2 packet at a[p:e] (payload at p + it), or -1 if it is not one."""
    if e - p < 16:
        return -1
    v = a[p]
    if v != 1 and v != 2:
        return -1
    hl = a[p + 1]
    fam = a[p + 2]
    if hl == 16:
        if fam != 2:
            return -1
    elif hl == 40:
        if not (fam == 10 or fam == 24 or fam == 28 or fam == 30):
            return -1
    else:
        return -1
    q = p + hl + (12 if v == 2 else 0)
    if q >= e or _line_start_sip(a, q, e) != 1:
        return -1
    return q - p


@njit(cache=True)
def _agent(st, capt, delay):
    """Per-agent figures: messages, and collector time - agent time (ns) sum, min, max."""
    n = st[XA]
    k = -1
    for i in range(n):
        if st[XA + 1 + i * NAG + AG_ID] == capt:
            k = i
            break
    if k < 0:
        if n >= NAGENT:
            k = NAGENT - 1  # the last row takes every further agent
        else:
            k = n
            st[XA] = n + 1
            b = XA + 1 + k * NAG
            st[b + AG_ID] = capt
            st[b + AG_N] = 0
            st[b + AG_DSUM] = 0
            st[b + AG_DMIN] = delay
            st[b + AG_DMAX] = delay
    b = XA + 1 + k * NAG
    st[b + AG_N] += 1
    st[b + AG_DSUM] += delay
    if delay < st[b + AG_DMIN]:
        st[b + AG_DMIN] = delay
    if delay > st[b + AG_DMAX]:
        st[b + AG_DMAX] = delay


@njit(cache=True)
def _hep(a, s, e, frame, ts_pkt, st, I, O, V, D, dl, scr, hs, he, ak, av, alist):
    """Decode the HEP packet a[s:e] and emit its SIP; returns the outcome counter (C_PARSED or
    a reason) for the packet that carried it."""
    fam = np.int64(0)
    proto = np.int64(17)
    ptype = np.int64(-1)
    have_src = False
    have_dst = False
    sport = 0
    dport = 0
    src_hi = np.int64(0)
    src_lo = np.int64(-1)
    dst_hi = np.int64(0)
    dst_lo = np.int64(-1)
    sec = np.int64(-1)
    usec = np.int64(0)
    capt = np.int64(0)
    ps = -1
    pe = -1
    comp = False
    if is_hep3(a, s, e):
        total = _be16(a, s + 4)
        if total < 6 or s + total > e:
            st[XB + R_HEP_BAD] += e - s
            return R_HEP_BAD
        e = s + total
        p = s + 6
        while p < e:
            if p + 6 > e:
                st[XB + R_HEP_BAD] += e - s
                return R_HEP_BAD
            vendor = _be16(a, p)
            typ = _be16(a, p + 2)
            ln = _be16(a, p + 4)
            if ln < 6 or p + ln > e:
                st[XB + R_HEP_BAD] += e - s
                return R_HEP_BAD
            b = p + 6
            m = ln - 6
            if vendor == 0:
                if typ == 1 and m >= 1:
                    fam = np.int64(a[b])
                elif typ == 2 and m >= 1:
                    proto = np.int64(a[b])
                elif typ == 3 and m >= 4:
                    src_hi = np.int64(0)
                    src_lo = _be32(a, b)
                    have_src = True
                elif typ == 4 and m >= 4:
                    dst_hi = np.int64(0)
                    dst_lo = _be32(a, b)
                    have_dst = True
                elif typ == 5 and m >= 16:
                    src_hi = _be64(a, b)
                    src_lo = _be64(a, b + 8)
                    have_src = True
                elif typ == 6 and m >= 16:
                    dst_hi = _be64(a, b)
                    dst_lo = _be64(a, b + 8)
                    have_dst = True
                elif typ == 7 and m >= 2:
                    sport = _be16(a, b)
                elif typ == 8 and m >= 2:
                    dport = _be16(a, b)
                elif typ == 9 and m >= 4:
                    sec = _be32(a, b)
                elif typ == 10 and m >= 4:
                    usec = _be32(a, b)
                elif typ == 11 and m >= 1:
                    ptype = np.int64(a[b])
                elif typ == 12 and m >= 4:
                    capt = _be32(a, b)
                elif typ == 12 and m >= 2:
                    capt = _be16(a, b)
                elif typ == 15:
                    ps = b
                    pe = b + m
                elif typ == 16:
                    comp = True
            p += ln
        st[X_HEP_V3] += 1
        if fam == 10 or fam == 24 or fam == 28 or fam == 30:
            fam = np.int64(6)
        elif fam == 2:
            fam = np.int64(4)
        elif src_hi != 0 or dst_hi != 0:
            fam = np.int64(6)
        else:
            fam = np.int64(4)
    else:
        hl = hep2_len(a, s, e)
        if hl < 0:
            st[XB + R_HEP_BAD] += e - s
            return R_HEP_BAD
        v = a[s]
        proto = np.int64(a[s + 3])
        have_src = True
        have_dst = True
        sport = _be16(a, s + 4)
        dport = _be16(a, s + 6)
        if a[s + 1] == 16:
            fam = np.int64(4)
            src_lo = _be32(a, s + 8)
            dst_lo = _be32(a, s + 12)
        else:
            fam = np.int64(6)
            src_hi = _be64(a, s + 8)
            src_lo = _be64(a, s + 16)
            dst_hi = _be64(a, s + 24)
            dst_lo = _be64(a, s + 32)
        t = s + a[s + 1]
        if v == 2:
            sec = _u32(a, t, False)
            usec = _u32(a, t + 4, False)
            capt = (np.int64(a[t + 9]) << 8) | np.int64(a[t + 8])
            st[X_HEP_V2] += 1
        else:
            st[X_HEP_V1] += 1
        ps = s + hl
        pe = e
        ptype = np.int64(1)
    if ptype != -1 and ptype != 1:
        st[XB + R_HEP_NOT_SIP] += e - s
        return R_HEP_NOT_SIP
    if ps < 0:
        if comp:
            st[XB + R_HEP_COMPRESSED] += e - s
            return R_HEP_COMPRESSED
        st[XB + R_HEP_BAD] += e - s
        return R_HEP_BAD
    if not (have_src and have_dst):
        st[XB + R_HEP_BAD] += e - s
        return R_HEP_BAD
    if sec >= 0:
        ts = sec * 1_000_000_000 + usec * 1000
    else:
        ts = ts_pkt
        st[X_HEP_NOTIME] += 1
    sid = _addr_id(ak, av, alist, st, src_hi, src_lo, fam)
    did = _addr_id(ak, av, alist, st, dst_hi, dst_lo, fam)
    # a HEP copy beside the packet it copies (a proxy host tracing to Homer, captured on the
    # host) is a duplicate of it (.dedup): checked, with no IP id of its own
    mode = st[X_DEDUP]
    ipid = st[X_IPID]
    st[X_DEDUP] = DEDUP_CHECK
    st[X_IPID] = HEP_IPID
    if proto == 6:
        good, bad = _emit_span(a, ps, pe, sid, did, sport, dport, TR_TCP, frame, ts, st, I,
                               O, V, D, dl, scr, hs, he)
        code = C_PARSED if good > 0 else (R_HEP_NOT_SIP if bad <= 0 else bad)
        n_ok = good
    else:
        c, _h, _c = _emit(a, ps, pe, False, sid, did, sport, dport, TR_UDP, frame, ts, pe - ps,
                          st, I, O, V, D, dl, scr, hs, he)
        code = C_PARSED if c == 1 else (R_HEP_NOT_SIP if c == 0 else c)
        n_ok = 1 if c == 1 else 0
    st[X_DEDUP] = mode
    st[X_IPID] = ipid
    if n_ok > 0:
        st[X_HEP_MSGS] += n_ok
        _agent(st, capt, ts_pkt - ts)
    elif code == R_HEP_NOT_SIP:
        st[XB + R_HEP_NOT_SIP] += e - s
    return code
