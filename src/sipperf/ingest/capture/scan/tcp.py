"""TCP: one byte stream per flow, cut into SIP messages by Content-Length.

A segment's payload is placed by sequence number (:func:`_tcp`): retransmitted and overlapping
bytes are dropped, a gap discards the partial message; the new bytes are appended to the flow's
region of the shared arena (``fs`` row: ``F_OFF``/``F_CAP``/``F_HEAD``/``F_LEN``; a region
that is too small moves to the arena's end at double the size; when the arena runs short,
:func:`.records.scan` repacks it with :func:`compact_arena` before the next packet).  Complete messages are
then cut off the front of the stream: skip CRLFs, find a start line (bytes that are not one
-- a capture that begins mid-message -- are discarded up to the next start line and counted),
the header block, its Content-Length (:func:`_clen`), and hand each message to
:func:`.sip._emit`.

Accounting: a segment whose bytes are still waiting for the rest of their message is pending
(``F_PEND``) and is counted with that message's outcome; at the end of the capture the
remaining ones are "fragment/segment of an incomplete message" (:func:`.records.pending_frames`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import (C_PARSED, F_CAP, F_HEAD, F_LEN, F_NEXT, F_OFF, F_PEND, F_SEEN, I31_MAX,
                     MAX_BODY, MAX_HDR, R_INCOMPLETE, R_TCP_EMPTY, R_TCP_GAP, R_TCP_KEEPALIVE,
                     R_TCP_NOT_SIP, R_TCP_RETRANS, R_TCP_TOO_BIG, ST_ARENA, ST_DISCARD_BYTES,
                     ST_MAXPEND, ST_MIDSTREAM)
from .primitives import _lower, _ws
from .sip import _emit, _start_line, header_end


@njit(cache=True)
def _tcp(fs, f, arena, a, ps, pe, seq, syn, w, src_id, dst_id, sport, dport, frame, ts,
         st, cnt, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len, name_id):
    """One TCP segment (payload a[ps:pe]) of flow f: its new bytes appended to the flow's
    stream by sequence number, then the complete messages at the stream's front emitted
    (framed by Content-Length), and the segment counted with their outcome or left pending."""
    n = pe - ps
    if fs[f, F_SEEN] == 0 or syn:
        if fs[f, F_SEEN] == 0 and not syn:
            st[ST_MIDSTREAM] += 1
        fs[f, F_SEEN] = 1
        fs[f, F_NEXT] = (seq + 1) & 0xFFFFFFFF if syn else seq
        fs[f, F_LEN] = 0
        fs[f, F_HEAD] = 0
        if fs[f, F_PEND] > 0:
            cnt[R_INCOMPLETE] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
    if n <= 0:
        cnt[R_TCP_EMPTY] += w
        return
    # place the payload by sequence number: drop what was seen, a gap loses the partial message
    nxt = fs[f, F_NEXT]
    delta = (seq - nxt) & 0xFFFFFFFF
    if delta >= 0x80000000:
        skip = (nxt - seq) & 0xFFFFFFFF
        if skip >= n:
            cnt[R_TCP_RETRANS] += w
            return
        ps += skip
        n -= skip
        seq = nxt
    elif delta != 0:
        if fs[f, F_LEN] > 0 or fs[f, F_PEND] > 0:
            cnt[R_TCP_GAP] += fs[f, F_PEND]
            st[ST_DISCARD_BYTES] += fs[f, F_LEN]
            fs[f, F_PEND] = 0
            fs[f, F_LEN] = 0
            fs[f, F_HEAD] = 0
    fs[f, F_NEXT] = (seq + n) & 0xFFFFFFFF
    # append to the flow's region (the caller guaranteed room at the arena's end)
    ln = fs[f, F_LEN]
    if ln == 0:
        fs[f, F_HEAD] = 0
    if fs[f, F_HEAD] + ln + n > fs[f, F_CAP]:
        c = 256
        while c < 2 * (ln + n):
            c *= 2
        o = st[ST_ARENA]
        src = fs[f, F_OFF] + fs[f, F_HEAD]
        arena[o:o + ln] = arena[src:src + ln]
        fs[f, F_OFF] = o
        fs[f, F_CAP] = c
        fs[f, F_HEAD] = 0
        st[ST_ARENA] = o + c
    b0 = fs[f, F_OFF] + fs[f, F_HEAD]
    arena[b0 + ln:b0 + ln + n] = a[ps:ps + n]
    ln += n
    if ln > st[ST_MAXPEND]:
        st[ST_MAXPEND] = ln
    cur_good = False
    cur_bad = 0
    crlf_only = True
    for i in range(ps, ps + n):
        if a[i] != 13 and a[i] != 10:
            crlf_only = False
            break
    # extract complete messages from arena[b0 : b0+ln] (the stream's last n bytes are new)
    h = b0
    end = b0 + ln
    while True:
        while h < end and (arena[h] == 13 or arena[h] == 10):
            h += 1
        if h >= end:
            break
        ok = _line_start_sip(arena, h, end)
        if ok == 2:
            break
        if ok == 0:
            # not a start line: discard up to the next line that starts one
            j = h
            found = -1
            last_lf = -1
            while j < end:
                if arena[j] == 10:
                    last_lf = j
                    k = _line_start_sip(arena, j + 1, end)
                    if k == 1:
                        found = j + 1
                        break
                    if k == 2 and j + 1 < end:
                        found = j + 1
                        break
                j += 1
            cut = found
            if cut < 0:
                cut = (last_lf + 1) if last_lf >= 0 else end
                if end - cut >= 4096:
                    cut = end
            st[ST_DISCARD_BYTES] += cut - h
            h = cut
            if fs[f, F_PEND] > 0 and h - b0 >= ln - n:
                cnt[R_TCP_NOT_SIP] += fs[f, F_PEND]
                fs[f, F_PEND] = 0
            continue
        hend = header_end(arena, h, end)
        if hend < 0:
            if end - h > MAX_HDR:
                cnt[R_TCP_TOO_BIG] += fs[f, F_PEND]
                fs[f, F_PEND] = 0
                cur_bad = R_TCP_TOO_BIG
                st[ST_DISCARD_BYTES] += end - h
                h = end
            break
        # Content-Length of this header block
        clen = _clen(arena, h, hend, name_tab, name_len, name_id)
        if clen > MAX_BODY:
            cnt[R_TCP_TOO_BIG] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            cur_bad = R_TCP_TOO_BIG
            st[ST_DISCARD_BYTES] += hend - h
            h = hend
            continue
        mlen = hend - h + (clen if clen > 0 else 0)
        if end - h < mlen:
            break
        code, _hl, _cl = _emit(arena, h, h + mlen, True, src_id, dst_id, sport, dport, 1, frame,
                               ts, -1, st, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len,
                               name_id)
        if code == 1:
            cnt[C_PARSED] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            cur_good = True
        else:
            r = code if code > 1 else R_TCP_NOT_SIP
            cnt[r] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            if cur_bad == 0:
                cur_bad = r
        h += mlen
    fs[f, F_HEAD] += h - b0
    fs[f, F_LEN] = end - h
    if fs[f, F_LEN] == 0:
        fs[f, F_HEAD] = 0
    if cur_good:
        cnt[C_PARSED] += w
    elif cur_bad != 0:
        cnt[cur_bad] += w
    elif fs[f, F_LEN] > 0:
        fs[f, F_PEND] += w
    elif crlf_only:
        cnt[R_TCP_KEEPALIVE] += w
    else:
        cnt[R_TCP_NOT_SIP] += w


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
def _clen(a, s, hend, name_tab, name_len, name_id):
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
def compact_arena(fs, nflow, arena, extra):
    """A new arena holding every flow's pending bytes (each region sized to a power of two),
    with at least ``extra`` bytes free."""
    need = extra
    for f in range(nflow):
        if fs[f, F_LEN] > 0:
            c = 256
            while c < fs[f, F_LEN] * 2:
                c *= 2
            need += c
    size = 1 << 16
    while size < 2 * need:
        size *= 2
    na = np.empty(size, np.uint8)
    o = 0
    mx = 0
    for f in range(nflow):
        n = fs[f, F_LEN]
        if n > mx:
            mx = n
        if n > 0:
            c = 256
            while c < n * 2:
                c *= 2
            src = fs[f, F_OFF] + fs[f, F_HEAD]
            na[o:o + n] = arena[src:src + n]
            fs[f, F_OFF] = o
            fs[f, F_CAP] = c
            fs[f, F_HEAD] = 0
            o += c
        else:
            fs[f, F_OFF] = 0
            fs[f, F_CAP] = 0
            fs[f, F_HEAD] = 0
    return na, o, mx
