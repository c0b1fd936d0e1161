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
tokenized by one compiled pass over its bytes (:func:`sipperf.ingest.thesis_logs.scan.scan_block`,
numba: finds the lines, checks the keys, reads the numbers) and checked, paired and written
by a second one (:func:`sipperf.ingest.thesis_logs.pair.pair_block`: instants, hash table of the
receive lines waiting for their send line, rows in line order straight into the final
columns, which the DataFrame then wraps without copying) — never a Python loop per line
(only lines that fail the structural test are classified one by one).  Pairing is per key
inside a block: the k-th send line of a key goes with its k-th receive line (receive lines
carried over first); unpaired receive lines of the last 20 000 lines are carried to the next
block.  ``bench/logs.py`` measures a 6 M-message log.
Resolution is 1 µs (``gettimeofday``).
"""
from __future__ import annotations

import os
import sys
import lzma
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sipperf.ingest.thesis_logs.pair import (  # noqa: F401  (NO_STAMP_BEFORE_NS: documented here)
    C_NCOL, N_METHODS, NO_STAMP_BEFORE_NS, ST_BAD_R, ST_BAD_S, ST_BAD_T, ST_DROPPED, ST_FIRST_BAD_R,
    ST_LEN, ST_MISS0, ST_NEG_R, ST_NEG_S, ST_NFIX, ST_PAIRED, ST_ROWS, ST_SONLY, dict_strings, pair_block)
from sipperf.ingest.thesis_logs.scan import gather, scan_block
from sipperf.timeline import INSTANTS, IngestError, IngestReport, validate_timeline

MARKER = b"ramekris"
#: OpenSIPS 1.x request method bit values (parser/msg_parser.h), index = log2(value)
METHOD_NAMES: tuple[str, ...] = (
    "INVITE", "CANCEL", "ACK", "BYE", "INFO", "OPTIONS", "UPDATE", "REGISTER", "MESSAGE",
    "SUBSCRIBE", "NOTIFY", "PRACK", "REFER", "PUBLISH",
)
METHOD_IDS: dict[str, int] = {m: 1 << i for i, m in enumerate(METHOD_NAMES)}
assert len(METHOD_NAMES) == N_METHODS
BLOCK_BYTES = 16 << 20
CARRY_LINES = 20_000


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


# --------------------------------------------------------------------------- block parser
def _classify_rest(buf: bytes, starts: np.ndarray, ends: np.ndarray, idx: np.ndarray,
                   counts: Counter, first: dict | None = None, line0: int = 0) -> None:
    """Count the lines that are not instrumentation lines by reason; ``first`` collects the
    1-based line number of the first one of each reason (our own ``sipperf:`` label line,
    which marks synthetic logs, excepted)."""
    for i in idx.tolist():
        line = bytes(buf[starts[i]:ends[i]])
        if not line.strip():
            why = "empty line"
        elif MARKER in line:
            if b"reply forwarded to" in line:
                why = "reply-forwarded line (no timestamps)"
            else:
                why = "missing field"
        elif b"reply forwarded to" in line:
            why = "reply-forwarded line (no timestamps)"
        else:
            why = "not an instrumentation line"
        counts[why] += 1
        if first is not None and why not in first and b" sipperf: " not in line:
            first[why] = line0 + i + 1


def _strings(values: list[str | None], codes: np.ndarray, run: int = 0) -> pd.arrays.ArrowStringArray:
    """``values[codes]`` (None, or a code outside ``values``, is null) as a pandas string array,
    built straight as Arrow ``large_string`` (what pandas stores); ``run`` > 0: ``values[0]``
    repeated ``run`` times (``codes`` unused)."""
    enc = [b"" if v is None else v.encode() for v in values]
    if run and values[0] is not None:  # one value repeated: offsets are a ramp, data a tiling
        off = np.arange(run + 1, dtype=np.int64) * len(enc[0])
        arr = pa.Array.from_buffers(pa.large_string(), run, [None, pa.py_buffer(off),
                                                            pa.py_buffer(enc[0] * run)])
        return pd.arrays.ArrowStringArray(arr)
    d_off = np.zeros(len(enc) + 1, np.int64)
    d_off[1:] = np.cumsum([len(e) for e in enc])
    d_data = np.frombuffer(b"".join(enc) or b"\0", np.uint8)
    d_null = np.array([v is None for v in values], dtype=bool)
    codes = np.zeros(1, np.int8) if run else np.ascontiguousarray(codes)
    off, data, valid, nulls = dict_strings(codes, d_data, d_off, d_null, run)
    n = len(off) - 1
    arr = pa.Array.from_buffers(pa.large_string(), n, [pa.py_buffer(valid) if nulls else None,
                                                      pa.py_buffer(off), pa.py_buffer(data)],
                                null_count=int(nulls))
    return pd.arrays.ArrowStringArray(arr)


def _null_strings(n: int) -> pd.arrays.ArrowStringArray:
    """An all-null string column (its zero buffers stay untouched, hence cost no memory)."""
    arr = pa.Array.from_buffers(pa.large_string(), n, [pa.py_buffer(np.zeros((n + 7) // 8, np.uint8)),
                                                      pa.py_buffer(np.zeros(n + 1, np.int64)),
                                                      pa.py_buffer(np.zeros(0, np.uint8))], null_count=n)
    return pd.arrays.ArrowStringArray(arr)


def _int_col(v: np.ndarray, null: np.ndarray | None = None) -> pd.arrays.IntegerArray:
    v = np.asarray(v, dtype=np.int64)
    m = np.zeros(len(v), bool) if null is None else np.asarray(null, bool)
    return pd.arrays.IntegerArray(np.where(m, 0, v), m)


# --------------------------------------------------------------------------- compiled path
_METH_LIT = np.zeros((len(METHOD_NAMES), 16), np.uint8)
for _i, _m in enumerate(METHOD_NAMES):
    _METH_LIT[_i, :len(_m)] = np.frombuffer(_m.encode(), np.uint8)
_METH_LEN = np.array([len(m) for m in METHOD_NAMES], np.int64)
_MT_NAMES = ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE", "OTHER"]


class _Columns:
    """The timeline's columns, preallocated (sized from the first block, grown by 1.5x if a
    later part of the file is denser) and filled in place by :func:`.pair.pair_block`.
    Pages past the last row are never touched, so the over-allocation costs no memory."""

    def __init__(self, rows: int, nbytes: int):
        self.n = 0
        self.line = np.empty(rows, np.int64)
        self.cseq = np.empty(rows, np.int64)
        self.req = np.empty(rows, np.int32)
        self.rcode = np.empty(rows, np.int8)
        self.mcode = np.empty(rows, np.int8)
        self.mt = np.empty(rows, np.int8)
        self.src = np.empty(rows, np.uint32)
        self.srcnull = np.empty(rows, bool)
        self.dropped = np.empty(rows, bool)
        self.inst = np.empty((7, rows), np.int64)
        self.miss = np.empty((7, rows), bool)
        self.off = np.empty(rows + 1, np.int64)
        self.off[0] = 0
        self.cid = np.empty(nbytes, np.uint8)

    def reserve(self, rows: int, nbytes: int) -> None:
        cap = len(self.line)
        if self.n + rows > cap:
            new = max(self.n + rows, int(cap * 1.5))
            for k in ("line", "cseq", "req", "rcode", "mcode", "mt", "src", "srcnull", "dropped"):
                a = getattr(self, k)
                b = np.empty(new, a.dtype)
                b[:self.n] = a[:self.n]
                setattr(self, k, b)
            for k in ("inst", "miss"):
                a = getattr(self, k)
                b = np.empty((7, new), a.dtype)
                b[:, :self.n] = a[:, :self.n]
                setattr(self, k, b)
            off = np.empty(new + 1, np.int64)
            off[:self.n + 1] = self.off[:self.n + 1]
            self.off = off
        used = int(self.off[self.n])
        if used + nbytes > len(self.cid):
            cid = np.empty(max(used + nbytes, int(len(self.cid) * 1.5)), np.uint8)
            cid[:used] = self.cid[:used]
            self.cid = cid

    def args(self) -> tuple:
        return (self.line, self.cseq, self.req, self.rcode, self.mcode, self.mt, self.src,
                self.srcnull, self.dropped, self.inst, self.miss, self.off, self.cid, self.n)


def _empty_carry() -> tuple:
    return (np.zeros((0, C_NCOL), np.int64), np.zeros((0, 3), bool), np.zeros(0, np.uint64),
            np.zeros(1, np.int64), np.zeros(0, np.uint8))


class _BlockPairer:
    """State carried from block to block: the output columns, the carry, the scratch table."""

    def __init__(self, path: str, strict: bool, size: int, counts: Counter, notes: Counter):
        self.path, self.strict, self.size = path, strict, size
        self.counts, self.notes = counts, notes
        self.cols: _Columns | None = None
        self.carry = _empty_carry()
        self.t64 = np.zeros((0, 4), np.uint64)
        self.t32 = np.zeros((0, 8), np.int32)
        self.gen = 0
        self.stats = np.zeros(ST_LEN, np.int64)
        self.parsed = 0

    def block(self, b: np.ndarray, starts, ends, kind, iv, okm, line0: int, final: bool,
              block_len: int) -> None:
        n_lines = len(kind)
        n_carry = len(self.carry[2])
        carry_bytes = len(self.carry[4])
        if self.cols is None:  # size the columns from the first block's density
            scale = self.size / max(block_len, 1)
            self.cols = _Columns(int(n_lines * scale * 1.15) + n_lines + n_carry + 1024,
                                 int(block_len * scale * 0.25) + block_len + carry_bytes + 4096)
        self.cols.reserve(n_lines + n_carry, block_len + carry_bytes)
        need = 1 << max(4, int(1.25 * (n_lines + n_carry) + 1).bit_length())
        if len(self.t64) < need:  # 32-byte rows, seen as uint64 (key) and int32 (counts, chain)
            buf = np.zeros(need * 32, np.uint8)
            self.t64, self.t32 = buf.view(np.uint64).reshape(need, 4), buf.view(np.int32).reshape(need, 8)
            self.gen = 0
        self.gen += 1
        fix_row = np.empty(n_lines, np.int64)
        fix_st = np.empty(n_lines, np.int64)
        fix_en = np.empty(n_lines, np.int64)
        fix_req = np.empty(n_lines, np.int64)
        st = self.stats
        self.carry = pair_block(b, _words(b), starts, ends, kind, iv, okm, line0, final, CARRY_LINES,
                                *self.carry, self.t64, self.t32, self.gen, _METH_LIT, _METH_LEN,
                                *self.cols.args(), fix_row, fix_st, fix_en, fix_req, st)
        if self.strict:
            for k, what in ((ST_BAD_R, "bad number or missing field in receive line"),
                            (ST_NEG_R, "negative interval in receive line"),
                            (ST_BAD_S, "bad number or missing field in send line"),
                            (ST_NEG_S, "negative interval (ip_out < 0) in send line"),
                            (ST_BAD_T, "negative interval: send before t_sip_c of its receive line")):
                if st[k]:
                    first = int(st[k + ST_FIRST_BAD_R - ST_BAD_R])
                    raise IngestError(self.path, f"line {line0 + first + 1}", what)
        bad = int(st[ST_BAD_R] + st[ST_BAD_S])
        if bad:
            self.counts["bad number"] += bad
        neg = int(st[ST_NEG_R] + st[ST_NEG_S] + st[ST_BAD_T])
        if neg:
            self.counts["negative interval"] += neg
        for k, name in enumerate(("t_arr", "t_stack", "t_sockq")):
            if st[ST_MISS0 + k]:
                self.notes[f"{name} missing (ioctl ENOENT / no stamp)"] += int(st[ST_MISS0 + k])
        n_fix = int(st[ST_NFIX])
        if n_fix:  # egress-only rows whose CSeq method text needs Python's decode/strip/upper
            c = self.cols
            rows, req = fix_row[:n_fix], fix_req[:n_fix]
            meth = _gather_bytes(_words(b), fix_st[:n_fix], fix_en[:n_fix], width=16)
            u, inv = np.unique(meth, return_inverse=True)
            umap = np.array([METHOD_NAMES.index(x.decode(errors="replace").strip().upper())
                             if x.decode(errors="replace").strip().upper() in METHOD_NAMES
                             else len(METHOD_NAMES) for x in u], dtype=np.int64)
            mcode = umap[inv.ravel()]
            c.mcode[rows] = mcode
            mt = np.full(n_fix, 6, np.int8)
            mt[(req == 180) & (mcode == 0)] = 1
            mt[(req == 200) & (mcode == 0)] = 2
            mt[(req == 200) & (mcode == 3)] = 5
            c.mt[rows] = np.where(req < 100, c.mt[rows], mt)
        self.cols.n += int(st[ST_ROWS])
        self.parsed += int(2 * st[ST_PAIRED] + st[ST_DROPPED] + st[ST_SONLY])

    def finish(self, line0: int) -> None:
        """Drop the receive lines still carried (a file that ends exactly at a block boundary)."""
        if len(self.carry[2]):
            z = np.zeros(0, np.int64)
            self.block(np.frombuffer(_PADB * 2, np.uint8), z, z, np.zeros(0, np.int8),
                       np.zeros((0, 12), np.int64), np.zeros((0, 10), bool), line0, True, 0)


def _frame(c: _Columns | None, run_id: str, utf8_replace: bool = False) -> pd.DataFrame:
    """The timeline from the filled columns, without copying them (``utf8_replace``: decode
    Call-IDs that are not UTF-8 with U+FFFD, one by one)."""
    if c is None:
        c = _Columns(0, 0)
    n = c.n
    off = c.off[:n + 1]
    nbytes = int(off[-1])
    callid = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(off),
                                                          pa.py_buffer(c.cid[:nbytes])])
    if utf8_replace:
        callid = pa.array([None if v is None else v.decode("utf-8", "replace") for v in callid.to_pylist()],
                          pa.large_string())
    else:
        callid = callid.cast(pa.large_string())  # checks UTF-8 (ArrowInvalid), without a copy
    names = list(METHOD_NAMES) + ["OTHER"]
    req = c.req[:n]
    is_req = req < 100
    src, src_null = c.src[:n], c.srcnull[:n]
    uq = np.unique(src)
    sinv = np.searchsorted(uq, src)  # = np.unique's inverse, without its argsort scratch
    src_names = [f"{v & 255}.{(v >> 8) & 255}.{(v >> 16) & 255}.{(v >> 24) & 255}" for v in uq.tolist()]
    sinv[src_null] = len(src_names)
    dropped = c.dropped[:n]
    # the string columns are the costly part (Arrow wants every value's bytes): two threads
    # (the compiled builder releases the GIL)
    jobs = {
        "run_id": ([run_id], np.zeros(min(n, 1), np.int8), n),
        "cseq_method": (names, c.mcode[:n], 0),
        "kind": (["request", "response"], (~is_req).view(np.int8), 0),
        "method": (names + [None], np.where(is_req, c.rcode[:n], np.int8(len(names))), 0),
        "msg_type": (_MT_NAMES, c.mt[:n], 0),
        "src": (src_names + [None], sinv, 0),
        "drop_reason": ([None, "not forwarded"], dropped.view(np.int8), 0),
    }
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as ex:
        futs = {k: ex.submit(_strings, *v) for k, v in jobs.items()}
        strings = {k: f.result() for k, f in futs.items()}
    del jobs, sinv
    data: dict[str, Any] = {
        "run_id": strings["run_id"],
        "call_id": pd.arrays.ArrowStringArray(callid),
        "cseq": pd.arrays.IntegerArray(c.cseq[:n], np.zeros(n, bool)),
        "cseq_method": strings["cseq_method"],
        "kind": strings["kind"],
        "method": strings["method"],
        "status": _int_col(req, is_req),
        "msg_type": strings["msg_type"],
        "src": strings["src"],
        "dst": _null_strings(n),
        "size": pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)),
    }
    for k, name in enumerate(INSTANTS):
        data[name] = pd.arrays.IntegerArray(c.inst[k, :n], c.miss[k, :n])
    data["dropped"] = pd.arrays.BooleanArray(dropped, np.zeros(n, bool))
    data["drop_reason"] = strings["drop_reason"]
    data["line"] = pd.arrays.IntegerArray(c.line[:n], np.zeros(n, bool))
    return pd.DataFrame(data, copy=False)


def _blocks(fh, block_bytes: int, n_areas: int = 3):
    """Yield the file's blocks of whole lines, tokenized: ``(area, b, scan, got, eof, length)``
    where ``area`` is the buffer (PAD spaces | unfinished line of the previous block | block |
    PAD), ``b`` its uint8 view up to the last newline + PAD (None when the block has no whole
    line yet), ``scan`` the :func:`scan_block` arrays, ``got`` the bytes read.  The buffers
    are reused round-robin: a block's buffer stays valid while the next ``n_areas - 2`` are read
    (see :class:`_Prefetch`)."""
    areas = [bytearray(_PADB) for _ in range(n_areas)]
    eq = np.zeros(8, np.int64)
    k = 0
    tail = b""
    carried = 0  # bytes of ``tail`` (an unfinished line, possibly longer than a block)
    none = (None, None, None, None, None)
    eof = False
    while not eof:
        area = areas[k % n_areas]
        k += 1
        need = 2 * PAD + carried + block_bytes + 1
        if len(area) < need:
            area = areas[(k - 1) % n_areas] = bytearray(need)
        area[PAD:PAD + carried] = tail
        got = fh.readinto(memoryview(area)[PAD + carried:PAD + carried + block_bytes])
        eof = got < block_bytes
        end = PAD + carried + got
        if eof:  # whole lines: the last one gets its newline
            if end > PAD and area[end - 1] != 10:
                area[end] = 10
                end += 1
            cut = end
        else:  # the carried part never holds a newline: cut after the block's last one
            cut = area.rfind(b"\n", PAD + carried, end) + 1
            if cut == 0:
                tail = bytes(area[PAD:end])
                carried = len(tail)
                yield area, None, none, got, eof, 0
                continue
        tail = bytes(area[cut:end])  # the unfinished last line, before the PAD overwrites it
        carried = len(tail)
        if cut <= PAD:
            yield area, None, none, got, eof, 0
            continue
        area[cut:cut + PAD] = _PADB
        b = np.frombuffer(memoryview(area)[:cut + PAD], dtype=np.uint8)
        n_nl = int(np.count_nonzero(b[PAD:cut] == 10))  # SIMD; bytearray.count is 3x slower
        yield area, b, scan_block(b, _words(b), PAD, n_nl, eq), got, eof, cut - PAD


class _Prefetch:
    """Run a generator one item ahead in a thread: reading and tokenizing the next block
    (``readinto`` and the compiled tokenizer release the GIL) overlaps pairing this one.  The
    queue holds one item, so with three buffers a buffer is refilled only after its block was
    consumed.  Errors in the thread are raised in the caller; leaving early stops the thread."""

    _END = object()

    def __init__(self, gen):
        import queue
        import threading
        self._q: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._gen = gen
        self._t = threading.Thread(target=self._run, name="thesis-log-reader", daemon=True)

    def _put(self, item) -> bool:
        import queue
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._gen:
                if not self._put(item):
                    return
            self._put(self._END)
        except BaseException as e:  # handed to the consumer
            self._put(e)

    def __enter__(self):
        self._t.start()
        return self

    def __iter__(self):
        while True:
            item = self._q.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def __exit__(self, *exc) -> None:
        self._stop.set()
        try:
            while True:
                self._q.get_nowait()
        except Exception:
            pass
        self._t.join()
        self._gen.close()


def _stem(path: Path) -> str:
    from sipperf.ingest.paths import display_path
    return display_path(path.stem)


def _line_of(e: IngestError) -> int:
    pos = str(e.position)
    return int(pos[5:]) if pos.startswith("line ") and pos[5:].isdigit() else 1 << 62


def _strict_skip(path, first: dict) -> None:
    why, line = min(first.items(), key=lambda kv: kv[1])
    raise IngestError(path, f"line {line}", f"--strict: {why}")


def _read_blocks(path, block_bytes, pairer, report, counts, strict, bar):
    """Read, tokenize and pair the file's blocks; returns (the reader, lines read)."""
    line0 = 0
    with open_log(path) as fh, _Prefetch(_blocks(fh, block_bytes)) as blocks:
        for area, b, (starts, ends, kind, iv, okm), got, eof, block_len in blocks:
            if bar is not None:
                bar.update(got)
            if b is None:
                continue
            n_nl = len(kind)
            first: dict = {}
            _classify_rest(area, starts, ends, np.flatnonzero(kind == 0), counts,
                           first if strict else None, line0)
            try:
                pairer.block(b, starts, ends, kind, iv, okm, line0, eof, block_len)
            except IngestError as e:
                if first and min(first.values()) < _line_of(e):
                    _strict_skip(path, first)
                raise
            if first:
                _strict_skip(path, first)
            del b, starts, ends, kind, iv, okm
            report.read += n_nl
            line0 += n_nl
        pairer.finish(line0)
    return fh, line0


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
    if progress is None:    # a bar only on a terminal: never in a pipe, a log or captured output
        progress = size > (256 << 20) and sys.stderr.isatty()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=size, unit="B", unit_scale=True, desc=path.name)
    pairer = _BlockPairer(str(path), strict, size, counts, notes)
    line0 = 0
    try:
        fh, line0 = _read_blocks(path, block_bytes, pairer, report, counts, strict, bar)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
        raise IngestError(path, f"line {report.read + 1}",
                          f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    report.parsed = pairer.parsed
    if bar is not None:
        bar.close()
    if report.read == 0:
        raise IngestError(path, "line 0", "empty file")
    report.skipped.update(counts)
    report.notes.extend(f"{k}: {v}" for k, v in sorted(notes.items()))
    if fh.bare_cr:
        report.notes.append(f"CR-only line ends: {fh.bare_cr} CRs read as line ends")
    try:
        df = _frame(pairer.cols, run_id if run_id is not None else _stem(path))
    except pa.ArrowInvalid:  # a Call-ID that is not UTF-8: replace the bad bytes, as for captures
        df = _frame(pairer.cols, run_id if run_id is not None else _stem(path), utf8_replace=True)
        report.notes.append("Call-IDs with bytes that are not UTF-8: shown with U+FFFD")
    del pairer
    if report.parsed == 0:
        raise IngestError(path, f"line {report.read}",
                          f"no thesis-format instrumentation line found ({dict(report.skipped)})")
    df = _post_pair(df, report)
    report.messages = len(df)
    if validate:
        validate_timeline(df)
    _release_memory()
    return df, report.check()


#: lines logged more than this before the latest earlier line count as out of time order
ORDER_TOLERANCE_NS = 10_000_000


def _post_pair(df: pd.DataFrame, report: IngestReport) -> pd.DataFrame:
    """Re-pair send lines logged *before* their receive line (a reordered or merged log), check
    the time order of the lines, and classify every receive line without a send line by the
    drop rule (:mod:`sipperf.ingest.pairing.hop`, column ``disposition``)."""
    from sipperf.ingest.pairing import hop

    t_c = df["t_sip_c"].to_numpy(dtype="float64", na_value=np.nan)
    t_o = df["t_sip_out"].to_numpy(dtype="float64", na_value=np.nan)
    drop = df["dropped"].to_numpy(bool)
    egress_only = np.isnan(t_c) & ~np.isnan(t_o)
    repaired = 0
    if drop.any() and egress_only.any():
        what = df["method"].astype("string").fillna(df["status"].astype("string")).fillna("")
        key = (df["call_id"].astype("string").fillna("") + "\x00" + df["cseq"].astype("string").fillna("")
               + "\x00" + what).to_numpy(object)
        line = df["line"].to_numpy(dtype="int64", na_value=0)
        d_idx = np.flatnonzero(drop)
        e_idx = np.flatnonzero(egress_only)
        d_keys = set(key[d_idx])
        e_idx = e_idx[np.fromiter((k in d_keys for k in key[e_idx]), bool, len(e_idx))]
        if len(e_idx):
            waiting: dict = {}
            for j in e_idx[np.argsort(t_o[e_idx], kind="stable")]:
                waiting.setdefault(key[j], []).append(j)
            take = []
            for i in d_idx[np.argsort(t_c[d_idx], kind="stable")]:
                cand = waiting.get(key[i])
                if not cand:
                    continue
                for n_, j in enumerate(cand):
                    if line[j] < line[i] and t_o[j] >= t_c[i]:
                        take.append((i, j))
                        del cand[n_]
                        break
            if take:
                ii = np.array([a for a, _ in take])
                jj = np.array([b for _, b in take])
                df = df.copy()
                for c in ("t_sip_out", "t_dep"):
                    v = df[c].array.copy()
                    v[ii] = df[c].array[jj]
                    df[c] = v
                dr = df["dropped"].array.copy()
                dr[ii] = False
                df["dropped"] = dr
                reason = df["drop_reason"].astype(object).to_numpy().copy()
                reason[ii] = None
                df["drop_reason"] = pd.array(reason, dtype="string")
                keep = np.ones(len(df), bool)
                keep[jj] = False
                df = df[keep].reset_index(drop=True)
                repaired = len(take)
                report.notes.append(f"{repaired} send lines came before their receive line in the file "
                                    f"(log not in time order): re-paired by Call-ID, CSeq and time")
    # the time order of the lines: each line's logged instant (receive: now = t_sip_c; send: now)
    line = df["line"].to_numpy(dtype="int64", na_value=0)
    firsts = [int(df[c].min()) for c in INSTANTS if df[c].notna().any()]
    t0 = min(firsts) if firsts else 0

    def _f64(col: pd.Series) -> np.ndarray:  # ns after t0 as float64: exact below 2^53 ns (104 days)
        return (col - t0).to_numpy(dtype="float64", na_value=np.nan)

    t_c = _f64(df["t_sip_c"])
    t_log = np.where(np.isnan(t_c), _f64(df["t_sip_out"]), t_c)
    if len(line) > 1 and not (np.diff(line) >= 0).all():
        t_log = t_log[np.argsort(line, kind="stable")]
    ok = ~np.isnan(t_log)
    runmax = np.maximum.accumulate(np.where(ok, t_log, -np.inf))
    late = int((ok[1:] & (t_log[1:] < runmax[:-1] - ORDER_TOLERANCE_NS)).sum()) if len(line) > 1 else 0
    del t_log, ok, runmax
    order = {"lines_out_of_time_order": late, "send_lines_repaired": repaired,
             "tolerance_ms": ORDER_TOLERANCE_NS / 1e6}
    # the drop rule, on the Call-IDs that have a receive line without a send line
    t_in = _f64(df["t_arr"])
    for c in ("t_stack", "t_sockq", "t_sip_in", "t_sip_c"):
        t_in = np.where(np.isnan(t_in), _f64(df[c]), t_in)
    t_out = _f64(df["t_dep"])
    t_out = np.where(np.isnan(t_out), _f64(df["t_sip_out"]), t_out)
    has_in, has_out = ~np.isnan(t_in), ~np.isnan(t_out)
    cats = list(hop.DISPOSITIONS)
    codes = np.full(len(df), cats.index(hop.DROPPED), np.int8)
    codes[has_in & has_out] = cats.index(hop.RELAYED)
    codes[~has_in & has_out] = cats.index(hop.ORIGINATED)
    todo = has_in & ~has_out
    if todo.any():
        end = float(np.nanmax(np.concatenate([t_in[has_in], t_out[has_out]])))
        both = has_in & has_out
        longest = float(np.max(t_out[both] - t_in[both])) if both.any() else None
        rel = df["call_id"].isin(pd.unique(df["call_id"].to_numpy(object)[todo])).to_numpy(bool)
        idx = np.flatnonzero(rel)
        sub = df.iloc[idx]
        d = hop.classify(sub, t_in[idx], t_out[idx], end, longest)
        codes[idx] = np.array([cats.index(x) for x in d], np.int8) if len(d) < 4096 else \
            pd.Categorical(d, categories=cats).codes.astype(np.int8)
    disp_cat = pd.Categorical.from_codes(codes, categories=cats)
    df["disposition"] = disp_cat
    was = df["dropped"].to_numpy(bool)
    now = codes == cats.index(hop.DROPPED)
    if (was & ~now).any():
        dr = df["dropped"].array.copy()
        dr[was & ~now] = False
        df["dropped"] = dr
        reason = df["drop_reason"].astype(object).to_numpy().copy()
        reason[was & ~now] = None
        df["drop_reason"] = pd.array(reason, dtype="string")
    if late:
        order["pdr_reliable"] = False
        report.notes.append(f"WARNING: {late} lines are logged out of time order (by more than "
                            f"{ORDER_TOLERANCE_NS / 1e6:g} ms): the log was reordered or merged; messages "
                            f"were paired by key and time, but a receive line whose send line is missing "
                            f"cannot be told from a drop, so no PDR is reported")
    report.details["log_order"] = order
    vc = np.bincount(codes, minlength=len(cats))
    report.details["dispositions"] = {cats[i]: int(vc[i]) for i in range(len(cats)) if vc[i]}
    return df



def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like a thesis-format log."""
    return MARKER + b" " in head and (b"parse_time=" in head or b" ip_out=" in head)


def sniff_file(path: str | os.PathLike, chunk: int = 1 << 20) -> bool:
    """True when a thesis-format instrumentation line occurs anywhere in the file (a syslog
    whose first instrumentation line comes after megabytes of other daemons' lines)."""
    pat = MARKER + b" "
    with open_log(path) as fh:
        tail = b""
        while True:
            b = fh.read(chunk)
            if not b:
                return False
            buf = tail + b
            i = buf.find(pat)
            while i >= 0:
                line = buf[i:i + 512].split(b"\n", 1)[0]
                if b"parse_time=" in line or b" ip_out=" in line:
                    return True
                i = buf.find(pat, i + 1)
            tail = buf[-512:]


class _LogReader:
    """Binary reader of a log, plain or compressed (gzip, xz, bzip2, zstd), whose ``readinto`` fills the buffer completely
    (short only at the end) and, for a file with classic-Mac line ends (CR alone, as some
    syslog relays write), turns every CR not followed by LF into LF (one byte for one, so
    line numbers and lengths stay what they are)."""

    def __init__(self, path: Path):
        from sipperf.ingest.compression import kind, open_stream

        self.raw = open(path, "rb")
        try:
            if kind(self.raw.read(8)) is not None:  # gzip, xz, bzip2, zstd
                self.raw.close()
                self.raw = open_stream(path)
                self.fh = self.raw
            else:
                self.raw.seek(0)
                self.fh = self.raw
            head = self.fh.read(SNIFF_CR)
        except BaseException:
            self.raw.close()
            raise
        self.cr_mode = head.count(b"\r") > 2 * head.count(b"\n")
        self.pending = head
        self.bare_cr = 0

    def read(self, n: int) -> bytes:
        buf = bytearray(n)
        k = self.readinto(memoryview(buf))
        return bytes(buf[:k])

    def readinto(self, mv) -> int:
        n = len(mv)
        k = min(n, len(self.pending))
        mv[:k] = self.pending[:k]
        self.pending = self.pending[k:]
        while k < n:
            got = self.fh.readinto(mv[k:])
            if not got:
                break
            k += got
        if self.cr_mode and k:
            a = np.frombuffer(mv, dtype=np.uint8, count=k)
            cr = np.flatnonzero(a == 13)
            if len(cr):
                if cr[-1] == k - 1:  # the CR ending this block: look at the next byte
                    if not self.pending:
                        self.pending = self.fh.read(1)
                    nxt = self.pending[:1]
                    last_bare = nxt != b"\n"
                    cr = cr[:-1]
                else:
                    last_bare = None
                bare = cr[a[cr + 1] != 10]
                a[bare] = 10
                self.bare_cr += len(bare)
                if last_bare:
                    a[k - 1] = 10
                    self.bare_cr += 1
        return k

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fh is not self.raw:
            self.fh.close()
        self.raw.close()


SNIFF_CR = 64 * 1024


def open_log(path: str | os.PathLike) -> _LogReader:
    """Open a log for reading (plain or compressed; CR-only line ends read as LF)."""
    return _LogReader(Path(path))


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
        "run_id": _strings([f"synthetic-seed{seed}"], np.zeros(min(n, 1), np.int8), n),
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
        "drop_reason": _null_strings(n),
    })
    return df
