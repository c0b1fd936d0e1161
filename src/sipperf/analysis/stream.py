"""Streaming analysis of one capture -- a file, or a ring buffer of files -- in bounded memory.

``sipperf analyze`` on a large capture (or a directory of ring-buffer files, ``dumpcap -b``)
runs here instead of building the whole timeline in memory.  The numbers are those of the
in-memory path (:func:`sipperf.ingest.capture.read.read_capture`, :mod:`sipperf.components`,
:mod:`sipperf.calls`), bit for bit on every test capture (tests/test_stream.py checks it);
what differs is how they are reached:

1. **Chunked reading.**  The bulk reader cuts the packet table into chunks of integer columns
   (:func:`sipperf.ingest.capture.fast.iter_compact`, no DataFrame built; :mod:`.compact`:
   Call-IDs and branches as 64-bit hashes, strings as codes).  The reading
   runs where it is cheapest: in this process, in a helper process that overlaps it with the
   analysis (one large file), or on Dask workers, one file each (a ring buffer,
   :mod:`sipperf.ingest.capture.distributed`).
2. **The vantage** (:mod:`.vantage`: proxy, hops, B2BUA or endpoint) is decided on the first
   :data:`PREFIX_ROWS` SIP messages of the capture (all of them when it is shorter).  A B2BUA
   capture is not streamed (its legs are correlated across Call-IDs): it is read in memory.
3. **Pairing that holds only open transactions.**  Every rule of the pairing and of the drop
   rule (:mod:`.hop`) looks only at the messages of one transaction -- same Call-ID and CSeq
   number -- so rows wait, grouped by transaction, until their group has been silent for
   :data:`HORIZON_S` seconds of capture time (longer than every RFC 3261 retransmission
   timer, 64·T1 = 32 s) or the capture ends; then the group is paired and classified by
   compiled passes (:mod:`.stream_kernels`) and reduced to what the outputs need.  Rows of a
   group that is already closed when they arrive (a transaction silent for longer than the
   horizon) form a new group: they are counted in ``report.json`` (``streaming.late_rows``).
   More than :data:`MAX_OPEN_ROWS` waiting rows close the longest-silent groups early (also
   counted).  The drop rule's last class, "in flight at capture end", depends on the end of
   the capture: such rows are kept aside and settled at the end.
4. **One pass for the statistics.**  What is kept per message is its sojourn (8 bytes plus its
   order keys) and its type -- the exact medians and percentiles then come from
   :mod:`sipperf.order_stats`, so no quantile is approximate; per transaction, a few instants
   for the RFC 6076 metrics and the transaction table; per (method, status, disposition), a
   count.  Memory grows with the number of messages by about 45 bytes each (about 300 MB for
   12 M packets), not by the size of the packet table (1.6 GB per million packets in memory).

Hash identity (:mod:`.compact`): two Call-IDs with one 64-bit hash would be one; the chance is
about n^2 / 2^65 for n Call-IDs.
"""
from __future__ import annotations

import importlib.util

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd

from sipperf.analysis import stream_kernels as K
from sipperf.ingest.capture import compact as C
from sipperf.ingest.capture.chunks import CHUNK_ROWS, peak_rss_mb, produce, produce_in_helper  # noqa: F401
from sipperf.ingest.pairing import hop
from sipperf.timeline import MSG_TYPES, IngestError, IngestReport

#: SIP messages the vantage is decided on
PREFIX_ROWS = 100_000
#: a transaction group whose last message is older than this (capture time) is complete
HORIZON_S = 64.0
#: rows waiting in open groups before the longest-silent groups are closed early
MAX_OPEN_ROWS = 4_000_000
#: process a batch of closed groups once this many rows have arrived
BATCH_ROWS = 250_000
#: captures at least this large (bytes, all files) are streamed by ``sipperf analyze``
STREAM_MIN_BYTES = 64 << 20

TRANSPORT_ONLY = frozenset({"TCP without payload", "TCP retransmission"})
I64 = np.int64
NA = C.NA_INT


class NotStreamable(Exception):
    """The capture must be read in memory (a B2BUA: legs correlated across Call-IDs)."""


