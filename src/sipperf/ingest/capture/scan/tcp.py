"""TCP: one byte stream per flow, reassembled by sequence number, then cut into messages by
the flow's framing.

**Placing the bytes** (:func:`_tcp`).  A segment at the next expected sequence number is
appended to the flow's region of the shared arena (``fs`` row: ``F_OFF``/``F_CAP``/``F_HEAD``/
``F_LEN``; a region that is too small moves to the arena's end at double the size; when the
arena runs short, :func:`.records.scan` repacks it with :func:`compact_arena` before the next
packet).  Bytes before the next expected one were seen already: a retransmission (the first
captured copy wins, as for the bytes waiting out of order).  A segment beyond the next
expected byte waits in a slot of the out-of-order pool (:mod:`.reorder`) until the missing
bytes come; then everything contiguous is appended at once (:func:`_ooo`).  So a message is
read whatever order its segments were captured in, and **its time is the time of the
segment that completed it** (the last of its bytes to arrive), the instant the receiver could
have read it.  Bytes that never come make a **gap** (:func:`_declare`): the partial message
before the hole is lost (its packets a counted "TCP gap" skip), the stream resumes at the
waiting bytes, which are replayed in capture order (each message with the time and frame of
its own completing segment).  A hole is declared when the bytes waiting would exceed the
window (64 KiB or 64 segments; "TCP gap declared: ... window"), when it has waited 10 s of
capture time, and at the end of the capture.

**Framing** (:func:`_deliver`), decided once per flow from the first bytes of its stream:
SIP (start line, header block, Content-Length, :func:`.messages._clen`; bytes that are not a
start line -- a capture that begins mid-message -- discarded up to the next start line and
counted), an HTTP Upgrade then WebSocket frames (:mod:`.ws`), WebSocket frames without the
upgrade (found by content), HEPv3 packets (:mod:`.hep`), or a refusal that names what it saw:
TLS (a TLS record header; "WebSocket over TLS" when the ClientHello offers ALPN ``http/1.1``
or the server port is an HTTPS port) or SigComp.

Accounting: a segment whose bytes are still waiting (for the rest of their message, or out of
order) is pending (``F_PEND``, or the weight of its piece in the pool) and is counted with its
message's outcome; at the end of the capture the remaining ones are "fragment/segment of an
incomplete message" (:func:`.records.pending_frames`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .hep import _hep, is_hep3
from .layout import (C_PARSED, F_CAP, F_DID, F_DPORT, F_HEAD, F_LEN, F_LIPID, F_LLEN, F_LSEQ, F_LTS,
                     F_MODE, F_NEXT, F_OFF, X_DUP_TCP, X_DUP_WINDOW, X_IPID,
                     F_PEND, F_SEEN, F_SID, F_SLOT, F_SPORT, F_WS_ASM, F_WS_OP, F_WS_POS,
                     M_HEP, M_HTTP, M_SIGCOMP, M_SIP, M_TLS, M_UNKNOWN, M_WS, M_WSS, MAX_BODY,
                     MAX_HDR, NPORTS, OOO_HOLD_NS, OOO_PIECES, OOO_WINDOW, OS_FLOW, OS_N,
                     OS_T0, OS_USED, P_FRAME, P_TS, R_HEP_BAD, R_HTTP, R_INCOMPLETE, R_SIGCOMP,
                     R_DUPLICATE, R_TCP_EMPTY, R_TCP_GAP, R_TCP_KEEPALIVE, R_TCP_NOT_SIP, R_TCP_RETRANS,
                     R_TCP_TOO_BIG, R_TCP_WINDOW, R_TLS, R_WS_CONTROL, R_WS_HANDSHAKE,
                     R_WS_NOT_SIP, R_WSS, ST_ARENA, ST_DISCARD_BYTES, ST_MAXPEND,
                     ST_MIDSTREAM, ST_OOO_ACTIVE, ST_OOO_T0MIN, X_GAP_END, X_GAP_HOLD,
                     X_GAP_WINDOW, X_OOO_DUP, X_OOO_FILLED, X_OOO_MAXPIECES, X_OOO_STORED, XB,
                     XP_TLS, XP_WS, XP_WSS)
from .messages import _clen, _line_start_sip
from .primitives import _be16
from .reorder import (first_seq, insert, next_piece, oldest, remove, set_weight, slot_alloc,
                      slot_free, waiting)
from .sip import _emit, header_end
from .ws import http_start, http_upgrade, ws_probe, ws_run, ws_sync

M32 = 0xFFFFFFFF
#: server ports taken for HTTPS (a TLS connection there is "WebSocket over TLS")
WSS_PORTS = np.array([443, 8443, 7443, 4443, 10443, 8089, 9443], np.int64)
_ALPN_HTTP = np.frombuffer(b"http/1.1", np.uint8).copy()
INT64_MAX = np.iinfo(np.int64).max


# ------------------------------------------------------------------------------ the stream
@njit(cache=True)
def _append(fs, f, arena, src, s, n, st):
    """Append src[s:s+n] to flow f's stream (the caller guaranteed room at the arena's end)."""
    ln = fs[f, F_LEN]
    if ln == 0:
        fs[f, F_HEAD] = 0
    if fs[f, F_HEAD] + ln + n > fs[f, F_CAP]:
        c = 256
        while c < 2 * (ln + n):
            c *= 2
        o = st[ST_ARENA]
        s0 = fs[f, F_OFF] + fs[f, F_HEAD]
        arena[o:o + ln] = arena[s0:s0 + ln]
        fs[f, F_OFF] = o
        fs[f, F_CAP] = c
        fs[f, F_HEAD] = 0
        st[ST_ARENA] = o + c
    b0 = fs[f, F_OFF] + fs[f, F_HEAD]
    arena[b0 + ln:b0 + ln + n] = src[s:s + n]
    fs[f, F_LEN] = ln + n
    if ln + n > st[ST_MAXPEND]:
        st[ST_MAXPEND] = ln + n


@njit(cache=True)
def _note_port(st, base, port):
    n = st[base]
    for i in range(n):
        if st[base + 1 + i] == port:
            return
    if n < NPORTS:
        st[base + 1 + n] = port
        st[base] = n + 1


@njit(cache=True)
def _contains(a, s, e, pat):
    n = pat.shape[0]
    for i in range(s, e - n + 1):
        ok = True
        for j in range(n):
            if a[i + j] != pat[j]:
                ok = False
                break
        if ok:
            return True
    return False


@njit(cache=True)
def _tls_class(a, s, e, sport, dport, st):
    """R_TLS or R_WSS for a stream that begins with a TLS record; notes the server port."""
    port = min(sport, dport)
    if a[s] == 0x16 and e - s > 5:
        if a[s + 5] == 1:    # ClientHello: sent to the server
            port = dport
        elif a[s + 5] == 2:  # ServerHello: sent by it
            port = sport
    wss = _contains(a, s, min(e, s + 4096), _ALPN_HTTP)
    for p in WSS_PORTS:
        if port == p:
            wss = True
    code = R_WSS if wss else R_TLS
    _note_port(st, XP_WSS if wss else XP_TLS, port)
    return code


@njit(cache=True)
def _detect(a, s, e, scr):
    """The framing of a stream from its first bytes (M_UNKNOWN: too few bytes to say)."""
    c0 = a[s]
    if c0 == 13 or c0 == 10:
        return M_SIP
    if e - s >= 4 and c0 == 0x48 and a[s + 1] == 0x45 and a[s + 2] == 0x50 and a[s + 3] == 0x33:
        return M_HEP
    k = http_start(a, s, e)
    if k == 1:
        return M_HTTP
    if k == 2:
        return M_UNKNOWN
    if c0 >= 0x14 and c0 <= 0x17:
        if e - s < 3:
            return M_UNKNOWN
        if a[s + 1] == 3 and a[s + 2] <= 4:
            return M_TLS
    if c0 >= 0xF8:
        return M_SIGCOMP
    if c0 == 0x81 or c0 == 0x82 or c0 == 0x01 or c0 == 0x02:
        k = ws_probe(a, s, e, scr)
        if k == 1:
            return M_WS
        if k == 2:
            return M_UNKNOWN
    k = _line_start_sip(a, s, e)
    if k == 2:
        return M_UNKNOWN
    return M_SIP


# --------------------------------------------------------------------------- the framings
@njit(cache=True)
def _deliver(fs, f, arena, w, n_new, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist):
    """Cut the complete messages off the front of flow f's stream (its last n_new bytes are
    new, brought by the packet ``frame`` of weight w) and count that packet."""
    ln = fs[f, F_LEN]
    b0 = fs[f, F_OFF] + fs[f, F_HEAD]
    end = b0 + ln
    src_id = fs[f, F_SID]
    dst_id = fs[f, F_DID]
    sport = fs[f, F_SPORT]
    dport = fs[f, F_DPORT]
    crlf_only = True
    for i in range(end - n_new, end):
        if arena[i] != 13 and arena[i] != 10:
            crlf_only = False
            break
    mode = fs[f, F_MODE]
    if mode == M_UNKNOWN:
        mode = _detect(arena, b0, end, scr)
        if mode == M_UNKNOWN:
            fs[f, F_PEND] += w
            return
        if mode == M_TLS or mode == M_SIGCOMP:
            code = R_SIGCOMP
            if mode == M_TLS:
                code = _tls_class(arena, b0, end, sport, dport, st)
                if code == R_WSS:
                    mode = M_WSS
            fs[f, F_MODE] = mode
            st[XB + code] += ln
            cnt[code] += w + fs[f, F_PEND]
            fs[f, F_PEND] = 0
            fs[f, F_LEN] = 0
            fs[f, F_HEAD] = 0
            return
        fs[f, F_MODE] = mode
        if mode == M_WS:
            _note_port(st, XP_WS, dport if (arena[b0 + 1] & 0x80) else sport)
    cur_good = False
    cur_bad = 0
    extra = 0
    h = b0
    if mode == M_HTTP:
        while h < end:
            k = http_start(arena, h, end)
            if k == 2:
                break
            if k == 0:  # not HTTP after all: read the rest as SIP
                mode = M_SIP
                fs[f, F_MODE] = M_SIP
                break
            hend = header_end(arena, h, end)
            if hend < 0:
                if end - h > 16384:
                    mode = M_SIP
                    fs[f, F_MODE] = M_SIP
                break
            up = http_upgrade(arena, h, hend)
            clen = _clen(arena, h, hend)
            mlen = hend - h + (clen if clen > 0 and not up else 0)
            if end - h < mlen:
                break
            if up:
                _note_port(st, XP_WS, dport if arena[h] == 71 else sport)
            h += mlen
            if up:
                extra = R_WS_HANDSHAKE
                mode = M_WS
                fs[f, F_MODE] = M_WS
                break
            extra = R_HTTP
        if h > b0:
            fs[f, F_HEAD] += h - b0
            fs[f, F_LEN] = end - h
            b0 = h
    if mode == M_WS:
        for _k in range(16):
            if end <= b0:
                break
            hr, used, good, bad, ctrl, desync = ws_run(arena, b0, end, fs, f, src_id, dst_id,
                                                       sport, dport, frame, ts, st, I, O, V,
                                                       D, dl, scr, hs, he)
            if good > 0:
                cur_good = True
            if bad != 0 and cur_bad == 0:
                cur_bad = R_WS_NOT_SIP if bad < 0 else bad
            if ctrl > 0 and extra == 0:
                extra = R_WS_CONTROL
            h = b0 + used
            if not desync:
                break
            # the frame boundaries are lost (after a gap, or not WebSocket): drop the message
            # being gathered, resume at the next frame that carries SIP
            fs[f, F_WS_ASM] = 0
            fs[f, F_WS_POS] = 0
            fs[f, F_WS_OP] = 0
            q = ws_sync(arena, hr + 1, end, scr)
            cut = q if q >= 0 else end
            st[ST_DISCARD_BYTES] += cut - b0
            if cur_bad == 0:
                cur_bad = R_WS_NOT_SIP
            h = cut
            fs[f, F_HEAD] += h - b0
            fs[f, F_LEN] = end - h
            b0 = h
    elif mode == M_HEP:
        while end - h >= 6:
            if not is_hep3(arena, h, end):  # out of step: resume at the next "HEP3"
                q = h + 1
                while q + 4 <= end and not (arena[q] == 0x48 and arena[q + 1] == 0x45
                                            and arena[q + 2] == 0x50 and arena[q + 3] == 0x33):
                    q += 1
                cut = q if q + 4 <= end else end
                st[ST_DISCARD_BYTES] += cut - h
                h = cut
                if cur_bad == 0:
                    cur_bad = R_HEP_BAD
                continue
            total = _be16(arena, h + 4)
            if total < 6:
                h += 4
                if cur_bad == 0:
                    cur_bad = R_HEP_BAD
                continue
            if end - h < total:
                break
            code = _hep(arena, h, h + total, frame, ts, st, I, O, V, D, dl, scr, hs, he, ak, av, alist)
            if code == C_PARSED:
                cur_good = True
            elif cur_bad == 0:
                cur_bad = code
            h += total
    elif mode == M_SIP:
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
                if fs[f, F_PEND] > 0 and h - b0 >= ln - n_new:
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
            clen = _clen(arena, h, hend)
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
            code, _hl, _cl = _emit(arena, h, h + mlen, True, src_id, dst_id, sport, dport, 1,
                                   frame, ts, -1, st, I, O, V, D, dl, scr, hs, he)
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
    # the packet's outcome; the pending packets share the first outcome that ends them
    if cur_good:
        c = C_PARSED
    elif cur_bad != 0:
        c = cur_bad
    elif extra != 0:
        c = extra
    elif fs[f, F_LEN] > 0:
        fs[f, F_PEND] += w
        return
    elif crlf_only:
        c = R_TCP_KEEPALIVE
    else:
        c = R_TCP_NOT_SIP
    cnt[c] += w
    if fs[f, F_PEND] > 0 and (cur_good or cur_bad != 0 or fs[f, F_LEN] == 0):
        cnt[c] += fs[f, F_PEND]
        fs[f, F_PEND] = 0


# -------------------------------------------------------------------- out-of-order bytes
@njit(cache=True)
def _drain(fs, f, arena, op, ob, slot, limit, st):
    """Append the waiting pieces of flow f that are contiguous with its stream (those that
    arrived at or before frame ``limit``); returns (bytes, packets they stand for)."""
    nb = 0
    wsum = 0
    while True:
        nxt = fs[f, F_NEXT]
        k = next_piece(op, slot, nxt, limit)
        if k < 0:
            break
        ln = op[slot, k, 1]
        _append(fs, f, arena, ob[slot], op[slot, k, 2], ln, st)
        fs[f, F_NEXT] = (nxt + ln) & M32
        wsum += op[slot, k, 3]
        nb += ln
        remove(op, slot, k)
    return nb, wsum


@njit(cache=True)
def _settle(fs, f, op, slot, st):
    """Free flow f's slot if nothing waits in it any more, else refresh its oldest time."""
    if op[slot, 0, OS_N] == 0:
        slot_free(op, st, slot)
        fs[f, F_SLOT] = 0
    else:
        t = oldest(op, slot)
        if t < st[ST_OOO_T0MIN]:
            st[ST_OOO_T0MIN] = t


