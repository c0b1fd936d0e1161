"""One SIP message -> one row: the start line, the header block (line by line, folded lines
unfolded into scratch, compact names, first occurrence wins, every Via element counted), the
malformed cases (CSeq, status, Call-ID), then the row (:mod:`.rows`).

The rules are those of :mod:`~sipperf.ingest.capture.sipmsg`, byte for byte
(tests/test_pcap_sipmsg.py compares the two on every fixture).  :func:`_emit` is what the
transports call: UDP with one datagram's payload (:mod:`.packet`), TCP with one
Content-Length-framed message (:mod:`.tcp`).
"""
from __future__ import annotations

import types

from numba import njit

from .dedup import _seen_before
from .layout import (H_CALLID, H_CLEN, H_CSEQ, H_VIA, I31_MAX, I_DPORT, I_DST, I_FRAME, I_IFACE,
                     I_SIZE, I_SPORT, I_SRC, I_TRANSPORT, I_TS, NAME_FIRST, NAME_ID, NAME_NEXT, NAME_TAB, NH, NS,
                     R_DUPLICATE, R_MAL_CALLID, R_MAL_CSEQ, R_MAL_STATUS, ST_NR, U32_MAX, X_DEDUP, X_IFACE)
from .primitives import _at, _find_lf, _lower
from .rows import _write_row
from .values import _blank, _next_top, _src, _u32v


@njit(cache=True, inline="always")
def _start_line(a, s, e):
    """(kind, x): kind 1 request (x = end of the method), 2 response (x = status), 0 not SIP."""
    n = e - s
    if n >= 8 and _at(a, s) == 83 and _at(a, s + 1) == 73 and _at(a, s + 2) == 80 and _at(a, s + 3) == 47 \
            and _at(a, s + 4) == 50 and _at(a, s + 5) == 46 and _at(a, s + 6) == 48 and _at(a, s + 7) == 32:
        if n < 11:
            return 0, 0
        st = 0
        for i in range(8, 11):
            c = _at(a, s + i)
            if c < 48 or c > 57:
                return 0, 0
            st = st * 10 + (c - 48)
        if n > 11:
            c = _at(a, s + 11)
            if not (c == 32 or c == 13 or c == 10):
                return 0, 0
        return 2, st
    # request line: up to the first LF (within 4096 bytes), or the whole message if shorter
    lim = min(e, s + 4096)
    eol = -1
    for i in range(s, lim):
        if _at(a, i) == 10:
            eol = i
            break
    if eol < 0:
        if n < 4096:
            eol = e
        else:
            return 0, 0
    le = eol
    if le > s and _at(a, le - 1) == 13:
        le -= 1
    # ends with " SIP/2.0", exactly two spaces, alphabetic method
    if le - s < 8:
        return 0, 0
    t = le - 8
    if not (_at(a, t) == 32 and _at(a, t + 1) == 83 and _at(a, t + 2) == 73 and _at(a, t + 3) == 80 and _at(a, t + 4) == 47
            and _at(a, t + 5) == 50 and _at(a, t + 6) == 46 and _at(a, t + 7) == 48):
        return 0, 0
    spaces = 0
    first = -1
    for i in range(s, le):
        if _at(a, i) == 32:
            spaces += 1
            if first < 0:
                first = i
    if spaces != 2 or first <= s:
        return 0, 0
    for i in range(s, first):
        c = _at(a, i) | 32
        if c < 97 or c > 122:
            return 0, 0
    return 1, first


@njit(cache=True)
def header_end(a, s, e):
    """Index just past the empty line ending the header block of a[s:e], or -1 (see sipmsg)."""
    i = s
    while i < e and a[i] != 10:
        i += 1
    while i < e:
        j = i + 1
        if j < e and a[j] == 13:
            j += 1
        if j < e and a[j] == 10:
            return j + 1
        if j >= e:
            return -1
        i = j
        while i < e and a[i] != 10:
            i += 1
    return -1


@njit(cache=True)
def _unfold_into(a, vs, ve, scr, sp):
    """Copy a raw header value _at(a, vs:ve) to scr[sp:], unfolded and stripped; returns (s, e)."""
    o = sp
    i = vs
    while i < ve:
        c = _at(a, i)
        if c == 10:
            while o > sp and (scr[o - 1] == 32 or scr[o - 1] == 9 or scr[o - 1] == 13):
                o -= 1
            i += 1
            while i < ve and (_at(a, i) == 32 or _at(a, i) == 9):
                i += 1
            scr[o] = 32
            o += 1
        else:
            scr[o] = c
            o += 1
            i += 1
    s = sp
    while s < o and (scr[s] == 32 or scr[s] == 9 or scr[s] == 13):
        s += 1
    while o > s and (scr[o - 1] == 32 or scr[o - 1] == 9 or scr[o - 1] == 13):
        o -= 1
    return s, o