def _trim() -> None:
    """Give freed heap memory back to the system (glibc keeps it after many large temporaries,
    and the peak resident set is what the bound is about)."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC = None


def _out_of_order(order: np.ndarray, same: np.ndarray, o: dict) -> np.ndarray:
    """``bad[i]``: positions i and i+1 of ``order`` are one group (``same[i]``) and out of
    (ts, frame, seq) order."""
    ts, fr, sq = o["ts"][order], o["frame"][order], o["seq"][order]
    return same & ((ts[1:] < ts[:-1]) | ((ts[1:] == ts[:-1]) & (
        (fr[1:] < fr[:-1]) | ((fr[1:] == fr[:-1]) & (sq[1:] < sq[:-1])))))


def _group_order(gh: np.ndarray, o: dict) -> tuple[np.ndarray, np.ndarray]:
    """The order of ``lexsort((seq, frame, ts, gh))`` and ``same`` (see :func:`_sort_groups`),
    for rows that mostly come in (ts, frame, seq) order within a group already: a stable sort by
    group, then only the disordered groups sorted."""
    order = np.argsort(gh, kind="stable")
    ghs = gh[order]
    same = ghs[1:] == ghs[:-1]
    bad = _out_of_order(order, same, o)
    if bad.any():
        order = _sort_groups(order, same, bad, o)
    return order, same


def _sort_groups(order: np.ndarray, same: np.ndarray, bad: np.ndarray, o: dict) -> np.ndarray:
    """``order`` (rows by group, each group's rows contiguous; ``same[i]``: positions i and i+1
    are one group) with the rows of every group that holds an out-of-order pair (``bad[i]``)
    sorted by (ts, frame, seq): what a full ``lexsort((seq, frame, ts, group))`` gives, at the
    cost of the few groups a slightly disordered capture (``-i any``, several queues) has."""
    gidx = np.concatenate([[0], np.cumsum(~same)])          # group number of each position
    hit = np.zeros(int(gidx[-1]) + 1, bool)
    hit[gidx[1:][bad]] = True
    pos = np.flatnonzero(hit[gidx])                          # positions of the groups to sort
    rows = order[pos]
    sub = np.lexsort((o["seq"][rows], o["frame"][rows], o["ts"][rows], gidx[pos]))
    order = order.copy()
    order[pos] = rows[sub]
    return order


# ----------------------------------------------------------------------------- accumulators
@dataclass
class _HopAcc:
    """What one hop keeps: per-disposition counts, sojourns with their order keys, notes."""

    socket: str
    sockets: set
    n_in: int = 0
    n_paired: int = 0
    n_eo: int = 0
    n_rows: int = 0
    longest: int = -1  # ns; -1 = no relayed message yet
    concurrent: bool = False  # a relayed message overtook another (settled at the end)
    disp: np.ndarray = field(default_factory=lambda: np.zeros(len(K.DISPOSITION_NAMES), I64))
    types: np.ndarray = field(default_factory=lambda: np.zeros(len(MSG_TYPES), I64))
    soj: list = field(default_factory=list)  # [(t_arr, frame, seq, sojourn, type)] arrays per batch
    prov: list = field(default_factory=list)  # provisional rows: (t_in, is_resp, count key arrays)
    used_self: int = 0
    amb: np.ndarray = field(default_factory=lambda: np.zeros(3, I64))  # ambiguous egress copies, later picks, none
    res: Any = None  # the Resolver of the groups with several candidate copies (proxy.resolver)
    inverted: int = 0  # ingress copies paired with an egress copy stamped before them
    unknown: int = 0   # messages whose time in the proxy the clock check could not vouch for


def _lut(cb: C.Codebook, fn) -> np.ndarray:
    return np.array([fn(s) for s in cb.strings], dtype=object)


class Engine:
    """The streaming pass over the merged chunks of one capture (see the module doc)."""

    def __init__(self, *, run_id: str, proxy=None, path_label: str = "capture", stateful: bool = True,
                 horizon_s: float = HORIZON_S, max_open_rows: int = MAX_OPEN_ROWS,
                 prefix_rows: int = PREFIX_ROWS, batch_rows: int = BATCH_ROWS,
                 prefix_frame=None, vantage=None, keep_rows: bool = False):
        self.cb = C.Codebook()
        self.keep_rows = keep_rows
        self.kept: list[dict] = []  # the caller side's rows for the measure table (keep_rows)
        self.run_id = run_id
        self.proxy = proxy
        self.path_label = path_label
        self.stateful = stateful
        self.horizon = int(horizon_s * 1e9)
        self.max_open = max_open_rows
        self.prefix_rows = prefix_rows
        self.batch_rows = batch_rows
        self.prefix_frame = prefix_frame  # callable(n) -> real packet DataFrame of the first n rows
        self.vantage = vantage  # given (tests), or decided on the first rows
        self.hops: list[_HopAcc] = ([_HopAcc(h.socket, set(h.sockets)) for h in vantage.hops]
                                    if vantage is not None and vantage.kind != "endpoint" else [])
        self.buffer: list[dict] = []  # merged chunks before the vantage is known
        self.buffered = 0
        self.open = C.empty()
        self.open["seq"] = np.zeros(0, I64)
        self.open["file"] = np.zeros(0, np.int32)
        self.incoming: list[dict] = []  # chunks come since the last close
        self.in_order = True    # every row fed so far came no earlier than the one before it
        self.last_ts = np.iinfo(np.int64).min
        self.since_batch = 0
        self.seq = 0
        self.watermark = NA
        self.closed = np.zeros(0, np.uint64)  # hashes of the groups closed so far, sorted
        self.late_rows = 0
        self.forced_rows = 0
        self.batches = 0
        self.n_rows = 0
        self.no_cid = 0
        self.capture_end = NA
        self.t_min = NA
        # caller side (for calls): min instant, max instant; records
        self.ref = NA
        self.run_last = NA
        self.crec: list[dict] = []
        self.xrec: list[dict] = []
        self.deferred: list[dict] = []
        self.stash: list[dict] = []  # rows of groups with several candidate copies, paired at the end
        self.counts: dict[tuple, list] = {}
        self.types_all = np.zeros(len(MSG_TYPES), I64)
        self.endpoint_rows = 0
        self.endpoint_retrans = 0
        self.endpoint_calls: list[np.ndarray] = []
        self.cross_file = {"paired_across_files": 0, "groups_across_files": 0}
        self.used = 0
        self.unused: dict[str, int] = {}
        self._flags_len = -1

    # ------------------------------------------------------------------ input
    def feed(self, chunk: dict, file_index: int, frame_offset: int, no_cid: int = 0) -> None:
        """A chunk of one file (local codes, as :func:`produce` makes it)."""
        self.no_cid += no_cid
        c = self.cb.merge(chunk)
        n = c["n"]
        if not n:
            return
        c["frame"] = c["frame"] + frame_offset
        c["seq"] = np.arange(self.seq, self.seq + n, dtype=I64)
        c["file"] = np.full(n, file_index, np.int32)
        self.seq += n
        self.n_rows += n
        mx = int(c["ts"].max())
        self.capture_end = mx if self.capture_end == NA else max(self.capture_end, mx)
        # rows in time order (the usual capture): no group can hold rows out of (ts, frame) order
        ts = c["ts"]
        if self.in_order and (ts[0] < self.last_ts or (n > 1 and bool((ts[1:] < ts[:-1]).any()))):
            self.in_order = False
        self.last_ts = int(ts[-1])
        if self.vantage is None:
            self.buffer.append(c)
            self.buffered += n
            if self.buffered >= self.prefix_rows:
                self._decide()
            return
        self._add(c)

    def _decide(self) -> None:
        from sipperf.ingest.pairing.vantage import classify_prepped

        rows = C.concat(self.buffer)
        self.buffer = []
        m = min(self.prefix_rows, rows["n"])
        p = self._pseudo_prep(C.take(rows, slice(0, m)))
        v, _ = classify_prepped(p, self.proxy, path=self.path_label, b2bua=self._b2bua_check(m))
        if v.kind == "b2bua":
            raise NotStreamable("B2BUA")
        self.vantage = v
        if v.kind != "endpoint":
            self.hops = [_HopAcc(h.socket, set(h.sockets)) for h in v.hops]
        self._add(rows)

    def _b2bua_check(self, m: int):
        def check():
            from sipperf.ingest.pairing.b2bua import find_b2bua
            from sipperf.ingest.pairing.vantage import prep
            if self.prefix_frame is None:
                return None
            return find_b2bua(prep(self.prefix_frame(m)))
        return check

    def _pseudo_prep(self, c: dict) -> pd.DataFrame:
        """The prepped packet table :mod:`.vantage` needs (src_ep, dst_ep, key, ...), from
        compact rows: the same equalities, so the same vantage."""
        eps = np.array(self.cb.endpoints, dtype=object)
        strings = np.array(self.cb.strings, dtype=object)
        what = self._what(c)
        # the message key (Call-ID, CSeq, CSeq method, method or status) as one 64-bit hash
        kh = self._group_hash(c["call"], c["cseq"])
        kh = self._group_hash(kh, (c["cm"].astype(I64) << 32) | (what.astype(I64) & 0xFFFFFFFF))
        keyc = pd.factorize(kh)[0]
        meth = np.where(c["method"] >= 0, strings[np.maximum(c["method"], 0)], None)
        bcode, buniq = pd.factorize(c["branch"])
        btext = np.array(["" if b == 0 else format(int(b), "x") for b in buniq], dtype=object)
        br = btext[bcode]
        return pd.DataFrame({
            "frame": c["frame"], "ts_ns": c["ts"], "src_ep": eps[c["src"]], "dst_ep": eps[c["dst"]],
            "key": keyc, "via_branch": pd.array(br, dtype="string"), "via_count": c["via_count"],
            "method": pd.array(meth, dtype="string"),
        })

    # ------------------------------------------------------------------ codes
    def _flags(self) -> None:
        """Lookup tables over the string codes (grown with the codebook)."""
        cb = self.cb
        if self._flags_len == len(cb.strings):
            return
        while True:  # upper-casing may add strings; their upper case is themselves
            n = len(cb.strings)
            up = [cb.string_code(s.upper()) for s in cb.strings[:n]]
            if len(cb.strings) == n:
                break
        self.up = np.array(up, np.int32)
        self._flags_len = len(cb.strings)
        self.ack_raw_code = cb.code_of("ACK")
        self.c_invite, self.c_ack, self.c_cancel = cb.code_of("INVITE"), cb.code_of("ACK"), cb.code_of("CANCEL")
        self.c_bye, self.c_register = cb.code_of("BYE"), cb.code_of("REGISTER")

    def _status_codes(self, status: np.ndarray) -> np.ndarray:
        """Code of str(status) for every row (status >= 0)."""
        if len(status) and 0 <= status.max() < 1000:   # three digits: a table, not a sort
            seen = np.flatnonzero(np.bincount(status[status >= 0], minlength=1000))
            lut = np.zeros(1000, np.int32)
            lut[seen] = [self.cb.string_code(str(int(u))) for u in seen]
            return np.where(status >= 0, lut[np.clip(status, 0, 999)], 0).astype(np.int32)
        uniq, inv = np.unique(status, return_inverse=True)
        lut = np.array([self.cb.string_code(str(int(u))) if u >= 0 else 0 for u in uniq], np.int32)
        return lut[inv] if len(uniq) else np.zeros(0, np.int32)

    def _what(self, c: dict) -> np.ndarray:
        """Method for requests, the status as text for responses (the message key's last part)."""
        return np.where(c["method"] >= 0, c["method"], self._status_codes(c["status"]))

    # ------------------------------------------------------------------ grouping
    @staticmethod
    def _group_hash(call: np.ndarray, cseq: np.ndarray) -> np.ndarray:
        x = call ^ (cseq.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        x ^= x >> np.uint64(31)
        return x

    def _add(self, c: dict) -> None:
        # the chunk waits beside the open rows until the next close (concatenating at every chunk
        # would copy every open row once per chunk)
        self.incoming.append(c)
        self.since_batch += c["n"]
        # robust clock: the 1st percentile of the newest chunk (an odd timestamp cannot close
        # every group at once), never going back
        if c["n"]:
            wm = int(np.percentile(c["ts"], 1, method="lower"))
            self.watermark = wm if self.watermark == NA else max(self.watermark, wm)
        # a close sorts and copies every open row: close when the rows that came since are at least
        # half the open ones (and at least a batch), so that its cost per row stays constant however
        # many rows the horizon holds open (a capture at tens of thousands of packets/s: millions)
        waiting = self.open["n"] + self.since_batch
        if self.since_batch >= max(self.batch_rows, waiting // 2) or waiting > self.max_open:
            self._close(final=False)

    def _close(self, final: bool) -> None:
        """Close the silent groups (every group when ``final``) and process them.  The open rows
        are kept in group order (capture order within a group), so the stable sort below meets
        one sorted run and the rows that came since."""
        if self.incoming:
            o = self.open
            parts = [o] + self.incoming
            self.open = {k: np.concatenate([x[k] for x in parts]) for k in o if k != "n"}
            self.open["n"] = int(sum(x["n"] for x in parts))
            self.incoming = []
        o = self.open
        self.since_batch = 0
        if not o["n"]:
            return
        gh = self._group_hash(o["call"], o["cseq"])
        # rows arrive in capture order: a stable sort by group keeps it inside each group, and
        # only a group whose rows are out of (ts, frame) order needs the full sort (none can be
        # when every row came in time order: frames grow with the rows)
        if self.in_order:
            order = np.argsort(gh, kind="stable")
            ghs = gh[order]
            same = ghs[1:] == ghs[:-1]
        else:
            order, same = _group_order(gh, o)
            ghs = gh[order]
        ts_s = o["ts"][order]
        start = np.flatnonzero(np.concatenate([[True], ~same]))
        sizes = np.diff(np.append(start, len(order)))
        last = np.maximum.reduceat(ts_s, start)
        if final:
            close_g = np.ones(len(start), bool)
        else:
            close_g = last < self.watermark - self.horizon
            keep_rows = int(sizes[~close_g].sum())
            if keep_rows > self.max_open:  # too many waiting: close the longest-silent groups
                cand = np.flatnonzero(~close_g)
                by_age = cand[np.argsort(last[cand], kind="stable")]
                excess = keep_rows - (self.max_open * 3) // 4
                cum = np.cumsum(sizes[by_age])
                force = by_age[:int(np.searchsorted(cum, excess)) + 1]
                close_g[force] = True
                self.forced_rows += int(sizes[force].sum())
        if not close_g.any():
            return
        row_close = np.repeat(close_g, sizes)
        sel = order[row_close]
        keep = order[~row_close]
        batch = {k: v[sel] for k, v in o.items() if k != "n"}
        batch["n"] = len(sel)
        self.open = {k: v[keep] for k, v in o.items() if k != "n"}
        self.open["n"] = len(keep)
        gstart = np.concatenate([[0], np.cumsum(sizes[close_g])]).astype(I64)
        # groups closed before: their rows are late (the earlier part was analysed alone)
        g_new = ghs[start[close_g]]    # one per group, already sorted (ghs is)
        if len(self.closed):
            pos = np.searchsorted(self.closed, g_new)
            hit = (pos < len(self.closed)) & (self.closed[np.minimum(pos, len(self.closed) - 1)] == g_new)
            if hit.any():
                first = ghs[start[close_g]]
                late_g = np.isin(first, g_new[hit])
                self.late_rows += int(sizes[close_g][late_g].sum())
            g_add = g_new[~hit]
        else:
            g_add = g_new
        self.closed = np.insert(self.closed, np.searchsorted(self.closed, g_add), g_add)
        self.batches += 1
        self._process(batch, gstart)
        del batch
        _trim()

    # ------------------------------------------------------------------ one batch
    def _derived(self, b: dict) -> dict:
        """The code columns every pass needs (upper-cased methods, message key part)."""
        self._flags()
        meth = b["method"]
        return {"meth_up": np.where(meth >= 0, self.up[np.maximum(meth, 0)], -1).astype(np.int32),
                "cm_up": self.up[b["cm"]], "what": self._what(b), "ack_raw": meth == self.ack_raw_code}

    def _hop_pass(self, b: dict, gstart: np.ndarray, acc: _HopAcc, dv: dict, res=None) -> dict:
        """:func:`.stream_kernels.hop_pass` for one hop over a batch (``res``: a
        :class:`~sipperf.ingest.pairing.proxy.Resolver` for the groups with several candidate copies)."""
        n = b["n"]
        sock = np.zeros(len(self.cb.endpoints), bool)
        for s_ in acc.sockets:
            code = self.cb._e.get(s_)
            if code is not None:
                sock[code] = True
        out = {"sock": sock, "role": np.empty(n, np.int8), "partner": np.empty(n, I64), "eo": np.empty(n, bool),
               "disp": np.empty(n, np.int8), "gamb": np.zeros(len(gstart) - 1, bool),
               "amb_stats": np.zeros(3, I64), "race_soj": np.full(n, -1, I64), "inv": np.zeros(n, bool)}
        empty = np.zeros(0, I64)
        K.hop_pass(gstart, b["ts"], b["frame"], b["src"], b["dst"], b["method"], dv["what"], b["cm"], dv["cm_up"],
                   dv["meth_up"], b["status"], b["branch"], dv["ack_raw"], sock, self.c_invite, self.c_ack,
                   self.c_cancel, self.stateful, res is not None,
                   res.ref_a if res is not None else empty, res.ref_d if res is not None else empty,
                   res.t_max if res is not None else 0, res.soj_max if res is not None else 0,
                   out["role"], out["partner"], out["eo"], out["disp"], out["gamb"], out["amb_stats"],
                   out["race_soj"], out["inv"])
        return out

    @staticmethod
    def _take_groups(b: dict, gstart: np.ndarray, keep_g: np.ndarray) -> tuple[dict, np.ndarray]:
        """The rows of the groups ``keep_g`` (bool per group) of a batch, and their group starts."""
        sizes = np.diff(gstart)
        rows = np.repeat(keep_g, sizes)
        out = {k: v[rows] for k, v in b.items() if k != "n"}
        out["n"] = int(rows.sum())
        return out, np.concatenate([[0], np.cumsum(sizes[keep_g])]).astype(I64)

    def _process(self, b: dict, gstart: np.ndarray, resolvers: list | None = None) -> None:
        dv = self._derived(b)
        live = None        # the rows processed now (None: every row of the batch)
        done_g = None      # the groups processed now (None: every group)
        if self.vantage.kind != "endpoint":
            passes = [self._hop_pass(b, gstart, acc, dv, resolvers[h] if resolvers else None)
                      for h, acc in enumerate(self.hops)]
            if resolvers is None:
                amb = np.zeros(len(gstart) - 1, bool)
                for ps in passes:
                    amb |= ps["gamb"]
                if amb.any():
                    # a transaction where an egress copy could forward several copies waits for the
                    # end: its pairing needs the certain pairs of the whole capture (proxy.choose).
                    # The other groups go on from the same passes (a group's pass sees that group only)
                    self.stash.append(self._take_groups(b, gstart, amb)[0])
                    if amb.all():
                        return
                    done_g = ~amb
                    live = np.repeat(done_g, np.diff(gstart))
            else:
                for ps, acc in zip(passes, self.hops):
                    acc.amb += ps["amb_stats"]
        n = b["n"]
        meth = b["method"]
        meth_up, cm_up = dv["meth_up"], dv["cm_up"]
        what = dv["what"]
        tmin = int((b["ts"] if live is None else b["ts"][live]).min())
        self.t_min = tmin if self.t_min == NA else min(self.t_min, tmin)
        files = b["file"]
        if n and files.min() != files.max():
            fmin = np.minimum.reduceat(files, gstart[:-1])
            fmax = np.maximum.reduceat(files, gstart[:-1])
            across = fmin != fmax
            self.cross_file["groups_across_files"] += int((across if done_g is None else across & done_g).sum())
        if self.vantage.kind == "endpoint":
            self._process_endpoint(b, gstart, what, meth_up, cm_up)
            return
        tl_call = []
        for h, acc in enumerate(self.hops):
            ps = passes[h]
            sock, role, partner, eo, disp = ps["sock"], ps["role"], ps["partner"], ps["eo"], ps["disp"]
            s_in = sock[b["src"]]
            d_in = sock[b["dst"]]
            if live is not None:
                s_in &= live
                d_in &= live
            self._used_mask = (s_in ^ d_in) if h == 0 else (self._used_mask | (s_in ^ d_in))
            acc.used_self += int((s_in & d_in).sum())
            ing = np.flatnonzero(role == K.ROLE_IN if live is None else (role == K.ROLE_IN) & live)
            eos = np.flatnonzero(eo if live is None else eo & live)
            paired = partner[ing] >= 0
            acc.n_in += len(ing)
            acc.n_paired += int(paired.sum())
            acc.n_eo += len(eos)
            rows = np.concatenate([ing, eos])
            nr = len(rows)
            acc.n_rows += nr
            t_arr = np.concatenate([b["ts"][ing], np.full(len(eos), NA, I64)])
            out_idx = np.concatenate([np.where(paired, partner[ing], -1), eos])
            has_out = out_idx >= 0
            t_dep = np.where(has_out, b["ts"][np.maximum(out_idx, 0)], NA)
            inv = np.concatenate([ps["inv"][ing], np.zeros(len(eos), bool)])
            if inv.any():  # an egress copy stamped before its ingress: relayed, the sojourn unknown
                t_dep = np.where(inv, NA, t_dep)
                acc.inverted += int(inv.sum())
            first_key = None
            fl = b["clock"]
            if fl.any():  # a stamp repaired, or a clock step between the copies (ingest/clock.py)
                from sipperf.ingest.clock import unknown_sojourn
                f_in = np.concatenate([fl[ing], fl[eos]])
                f_out = np.concatenate([np.where(paired, fl[np.maximum(partner[ing], 0)], fl[ing]), fl[eos]])
                unk = unknown_sojourn(f_in, f_out) & ~inv
                if unk.any():
                    first_key = np.where(t_arr != NA, t_arr, t_dep)
                    arr_unk = unk & ((f_in & 1) == 1) & (np.arange(nr) < len(ing))
                    t_arr = np.where(arr_unk, NA, t_arr)
                    t_dep = np.where(unk, NA, t_dep)
                    acc.unknown += int(unk.sum())
            frame_key = b["frame"][rows]
            if len(b["file"]) and paired.any():
                fi = b["file"][ing[paired]]
                fo = b["file"][partner[ing[paired]]]
                self.cross_file["paired_across_files"] += int((fi != fo).sum())
            d = disp[rows].astype(np.int8)
            is_req = meth[rows] >= 0
            mt = _msg_type(is_req, meth_up[rows], cm_up[rows], b["status"][rows], self.cb)
            np.add.at(acc.types, mt, 1)
            np.add.at(self.types_all, mt, 1)
            both = has_out & (t_arr != NA) & (t_dep != NA)
            if both.any():
                soj = t_dep[both] - t_arr[both]
                acc.longest = max(acc.longest, int(soj.max()))
                acc.soj.append((t_arr[both], b["seq"][rows][both], soj, mt[both]))
            # counts (provisional rows are counted when settled)
            self._count(is_req, meth_up[rows], b["status"][rows], cm_up[rows], d, h, acc)
            prov = d == K.D_PROVISIONAL
            racy = np.where(prov, ps["race_soj"][rows], -1)
            if prov.any():
                acc.prov.append({"t_in": t_arr[prov], "is_req": is_req[prov], "meth_up": meth_up[rows][prov],
                                 "status": b["status"][rows][prov], "cm_up": cm_up[rows][prov],
                                 "racy": racy[prov]})
            if h == 0 and self.keep_rows:
                self.kept.append({"t_arr": t_arr, "t_dep": t_dep, "frame": frame_key, "call": b["call"][rows],
                                  "cseq": b["cseq"][rows], "method": meth[rows], "cm": b["cm"][rows],
                                  "status": b["status"][rows], "mt": mt, "disp": d, "racy": racy})
            if h == 0:
                g_rows = np.repeat(np.arange(len(gstart) - 1, dtype=I64), np.diff(gstart))[rows]
                tl_call.append({
                    "grp": g_rows, "first": first_key if first_key is not None else np.where(t_arr != NA, t_arr, t_dep),
                    "frame": frame_key,
                    "eo": np.concatenate([np.zeros(len(ing), bool), np.ones(len(eos), bool)]),
                    "seq": b["seq"][rows], "is_req": is_req, "meth_up": meth_up[rows], "cm_up": cm_up[rows],
                    "status": b["status"][rows], "t_arr": t_arr, "t_dep": t_dep, "disp": d,
                    "call": b["call"][rows], "cseq": b["cseq"][rows], "racy": racy})
        used = self._used_mask
        self.used += int(used.sum())
        self._calls(tl_call[0], n_groups=len(gstart) - 1)

    def _process_endpoint(self, b, gstart, what, meth_up, cm_up) -> None:
        n = b["n"]
        retrans = np.empty(n, bool)
        K.endpoint_pass(gstart, b["cm"], what, b["src"], b["dst"], b["branch"], b["method"], retrans)
        is_req = b["method"] >= 0
        mt = _msg_type(is_req, meth_up, cm_up, b["status"], self.cb)
        np.add.at(self.types_all, mt, 1)
        self.endpoint_rows += n
        self.endpoint_retrans += int(retrans.sum())
        self.endpoint_calls.append(np.unique(b["call"]))
        self.used += n
        d = np.full(n, K.D_SEEN, np.int8)
        self._count(is_req, meth_up, b["status"], cm_up, d, 0, None, retrans=retrans)
        if self.keep_rows:
            self.kept.append({"t_arr": b["ts"], "t_dep": np.full(n, NA, I64), "frame": b["frame"], "call": b["call"],
                              "cseq": b["cseq"], "method": b["method"], "cm": b["cm"], "status": b["status"],
                              "mt": mt, "disp": d, "retrans": retrans})
        g_rows = np.repeat(np.arange(len(gstart) - 1, dtype=I64), np.diff(gstart))
        self._calls({"grp": g_rows, "first": b["ts"], "frame": b["frame"], "eo": np.zeros(n, bool),
                     "seq": b["seq"], "is_req": is_req, "meth_up": meth_up, "cm_up": cm_up,
                     "status": b["status"], "t_arr": b["ts"], "t_dep": np.full(n, NA, I64),
                     "disp": d, "call": b["call"], "cseq": b["cseq"], "racy": np.full(n, -1, I64)},
                    n_groups=len(gstart) - 1)

    def _count(self, is_req, meth_up, status, cm_up, d, hop_i, acc, retrans=None) -> None:
        """Add to the message counts (kind, method, status, CSeq method, disposition, re)."""
        if acc is not None:
            np.add.at(acc.disp, d.astype(I64), 1)
        keep = d != K.D_PROVISIONAL
        re = (d == K.D_RETRANS) if retrans is None else retrans
        cols = [is_req.astype(I64), np.where(is_req, meth_up, -1).astype(I64) + 1,
                np.where(is_req, -1, status).astype(I64) + 1, cm_up.astype(I64) + 1, d.astype(I64),
                re.astype(I64)]
        cols = [c[keep] for c in cols]
        if not len(cols[0]):
            return
        # one int64 per key when the fields fit (they do unless codes run into the millions)
        width = [max(int(c.max()), 0).bit_length() + 1 for c in cols]
        if sum(width) <= 62 and all(int(c.min()) >= 0 for c in cols):
            packed = np.zeros(len(cols[0]), I64)
            for c, w in zip(cols, width):
                packed = (packed << w) | c
            uniq, first, cnt = np.unique(packed, return_index=True, return_counts=True)
            rows = np.stack(cols, axis=1)[first]
        else:
            rows, cnt = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
        for row, k in zip(rows.tolist(), cnt.tolist()):
            t = (row[0], row[1] - 1, row[2] - 1, row[3] - 1, row[4], row[5])
            self.counts[t] = self.counts.get(t, 0) + k

    def _calls(self, t: dict, n_groups: int) -> None:
        """Per-transaction records of the caller side (see :func:`.stream_kernels.call_records`)."""
        first = t["first"]
        ok = first != NA
        if ok.any():
            lo = int(first[ok].min())
            self.ref = lo if self.ref == NA else min(self.ref, lo)
            hi = int(np.maximum(t["t_arr"], t["t_dep"]).max())
            self.run_last = hi if self.run_last == NA else max(self.run_last, hi)
        # groups with a row whose drop class is open wait for the end of the capture
        prov = t["disp"] == K.D_PROVISIONAL
        if prov.any():
            gp = np.zeros(n_groups, bool)
            gp[t["grp"][prov & ~t["is_req"]]] = True
            defer = gp[t["grp"]]
            if defer.any():
                self.deferred.append({k: v[defer] for k, v in t.items()})
                t = {k: v[~defer] for k, v in t.items()}
        self._records(t)

    def _records(self, t: dict) -> None:
        if not len(t["grp"]):
            return
        # lexsort((seq, eo, frame, first, grp)): the rows come in runs already sorted by group, so
        # a stable sort by group, then each group's few rows sorted in place (a compiled pass)
        order = np.argsort(t["grp"], kind="stable")
        grp = t["grp"][order]
        gstart = np.flatnonzero(np.concatenate([[True], grp[1:] != grp[:-1]]))
        gstart = np.append(gstart, len(grp)).astype(I64)
        K.sort_within_groups(order, gstart, t["first"], t["frame"], t["eo"].view(np.int8), t["seq"])
        t = {k: v[order] for k, v in t.items()}
        d = t["disp"]
        notdeliv = np.isin(d, (K.D_DROPPED, K.D_100, K.D_ACK, K.D_CANCEL, K.D_RETRANS, K.D_AFTER_FINAL, K.D_OWN))
        own = d == K.D_ORIGINATED
        t_arr, t_dep = t["t_arr"], t["t_dep"]
        req_t = np.where(t_arr != NA, t_arr, t_dep)
        resp_t = np.where(t_dep != NA, t_dep, t_arr)
        ng = len(gstart) - 1
        m = len(grp)
        cg, cm_, ct, ca, ci, cs, cf, csf = (np.empty(3 * ng, I64) for _ in range(8))
        xg, xm, xc, xt, xf, xfin = (np.empty(m, I64) for _ in range(6))
        mcodes = np.array([self.c_invite, self.c_bye, self.c_register], I64)
        nc, nx = K.call_records(gstart, t["is_req"], t["meth_up"].astype(I64), t["cm_up"].astype(I64),
                                t["status"], req_t, resp_t, notdeliv, own, mcodes,
                                cg, cm_, ct, ca, ci, cs, cf, csf, xg, xm, xc, xt, xf, xfin)
        if nc:
            gi = gstart[cg[:nc]]
            self.crec.append({"call": t["call"][gi], "cseq": t["cseq"][gi], "m": cm_[:nc].astype(np.int8),
                              "t_req": ct[:nc].copy(), "t_any": ca[:nc].copy(), "t_ind": ci[:nc].copy(),
                              "s_ind": cs[:nc].astype(np.int32), "t_fin": cf[:nc].copy(),
                              "s_fin": csf[:nc].astype(np.int32)})
        if nx:
            gi = gstart[xg[:nx]]
            self.xrec.append({"call": t["call"][gi], "cseq": t["cseq"][gi], "m": xm[:nx].astype(np.int32),
                              "copies": xc[:nx].astype(np.int32), "t_req": xt[:nx].copy(),
                              "t_first": xf[:nx].copy(), "t_fin": xfin[:nx].copy()})

    # ------------------------------------------------------------------ the end
    def _resolve_stash(self) -> None:
        """Pair the groups set aside because an egress copy had several candidate copies
        (:func:`sipperf.ingest.pairing.proxy.pair_at_proxy`'s second pass): per hop, the certain
        pairs are every relayed message of the other groups -- those processed, and those set
        aside for another hop only -- then the groups are processed with that evidence."""
        from sipperf.ingest.pairing.proxy import resolver

        st = {k: np.concatenate([x[k] for x in self.stash]) for k in self.stash[0] if k != "n"}
        st["n"] = len(st["seq"])
        self.stash = []
        gh = self._group_hash(st["call"], st["cseq"])
        # every piece is in group order already: a merge, then the groups split across pieces
        order, same = _group_order(gh, st)
        st = {k: (v[order] if k != "n" else v) for k, v in st.items()}
        start = np.flatnonzero(np.concatenate([[True], ~same]))
        gstart = np.append(start, st["n"]).astype(I64)
        dv = self._derived(st)
        resolvers = []
        for acc in self.hops:
            ps = self._hop_pass(st, gstart, acc, dv)
            sure = (ps["role"] == K.ROLE_IN) & (ps["partner"] >= 0) & ~np.repeat(ps["gamb"], np.diff(gstart))
            v = _hop_values(acc)
            a = np.concatenate([v["t_arr"], st["ts"][sure]])
            d = np.concatenate([v["t_arr"] + v["soj"], st["ts"][ps["partner"][sure]]])
            acc.res = resolver(a, d)
            resolvers.append(acc.res)
            del a, d, v
        self._process(st, gstart, resolvers)

    def finish(self) -> None:
        if self.vantage is None:
            if not self.buffered:
                return
            self._decide()
        self._close(final=True)
        if self.vantage.kind == "endpoint":
            return
        if self.stash:
            self._resolve_stash()
        # settle "in flight at capture end" against "dropped" (hop.classify's horizon), and a
        # provisional that may have lost the race to its final where the proxy is concurrent
        t0 = self.t_min
        for h, acc in enumerate(self.hops):
            longest = acc.longest if acc.longest >= 0 else None
            # the certain pairs the resolver saw are relayed messages: one overtaking there is enough
            res = getattr(acc, "res", None)
            acc.concurrent = bool(res is not None and res.t_max > 0) or _concurrent(acc)
            for p in acc.prov:
                if longest is None:
                    fl = np.zeros(len(p["t_in"]), bool)
                else:  # t_in > capture_end - longest, in the float arithmetic of hop.classify
                    t_in = (p["t_in"] - t0).astype(np.float64)
                    fl = t_in > float(self.capture_end - t0) - float(longest)
                dd = np.where(fl, K.D_IN_FLIGHT, K.D_DROPPED).astype(np.int8)
                if acc.concurrent and longest is not None:
                    dd[(p["racy"] >= 0) & (p["racy"] <= longest)] = K.D_AFTER_FINAL
                acc.disp[K.D_PROVISIONAL] -= len(dd)
                np.add.at(acc.disp, dd.astype(I64), 1)
                self._count(p["is_req"], p["meth_up"], p["status"], p["cm_up"], dd, h, None)
                p["final"] = dd
        if self.deferred:
            acc = self.hops[0]
            longest = acc.longest if acc.longest >= 0 else None
            t = {k: np.concatenate([x[k] for x in self.deferred]) for k in self.deferred[0]}
            prov = t["disp"] == K.D_PROVISIONAL
            if longest is None:
                fl = np.zeros(int(prov.sum()), bool)
            else:
                fl = (t["t_arr"][prov] - t0).astype(np.float64) > float(self.capture_end - t0) - float(longest)
            t["disp"] = t["disp"].copy()
            t["disp"][prov] = np.where(fl, K.D_IN_FLIGHT, K.D_DROPPED)
            if acc.concurrent and longest is not None:
                t["disp"][prov & (t["racy"] >= 0) & (t["racy"] <= longest)] = K.D_AFTER_FINAL
            # group ids of different batches may repeat: make them unique per (call, cseq)
            # (the group hash the batches were grouped by: one 64-bit key, factorized by hashing)
            key = pd.factorize(self._group_hash(t["call"], t["cseq"]))[0]
            t["grp"] = key.astype(I64)
            self.deferred = []
            self._records(t)


def _msg_type(is_req, meth_up, cm_up, status, cb: C.Codebook) -> np.ndarray:
    """Index into MSG_TYPES (:func:`sipperf.timeline.msg_type_vector` on codes)."""
    inv, ack, bye = cb.code_of("INVITE"), cb.code_of("ACK"), cb.code_of("BYE")
    out = np.full(len(is_req), MSG_TYPES.index("OTHER"), np.int8)
    out[is_req & (meth_up == inv)] = MSG_TYPES.index("INVITE")
    out[is_req & (meth_up == ack)] = MSG_TYPES.index("ACK")
    out[is_req & (meth_up == bye)] = MSG_TYPES.index("BYE")
    resp = ~is_req
    out[resp & (status == 180) & (cm_up == inv)] = MSG_TYPES.index("180")
    out[resp & (status == 200) & (cm_up == inv)] = MSG_TYPES.index("200-INVITE")
    out[resp & (status == 200) & (cm_up == bye)] = MSG_TYPES.index("200-BYE")
    return out


# ------------------------------------------------------------------------------ the outputs
@dataclass
class Outputs:
    """What ``analyze`` writes, from a streaming pass (the in-memory path's tables)."""

    components: pd.DataFrame
    components_by_hop: pd.DataFrame | None
    calls: pd.DataFrame
    transactions: pd.DataFrame
    counts: pd.DataFrame
    report: IngestReport
    #: for the figures: first instant (float ns) and each component's values (float ns)
    figure_t: np.ndarray
    figure_arrays: dict[str, np.ndarray]
    #: with ``keep_rows``: the caller side's rows, the columns ``sipperf report`` measures (:func:`measure_table`)
    rows: pd.DataFrame | None = None


def _concurrent(acc: _HopAcc) -> bool:
    """:func:`sipperf.ingest.pairing.proxy.concurrent` on a hop's relayed messages."""
    from sipperf.ingest.pairing.proxy import overtaken_any

    v = _hop_values(acc)
    return bool(len(v["t_arr"]) and overtaken_any(v["t_arr"], v["t_arr"] + v["soj"]))


def _hop_values(acc: _HopAcc) -> dict[str, np.ndarray]:
    """A hop's sojourns with their order keys (t_arr, seq: the row order, since frames grow
    with seq) and types, as single arrays (the per-batch pieces are released)."""
    if not acc.soj:
        z = np.zeros(0, I64)
        return {"t_arr": z, "seq": z, "soj": z, "type": np.zeros(0, np.int8)}
    names = ("t_arr", "seq", "soj", "type")
    out = {}
    for j, k in enumerate(names):
        out[k] = np.concatenate([x[j] for x in acc.soj]) if len(acc.soj) > 1 else acc.soj[0][j]
    acc.soj = [tuple(out[k] for k in names)]
    return out


def _ci_order(first: np.ndarray, hop_i: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """analyze's order for the batch means: a stable sort of the timeline rows (hop, then
    first instant, frame) by the first instant as float64 (:func:`sipperf.analysis.result.order_key`)."""
    return np.lexsort((seq, first, hop_i, first.astype(np.float64)))


def _components_table(type_counts: np.ndarray, soj: np.ndarray, types: np.ndarray,
                      ci_vals_us: np.ndarray | None) -> pd.DataFrame:
    from sipperf import components, stats

    tc = {t: int(c) for t, c in zip(MSG_TYPES, type_counts)}
    vals = {"sojourn": (soj, types)} if len(soj) else {}
    comp = components.summary_from_values(tc, vals, unit="us")
    if len(soj) and ci_vals_us is not None:
        hw = (stats.batch_means_ci(ci_vals_us).half_width if len(ci_vals_us) >= 2 * stats.DEFAULT_BATCHES
              else np.nan)
        comp["sojourn_ci95_hw"] = np.where(comp["msg_type"] == "ALL", hw, np.nan)
    return comp


def outputs(e: Engine, *, offered: int | None = None, figures: bool = True) -> Outputs:
    """The tables of ``sipperf analyze`` from a finished engine, and the report's findings
    (:attr:`Engine.report` must be set: the packet account)."""
    from sipperf import calls

    v = e.vantage
    rep: IngestReport = e.report
    # ---- components ------------------------------------------------------------------------
    fig_t = np.zeros(0)
    fig_a: dict[str, np.ndarray] = {}
    by_hop = None
    one_hop_soj = None  # the sojourns in row order, when there is one hop
    if v.kind == "endpoint":
        comp = _components_table(e.types_all, np.zeros(0, I64), np.zeros(0, np.int8), None)
    else:
        parts = [_hop_values(acc) for acc in e.hops]
        if len(parts) == 1:
            allv, hop_i = parts[0], np.zeros(len(parts[0]["soj"]), np.int8)
        else:
            hop_i = np.concatenate([np.full(len(p_["soj"]), h, np.int8) for h, p_ in enumerate(parts)])
            allv = {k: np.concatenate([p_[k] for p_ in parts]) for k in parts[0]}
        order = np.lexsort((allv["seq"], allv["t_arr"], hop_i))  # the timeline's row order
        soj, types = allv["soj"][order], allv["type"][order]
        # one hop: the batch-means order (float instant, hop, instant, seq) is the row order, the
        # float of an instant being monotone in it (equal floats are then ordered by the instant)
        ci = order if len(parts) == 1 else _ci_order(allv["t_arr"], hop_i, allv["seq"])
        one_hop_soj = soj if len(parts) == 1 else None
        del order
        ci_vals = allv["soj"][ci] / 1e3
        if figures:
            fig_t = allv["t_arr"][ci].astype(np.float64)
            fig_a = {"sojourn": allv["soj"][ci].astype(np.float64)}
        del ci
        comp = _components_table(e.types_all, soj, types, ci_vals)
        del types, ci_vals
        if len(e.hops) > 1:
            tabs = []
            for h, (acc, p_) in enumerate(zip(e.hops, parts)):
                o = np.lexsort((p_["seq"], p_["t_arr"]))
                ci_h = _ci_order(p_["t_arr"], np.zeros(len(o), np.int8), p_["seq"])
                c = _components_table(acc.types, p_["soj"][o], p_["type"][o], p_["soj"][ci_h] / 1e3)
                c.insert(0, "proxy", acc.socket)
                c.insert(0, "hop", h + 1)
                tabs.append(c)
            by_hop = pd.concat(tabs, ignore_index=True)
    # ---- calls and transactions (caller side) ----------------------------------------------
    ref = e.ref
    strings = e.cb.strings

    def rel(a):
        out = (a - ref).astype(np.float64)
        out[a == NA] = np.nan
        return out

    def stat(a):
        out = a.astype(np.float64)
        out[a < 0] = np.nan
        return out

    cr = {k: np.concatenate([r[k] for r in e.crec]) for k in e.crec[0]} if e.crec else None
    e.crec = []
    run_end = pd.Series({e.run_id: float(e.run_last - ref) if e.run_last != NA else np.nan})

    def tx_of(mi: int) -> pd.DataFrame:
        cols = ["key", "cseq", "t_req", "run", "t_any", "t_ind", "s_ind", "t_fin", "s_fin"]
        if cr is None or not (cr["m"] == mi).any():
            return pd.DataFrame({c: pd.Series(dtype="float64" if c not in ("key", "run") else object)
                                 for c in cols})
        s_ = cr["m"] == mi
        df = pd.DataFrame({
            "key": cr["call"][s_].view(np.int64), "cseq": np.where(cr["cseq"][s_] == NA, -1.0, cr["cseq"][s_]),
            "t_req": rel(cr["t_req"][s_]), "run": e.run_id, "t_any": rel(cr["t_any"][s_]),
            "t_ind": rel(cr["t_ind"][s_]), "s_ind": stat(cr["s_ind"][s_]), "t_fin": rel(cr["t_fin"][s_]),
            "s_fin": stat(cr["s_fin"][s_])})
        if df.duplicated(["key", "cseq"]).any():  # parts of one transaction closed apart
            df = _merge_parts(df)
        df = df.sort_values(["key", "cseq"], kind="stable")
        return df.sort_values(["key", "t_req"], kind="stable").reset_index(drop=True)[cols]

    c_tab = calls.call_table_from(tx_of(0), tx_of(1), run_end)
    r_tab = calls._attempts(tx_of(2), run_end, calls.TIMER_S * 1e9, invite=False)
    if v.kind == "endpoint":
        pdr_row = calls.pdr_row_from(False, False, 0, 0, offered)
    else:
        a0 = e.hops[0]
        pdr_row = calls.pdr_row_from(True, True, int(a0.disp[K.D_DROPPED]),
                                     int(a0.disp[K.D_RELAYED] + a0.disp[K.D_DROPPED]), offered)
    cm = calls.metrics_from(c_tab, r_tab, pdr_row)
    if e.xrec:
        xr = {k: np.concatenate([r[k] for r in e.xrec]) for k in e.xrec[0]}
        e.xrec = []
        mcodes, minv = np.unique(xr["m"], return_inverse=True)
        tx = pd.DataFrame({"key": xr["call"].view(np.int64), "cseq": xr["cseq"],
                           "method": np.array([strings[m] for m in mcodes.tolist()], dtype=object)[minv],
                           "copies": xr["copies"].astype(np.int64),
                           "t_req": rel(xr["t_req"]), "t_first": rel(xr["t_first"]), "t_fin": rel(xr["t_fin"])})
        if tx.duplicated(["key", "cseq", "method"]).any():
            tx = tx.groupby(["key", "cseq", "method"], as_index=False).agg(
                copies=("copies", "sum"), t_req=("t_req", "min"), t_first=("t_first", "min"),
                t_fin=("t_fin", "min"))
        tr = calls.transactions_from(tx)
    else:
        tr = calls.transactions_from(None)
    # ---- counts --------------------------------------------------------------------------
    if e.counts:
        keys = np.array(list(e.counts.keys()), dtype=I64)
        n = np.array(list(e.counts.values()), dtype=I64)
        req = keys[:, 0] == 1
        df = pd.DataFrame({
            "kind": np.where(req, "request", "response"),
            "method": [strings[m] if r else "" for m, r in zip(keys[:, 1].tolist(), req.tolist())],
            "status": ["" if r or s < 0 else str(s) for s, r in zip(keys[:, 2].tolist(), req.tolist())],
            "cseq_method": [strings[c] for c in keys[:, 3].tolist()],
            "disposition": [K.DISPOSITION_NAMES[d] for d in keys[:, 4].tolist()],
            "re": keys[:, 5], "n": n})
        counts = calls.message_counts_from(df)
    else:
        counts = calls.message_counts_from(None)
    # ---- the report's findings ------------------------------------------------------------
    rows = e.endpoint_rows if v.kind == "endpoint" else sum(a.n_rows for a in e.hops)
    rep.messages = rows
    rep.details["vantage"] = v.to_dict()
    unused: dict[str, int] = {}
    if e.no_cid:
        unused["no Call-ID (malformed SIP message)"] = e.no_cid
    if v.kind == "endpoint":
        calls_n = len(np.unique(np.concatenate(e.endpoint_calls))) if e.endpoint_calls else 0
        rep.details["vantage"]["seen"] = {"messages": int(rows), "retransmissions": int(e.endpoint_retrans),
                                          "call_ids": int(calls_n)}
    else:
        per_hop = []
        for h, acc in enumerate(e.hops):
            pre = f"hop {h + 1}: " if len(e.hops) > 1 else ""
            socks = set(acc.sockets) | {acc.socket}
            if len(socks) > 1:
                rep.notes.append(f"{pre}proxy also uses {sorted(socks - {acc.socket})}")
            rep.notes.append(f"{pre}{acc.n_paired} paired, {acc.n_in - acc.n_paired} without egress, "
                             f"{acc.n_eo} egress only (proxy-originated or retransmitted by the proxy)")
            if acc.res is not None and acc.amb[0]:
                rep.notes.append(pre + acc.res.note(int(acc.amb[0]), int(acc.amb[1]), int(acc.amb[2])))
            if acc.inverted:
                from sipperf.ingest.pairing.proxy import inverted_note
                rep.notes.append(pre + inverted_note(acc.inverted))
                rep.details["egress_before_ingress"] = rep.details.get("egress_before_ingress", 0) + acc.inverted
            if acc.unknown:
                rep.notes.append(f"{pre}{acc.unknown} messages had a copy with a repaired stamp, or a clock step "
                                 "between their copies: counted as what they were, their time in the proxy left out")
                rep.details["time_unknown"] = rep.details.get("time_unknown", 0) + acc.unknown
            dcount = {name: int(acc.disp[i]) for i, name in enumerate(hop.DISPOSITIONS) if acc.disp[i]}
            rep.notes.append(f"{pre}dispositions: " + ", ".join(f"{k} {x}" for k, x in dcount.items()))
            vals = parts[h]
            if one_hop_soj is not None:
                sj = one_hop_soj.astype(np.float64) / 1e3
            else:
                sj = vals["soj"][np.lexsort((vals["seq"], vals["t_arr"]))].astype(np.float64) / 1e3
            relayed, dropped = dcount.get(hop.RELAYED, 0), dcount.get(hop.DROPPED, 0)
            per_hop.append({
                "hop": h + 1, "proxy": acc.socket, "messages": int(acc.n_rows), "dispositions": dcount,
                "pdr_percent": 100.0 * dropped / (relayed + dropped) if relayed + dropped else None,
                "sojourn_us": {"count": int(len(sj)), "mean": float(sj.mean()) if len(sj) else None,
                               "median": float(np.median(sj)) if len(sj) else None,
                               "p99": float(np.percentile(sj, 99)) if len(sj) else None},
            })
            if acc.used_self:
                unused["from the proxy to itself"] = unused.get("from the proxy to itself", 0) + acc.used_self
        rep.details["vantage"]["per_hop"] = per_hop
        n_other = e.n_rows - e.used - sum(a.used_self for a in e.hops)
        if n_other:
            unused["not to or from the proxy" if len(e.hops) == 1 else "not to or from any hop"] = n_other
    rep.details["messages_account"] = {"sip_messages": e.n_rows + e.no_cid, "in_timeline": int(e.used),
                                       "not_in_timeline": unused}
    assert e.used + sum(unused.values()) == e.n_rows + e.no_cid
    rep.notes.extend(v.notes)
    return Outputs(comp, by_hop, cm, tr, counts, rep, fig_t, fig_a, measure_table(e) if e.keep_rows else None)


#: the columns of :func:`measure_table`
MEASURE_COLUMNS = ("run_id", "call_id", "cseq", "cseq_method", "kind", "method", "status", "msg_type", "t_arr",
                   "t_dep", "dropped", "disposition", "vantage", "proxy")


def measure_table(e: Engine) -> pd.DataFrame:
    """The caller side's timeline rows (hop 1 with several hops), in the timeline's order, with the
    columns :func:`sipperf.report.runs.measure` and the report's per-run tables read
    (:data:`MEASURE_COLUMNS`, plus ``retrans`` at an endpoint): about 48 bytes per message
    (58 while the capture is read), against about 1.6 kB per packet on the in-memory path.
    ``call_id`` is the Call-ID's 64-bit hash (:mod:`.compact`): calls group as by their
    Call-IDs."""
    from sipperf.timeline import MSG_TYPES

    cols = ("t_arr", "t_dep", "frame", "call", "cseq", "method", "cm", "status", "mt", "disp", "retrans", "racy")
    k = {c: np.concatenate([x[c] for x in e.kept]) if e.kept and c in e.kept[0] else None for c in cols}
    e.kept = []
    n = 0 if k["t_arr"] is None else len(k["t_arr"])
    if not n:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in MEASURE_COLUMNS})
    first = np.where(k["t_arr"] != NA, k["t_arr"], k["t_dep"])
    o = np.lexsort((k["frame"], first))
    k = {c: (v[o] if v is not None else None) for c, v in k.items()}
    del first, o
    d = k["disp"].copy()
    prov = d == K.D_PROVISIONAL
    if prov.any():  # settled as hop.classify's horizon does (Engine.finish)
        longest = e.hops[0].longest if e.hops and e.hops[0].longest >= 0 else None
        if longest is None:
            d[prov] = K.D_DROPPED
        else:
            t0 = e.t_min
            fl = (k["t_arr"][prov] - t0).astype(np.float64) > float(e.capture_end - t0) - float(longest)
            d[prov] = np.where(fl, K.D_IN_FLIGHT, K.D_DROPPED)
        if longest is not None and e.hops[0].concurrent and k["racy"] is not None:
            d[prov & (k["racy"] >= 0) & (k["racy"] <= longest)] = K.D_AFTER_FINAL
    strings = np.array(e.cb.strings, dtype=object)

    def ints(v, dtype):
        out = pd.array(np.where(v == NA, 0, v).astype(dtype), dtype=dtype.capitalize())
        out[v == NA] = pd.NA
        return out

    def cat(codes, names):
        return pd.Categorical.from_codes(codes.astype(np.int32), categories=pd.Index(names, dtype=object))

    req = k["method"] >= 0
    meth = np.where(req, k["method"], -1)
    st = k["status"].astype(np.int64)
    status = pd.array(np.where(st >= 0, st, 0).astype(np.int16), dtype="Int16")
    status[st < 0] = pd.NA
    v = e.vantage
    out = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[e.run_id]),
        "call_id": k["call"].view(np.int64),
        "cseq": ints(k["cseq"], "int64"),
        "cseq_method": cat(k["cm"], strings),
        "kind": pd.Categorical.from_codes(np.where(req, 0, 1).astype(np.int8), categories=["request", "response"]),
        "method": pd.Categorical.from_codes(meth.astype(np.int32), categories=pd.Index(strings, dtype=object)),
        "status": status,
        "msg_type": pd.Categorical.from_codes(k["mt"].astype(np.int8), categories=list(MSG_TYPES)),
        "t_arr": ints(k["t_arr"], "int64"),
        "t_dep": ints(k["t_dep"], "int64"),
        "dropped": pd.array(d == K.D_DROPPED, dtype="boolean"),
        "disposition": pd.Categorical.from_codes(d.astype(np.int8), categories=list(K.DISPOSITION_NAMES)),
        "vantage": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[v.kind]),
    })
    seen = sorted({str(s).lower() for s in e.cb.transports if s})
    if len(seen) == 1:              # one transport in the capture: the measure knows what a loss is
        out["transport"] = seen[0]
    elif seen and set(seen) <= {"tcp", "tls", "ws", "wss", "sctp"}:
        # streams only (WebSocket or TLS callers, the next hop over TCP): nothing is dropped either
        # way; the transport that is not plain TCP names the run, as the callers' transport
        other = [t for t in seen if t != "tcp"]
        out["transport"] = other[0] if len(other) == 1 else "tcp"
    if v.kind == "endpoint":
        out["retrans"] = pd.array(k["retrans"], dtype="boolean")
    else:
        out["proxy"] = pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[e.hops[0].socket])
    return out


