"""Reader and writer for the seed thesis's instrumented OpenSIPS log (seed 000, Appendix A.2).

The thesis patched OpenSIPS 1.6 to write, through ``LM_ERR`` (hence syslog), one line when a
message enters the SIP layer (``receive.c``) and one line when it is sent (``forward.c``,
``modules/tm/t_fwd.c``, ``modules/tm/t_reply.c``).  The appendix prints the C code, partly
truncated; this module reconstructs the lines it writes.  **Every guess is listed here** (and
in ``docs/formats.md``):

Receive line (``receive.c``; the format string is cut off after ``sock_recvtim`` in the
appendix; the argument list is complete)::

    <syslog prefix>ramekris src_ip %d parse_time=%lf wait_time=%lf stack_time=%lf \
sock_recvtime=%lf now=%lld request %d callid=%.*s cseq=%.*s method_id=%d

with ``prev`` = ``gettimeofday`` at entry of ``receive_msg`` (µs since the epoch),
``now`` = ``gettimeofday`` after parsing and the three ioctls, ``waittime`` = SIOCGSTAMP,
``udp_recvtime`` = SIOCGSTAMPUDP, ``sock_recvtime`` = SIOCGSTAMPRECV (all µs)::

    parse_time    = now - prev                   = t_sip_c  - t_sip_in   (T1_sip)
    wait_time     = prev - waittime              = t_sip_in - t_arr      (K_rcv)
    stack_time    = udp_recvtime - waittime      = t_stack  - t_arr      (K_stack)
    sock_recvtime = sock_recvtime - udp_recvtime = t_sockq  - t_stack    (K_sockq)
    now           = t_sip_c (absolute)

Guesses: (G1) the keys after ``sock_recvtim`` are ``sock_recvtime=``, ``now=``, ``request``,
``callid=``, ``cseq=``, ``method_id=`` (``request %d`` copied from the send lines).
(G2) ``%lf`` prints six decimals; all operands are whole µs, so the fraction is ``.000000``;
we keep three decimals (ns).  (G3) ``src_ip %d`` is the IPv4 address's ``addr32`` in network
byte order printed as a signed int on a little-endian host (10.0.0.1 -> 16777226).
(G4) ``request %d`` is ``msg->REQ_METHOD`` = ``first_line.u.request.method_value``; in a
reply the union member at that offset is ``u.reply.statuscode``, so a value >= 100 is a
response status and a smaller one a request method id (OpenSIPS 1.x bit values INVITE=1,
CANCEL=2, ACK=4, BYE=8, INFO=16, OPTIONS=32, UPDATE=64, REGISTER=128, MESSAGE=256,
SUBSCRIBE=512, NOTIFY=1024, PRACK=2048, REFER=4096, PUBLISH=8192).  ``method_id`` is the CSeq
method in the same coding.  ``cseq=`` in the receive line is the CSeq *number* only.

Send line (``forward.c``, ``t_fwd.c``, ``t_reply.c``; format given in full)::

    <syslog prefix>ramekris now=%lld ip_out=%lld request %d callid=%.*s cseq=%.*s

``now`` is ``gettimeofday`` just before the send (t_sip_out) and ``ip_out`` is printed as
``ip_out - now``, i.e. the send duration K_snd, so t_dep = now + ip_out.  (G5) ``cseq=``
is the whole CSeq header body, number and method (``cseq=1 INVITE``).  (G6) the second
``t_reply.c`` block writes ``callid=.%s cseq=.%s`` (a typo that cannot work with the
``len, s`` arguments); we read it as ``%.*s`` and accept an optional leading ``.``.

ENOENT: the patched kernel initialises the new stamps to ``ktime_set(-1, 0)`` and the ioctl
returns ``-ENOENT`` while no stamp was taken; OpenSIPS ignores the return value and uses the
``memset`` zero ``timeval``, so the printed interval contains a whole epoch time (e.g.
``stack_time=-1300000000123456.000000``).  (G7) we rebuild the absolute stamps
(``t_arr = t_sip_in - wait_time``, ``t_stack = t_arr + stack_time``,
``t_sockq = t_stack + sock_recvtime``) and treat a rebuilt stamp earlier than 1000 s after the
epoch (0, or the −1 s sentinel if a kernel copied it) as missing: that instant is null, the
message is kept, and the report notes how many stamps were missing.

Syslog prefix: (G8) anything before ``ramekris`` is ignored (RFC 3164 ``Mon dd hh:mm:ss host
opensips[pid]: ERROR:core:receive_msg: `` as our writer emits, RFC 5424, journald ...).
Lines that are not instrumentation lines are counted skips.  ``forward.c``'s
``reply forwarded to %.*s:%d method %d callid %.*s`` line has no time and is a counted skip.

Pairing: a send line belongs to the earliest not yet paired receive line with the same
Call-ID, CSeq number and ``request`` value (FIFO per key, which also works when several
OpenSIPS processes interleave their lines).  (G9) a receive line without a send line is a
message that never left the proxy: ``dropped=True``, ``drop_reason="not forwarded"``
(absorbed retransmission, ACK of a non-2xx, ...).  A send line without a receive line (e.g.
the proxy's own ``100 Trying``) is an egress-only row (t_sip_out and t_dep only).

Speed: the file is read in blocks of whole lines (16 MB) into one reused buffer; each block is
tokenized by one compiled pass over its bytes (:func:`sipperf.ingest.thesis_scan.scan_block`,
numba: finds the lines, checks the keys, reads the numbers), the rest is numpy over the
parsed fields — never a Python loop per line (only lines that fail the structural test are
classified one by one).  Pairing is FIFO per key inside a block; unpaired receive lines of
the last 20 000 lines are carried to the next block.  ``bench/logs.py`` measures a
6 M-message log.
Resolution is 1 µs (``gettimeofday``).
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sipperf.ingest.thesis_scan import gather, scan_block
from sipperf.timeline import INSTANTS, SCHEMA, IngestError, IngestReport, validate_timeline

MARKER = b"ramekris"
#: OpenSIPS 1.x request method bit values (parser/msg_parser.h), index = log2(value)
METHOD_NAMES: tuple[str, ...] = (
    "INVITE", "CANCEL", "ACK", "BYE", "INFO", "OPTIONS", "UPDATE", "REGISTER", "MESSAGE",
    "SUBSCRIBE", "NOTIFY", "PRACK", "REFER", "PUBLISH",
)
METHOD_IDS: dict[str, int] = {m: 1 << i for i, m in enumerate(METHOD_NAMES)}
RECV_KEYS = (b"parse_time", b"wait_time", b"stack_time", b"sock_recvtime", b"now",
             b"callid", b"cseq", b"method_id")
SEND_KEYS = (b"now", b"ip_out", b"callid", b"cseq")
#: a rebuilt kernel stamp before this (ns since epoch, = 1000 s) means "ioctl found no stamp"
NO_STAMP_BEFORE_NS = 1_000_000_000_000
BLOCK_BYTES = 16 << 20
CARRY_LINES = 20_000
_MAX_NUM = 19
_U64 = np.uint64


def _libc_trim():
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_MALLOC_TRIM = _libc_trim()


def _release_memory() -> None:
    """Hand freed block temporaries back to the OS: glibc otherwise keeps them as holes between
    the long-lived per-block arrays, which adds to the peak RSS of a 6 M-message read."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    pa.default_memory_pool().release_unused()