@njit(cache=True)
def _lose_partial(fs, f, cnt, st, reason):
    """The bytes before a hole can never complete their message: its packets are counted
    under ``reason``, the bytes dropped."""
    cnt[reason] += fs[f, F_PEND]
    fs[f, F_PEND] = 0
    st[ST_DISCARD_BYTES] += fs[f, F_LEN]
    fs[f, F_LEN] = 0
    fs[f, F_HEAD] = 0
    fs[f, F_WS_ASM] = 0
    fs[f, F_WS_POS] = 0
    fs[f, F_WS_OP] = 0


@njit(cache=True)
def _declare(fs, f, arena, slot, reason, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob):
    """The hole before flow f's waiting bytes is a gap: lose the partial message before it,
    resume the stream at the first waiting byte, and replay the waiting pieces in capture
    order (each message emitted with the frame and time of the piece that completes it)."""
    _lose_partial(fs, f, cnt, st, reason)
    n = op[slot, 0, OS_N]
    if n == 0:
        _settle(fs, f, op, slot, st)
        return
    fs[f, F_NEXT] = first_seq(op, slot, fs[f, F_NEXT])
    frames = np.empty(n, np.int64)
    times = np.empty(n, np.int64)
    for k in range(n):
        frames[k] = op[slot, 1 + k, P_FRAME]
        times[k] = op[slot, 1 + k, P_TS]
    order = np.argsort(frames, kind="mergesort")
    last = -1
    for t in range(n):
        fr = frames[order[t]]
        if fr == last:
            continue
        last = fr
        nb, wsum = _drain(fs, f, arena, op, ob, slot, fr, st)
        if nb > 0:
            fs[f, F_PEND] += wsum
            _deliver(fs, f, arena, 0, nb, fr, times[order[t]], st, cnt, I, O, V, D, dl, scr,
                     hs, he, ak, av, alist)
    _settle(fs, f, op, slot, st)