def _merge_parts(df: pd.DataFrame) -> pd.DataFrame:
    """Records of one (key, cseq) transaction whose parts were closed apart: what the
    in-memory grouping gives (earliest request, earliest response, first indicative and first
    final response by instant)."""
    g = df.groupby(["key", "cseq"], sort=False)
    out = g.agg(t_req=("t_req", "min"), run=("run", "first"), t_any=("t_any", "min")).reset_index()
    for t, s_ in (("t_ind", "s_ind"), ("t_fin", "s_fin")):
        best = df.sort_values(t, kind="stable").drop_duplicates(["key", "cseq"], keep="first")
        out = out.merge(best[["key", "cseq", t, s_]], on=["key", "cseq"], how="left")
    return out


# ------------------------------------------------------------------------------- the driver
def stream_capture(files: list[Path], *, run_id: str, label: str, proxy=None, strict: bool = False,
                   stateful: bool = True, offered: int | None = None, figures: bool = True,
                   mode: str = "auto", workers: int | None = None, scheduler: str | None = None,
                   progress: bool | None = None, chunk_rows: int = CHUNK_ROWS, horizon_s: float = HORIZON_S,
                   prefix_rows: int = PREFIX_ROWS, batch_rows: int = BATCH_ROWS,
                   max_open_rows: int = MAX_OPEN_ROWS, vantage=None, keep_rows: bool = False) -> Outputs:
    """Analyse one capture (one file, or the files of a ring buffer in time order) in one
    streaming pass.  ``mode``: "inline" (read here), "helper" (read in a helper process),
    "dask" (one file per Dask task; ``workers`` local workers or ``scheduler``), "auto"
    (dask for several files, helper for one file of 256 MB or more, else inline).  Raises
    :class:`IngestError` as the in-memory path does, :class:`NotStreamable` for a B2BUA.
    ``vantage``: use this :class:`~.vantage.Vantage` instead of deciding it (tests).  ``keep_rows``:
    also return the caller side's rows for ``sipperf report`` (:func:`measure_table`, ``Outputs.rows``)."""
    files = [Path(f) for f in files]
    if mode == "auto":
        size = sum(f.stat().st_size for f in files)
        have_dask = importlib.util.find_spec("distributed") is not None   # the [distributed] extra
        mode = "dask" if len(files) > 1 and (workers or scheduler or (size >= (256 << 20) and have_dask)) else (
            "helper" if len(files) == 1 and size >= (256 << 20) else "inline")
    t_start = time.perf_counter()
    engine = Engine(run_id=run_id, proxy=proxy, path_label=label, stateful=stateful, horizon_s=horizon_s,
                    max_open_rows=max_open_rows, prefix_rows=prefix_rows, batch_rows=batch_rows,
                    prefix_frame=lambda n: _prefix_frame(files, n), vantage=vantage, keep_rows=keep_rows)
    if mode == "dask":
        from sipperf.ingest.capture.distributed import map_files
        source = map_files(files, workers=workers, scheduler=scheduler, progress=progress,
                           chunk_rows=chunk_rows, strict=strict)
    elif mode == "helper":
        source = ((0, m) for m in produce_in_helper(files[0], chunk_rows=chunk_rows, strict=strict))
    else:
        source = ((i, m) for i, f in enumerate(files) for m in produce(f, chunk_rows=chunk_rows, strict=strict))
    from sipperf.ingest.paths import display_path

    reports: list[IngestReport] = []
    helper = None
    rows_per_file = np.zeros(len(files), I64)
    offset = 0
    for i, msg in source:
        if msg[0] == "chunk":
            engine.feed(msg[1], i, offset, msg[2])
            rows_per_file[i] += msg[1]["n"] + msg[2]
        elif msg[0] == "end":
            r = msg[1]
            r.path = display_path(files[i])
            if len(msg) > 2:
                helper = msg[2]
            reports.append(r)
            offset += r.read
        elif msg[0] == "error":
            raise IngestError(msg[1], msg[2], msg[3])
    _check(files, reports, engine, strict)
    engine.finish()
    rep = _report(files, reports, label)
    engine.report = rep
    out = outputs(engine, offered=offered, figures=figures)
    out.report.details["streaming"] = {
        "engine": f"streaming ({mode})", "files": len(files), "sip_messages": int(engine.n_rows + engine.no_cid),
        "vantage_from_first_rows": int(min(prefix_rows, engine.n_rows)), "horizon_s": horizon_s,
        "max_open_rows": max_open_rows,
        "late_rows": int(engine.late_rows), "closed_early_rows": int(engine.forced_rows),
        "batches": int(engine.batches),
        "seconds": round(time.perf_counter() - t_start, 3),
    }
    if helper is not None:
        out.report.details["streaming"]["reader_process"] = {k: round(v, 3) for k, v in helper.items()}
    if engine.late_rows or engine.forced_rows:
        out.report.notes.append(
            f"streaming: {engine.late_rows} messages arrived for a transaction silent for more than "
            f"{horizon_s:g} s (or closed early: {engine.forced_rows} rows, more than {max_open_rows} "
            f"rows waiting): their transaction was paired in parts")
    if len(files) > 1:
        out.report.details["capture_set"] = {
            "files": [{"path": r.path, "read": r.read, "parsed": r.parsed, "skipped": dict(r.skipped),
                       "sip_messages": int(k)} for r, k in zip(reports, rows_per_file)],
            "pairing": {"transactions_across_files": int(engine.cross_file["groups_across_files"]),
                        "messages_paired_across_files": int(engine.cross_file["paired_across_files"])},
        }
    from sipperf.analysis.account import clock_resolution_ns, with_resolution
    res = clock_resolution_ns(out.report)  # the clock's resolution beside every component, as in memory
    out.components = with_resolution(out.components, res)
    out.components_by_hop = with_resolution(out.components_by_hop, res)
    return out


