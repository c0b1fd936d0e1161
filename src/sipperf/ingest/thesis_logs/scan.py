"""Single-pass byte tokenizer for thesis-format log blocks (numba), used by :mod:`.read`.

One compiled loop over a padded block finds each line, decides whether it is a receive or a
send instrumentation line (same structural test as the documented format: the last 8 resp. 4
``=`` of the line carry the keys) and reads its numbers, writing into preallocated arrays.  It
reproduces, byte for byte, the rules of the earlier vectorised numpy parser (8-byte SWAR digit
loads, clipped literal checks), so the output is identical; see :mod:`.read` for the format.

numba is a hard dependency of the fast path: importing this module without it fails loudly.
"""
from __future__ import annotations

import numba as nb  # noqa: F401  (required: pinned in requirements)
import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

_NL8 = np.uint64(0x0A0A0A0A0A0A0A0A)
_EQ8 = np.uint64(0x3D3D3D3D3D3D3D3D)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)

_PARSE_TIME = np.frombuffer(b" parse_time", np.uint8)
_NOW = np.frombuffer(b" now", np.uint8)
_CALLID = np.frombuffer(b" callid", np.uint8)
_METHOD_ID = np.frombuffer(b" method_id", np.uint8)
_RK_NOW = np.frombuffer(b"ramekris now", np.uint8)
_IP_OUT = np.frombuffer(b" ip_out", np.uint8)
_REQUEST = np.frombuffer(b" request ", np.uint8)


@njit(cache=True, inline="always")
def _match(b, pos, lit):
    """buf[pos:pos+len(lit)] == lit, pos clipped like the numpy version."""
    nw = b.shape[0] - 7
    L = lit.shape[0]
    p = pos
    hi = nw - 1 - L
    if p > hi:
        p = hi
    if p < 0:
        p = 0
    for i in range(L):
        if b[p + i] != lit[i]:
            return False
    return True


@njit(cache=True, inline="always")
def _match1(b, pos, c):
    nw = b.shape[0] - 7
    p = pos
    hi = nw - 2
    if p > hi:
        p = hi
    if p < 0:
        p = 0
    return b[p] == c


@njit(cache=True, inline="always")
def _digits(b, end, n):
    """Value and validity of the n (0..8) characters ending at ``end`` (SWAR semantics)."""
    nw = b.shape[0] - 7
    j = end - 8
    if j < 0:
        j += nw
    v = np.int64(0)
    ok = True
    for i in range(8 - n, 8):
        c = b[j + i]
        if c < 48 or c > 57:
            ok = False
        v = v * 10 + (c & 15)
    return v, ok


@njit(cache=True, inline="always")
def _parse_int(b, start, end):
    neg = _match1(b, start, 45)
    s = start + (1 if neg else 0)
    n = end - s
    ok = n >= 1 and n <= 16
    if ok:
        nn = n
        e = end
    else:
        nn = 1
        e = s + 1
    lo, ok1 = _digits(b, e, min(nn, 8))
    k = nn - 8
    if k < 0:
        k = 0
    hi, ok2 = _digits(b, e - 8, k)
    ok = ok and ok1 and ok2
    val = hi * 100_000_000 + lo
    return (-val if neg else val), ok


@njit(cache=True, inline="always")
def _parse_lf_ns(b, start, end):
    has_dot = _match1(b, end - 7, 46)
    iend = end - 7 if has_dot else end
    ival, ok = _parse_int(b, start, iend)
    fval, fok = _digits(b, iend + 4, 3)
    neg = _match1(b, start, 45)
    frac = fval if has_dot else 0
    ns = ival * 1000 + (-frac if neg else frac)
    return ns, ok and (fok or not has_dot)


@njit(cache=True, inline="always")
def _next_space(b, p, end):
    for q in range(p + 1, end):
        if b[q] == 32:
            return q
    return end