@njit(cache=True)
def _ooo(fs, f, arena, a, ps, n, seq, w, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob):
    """The segment a[ps:ps+n] of a flow that has bytes waiting, or is itself out of order."""
    for _try in range(8):
        nxt = fs[f, F_NEXT]
        delta = (seq - nxt) & M32
        if delta >= 0x80000000:
            skip = (nxt - seq) & M32
            if skip >= n:
                cnt[R_TCP_RETRANS] += w
                return
            ps += skip
            n -= skip
            seq = nxt
            delta = 0
        slot = fs[f, F_SLOT] - 1
        if slot < 0:
            if delta == 0:
                _append(fs, f, arena, a, ps, n, st)
                fs[f, F_NEXT] = (seq + n) & M32
                _deliver(fs, f, arena, w, n, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist)
                return
            slot = slot_alloc(op, st, f, ts) if delta + n <= OOO_WINDOW else -1
            if slot < 0:
                # no room to wait for the missing bytes: they are taken as lost
                _lose_partial(fs, f, cnt, st, R_TCP_WINDOW)
                st[X_GAP_WINDOW] += 1
                fs[f, F_NEXT] = seq
                continue
            fs[f, F_SLOT] = slot + 1
        r = insert(op, ob, slot, a, ps, n, seq, nxt, frame, ts)
        if r < 0:
            _declare(fs, f, arena, slot, R_TCP_WINDOW, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob)
            st[X_GAP_WINDOW] += 1
            continue
        if r == 0:
            cnt[R_TCP_RETRANS] += w
            st[X_OOO_DUP] += 1
            _settle(fs, f, op, slot, st)
            return
        if ts < st[ST_OOO_T0MIN]:
            st[ST_OOO_T0MIN] = ts
        if op[slot, 0, OS_N] > st[X_OOO_MAXPIECES]:
            st[X_OOO_MAXPIECES] = op[slot, 0, OS_N]
        nb, wsum = _drain(fs, f, arena, op, ob, slot, INT64_MAX, st)
        if nb == 0:
            set_weight(op, slot, frame, w)
            st[X_OOO_STORED] += 1
            return
        if wsum > 0:
            st[X_OOO_FILLED] += 1
        fs[f, F_PEND] += wsum
        _settle(fs, f, op, slot, st)
        _deliver(fs, f, arena, w, nb, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist)
        return
    cnt[R_TCP_WINDOW] += w