def _check(files, reports, engine: Engine, strict: bool) -> None:
    """The checks of :func:`sipperf.ingest.capture.read.read_capture`, in its order."""
    label = files[0] if len(files) == 1 else files[0].parent
    if strict:
        for f, r in zip(files, reports):
            real = {k: n for k, n in r.skipped.items() if k not in TRANSPORT_ONLY}
            if real:
                reason, n = next(iter(sorted(real.items())))
                raise IngestError(f, "packets", f"--strict: {sum(real.values())} packet(s) skipped, e.g. {n} for "
                                                f"{reason!r} ({real})")
    read = sum(r.read for r in reports)
    if engine.n_rows + engine.no_cid == 0:
        skipped: dict = {}
        for r in reports:
            for k, n in r.skipped.items():
                skipped[k] = skipped.get(k, 0) + n
        what = f"skipped: {skipped}" if skipped else "no packets"
        raise IngestError(label, f"{read} packets", f"no SIP message in this capture ({what})")
    if engine.no_cid and strict:
        raise IngestError(label, "packets", f"--strict: {engine.no_cid} SIP message(s) without Call-ID")
    if engine.n_rows == 0:
        raise IngestError(label, f"{read} packets", "no usable SIP message in this capture (none has a Call-ID)")


def _report(files, reports: list[IngestReport], label: str) -> IngestReport:
    if len(reports) == 1:
        return reports[0]
    from sipperf.ingest.capture.read import set_report

    return set_report(reports, label)


def _prefix_frame(files, n: int) -> pd.DataFrame:
    """The real packet table of the first ``n`` SIP messages with a Call-ID (for the B2BUA check)."""
    from sipperf.ingest.capture.fast import empty_packets, iter_packets

    parts, have = [], 0
    for f in files:
        for df in iter_packets(f, IngestReport(source="x"), chunk_rows=min(n, CHUNK_ROWS), progress=False):
            cid = df["call_id"]
            df = df[~(cid.isna() | (cid.astype("string") == "")).to_numpy(dtype=bool, na_value=True)]
            parts.append(df.iloc[:n - have])
            have += len(parts[-1])
            if have >= n:
                break
        if have >= n:
            break
    return pd.concat(parts, ignore_index=True) if parts else empty_packets()
