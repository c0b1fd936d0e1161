"""SIP over WebSocket (RFC 7118) on a reassembled TCP stream: the HTTP Upgrade that starts a
connection, and the frames (RFC 6455 §5) after it.

* :func:`http_upgrade`: an HTTP request or response header block that asks for / grants
  ``Upgrade: websocket`` (the ``Sec-WebSocket-Protocol`` may name ``sip``; a WebSocket whose
  messages are not SIP is counted as such).
* :func:`ws_probe`: bytes that begin with a WebSocket data frame whose payload (unmasked)
  begins with a SIP start line: a connection whose upgrade is not in the capture.
* :func:`ws_run`: the frames of a stream, in place: a frame is unmasked in the arena when it is
  complete; a message in one frame is read where it lies, a fragmented one (FIN = 0, then
  continuation frames, control frames allowed between them) is gathered at the front of the
  stream's region first; control frames (close, ping, pong) are counted.  Each WebSocket
  message is a span of SIP messages (:func:`.messages._emit_span`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .layout import F_WS_ASM, F_WS_OP, F_WS_POS, MAX_BODY, TR_WS, X_WS_CTRL, X_WS_FRAGMENTED, \
    X_WS_MSGS, X_WS_MULTI
from .messages import _emit_span, _line_start_sip
from .primitives import _be16, _be64, _lower

_UPGRADE = np.frombuffer(b"upgrade", np.uint8).copy()
_WEBSOCKET = np.frombuffer(b"websocket", np.uint8).copy()


@njit(cache=True)
def _contains_ci(a, s, e, pat):
    n = pat.shape[0]
    for i in range(s, e - n + 1):
        ok = True
        for j in range(n):
            if _lower(a[i + j]) != pat[j]:
                ok = False
                break
        if ok:
            return True
    return False


@njit(cache=True)
def http_start(a, s, e):
    """1 if a[s:e] begins an HTTP request ("GET ") or response ("HTTP/"), 2 too short to
    say, 0 not."""
    if e - s < 5:
        g = (a[s] == 71 and (e - s < 2 or a[s + 1] == 69) and (e - s < 3 or a[s + 2] == 84)
             and (e - s < 4 or a[s + 3] == 32))
        h = (a[s] == 72 and (e - s < 2 or a[s + 1] == 84) and (e - s < 3 or a[s + 2] == 84)
             and (e - s < 4 or a[s + 3] == 80))
        return 2 if (g or h) else 0
    if a[s] == 71 and a[s + 1] == 69 and a[s + 2] == 84 and a[s + 3] == 32:
        return 1
    if a[s] == 72 and a[s + 1] == 84 and a[s + 2] == 84 and a[s + 3] == 80 and a[s + 4] == 47:
        return 1
    return 0


@njit(cache=True)
def http_upgrade(a, s, hend):
    """The header block a[s:hend] (request or response) carries ``Upgrade: websocket``; for a
    response, with status 101."""
    if a[s] == 72:  # a response: HTTP/1.x 101
        sp = -1
        for i in range(s, min(hend, s + 16)):
            if a[i] == 32:
                sp = i
                break
        if sp < 0 or sp + 4 > hend or not (a[sp + 1] == 49 and a[sp + 2] == 48 and a[sp + 3] == 49):
            return False
    p = s
    while p < hend:
        lf = p
        while lf < hend and a[lf] != 10:
            lf += 1
        if lf - p > 8:
            ok = True
            for j in range(7):
                if _lower(a[p + j]) != _UPGRADE[j]:
                    ok = False
                    break
            if ok and (a[p + 7] == 58 or a[p + 7] == 32) and _contains_ci(a, p + 7, lf, _WEBSOCKET):
                return True
        p = lf + 1
    return False


@njit(cache=True, inline="always")
def _frame_header(a, h, end):
    """(header length, payload length, opcode, fin, masked) of the frame at a[h:end]; header
    length 0 if the header is not complete yet, -1 if it is not a valid frame header."""
    if end - h < 2:
        return 0, 0, 0, 0, 0
    c0 = a[h]
    c1 = a[h + 1]
    op = c0 & 15
    fin = c0 >> 7
    if (c0 & 0x70) != 0 or not (op <= 2 or (op >= 8 and op <= 10)):
        return -1, 0, 0, 0, 0
    ln = np.int64(c1 & 127)
    hl = 2
    if ln == 126:
        if end - h < 4:
            return 0, 0, 0, 0, 0
        ln = _be16(a, h + 2)
        hl = 4
    elif ln == 127:
        if end - h < 10:
            return 0, 0, 0, 0, 0
        ln = _be64(a, h + 2)
        hl = 10
        if ln < 0 or ln > MAX_BODY:
            return -1, 0, 0, 0, 0
    masked = c1 >> 7
    if masked:
        hl += 4
    if op >= 8 and (fin == 0 or ln > 125):
        return -1, 0, 0, 0, 0
    if end - h < hl:
        return 0, 0, 0, 0, 0
    return hl, ln, op, fin, masked


@njit(cache=True)
def ws_probe(a, s, e, scr):
    """1 if a[s:e] begins with a WebSocket data frame (text or binary, first of a message)
    whose payload begins with a SIP start line, 2 if it may still, 0 if not."""
    hl, ln, op, fin, masked = _frame_header(a, s, e)
    if hl == 0:
        return 2
    if hl < 0 or not (op == 1 or op == 2):
        return 0
    p = s + hl
    avail = min(ln, e - p, 1024)
    if masked:
        for i in range(avail):
            scr[i] = a[p + i] ^ a[p - 4 + (i & 3)]
    else:
        for i in range(avail):
            scr[i] = a[p + i]
    k = _line_start_sip(scr, 0, avail)
    if k == 2:
        return 2 if (avail < ln and avail < 1024) else 0
    return k


@njit(cache=True)
def ws_sync(a, s, e, scr):
    """Position in a[s:e] of the next frame ws_probe accepts (after a gap), or -1."""
    for p in range(s, min(e, s + 65536)):
        c = a[p]
        if c == 0x81 or c == 0x82 or c == 0x01 or c == 0x02:
            if ws_probe(a, p, e, scr) == 1:
                return p
    return -1


@njit(cache=True)
def ws_run(arena, b0, end, fs, f, src_id, dst_id, sport, dport, frame, ts, st, I, O, V, D,
           dl, scr, hs, he):
    """The complete frames of a WebSocket stream arena[b0:end] (b0 = the stream's front).

    Returns (position reached, bytes consumed from the front, SIP rows written, first failure
    (0, -1 not SIP, or R_MAL_*), control frames, desynchronised: the bytes at the position
    reached are not a frame header): consumed stops at a fragmented message still
    being gathered (its bytes stay at the front, ``F_WS_ASM``; ``F_WS_POS`` = where parsing
    resumes)."""
    asm = fs[f, F_WS_ASM]
    h = b0 + fs[f, F_WS_POS] if asm > 0 else b0
    good = 0
    bad = 0
    ctrl = 0
    desync = False
    while True:
        hl, ln, op, fin, masked = _frame_header(arena, h, end)
        if hl == 0:
            break
        if hl < 0:
            desync = True
            break
        if end - h < hl + ln:
            break
        p = h + hl
        if masked:
            k = p - 4
            m0 = arena[k]
            m1 = arena[k + 1]
            m2 = arena[k + 2]
            m3 = arena[k + 3]
            i = 0
            while i + 4 <= ln:
                arena[p + i] ^= m0
                arena[p + i + 1] ^= m1
                arena[p + i + 2] ^= m2
                arena[p + i + 3] ^= m3
                i += 4
            while i < ln:
                arena[p + i] ^= arena[k + (i & 3)]
                i += 1
        h = p + ln
        if op >= 8:
            ctrl += 1
            st[X_WS_CTRL] += 1
            continue
        if op != 0:
            if fs[f, F_WS_OP] != 0:  # a new message while one was being gathered: it is lost
                asm = 0
                if bad == 0:
                    bad = -1
            fs[f, F_WS_OP] = op
        elif fs[f, F_WS_OP] == 0:  # a continuation without a first frame (after a gap)
            if bad == 0:
                bad = -1
            continue
        if fin and asm == 0:
            g, b = _emit_span(arena, p, p + ln, src_id, dst_id, sport, dport, TR_WS, frame, ts,
                              st, I, O, V, D, dl, scr, hs, he)
            fs[f, F_WS_OP] = 0
        else:
            dst = b0 + asm
            if dst != p:
                for i in range(ln):  # dst < p: an ascending copy is safe
                    arena[dst + i] = arena[p + i]
            asm += ln
            if not fin:
                continue
            st[X_WS_FRAGMENTED] += 1
            g, b = _emit_span(arena, b0, b0 + asm, src_id, dst_id, sport, dport, TR_WS, frame, ts,
                              st, I, O, V, D, dl, scr, hs, he)
            asm = 0
            fs[f, F_WS_OP] = 0
        st[X_WS_MSGS] += 1
        if g > 1:
            st[X_WS_MULTI] += 1
        good += g
        if b != 0 and bad == 0:
            bad = b
    fs[f, F_WS_ASM] = asm
    if asm > 0:
        fs[f, F_WS_POS] = h - b0
        return h, 0, good, bad, ctrl, desync
    fs[f, F_WS_POS] = 0
    return h, h - b0, good, bad, ctrl, desync