@njit(cache=True)
def expire_one(now, force, fs, arena, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob):
    """Declare one hole that has waited more than OOO_HOLD_NS before ``now`` (any hole if
    ``force``: the end of the capture) a gap; returns True if it did, else refreshes the
    oldest waiting time and returns False."""
    tmin = INT64_MAX
    for s in range(op.shape[0]):
        if op[s, 0, OS_USED] == 0:
            continue
        t0 = op[s, 0, OS_T0]
        if force or now - t0 > OOO_HOLD_NS:
            _declare(fs, op[s, 0, OS_FLOW], arena, s, R_TCP_GAP, st, cnt, I, O, V, D, dl,
                     scr, hs, he, ak, av, alist, op, ob)
            st[X_GAP_END if force else X_GAP_HOLD] += 1
            return True
        if t0 < tmin:
            tmin = t0
    st[ST_OOO_T0MIN] = tmin
    return False


# ------------------------------------------------------------------------------ a segment
@njit(cache=True)
def _tcp(fs, f, arena, a, ps, pe, seq, flags, w, src_id, dst_id, sport, dport, frame, ts,
         st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob):
    """One TCP segment (payload a[ps:pe], TCP flags ``flags``) of flow f: its bytes placed by
    sequence number, the complete messages at the stream's front emitted, and the segment
    counted with their outcome or left pending."""
    n = pe - ps
    syn = (flags & 2) != 0
    if fs[f, F_SEEN] == 0 or syn:
        if fs[f, F_SEEN] == 0:
            fs[f, F_SID] = src_id
            fs[f, F_DID] = dst_id
            fs[f, F_SPORT] = sport
            fs[f, F_DPORT] = dport
            if not syn:
                st[ST_MIDSTREAM] += 1
        fs[f, F_SEEN] = 1
        fs[f, F_NEXT] = (seq + 1) & M32 if syn else seq
        fs[f, F_LEN] = 0
        fs[f, F_HEAD] = 0
        if fs[f, F_PEND] > 0:
            cnt[R_INCOMPLETE] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
        if syn:  # a new connection on this address pair
            fs[f, F_MODE] = M_UNKNOWN
            fs[f, F_WS_ASM] = 0
            fs[f, F_WS_POS] = 0
            fs[f, F_WS_OP] = 0
            slot = fs[f, F_SLOT] - 1
            if slot >= 0:
                cnt[R_INCOMPLETE] += waiting(op, slot)
                slot_free(op, st, slot)
                fs[f, F_SLOT] = 0
    mode = fs[f, F_MODE]
    if n <= 0:
        cnt[R_TCP_EMPTY] += w
        return
    # the same segment seen again at once with the same (non-zero) IPv4 id (a mirror port, two
    # taps): a duplicate copy, not a retransmission (a retransmission is sent anew, with another
    # id; without an id -- IPv6, or 0 -- the copy stays a "TCP retransmission")
    ipid = st[X_IPID]
    dt = ts - fs[f, F_LTS]
    if dt < 0:
        dt = -dt
    if (seq == fs[f, F_LSEQ] and n == fs[f, F_LLEN] and fs[f, F_LLEN] > 0 and dt <= st[X_DUP_WINDOW]
            and ipid > 0 and ipid == fs[f, F_LIPID]):
        cnt[R_DUPLICATE] += w
        st[X_DUP_TCP] += w
        return
    fs[f, F_LSEQ] = seq
    fs[f, F_LLEN] = n
    fs[f, F_LTS] = ts
    fs[f, F_LIPID] = ipid
    if mode == M_TLS or mode == M_WSS or mode == M_SIGCOMP:
        code = R_TLS if mode == M_TLS else (R_WSS if mode == M_WSS else R_SIGCOMP)
        cnt[code] += w
        st[XB + code] += n
        return
    if fs[f, F_SLOT] == 0 and seq == fs[f, F_NEXT]:  # in order, nothing waiting: the usual case
        _append(fs, f, arena, a, ps, n, st)
        fs[f, F_NEXT] = (seq + n) & M32
        _deliver(fs, f, arena, w, n, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist)
        return
    _ooo(fs, f, arena, a, ps, n, seq, w, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob)


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