@njit(cache=True, nogil=True)
def scan_block(b, w, pad, n_lines, eqbuf):
    """Tokenize a padded block ``b`` (uint8) with ``n_lines`` newlines; ``w`` is its unaligned
    uint64 view (``w[p]`` = bytes p..p+7, little-endian) for the 8-bytes-at-a-time line search.

    Returns (starts, ends, kind, iv, ok): kind 0 = other, 1 = receive, 2 = send; ``iv`` int64
    (n_lines, 12) fields; ``ok`` bool (n_lines, 10) validity flags (layout in :mod:`.read`).
    ``eqbuf`` is scratch (int64, >= 8).
    """
    starts = np.empty(n_lines, np.int64)
    ends = np.empty(n_lines, np.int64)
    kind = np.zeros(n_lines, np.int8)
    iv = np.zeros((n_lines, 12), np.int64)
    ok = np.zeros((n_lines, 10), np.bool_)
    n = b.shape[0]
    li = 0
    st = pad
    p = pad
    while li < n_lines:
        # find the newline, remembering the last 8 '=' positions (ring)
        # 8 bytes at a time: exact per-byte masks (0x80 where the byte is '\n' resp. '=')
        cnt = 0
        q = st
        while True:
            x = w[q]
            xn = x ^ _NL8
            xe = x ^ _EQ8
            zn = ~(((xn & _LOW7) + _LOW7) | xn | _LOW7)
            ze = ~(((xe & _LOW7) + _LOW7) | xe | _LOW7)
            if zn != 0:
                k = trailing_zeros(zn) >> 3  # first newline in this word
                ze &= (np.uint64(1) << np.uint64(8 * k)) - np.uint64(1)
                while ze != 0:
                    eqbuf[cnt & 7] = q + (trailing_zeros(ze) >> 3)
                    cnt += 1
                    ze &= ze - np.uint64(1)
                q += k
                break
            while ze != 0:
                eqbuf[cnt & 7] = q + (trailing_zeros(ze) >> 3)
                cnt += 1
                ze &= ze - np.uint64(1)
            q += 8
        nl = q
        en = nl
        if en > st and b[en - 1] == 13:
            en -= 1
        starts[li] = st
        ends[li] = en
        is_r = False
        if cnt >= 8:
            e0 = eqbuf[(cnt - 8) & 7]
            e1 = eqbuf[(cnt - 7) & 7]
            e2 = eqbuf[(cnt - 6) & 7]
            e3 = eqbuf[(cnt - 5) & 7]
            e4 = eqbuf[(cnt - 4) & 7]
            e5 = eqbuf[(cnt - 3) & 7]
            e6 = eqbuf[(cnt - 2) & 7]
            e7 = eqbuf[(cnt - 1) & 7]
            if (_match(b, e0 - 11, _PARSE_TIME) and _match(b, e4 - 4, _NOW)
                    and _match(b, e5 - 7, _CALLID) and _match(b, e7 - 10, _METHOD_ID)):
                is_r = True
                kind[li] = 1
                v, o = _parse_lf_ns(b, e0 + 1, e1 - 10)       # wait_time
                iv[li, 0] = v
                ok[li, 0] = o
                v, o = _parse_lf_ns(b, e1 + 1, e2 - 11)       # stack_time
                iv[li, 1] = v
                ok[li, 1] = o
                v, o = _parse_lf_ns(b, e2 + 1, e3 - 14)       # sock_recvtime
                iv[li, 2] = v
                ok[li, 2] = o
                v, o = _parse_lf_ns(b, e3 + 1, e4 - 4)        # now
                iv[li, 3] = v
                ok[li, 3] = o
                now_end = _next_space(b, e4, en)
                v, o = _parse_int(b, e4 + 1, now_end)
                iv[li, 4] = v
                ok[li, 4] = o
                v, o = _parse_int(b, e6 + 1, e7 - 10)         # cseq
                iv[li, 5] = v
                ok[li, 5] = o
                v, o = _parse_int(b, e7 + 1, en)              # method_id
                iv[li, 6] = v
                ok[li, 6] = o
                ok[li, 7] = _match(b, now_end, _REQUEST)
                v, o = _parse_int(b, now_end + 9, e5 - 7)     # request value
                iv[li, 7] = v
                ok[li, 7] = ok[li, 7] and o
                src_end = e0 - 11
                sp = -1
                for r in range(src_end - 1, -1, -1):
                    if b[r] == 32:
                        sp = r
                        break
                if sp < 0:
                    for r in range(n):
                        if b[r] == 32:
                            sp = r
                            break
                v, o = _parse_int(b, sp + 1, src_end)
                iv[li, 8] = v
                cs = e5 + 1
                if _match1(b, cs, 46):
                    cs += 1
                iv[li, 9] = cs
                iv[li, 10] = e6 - 5
        if not is_r and cnt >= 4:
            f0 = eqbuf[(cnt - 4) & 7]
            f1 = eqbuf[(cnt - 3) & 7]
            f2 = eqbuf[(cnt - 2) & 7]
            f3 = eqbuf[(cnt - 1) & 7]
            if _match(b, f0 - 12, _RK_NOW) and _match(b, f1 - 7, _IP_OUT) and _match(b, f2 - 7, _CALLID):
                kind[li] = 2
                v, o = _parse_int(b, f0 + 1, f1 - 7)          # now
                iv[li, 0] = v
                ok[li, 0] = o
                ipo_end = _next_space(b, f1, en)
                v, o = _parse_int(b, f1 + 1, ipo_end)         # ip_out (duration)
                iv[li, 1] = v
                ok[li, 1] = o
                ok[li, 2] = _match(b, ipo_end, _REQUEST)
                v, o = _parse_int(b, ipo_end + 9, f2 - 7)     # request value
                iv[li, 2] = v
                ok[li, 3] = o
                cs = f2 + 1
                if _match1(b, cs, 46):
                    cs += 1
                iv[li, 3] = cs
                iv[li, 4] = f3 - 5
                q0 = f3 + 1
                if _match1(b, q0, 46):
                    q0 += 1
                cseq_en = _next_space(b, f3, en)
                v, o = _parse_int(b, q0, cseq_en)
                iv[li, 5] = v
                ok[li, 4] = o
                iv[li, 6] = cseq_en
        li += 1
        st = nl + 1
    return starts, ends, kind, iv, ok


@njit(cache=True)
def gather(b, start, end, wd):
    """(n, wd) uint8 rows of ``b[start:end]``, cut at ``wd`` bytes and NUL padded."""
    n = start.shape[0]
    out = np.zeros((n, wd), np.uint8)
    for i in range(n):
        s = start[i]
        ln = end[i] - s
        if ln > wd:
            ln = wd
        for k in range(ln):
            out[i, k] = b[s + k]
    return out