@njit(cache=True, inline="always")
def _finish_value(a, cvs, cve, folded, scr, sp):
    """A raw header value a[cvs:cve] -> stripped span: in place, or unfolded into scr[sp:]."""
    if folded:
        vs, ve = _unfold_into(a, cvs, cve, scr, sp)
        return vs, ve, 1
    vs = cvs
    ve = cve
    while vs < ve and (a[vs] == 32 or a[vs] == 9 or a[vs] == 13):
        vs += 1
    while ve > vs and (a[ve - 1] == 32 or a[ve - 1] == 9 or a[ve - 1] == 13):
        ve -= 1
    return vs, ve, 0


@njit(cache=True, inline="always")
def _via_elements(v, vs, ve, hs, he, hsrc, src_flag, first):
    """Count the non-blank comma-separated values of a Via value v[vs:ve]; the first one of
    the top Via header becomes hs/he[H_VIA].  Returns the count."""
    simple = True
    for q in range(vs, ve):
        c = v[q]
        if c == 44 or c == 34 or c == 60:
            simple = False
            break
    if simple:
        if _blank(v, vs, ve):
            if first:
                hs[H_VIA] = -2
            return 0
        if first:
            hs[H_VIA] = vs
            he[H_VIA] = ve
            hsrc[H_VIA] = src_flag
        return 1
    n = 0
    q = vs
    while q <= ve:
        qe = _next_top(v, q, ve, 44)
        if not _blank(v, q, qe):
            n += 1
            if first:
                hs[H_VIA] = q
                he[H_VIA] = qe
                hsrc[H_VIA] = src_flag
                first = False
        q = qe + 1
    if first:
        hs[H_VIA] = -2  # the top Via header has no value: no branch
    return n


