"""The row writer: the columns of one SIP message's row from the header spans
:func:`.sip.parse_sip` found.

A row is ``I[:, r]`` (the integer columns, ``NULL`` = -1 where nullable) and, per string
column ``c``, the bytes ``D[c, O[c, r]:O[c, r + 1]]`` with ``V[c, r]`` = 1 (0 for a null) --
the offsets/validity/data layout of an Arrow string array, filled in place.
:func:`.sip._emit` adds the packet's own columns (frame, time, addresses, ports, size).

Inlined into :func:`.sip.parse_sip` at Numba IR level (``inline="always"``), like the small
helpers: a call with a dozen array arguments costs more than the work of most of them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import (H_CALLID, H_CONTACT, H_CORR0, H_FROM, H_MAXFWD, H_RETRY, H_SERVER, H_TO,
                     H_UA, H_VIA, I_CSEQ, I_MAXFWD, I_NONASCII, I_RETRY, I_STATUS, I_VIACNT, NH,
                     S_BRANCH, S_CALLID, S_CONTACT, S_CORR, S_CSEQM, S_FROMTAG, S_FROMURI,
                     S_METHOD, S_TOTAG, S_TOURI, S_UA, U32_MAX)
from .primitives import _any_high, _copy
from .values import _name_addr, _next_top, _param, _src, _u32v


_TAG = np.frombuffer(b"tag", np.uint8).copy()
_BRANCH = np.frombuffer(b"branch", np.uint8).copy()


@njit(cache=True, inline="always")
def _put(D, O, V, dl, c, r, src, s, e):
    """Write src[s:e] as row r of string column c."""
    n = e - s
    base = dl[c]
    _copy(D, c * D.shape[1] + base, src, s, n)
    dl[c] = base + n
    O[c, r + 1] = base + n
    V[c, r] = 1


@njit(cache=True, inline="always")
def _null(O, V, dl, c, r):
    O[c, r + 1] = dl[c]
    V[c, r] = 0


@njit(cache=True, inline="always")
def _write_row(a, s, kind, x, r, I, O, V, D, dl, scr, hs, he, hsrc, hlen, cseq, status, via_count,
               cv, cm_s, cm_e):
    """The row's columns from the header spans found by :func:`.sip.parse_sip` (kept apart for
    reading; inlined into it at Numba IR level, see the module docstring)."""
    I[I_CSEQ, r] = cseq
    I[I_STATUS, r] = status
    I[I_VIACNT, r] = via_count
    mf = -1
    if hs[H_MAXFWD] >= 0:
        mf = _u32v(_src(a, scr, hsrc, H_MAXFWD), hs[H_MAXFWD], he[H_MAXFWD], U32_MAX)
    I[I_MAXFWD, r] = mf
    ra = -1
    if hs[H_RETRY] >= 0:
        v = _src(a, scr, hsrc, H_RETRY)
        q = hs[H_RETRY]
        qe = he[H_RETRY]
        while q < qe and v[q] >= 48 and v[q] <= 57:
            q += 1
        if q > hs[H_RETRY]:
            c = v[q] if q < qe else 32
            if c == 32 or c == 9 or c == 40 or c == 59:
                ra = _u32v(v, hs[H_RETRY], q, U32_MAX)
    I[I_RETRY, r] = ra
    hi = _any_high(a, s, s + hlen)
    if hs[H_CALLID] >= 0:
        _put(D, O, V, dl, S_CALLID, r, _src(a, scr, hsrc, H_CALLID), hs[H_CALLID], he[H_CALLID])
    else:
        _null(O, V, dl, S_CALLID, r)
    if cm_s >= 0:
        _put(D, O, V, dl, S_CSEQM, r, cv, cm_s, cm_e)
    else:
        _null(O, V, dl, S_CSEQM, r)
    if kind == 1:
        _put(D, O, V, dl, S_METHOD, r, a, s, x)
    else:
        _null(O, V, dl, S_METHOD, r)
    bs = -1
    be = -1
    if hs[H_VIA] >= 0:
        v = _src(a, scr, hsrc, H_VIA)
        bs, be = _param(v, hs[H_VIA], he[H_VIA], _BRANCH, 6)
        if bs >= 0:
            q = bs
            while q < be and not (v[q] == 44 or v[q] == 32 or v[q] == 9 or v[q] == 59):
                q += 1
            be = q
            if be == bs:
                bs = -1
        if bs >= 0:
            _put(D, O, V, dl, S_BRANCH, r, v, bs, be)
    if bs < 0:
        _null(O, V, dl, S_BRANCH, r)
    for hid, cu, ct in ((H_FROM, S_FROMURI, S_FROMTAG), (H_TO, S_TOURI, S_TOTAG)):
        us = -1
        ts = -1
        if hs[hid] >= 0:
            v = _src(a, scr, hsrc, hid)
            us, ue, ps, pe = _name_addr(v, hs[hid], he[hid])
            ts, te = _param(v, ps, pe, _TAG, 3)
            if us >= 0:
                _put(D, O, V, dl, cu, r, v, us, ue)
            if ts >= 0:
                _put(D, O, V, dl, ct, r, v, ts, te)
        if us < 0:
            _null(O, V, dl, cu, r)
        if ts < 0:
            _null(O, V, dl, ct, r)
    us = -1
    if hs[H_CONTACT] >= 0:
        v = _src(a, scr, hsrc, H_CONTACT)
        q = hs[H_CONTACT]
        qe = he[H_CONTACT]
        if not (qe - q == 1 and v[q] == 42):
            fe = _next_top(v, q, qe, 44)
            us, ue, ps, pe = _name_addr(v, q, fe)
            if us >= 0:
                _put(D, O, V, dl, S_CONTACT, r, v, us, ue)
    if us < 0:
        _null(O, V, dl, S_CONTACT, r)
    done = False
    for k in range(H_CORR0, NH):
        if hs[k] >= 0 and he[k] > hs[k]:
            _put(D, O, V, dl, S_CORR, r, _src(a, scr, hsrc, k), hs[k], he[k])
            done = True
            break
    if not done:
        _null(O, V, dl, S_CORR, r)
    if hs[H_UA] >= 0 and he[H_UA] > hs[H_UA]:
        _put(D, O, V, dl, S_UA, r, _src(a, scr, hsrc, H_UA), hs[H_UA], he[H_UA])
    elif hs[H_SERVER] >= 0 and he[H_SERVER] > hs[H_SERVER]:
        _put(D, O, V, dl, S_UA, r, _src(a, scr, hsrc, H_SERVER), hs[H_SERVER], he[H_SERVER])
    else:
        _null(O, V, dl, S_UA, r)
    I[I_NONASCII, r] = 1 if hi else 0