# --------------------------------------------------------------------------- byte helpers
# The block is padded with PAD spaces on both sides so 8-byte loads never leave the buffer;
# ``w`` is an unaligned uint64 view: w[p] holds bytes p..p+7 (little-endian).
PAD = 16
_PADB = b" " * PAD


def _words(buf) -> np.ndarray:
    return np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))


def _gather_bytes(w: np.ndarray, start: np.ndarray, end: np.ndarray, width: int | None = None) -> np.ndarray:
    """Fixed-width ``S`` array of ``buf[start:end]`` (NUL padded); ``w`` is the block's word view."""
    ln = np.clip(end - start, 0, None)
    wd = int(width or max(8, -(-int(ln.max() if len(ln) else 1) // 8) * 8))
    b = np.ndarray(shape=(len(w) + 7,), dtype=np.uint8, buffer=w.base if w.base is not None else w)
    return gather(b, start, start + ln, wd).view(f"S{wd}").ravel()


def _hash_bytes(s: np.ndarray) -> np.ndarray:
    """Content hash (uint64) of an ``S`` array, independent of its padding width."""
    w = s.dtype.itemsize
    pad = -(-w // 8) * 8
    if pad != w:
        s = s.astype(f"S{pad}")
    words = np.frombuffer(s.tobytes(), dtype="<u8").reshape(len(s), pad // 8)
    h = np.full(len(s), _U64(1469598103934665603))
    with np.errstate(over="ignore"):
        for k in range(words.shape[1]):
            wk = words[:, k]
            h = np.where(wk != 0, (h ^ wk) * _U64(1099511628211), h)
            h ^= h >> _U64(29)
    return h


def _key(h: np.ndarray, cseq: np.ndarray, req: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        k = h ^ (cseq.astype(np.uint64) * _U64(0x9E3779B97F4A7C15))
        k = k ^ (req.astype(np.uint64) * _U64(0xC2B2AE3D27D4EB4F))
        k ^= k >> _U64(31)
    return k


# --------------------------------------------------------------------------- block parser
def _classify_rest(buf: bytes, starts: np.ndarray, ends: np.ndarray, idx: np.ndarray,
                   counts: Counter) -> None:
    for i in idx.tolist():
        line = bytes(buf[starts[i]:ends[i]])
        if not line.strip():
            counts["empty line"] += 1
        elif MARKER in line:
            if b"reply forwarded to" in line:
                counts["reply-forwarded line (no timestamps)"] += 1
            else:
                counts["missing field"] += 1
        elif b"reply forwarded to" in line:
            counts["reply-forwarded line (no timestamps)"] += 1
        else:
            counts["not an instrumentation line"] += 1


def _parse_block(buf, line0: int, path: str, strict: bool, counts: Counter,
                 notes: Counter, n_lines: int) -> dict[str, Any]:
    """Parse the ``n_lines`` whole lines in ``buf`` (bytes-like, PAD spaces on both sides)."""
    b = np.frombuffer(buf, dtype=np.uint8)
    w = _words(buf)
    starts, ends, kind, iv, okm = scan_block(b, PAD, n_lines, np.zeros(8, np.int64))
    rl = np.flatnonzero(kind == 1)
    sl = np.flatnonzero(kind == 2)
    _classify_rest(buf, starts, ends, np.flatnonzero(kind == 0), counts)

    out: dict[str, Any] = {}
    # ---- receive fields (read by scan_block)
    r_iv, r_ok = iv[rl], okm[rl]
    parse_ns, wait_ns, stack_ns, sockq_ns = r_iv[:, 0], r_iv[:, 1], r_iv[:, 2], r_iv[:, 3]
    now_us, cseq, mid, req, src = r_iv[:, 4], r_iv[:, 5], r_iv[:, 6], r_iv[:, 7], r_iv[:, 8]
    cid_st, cid_en = r_iv[:, 9], r_iv[:, 10]
    okr = r_ok[:, :8].all(axis=1) & (cid_en > cid_st)
    bad = ~okr
    if bad.any():
        if strict:
            i = int(rl[np.flatnonzero(bad)[0]])
            raise IngestError(path, f"line {line0 + i + 1}", "bad number or missing field in receive line")
        counts["bad number"] += int(bad.sum())
    # rebuild absolute instants (ns)
    t_sip_c = now_us * 1000
    t_sip_in = t_sip_c - parse_ns
    a = t_sip_in - wait_ns
    s_ = a + stack_ns
    q = s_ + sockq_ns
    inst = [a, s_, q, t_sip_in, t_sip_c]
    miss = [x < NO_STAMP_BEFORE_NS for x in inst[:3]] + [np.zeros(len(a), bool)] * 2
    for name, m in zip(("t_arr", "t_stack", "t_sockq"), miss):
        if (m & okr).any():
            notes[f"{name} missing (ioctl ENOENT / no stamp)"] += int((m & okr).sum())
    neg = parse_ns < 0
    lastv = np.full(len(a), np.iinfo(np.int64).min)
    for x, m in zip(inst, miss):
        neg |= ~m & (x < lastv)
        lastv = np.where(m, lastv, x)
    neg &= okr
    if neg.any():
        if strict:
            i = int(rl[np.flatnonzero(neg)[0]])
            raise IngestError(path, f"line {line0 + i + 1}", "negative interval in receive line")
        counts["negative interval"] += int(neg.sum())
    keep = okr & ~neg
    cid = _gather_bytes(w, cid_st[keep], cid_en[keep])
    out["r"] = {
        "line": line0 + rl[keep],
        "callid": cid,
        "cseq": cseq[keep], "req": req[keep], "mid": mid[keep],
        "src": (src[keep] & 0xFFFFFFFF).astype(np.uint32),
        "inst": np.stack([np.where(m[keep], 0, x[keep]) for x, m in zip(inst, miss)]),
        "miss": np.stack([m[keep] for m in miss]),
    }

    # ---- send fields
    s_iv, s_ok = iv[sl], okm[sl]
    now_us, dur_us, req, cseq = s_iv[:, 0], s_iv[:, 1], s_iv[:, 2], s_iv[:, 5]
    cid_st, cid_en, cseq_en = s_iv[:, 3], s_iv[:, 4], s_iv[:, 6]
    oks = s_ok[:, :5].all(axis=1) & (cid_en > cid_st)
    bad = ~oks
    if bad.any():
        if strict:
            i = int(sl[np.flatnonzero(bad)[0]])
            raise IngestError(path, f"line {line0 + i + 1}", "bad number or missing field in send line")
        counts["bad number"] += int(bad.sum())
    neg = oks & (dur_us < 0)
    if neg.any():
        if strict:
            i = int(sl[np.flatnonzero(neg)[0]])
            raise IngestError(path, f"line {line0 + i + 1}", "negative interval (ip_out < 0) in send line")
        counts["negative interval"] += int(neg.sum())
    keep = oks & ~neg
    meth = _gather_bytes(w, cseq_en[keep] + 1, ends[sl][keep], width=16)
    out["s"] = {
        "line": line0 + sl[keep],
        "callid": _gather_bytes(w, cid_st[keep], cid_en[keep]),
        "cseq": cseq[keep], "req": req[keep], "cmeth": meth,
        "out": now_us[keep] * 1000, "dep": (now_us[keep] + dur_us[keep]) * 1000,
    }
    out["n_lines"] = n_lines
    return out


def _pair(r: dict, s: dict, final: bool, last_line: int, counts: Counter, path: str, strict: bool):
    """FIFO pairing per (Call-ID, CSeq, request value). Returns rows dict and carried receives."""
    kr = _key(_hash_bytes(r["callid"]), r["cseq"], r["req"])
    ks = _key(_hash_bytes(s["callid"]), s["cseq"], s["req"])
    nr, ns = len(kr), len(ks)
    keys = np.concatenate((kr, ks))
    line = np.concatenate((r["line"], s["line"]))
    is_r = np.concatenate((np.ones(nr, bool), np.zeros(ns, bool)))
    order = np.lexsort((line, keys))
    k_o = keys[order]
    r_o = is_r[order]
    newgrp = np.ones(len(order), bool)
    newgrp[1:] = k_o[1:] != k_o[:-1]
    gid = np.cumsum(newgrp) - 1
    gstart = np.flatnonzero(newgrp)
    cr = np.cumsum(r_o)
    cs = np.cumsum(~r_o)
    cr0 = np.concatenate(([0], cr))[gstart][gid]
    cs0 = np.concatenate(([0], cs))[gstart][gid]
    rank = np.where(r_o, cr - cr0, cs - cs0) - 1
    comp = gid.astype(np.int64) * (len(order) + 1) + rank
    r_pos = order[r_o]           # index into r
    s_pos = order[~r_o] - nr     # index into s
    r_comp = comp[r_o]
    s_comp = comp[~r_o]
    j = np.searchsorted(r_comp, s_comp)
    j = np.minimum(j, max(len(r_comp) - 1, 0))
    hit = (len(r_comp) > 0) & (r_comp[j] == s_comp) if len(r_comp) else np.zeros(len(s_comp), bool)
    ri = r_pos[j[hit]] if len(r_comp) else np.zeros(0, np.int64)
    si = s_pos[hit]
    # a send line must come after its receive line and after t_sip_c
    good = (s["line"][si] > r["line"][ri]) & (s["out"][si] >= r["inst"][4][ri])
    bad_t = (s["line"][si] > r["line"][ri]) & ~(s["out"][si] >= r["inst"][4][ri])
    if bad_t.any():
        if strict:
            raise IngestError(path, f"line {int(s['line'][si][bad_t][0]) + 1}",
                              "negative interval: send before t_sip_c of its receive line")
        counts["negative interval"] += int(bad_t.sum())
    skip_s = np.zeros(ns, bool)
    skip_s[si[bad_t]] = True
    ri, si = ri[good], si[good]
    r_paired = np.zeros(nr, bool)
    r_paired[ri] = True
    s_paired = np.zeros(ns, bool)
    s_paired[si] = True
    r_un = np.flatnonzero(~r_paired)
    if final:
        carry_mask = np.zeros(len(r_un), bool)
    else:
        carry_mask = r["line"][r_un] > last_line - CARRY_LINES
    carry = {k: (v[:, r_un[carry_mask]] if v.ndim == 2 else v[r_un[carry_mask]]) for k, v in r.items()}
    r_drop = r_un[~carry_mask]
    s_only = np.flatnonzero(~s_paired & ~skip_s)
    return (ri, si, r_drop, s_only), carry


def _method_code(v: np.ndarray) -> np.ndarray:
    """OpenSIPS method bit value -> index into METHOD_NAMES, or len(METHOD_NAMES) (OTHER)."""
    v = v.astype(np.int64)
    pow2 = (v > 0) & ((v & (v - 1)) == 0) & (v <= 1 << (len(METHOD_NAMES) - 1))
    code = np.where(pow2, np.log2(np.where(pow2, v, 1)).round().astype(np.int64), len(METHOD_NAMES))
    return code


def _strings(values: list[str | None], codes: np.ndarray) -> pd.arrays.ArrowStringArray:
    vals = pa.array(values, type=pa.string())
    idx = pa.array(codes.astype(np.int32))
    return pd.arrays.ArrowStringArray(pc.take(vals, idx))


def _int_col(v: np.ndarray, null: np.ndarray | None = None) -> pd.arrays.IntegerArray:
    v = np.asarray(v, dtype=np.int64)
    m = np.zeros(len(v), bool) if null is None else np.asarray(null, bool)
    return pd.arrays.IntegerArray(np.where(m, 0, v), m)


def _rows(r: dict, s: dict, ri, si, r_drop, s_only) -> dict[str, Any]:
    """Assemble numpy columns for paired, dropped and egress-only messages."""
    rr = np.concatenate((ri, r_drop))
    n1, n2, n3 = len(ri), len(r_drop), len(s_only)
    n = n1 + n2 + n3
    cols: dict[str, Any] = {}
    cols["line"] = np.concatenate((r["line"][rr], s["line"][s_only]))
    cols["callid"] = np.concatenate((r["callid"][rr], s["callid"][s_only]))
    cols["cseq"] = np.concatenate((r["cseq"][rr], s["cseq"][s_only]))
    req = np.concatenate((r["req"][rr], s["req"][s_only]))
    cols["req"] = req
    mcode = np.concatenate((_method_code(r["mid"][rr]), np.full(n3, -1)))
    cols["mcode"] = mcode
    cols["cmeth_s"] = np.concatenate((np.zeros(n1 + n2, "S16"), s["cmeth"][s_only]))
    cols["src"] = np.concatenate((r["src"][rr], np.zeros(n3, np.uint32)))
    cols["src_null"] = np.concatenate((np.zeros(n1 + n2, bool), np.ones(n3, bool)))
    inst = np.zeros((7, n), np.int64)  # 0 where missing (IntegerArray needs no copy)
    miss = np.ones((7, n), bool)
    inst[:5, :n1 + n2] = r["inst"][:, rr]
    miss[:5, :n1 + n2] = r["miss"][:, rr]
    inst[5, :n1] = s["out"][si]
    inst[6, :n1] = s["dep"][si]
    miss[5:, :n1] = False
    inst[5, n1 + n2:] = s["out"][s_only]
    inst[6, n1 + n2:] = s["dep"][s_only]
    miss[5:, n1 + n2:] = False
    cols["inst"], cols["miss"] = inst, miss
    cols["dropped"] = np.concatenate((np.zeros(n1, bool), np.ones(n2, bool), np.zeros(n3, bool)))
    return cols


def _finish_chunk(c: dict) -> dict:
    """Per block: sort rows by line, resolve codes, turn Call-IDs into an Arrow string array."""
    order = np.argsort(c["line"], kind="stable")
    inst, miss = c.pop("inst"), c.pop("miss")
    c = {k: v[order] for k, v in c.items()}
    # one array per instant (not views of a 7-row block) so _to_timeline frees each as it goes
    inst = [inst[k][order] for k in range(7)]
    miss = [miss[k][order] for k in range(7)]
    n = len(c["line"])
    req = c["req"]
    is_req = req < 100
    # cseq method: receive -> method_id code; egress-only -> the text after the CSeq number
    mcode = c["mcode"].copy()
    eg = np.flatnonzero(mcode < 0)
    if len(eg):
        u, inv = np.unique(c["cmeth_s"][eg], return_inverse=True)
        umap = np.array([METHOD_NAMES.index(x.decode(errors="replace").strip().upper())
                         if x.decode(errors="replace").strip().upper() in METHOD_NAMES
                         else len(METHOD_NAMES) for x in u], dtype=np.int64)
        mcode[eg] = umap[inv.ravel()]
    rcode = _method_code(req)  # request method from REQ_METHOD
    inv_code, ack_code, bye_code = 0, 2, 3
    mt = np.full(n, 6, dtype=np.int8)  # index into MSG_TYPES
    mt[is_req & (rcode == inv_code)] = 0
    mt[is_req & (rcode == ack_code)] = 3
    mt[is_req & (rcode == bye_code)] = 4
    mt[~is_req & (req == 180) & (mcode == inv_code)] = 1
    mt[~is_req & (req == 200) & (mcode == inv_code)] = 2
    mt[~is_req & (req == 200) & (mcode == bye_code)] = 5
    return {
        "line": c["line"], "cseq": c["cseq"], "req": req.astype(np.int32),
        "mcode": mcode.astype(np.int8), "rcode": rcode.astype(np.int8), "mt": mt,
        "src": c["src"], "src_null": c["src_null"], "dropped": c["dropped"],
        **{f"i{k}": inst[k] for k in range(7)}, **{f"m{k}": miss[k] for k in range(7)},
        "callid": pa.array(c["callid"]).cast(pa.string()),
    }


def _to_timeline(parts: list[dict], run_id: str) -> pd.DataFrame:
    if not parts:
        parts = [_finish_chunk({
            "line": np.zeros(0, np.int64), "callid": np.zeros(0, "S8"), "cseq": np.zeros(0, np.int64),
            "req": np.zeros(0, np.int64), "mcode": np.zeros(0, np.int64), "cmeth_s": np.zeros(0, "S16"),
            "src": np.zeros(0, np.uint32), "src_null": np.zeros(0, bool),
            "inst": np.zeros((7, 0), np.int64), "miss": np.zeros((7, 0), bool), "dropped": np.zeros(0, bool)})]

    def col(k):  # concatenate one column, releasing the blocks' copies as we go
        arrs = [p.pop(k) for p in parts]
        if len(arrs) == 1:
            return arrs[0]
        out = np.concatenate(arrs)
        del arrs
        _release_memory()
        return out

    callid = pa.chunked_array([p.pop("callid") for p in parts], type=pa.string())
    n = len(callid)
    names = list(METHOD_NAMES) + ["OTHER"]
    mt_names = ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE", "OTHER"]
    req = col("req")
    is_req = req < 100
    src, src_null = col("src"), col("src_null")
    uq = np.unique(src)
    sinv = np.searchsorted(uq, src)  # = np.unique's inverse, without its argsort scratch
    src_names = [f"{v & 255}.{(v >> 8) & 255}.{(v >> 16) & 255}.{(v >> 24) & 255}" for v in uq.tolist()]
    sinv[src_null] = len(src_names)
    src_codes = sinv
    del src, src_null, sinv
    data: dict[str, Any] = {
        "run_id": _strings([run_id], np.zeros(n, np.int32)),
        "call_id": pd.arrays.ArrowStringArray(callid),
        "cseq": _int_col(col("cseq")),
        "cseq_method": _strings(names, col("mcode")),
        "kind": _strings(["request", "response"], (~is_req).astype(np.int32)),
        "method": _strings(names + [None], np.where(is_req, col("rcode"), len(names))),
        "status": _int_col(req, is_req),
        "msg_type": _strings(mt_names, col("mt")),
        "src": _strings(src_names + [None], src_codes),
        "dst": pd.arrays.ArrowStringArray(pa.nulls(n, pa.string())),
        "size": pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)),
    }
    del req, src_codes
    for k, name in enumerate(INSTANTS):
        data[name] = pd.arrays.IntegerArray(col(f"i{k}"), col(f"m{k}"))
    dropped = col("dropped")
    data["dropped"] = pd.arrays.BooleanArray(dropped, np.zeros(n, bool))
    data["drop_reason"] = _strings([None, "not forwarded"], dropped.astype(np.int32))
    line = col("line")
    line += 1
    data["line"] = pd.arrays.IntegerArray(line, np.zeros(n, bool))
    return pd.DataFrame(data, copy=False)


def read_thesis_log(path: str | os.PathLike, *, run_id: str | None = None, strict: bool = False,
                    progress: bool | None = None, block_bytes: int = BLOCK_BYTES,
                    validate: bool = True) -> tuple[pd.DataFrame, IngestReport]:
    """Read a thesis-format OpenSIPS log into the timeline.

    ``strict=True`` raises :class:`IngestError` (file and line) on the first bad
    instrumentation line or negative interval instead of counting it as a skip.  ``progress``
    shows a tqdm bar (default: files over 256 MB).  Extra column: ``line`` (1-based line of
    the receive line, or of the send line for egress-only rows).
    """
    path = Path(path)
    report = IngestReport(source="thesis_log", path=str(path))
    counts: Counter = Counter()
    notes: Counter = Counter()
    size = path.stat().st_size
    if progress is None:
        progress = size > (256 << 20)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=size, unit="B", unit_scale=True, desc=path.name)
    parts: list[dict] = []
    carry: dict | None = None
    line0 = 0
    rest = b""
    # one reused buffer: PAD spaces | unfinished line carried over | block read in place | PAD
    area = bytearray(_PADB)
    rest_len = 0
    with open(path, "rb") as fh:
        eof = False
        while not eof:
            need = 2 * PAD + rest_len + block_bytes + 1
            if len(area) < need:
                grown = bytearray(need)
                grown[:PAD + rest_len] = area[:PAD + rest_len]
                area = grown
            got = fh.readinto(memoryview(area)[PAD + rest_len:PAD + rest_len + block_bytes])
            eof = got < block_bytes
            end = PAD + rest_len + got
            if bar is not None:
                bar.update(got)
            if eof:  # whole lines: the last one gets its newline
                if end > PAD and area[end - 1] != 10:
                    area[end] = 10
                    end += 1
                cut = end
            else:  # the carried part never holds a newline: cut after the block's last one
                cut = area.rfind(b"\n", PAD + rest_len, end) + 1
                if cut == 0:
                    rest_len += got
                    continue
            tail = bytes(area[cut:end])  # the unfinished last line, before the PAD overwrites it
            if cut > PAD:
                area[cut:cut + PAD] = _PADB
                n_nl = area.count(b"\n", PAD, cut)
                blk = _parse_block(memoryview(area)[:cut + PAD], line0, str(path), strict, counts,
                                   notes, n_nl)
            area[PAD:PAD + len(tail)] = tail
            rest_len = len(tail)
            if cut <= PAD:
                continue
            n_lines = blk["n_lines"]
            report.read += n_lines
            r = blk["r"]
            if carry is not None:
                r = {k: (np.concatenate((carry[k], r[k]), axis=1) if r[k].ndim == 2
                         else np.concatenate((carry[k], r[k]))) for k in r}
            (ri, si, r_drop, s_only), carry = _pair(r, blk["s"], eof, line0 + n_lines - 1,
                                                    counts, str(path), strict)
            report.parsed += len(ri) * 2 + len(r_drop) + len(s_only)
            if len(ri) + len(r_drop) + len(s_only):
                parts.append(_finish_chunk(_rows(r, blk["s"], ri, si, r_drop, s_only)))
            del blk, r
            line0 += n_lines
            _release_memory()
    if bar is not None:
        bar.close()
    if report.read == 0:
        raise IngestError(path, "line 0", "empty file")
    report.skipped.update(counts)
    report.notes.extend(f"{k}: {v}" for k, v in sorted(notes.items()))
    df = _to_timeline(parts, run_id if run_id is not None else path.stem)
    report.messages = len(df)
    if report.parsed == 0:
        raise IngestError(path, f"line {report.read}",
                          f"no thesis-format instrumentation line found ({dict(report.skipped)})")
    if validate:
        validate_timeline(df)
    _release_memory()
    return df, report.check()


def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like a thesis-format log."""
    return MARKER + b" " in head and (b"parse_time=" in head or b" ip_out=" in head)


# --------------------------------------------------------------------------- writer
def _ip_le(values: pd.Series) -> np.ndarray:
    u, inv = np.unique(values.fillna("").astype(str).to_numpy(), return_inverse=True)
    out = []
    for s in u:
        host = s.rsplit(":", 1)[0] if s.count(":") == 1 else s
        parts = host.split(".")
        try:
            q = [int(x) for x in parts]
            assert len(q) == 4 and all(0 <= x < 256 for x in q)
            v = q[0] | q[1] << 8 | q[2] << 16 | q[3] << 24
            out.append(v - (1 << 32) if v >= 1 << 31 else v)
        except (ValueError, AssertionError):
            out.append(0)
    return np.asarray(out, dtype=np.int64)[inv.ravel()]


def _s(a) -> pa.Array:
    return pc.cast(pa.array(a), pa.string())


def write_thesis_log(timeline: pd.DataFrame, path: str | os.PathLike, *, host: str = "sps",
                     pid: int = 4242, label: str | None = None, batch_rows: int = 500_000) -> int:
    """Write ``timeline`` as a thesis-format syslog file (the format :func:`read_thesis_log` reads).

    A row with ``t_sip_in`` and ``t_sip_c`` gives a receive line (null kernel stamps are written
    as the ENOENT zero stamp); a row with ``t_sip_out`` and ``t_dep`` gives a send line.  Lines
    are ordered by the time they are logged (t_sip_c, t_dep).  Instants are floored to µs
    (the format's resolution).  ``label`` (e.g. "SYNTHETIC: made by bench/logs.py seed 1")
    is written as a first, non-instrumentation syslog line.  A ``worker`` column, if present,
    sets the syslog pid (pid + worker).  Returns the number of lines written.
    """
    tl = timeline
    key = tl["t_sip_c"].to_numpy(dtype="float64", na_value=np.nan)
    key = np.where(np.isnan(key), tl["t_dep"].to_numpy(dtype="float64", na_value=np.nan), key)
    order = np.argsort(np.nan_to_num(key, nan=0.0), kind="stable")
    written = 0
    with open(path, "wb") as fh:
        if label:
            fh.write(f"Jan  1 00:00:00 {host} sipperf: {label}\n".encode())
            written += 1
        for k in range(0, len(order), batch_rows):
            written += _write_batch(tl.iloc[order[k:k + batch_rows]], fh, host, pid)
    return written


def _write_batch(tl: pd.DataFrame, fh, host: str, pid: int) -> int:
    n = len(tl)
    present = {c: tl[c].notna().to_numpy(bool) for c in INSTANTS}
    iu = {c: np.where(present[c], tl[c].to_numpy(dtype="int64", na_value=0) // 1000, 0) for c in INSTANTS}
    is_req = (tl["kind"].astype("string") == "request").fillna(False).to_numpy(bool)
    meth = tl["method"].astype("string").str.upper().fillna("").to_numpy(object)
    cmeth = tl["cseq_method"].astype("string").str.upper().fillna("").to_numpy(object)
    um, minv = np.unique(meth.astype(str), return_inverse=True)
    mid_of = np.array([METHOD_IDS.get(x, 16384) for x in um], dtype=np.int64)
    uc, cinv = np.unique(cmeth.astype(str), return_inverse=True)
    cmid_of = np.array([METHOD_IDS.get(x, 16384) for x in uc], dtype=np.int64)
    status = tl["status"].to_numpy(dtype="float64", na_value=0).astype(np.int64)
    req = np.where(is_req, mid_of[minv.ravel()], status)
    cseq = tl["cseq"].to_numpy(dtype="float64", na_value=0).astype(np.int64)
    callid = tl["call_id"].astype(str).to_numpy(object)
    pids = (pid + tl["worker"].to_numpy(dtype="float64", na_value=0).astype(np.int64)) if "worker" in tl else np.full(n, pid)
    src = _ip_le(tl["src"])

    rv = present["t_sip_in"] & present["t_sip_c"]
    sv = present["t_sip_out"] & present["t_dep"]
    P, N = iu["t_sip_in"], iu["t_sip_c"]
    A = np.where(present["t_arr"], iu["t_arr"], 0)
    S = np.where(present["t_stack"], iu["t_stack"], 0)
    Q = np.where(present["t_sockq"], iu["t_sockq"], 0)

    def prefix(t_us, func, pids_):
        ts = pa.array(t_us // 1_000_000, type=pa.timestamp("s"))
        d = pc.strftime(ts, format="%b %d %H:%M:%S")
        return pc.binary_join_element_wise(d, f" {host} opensips[", _s(pids_), f"]: ERROR:{func}: ramekris ", "")

    lf = lambda x: pc.binary_join_element_wise(_s(x), ".000000", "")  # noqa: E731
    i = np.flatnonzero(rv)
    recv = pc.binary_join_element_wise(
        prefix(N[i], "core:receive_msg", pids[i]),
        "src_ip ", _s(src[i]), " parse_time=", lf(N[i] - P[i]), " wait_time=", lf(P[i] - A[i]),
        " stack_time=", lf(S[i] - A[i]), " sock_recvtime=", lf(Q[i] - S[i]), " now=", _s(N[i]),
        " request ", _s(req[i]), " callid=", pa.array(callid[i], pa.string()), " cseq=", _s(cseq[i]),
        " method_id=", _s(cmid_of[cinv.ravel()][i]), "\n", "")
    j = np.flatnonzero(sv)
    func = np.where(~is_req[j], "tm:relay_reply",
                    np.where(req[j] == METHOD_IDS["ACK"], "core:forward_request", "tm:t_forward_nonack"))
    O, D = iu["t_sip_out"], iu["t_dep"]
    ts = pa.array(D[j] // 1_000_000, type=pa.timestamp("s"))
    send = pc.binary_join_element_wise(
        pc.strftime(ts, format="%b %d %H:%M:%S"), f" {host} opensips[", _s(pids[j]), "]: ERROR:",
        pa.array(func, pa.string()), ": ramekris now=", _s(O[j]), " ip_out=", _s(D[j] - O[j]),
        " request ", _s(req[j]), " callid=", pa.array(callid[j], pa.string()), " cseq=", _s(cseq[j]),
        " ", pa.array(cmeth[j].astype(str), pa.string()), "\n", "")
    t_log = np.concatenate((N[i], D[j]))
    tie = np.concatenate((np.zeros(len(i), np.int8), np.ones(len(j), np.int8)))
    order = np.lexsort((tie, t_log))
    lines = pc.take(pa.concat_arrays([recv, send]), pa.array(order))
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    if len(arr):
        _, offs, data = arr.buffers()
        o = np.frombuffer(offs, dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
        fh.write(memoryview(data)[o[0]:o[-1]])
    return len(order)


# --------------------------------------------------------------------------- synthetic data
def synthetic_timeline(n_calls: int, *, seed: int = 1, rate_cps: float = 100.0,
                       t0_ns: int = 1_300_000_000_000_000_000) -> pd.DataFrame:
    """A SYNTHETIC timeline of ``n_calls`` thesis call flows (6 messages each), for tests and
    benchmarks only: Poisson call arrivals, 250 ms holding time, and independent
    exponential components with means near Table 4.3 of the thesis (K_stack 2.4 µs,
    K_sockq 7.9 µs, K_copy 2 µs, T1_sip 10 µs, T2_sip 20 µs, K_snd 5.6 µs).  No queueing:
    the numbers are made up and only the structure is realistic.  ``run_id`` is
    ``"synthetic-seed<seed>"``.
    """
    rng = np.random.default_rng(seed)
    n = n_calls * 6
    starts = t0_ns + np.cumsum(rng.exponential(1e9 / rate_cps, n_calls)).astype(np.int64)
    offs_ms = np.array([0.0, 1.0, 2.0, 3.0, 253.0, 254.0])
    t_arr = (starts[:, None] + (offs_ms * 1e6).astype(np.int64)[None, :]).ravel()
    t_arr += rng.integers(0, 200_000, n)
    comp_us = {"k_stack": 2.4, "k_sockq": 7.9, "k_copy": 2.0, "t_sip1": 10.0, "t_sip2": 20.0,
               "k_snd": 5.6}
    c = {k: np.maximum(1000, (rng.exponential(v, n) * 1000).astype(np.int64)) for k, v in comp_us.items()}
    t_stack = t_arr + c["k_stack"]
    t_sockq = t_stack + c["k_sockq"]
    t_sip_in = t_sockq + c["k_copy"]
    t_sip_c = t_sip_in + c["t_sip1"]
    t_sip_out = t_sip_c + c["t_sip2"]
    t_dep = t_sip_out + c["k_snd"]
    k = np.tile(np.arange(6), n_calls)
    kinds = np.array(["request", "response", "response", "request", "request", "response"])[k]
    method = np.array(["INVITE", None, None, "ACK", "BYE", None], dtype=object)[k]
    status = np.array([0, 180, 200, 0, 0, 200])[k]
    cseq_m = np.array(["INVITE", "INVITE", "INVITE", "ACK", "BYE", "BYE"])[k]
    cseq = np.array([1, 1, 1, 1, 2, 2])[k]
    uac, uas = "10.0.0.1", "10.0.0.3"
    src = np.array([uac, uas, uas, uac, uac, uas])[k]
    dst = np.array([uas, uac, uac, uas, uas, uac])[k]
    call = np.repeat(np.arange(n_calls), 6)
    callid = pc.binary_join_element_wise(_s(call + 1), "-synthetic@10.0.0.1", "")
    df = pd.DataFrame({
        "run_id": _strings([f"synthetic-seed{seed}"], np.zeros(n, np.int32)),
        "call_id": pd.arrays.ArrowStringArray(callid),
        "cseq": _int_col(cseq),
        "cseq_method": pd.array(cseq_m, dtype="string"),
        "kind": pd.array(kinds, dtype="string"),
        "method": pd.array(method, dtype="string"),
        "status": _int_col(status, status == 0),
        "msg_type": pd.array(np.array(["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"])[k], dtype="string"),
        "src": pd.array(src, dtype="string"),
        "dst": pd.array(dst, dtype="string"),
        "size": _int_col(np.array([624, 375, 542, 466, 466, 367])[k]),
        "t_arr": _int_col(t_arr), "t_stack": _int_col(t_stack), "t_sockq": _int_col(t_sockq),
        "t_sip_in": _int_col(t_sip_in), "t_sip_c": _int_col(t_sip_c), "t_sip_out": _int_col(t_sip_out),
        "t_dep": _int_col(t_dep),
        "dropped": pd.arrays.BooleanArray(np.zeros(n, bool), np.zeros(n, bool)),
        "drop_reason": pd.arrays.ArrowStringArray(pa.nulls(n, pa.string())),
    })
    return df