@njit(cache=True, _nrt=False)
def parse_sip(a, s, e, r, I, O, V, D, dl, scr, hs, he, framing):
    """Parse the SIP message _at(a, s:e) into row r (one pass over the start line and headers).

    Compiled without reference counting (``_nrt=False``; it allocates nothing): the array
    variables it selects between (``_src``: the message or the unfolding scratch) and its
    thirteen array arguments had cost some forty calls per message.

    Returns (code, header_len, content_length): code 1 = a row was written, 0 = not SIP,
    R_MAL_* = malformed (nothing written).  header_len as in sipmsg (e - s without a blank
    line); content_length -1 when absent or invalid.  ``hs``/``he`` hold NH starts, then NH
    ends... (scratch of 3*NH: start, end, in-scratch flag per header id)."""
    kind, x = _start_line(a, s, e)
    if kind == 0:
        return 0, 0, -1
    hsrc = he[NH:]
    for k in range(NH):
        hs[k] = -1
        hsrc[k] = 0
    via_count = 0
    sp = 0  # scratch fill
    hend = -1
    p = s
    while p < e and _at(a, p) != 10:
        p += 1
    p += 1
    cur = -1          # header id of the current header; -2 valid but not needed; -1 none
    cvs = 0
    cve = 0
    folded = False
    while True:
        # p: the start of a line (or >= e)
        end_hdr = False
        if p >= e:
            end_hdr = True
        else:
            c0 = _at(a, p)
            if c0 == 10:
                hend = p + 1
                end_hdr = True
            elif c0 == 13 and p + 1 < e and _at(a, p + 1) == 10:
                hend = p + 2
                end_hdr = True
            elif (c0 == 32 or c0 == 9) and cur != -1:
                lf = _find_lf(a, p, e)
                cve = lf
                folded = True
                p = lf + 1
                continue
        # finish the current header
        if cur >= 0:
            if cur == H_VIA:
                vs, ve, fl = _finish_value(a, cvs, cve, folded, scr, sp)
                if fl:
                    sp = ve
                via_count += _via_elements(scr if fl else a, vs, ve, hs, he, hsrc, fl, hs[H_VIA] == -1)
            elif hs[cur] == -1:
                vs, ve, fl = _finish_value(a, cvs, cve, folded, scr, sp)
                if fl:
                    sp = ve
                hs[cur] = vs
                he[cur] = ve
                hsrc[cur] = fl
        cur = -1
        folded = False
        if end_hdr:
            break
        # a header line: name, colon
        q = p
        ws_in = False
        ne = -1
        while q < e:
            c = _at(a, q)
            if c == 58 or c == 10:
                break
            if c == 32 or c == 9:
                if ne < 0:
                    ne = q
            elif ne >= 0:
                ws_in = True
            q += 1
        lf = q
        if q < e and _at(a, q) == 58:
            colon = q
            if ne < 0:
                ne = colon
            n = ne - p
            if n > 0 and not ws_in:
                cur = -2
                if n <= 24:
                    c1 = _lower(_at(a, p))
                    k = NAME_FIRST[n, c1] if c1 < 128 else -1
                    while k >= 0:
                        same = True
                        for t in range(1, n):
                            if _lower(_at(a, p + t)) != NAME_TAB[k, t]:
                                same = False
                                break
                        if same:
                            cur = NAME_ID[k]
                            break
                        k = NAME_NEXT[k]
                cvs = colon + 1
            lf = _find_lf(a, colon, e)
            cve = lf
        p = lf + 1
    # ---- fields
    status = -1
    if kind == 2:
        status = x
    err = 0
    if kind == 2 and (status < 100 or status > 699):
        err = R_MAL_STATUS
    if err == 0 and not (hs[H_CALLID] >= 0 and he[H_CALLID] > hs[H_CALLID]):
        err = R_MAL_CALLID
    cseq = -1
    cm_s = -1
    cm_e = -1
    cv = a
    if hs[H_CSEQ] < 0:
        if err == 0:
            err = R_MAL_CSEQ
    else:
        cv = _src(a, scr, hsrc, H_CSEQ)
        # bytes.split(): ASCII whitespace
        q = hs[H_CSEQ]
        qe = he[H_CSEQ]
        while q < qe and (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        t0 = q
        while q < qe and not (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        t1 = q
        cseq = _u32v(cv, t0, t1, U32_MAX) if t1 > t0 else -1
        if cseq < 0 and err == 0:
            err = R_MAL_CSEQ
        while q < qe and (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        if q < qe:
            cm_s = q
            while q < qe and not (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
                q += 1
            cm_e = q
    if err != 0:
        return err, 0, -1
    clen = -1
    if hs[H_CLEN] >= 0:
        clen = _u32v(_src(a, scr, hsrc, H_CLEN), hs[H_CLEN], he[H_CLEN], I31_MAX)
    hlen = (hend - s) if hend >= 0 else (e - s)
    _write_row(a, s, kind, x, r, I, O, V, D, dl, scr, hs, he, hsrc, hlen, cseq, status, via_count,
               cv, cm_s, cm_e)
    return 1, hlen, clen


@njit(cache=True)
def _emit(a, s, e, framing, src_id, dst_id, sport, dport, transport, frame, ts, size_udp,
          st, I, O, V, D, dl, scr, hs, he):
    """Parse a[s:e] and, if SIP and well formed, write row st[ST_NR]; returns (code, hlen, clen).
    A copy of a datagram read within the duplicate window (:mod:`.dedup`) writes no row: code
    R_DUPLICATE."""
    r = st[ST_NR]
    code, hlen, clen = parse_sip(a, s, e, r, I, O, V, D, dl, scr, hs, he, framing)
    if code == 1 and st[X_DEDUP] != 0 and _seen_before(a, s, e, src_id, dst_id, sport, dport, transport, ts, st):
        for c in range(NS):  # the row's string bytes are given back
            dl[c] = O[c, r]
        return R_DUPLICATE, hlen, clen
    if code == 1:
        I[I_IFACE, r] = st[X_IFACE]
        I[I_FRAME, r] = frame
        I[I_TS, r] = ts
        I[I_SPORT, r] = sport
        I[I_DPORT, r] = dport
        I[I_SRC, r] = src_id
        I[I_DST, r] = dst_id
        I[I_TRANSPORT, r] = transport
        if size_udp >= 0:
            I[I_SIZE, r] = size_udp
        else:
            I[I_SIZE, r] = hlen + (clen if clen > 0 else 0)
        st[ST_NR] = r + 1
    return code, hlen, clen


def _inline_twin(fn, name):
    """A copy of the compiled function ``fn`` inlined into its callers at Numba IR level (the
    same source, under its own name and cache entry)."""
    py = fn.py_func
    f = types.FunctionType(py.__code__, py.__globals__, name, py.__defaults__)
    f.__qualname__ = name
    return njit(cache=True, inline="always")(f)


#: the plain-UDP path's own copy of :func:`_emit`, inlined into :func:`.packet._packet`: _emit
#: has several callers (UDP, TCP, WebSocket, HEP), and LLVM then no longer inlines it by itself --
#: a call with a dozen array arguments cost the UDP path 7 % of its speed (the compiled pass on
#: 2 M packets: 0.95 M packets/s called, 1.01 M inlined).  Inlining :func:`parse_sip` as well
#: gives 1.08 M but makes the first compile 2.7 times as big (7.9 GB, 140 s): not taken.
_emit_udp = _inline_twin(_emit, "_emit_udp")
