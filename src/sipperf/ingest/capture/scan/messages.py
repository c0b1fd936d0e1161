"""SIP messages cut from a byte span: the Content-Length of a header block (:func:`_clen`),
whether bytes begin with a SIP start line (:func:`_line_start_sip`), and every message of a
span whose end is known (:func:`_emit_span`: a WebSocket message, the payload of a HEP
packet that carried TCP).

Inside a span the messages are framed as on a TCP stream (RFC 3261 §18.3: the header block,
then Content-Length bytes of body); a message without Content-Length ends where the span ends
(RFC 7118 §5 makes it optional over WebSocket, the frame delimits the message) unless a SIP
start line follows its header block at once (a body-less message, then the next one).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import I31_MAX
from .primitives import _lower, _ws
from .sip import _emit, _start_line, header_end


@njit(cache=True)
def _line_start_sip(a, s, e):
    """True if a[s:e] begins with a complete SIP start line (a LF present) -> 1, could still
    become one (no LF yet, short) -> 2, cannot -> 0."""
    eol = -1
    for i in range(s, min(e, s + 4096)):
        if a[i] == 10:
            eol = i
            break
    if eol < 0:
        return 2 if e - s < 4096 else 0
    k, _x = _start_line(a, s, eol + 1)
    return 1 if k != 0 else 0


_CLEN_NAME = np.frombuffer(b"content-length", np.uint8).copy()


@njit(cache=True)
def _clen(a, s, hend):
    """Content-Length of the header block a[s:hend] per sipmsg.content_length, -1 if none."""
    p = s
    while p < hend and a[p] != 10:
        p += 1
    p += 1
    cvs = -1
    cve = -1
    cur = False
    while p < hend:
        lf = hend
        for q in range(p, hend):
            if a[q] == 10:
                lf = q
                break
        if lf > p and (a[p] == 32 or a[p] == 9) and cur:
            cve = lf
            p = lf + 1
            continue
        if cur:
            break
        le = lf
        if le > p and a[le - 1] == 13:
            le -= 1
        if le == p:
            break
        colon = -1
        for q in range(p, le):
            if a[q] == 58:
                colon = q
                break
        if colon > p:
            ne = colon
            while ne > p and _ws(a[ne - 1]):
                ne -= 1
            n = ne - p
            if (n == 1 and _lower(a[p]) == 108) or n == 14:
                okk = True
                if n == 14:
                    for q in range(14):
                        if _lower(a[p + q]) != _CLEN_NAME[q]:
                            okk = False
                            break
                if okk:
                    cur = True
                    cvs = colon + 1
                    cve = lf
        p = lf + 1
    if not cur:
        return -1
    # value: unfold-free digits check (folded Content-Length: strip and join like sipmsg)
    digits = np.int64(0)
    seen = False
    state = 0  # 0 leading ws, 1 digits, 2 trailing ws
    for q in range(cvs, cve):
        c = a[q]
        if c == 32 or c == 9 or c == 13 or c == 10:
            if state == 1:
                state = 2
            continue
        if c < 48 or c > 57 or state == 2:
            return -1
        state = 1
        seen = True
        if digits <= I31_MAX:
            digits = digits * 10 + (c - 48)
    if not seen or digits > I31_MAX:
        return -1
    return digits


@njit(cache=True)
def _emit_span(a, s, e, src_id, dst_id, sport, dport, transport, frame, ts, st, I, O, V, D,
               dl, scr, hs, he):
    """Every SIP message of the span a[s:e] (framed as the module docstring says), one row
    each.  Returns (rows written, first failure code: 0 none, -1 not SIP, else R_MAL_*)."""
    h = s
    good = 0
    bad = 0
    while h < e:
        while h < e and (a[h] == 13 or a[h] == 10):
            h += 1
        if h >= e:
            break
        hend = header_end(a, h, e)
        mlen = e - h
        if hend >= 0:
            clen = _clen(a, h, hend)
            if clen >= 0:
                mlen = min(hend - h + clen, e - h)
            elif hend < e and _line_start_sip(a, hend, e) == 1:
                mlen = hend - h
        code, _hl, _cl = _emit(a, h, h + mlen, True, src_id, dst_id, sport, dport, transport,
                               frame, ts, mlen, st, I, O, V, D, dl, scr, hs, he)
        if code == 1:
            good += 1
        elif code == 0:
            if bad == 0:
                bad = -1
            break  # not SIP: the rest of the span cannot be framed
        elif bad == 0:
            bad = code
        h += mlen
    return good, bad
