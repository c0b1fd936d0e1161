"""The grammar of one SIP header value, as :mod:`~sipperf.ingest.capture.sipmsg` reads it: the
first element of a list (split outside quotes and ``<>``), blank and strip, a ``;name=value``
parameter, a name-addr's URI and parameters, a bounded unsigned integer.

Each helper works on a byte array and a span ``[s, e)`` and returns spans, never copies; the
value lives either in the packet or, once unfolded, in the scratch array (:func:`_src` picks
which).  All are inlined into their callers (``inline="always"``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .primitives import _at, _lower, _ws


@njit(cache=True, inline="always")
def _next_top(a, s, e, sep):
    """End of the first element of a[s:e] split at ``sep`` outside quotes and <> (or e)."""
    # fast path: no quote or angle bracket before the separator
    for i in range(s, e):
        c = _at(a, i)
        if c == sep:
            return i
        if c == 34 or c == 60 or c == 62:
            break
    else:
        return e
    quoted = False
    angle = False
    esc = False
    for i in range(s, e):
        c = _at(a, i)
        if quoted:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 60:
            angle = True
        elif c == 62:
            angle = False
        elif c == sep and not angle:
            return i
    return e


@njit(cache=True, inline="always")
def _blank(a, s, e):
    for i in range(s, e):
        if not _ws(_at(a, i)):
            return False
    return True


@njit(cache=True, inline="always")
def _strip(a, s, e):
    while s < e and _ws(_at(a, s)):
        s += 1
    while e > s and _ws(_at(a, e - 1)):
        e -= 1
    return s, e


@njit(cache=True, inline="always")
def _param(a, s, e, name, nlen):
    """Span of the value of ``;name=value`` in _at(a, s:e) (first piece skipped), or (-1, -1)."""
    p = _next_top(a, s, e, 59)
    while p < e:
        q = _next_top(a, p + 1, e, 59)
        # piece _at(a, p+1:q): key [= value]
        eq = -1
        for i in range(p + 1, q):
            if _at(a, i) == 61:
                eq = i
                break
        ke = q if eq < 0 else eq
        ks, ke = _strip(a, p + 1, ke)
        if ke - ks == nlen:
            ok = True
            for i in range(nlen):
                if _lower(_at(a, ks + i)) != name[i]:
                    ok = False
                    break
            if ok:
                if eq < 0:
                    return -1, -1
                vs, ve = _strip(a, eq + 1, q)
                if ve == vs:
                    return -1, -1
                return vs, ve
        p = q
    return -1, -1


@njit(cache=True, inline="always")
def _name_addr(a, s, e):
    """(uri_s, uri_e, params_s, params_e) of a From/To/Contact value; uri_s = -1 if empty."""
    quoted = False
    esc = False
    for i in range(s, e):
        c = _at(a, i)
        if quoted:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 60:
            j = -1
            for k in range(i + 1, e):
                if _at(a, k) == 62:
                    j = k
                    break
            if j < 0:
                us, ue = _strip(a, i + 1, e)
                return (us if ue > us else -1), ue, e, e
            us, ue = _strip(a, i + 1, j)
            return (us if ue > us else -1), ue, j + 1, e
    k = -1
    for i in range(s, e):
        if _at(a, i) == 59:
            k = i
            break
    if k < 0:
        us, ue = _strip(a, s, e)
        return (us if ue > us else -1), ue, e, e
    us, ue = _strip(a, s, k)
    return (us if ue > us else -1), ue, k, e


@njit(cache=True, inline="always")
def _u32v(a, s, e, limit):
    """1*DIGIT not above limit, else -1."""
    if e <= s:
        return -1
    v = np.int64(0)
    over = False
    for i in range(s, e):
        c = _at(a, i)
        if c < 48 or c > 57:
            return -1
        if not over:
            v = v * 10 + (c - 48)
            if v > limit:
                over = True
    return -1 if over else v


@njit(cache=True, inline="always")
def _src(a, scr, hsrc, k):
    return scr if hsrc[k] else a
