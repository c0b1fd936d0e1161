"""Bulk capture reader: pcap/pcapng (plain, or compressed: gzip, xz, bzip2, zstd) -> the packet table, no tshark.

One compiled pass (:func:`.scan.scan`, numba) walks the mapped file record by record and
writes one row per SIP message straight into column arrays; this module opens the file,
drives the pass in pieces of at most 65 536 records, turns the columns into DataFrames
(strings as Arrow arrays, no Python object per row; :func:`iter_packets`) or straight into the
streaming engine's compact chunks (:func:`iter_compact`) and keeps the account.  The records are
identical to :mod:`sipperf.ingest.capture.pyshark_engine`'s (a test checks it on every fixture); what a
record goes through is listed in :mod:`.scan`, the SIP rules in :mod:`.sipmsg`.

Record conventions (the same as tshark's): ``frame`` is the 1-based number of the packet that
completes the message (the last fragment / segment), ``ts_ns`` its capture time in epoch ns,
``size`` the SIP message length in bytes (start line + headers + body; a UDP datagram's whole
payload).

The account (:class:`~sipperf.timeline.IngestReport`): ``read`` = packet records in the file
(a record cut off by the end of the file, or a corrupt record header after which nothing can
be read, counts as one more, skipped); every packet is ``parsed`` (it carries, completes or is
part of a SIP message) or skipped with a reason.  ``on_truncated="raise"`` (for ``--strict``)
turns a cut or corrupt tail into an :class:`~sipperf.timeline.IngestError` naming the packet
and byte offset.

Decisions documented here:

* a pcapng Simple Packet Block has no timestamp: its packet is a counted skip ("pcapng simple
  packet block (no timestamp)"), never a row at 1970-01-01; a capture whose timestamps are all
  zero is read and says so in a note;
* a packet block naming an interface no IDB defined is a counted skip, the first one's byte
  offset in a note;
* a compressed file (gzip, xz, bzip2, zstd: :mod:`sipperf.ingest.compression`) is recognised by
  content (its magic, then the pcap/pcapng magic inside) and read as a stream, never written to
  disk; cut short, it is read up to the cut like a capture cut short.
"""
from __future__ import annotations

import mmap
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import numpy as np
import pandas as pd

from sipperf.timeline import IngestError, IngestReport
from sipperf.ingest.capture import scan as ps

COLUMNS: tuple[str, ...] = (
    "frame", "ts_ns", "src", "sport", "dst", "dport", "transport", "size",
    "call_id", "cseq", "cseq_method", "method", "status", "via_branch",
    "from_uri", "from_tag", "to_uri", "to_tag", "contact_uri", "corr_id", "ua",
    "via_count", "max_forwards", "retry_after", "iface",
)
DTYPES: dict[str, str] = {
    "frame": "int64", "ts_ns": "int64", "src": "string", "sport": "int64", "dst": "string",
    "dport": "int64", "transport": "string", "size": "int64", "call_id": "string", "cseq": "Int64",
    "cseq_method": "string", "method": "string", "status": "Int64", "via_branch": "string",
    "from_uri": "string", "from_tag": "string", "to_uri": "string", "to_tag": "string",
    "contact_uri": "string", "corr_id": "string", "ua": "string", "via_count": "int64",
    "max_forwards": "Int64", "retry_after": "Int64", "iface": "int64",
}

PCAP_MAGICS = {  # magic -> (byte order big?, ns per fraction unit, record header bytes)
    b"\xd4\xc3\xb2\xa1": (False, 1000, 16), b"\xa1\xb2\xc3\xd4": (True, 1000, 16),
    b"\x4d\x3c\xb2\xa1": (False, 1, 16), b"\xa1\xb2\x3c\x4d": (True, 1, 16),
    b"\x34\xcd\xb2\xa1": (False, 1000, 24), b"\xa1\xb2\xcd\x34": (True, 1000, 24),  # Kuznetzov
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC = b"\x1f\x8b"

_INT_COLS = {"frame": ps.I_FRAME, "ts_ns": ps.I_TS, "sport": ps.I_SPORT, "dport": ps.I_DPORT,
             "size": ps.I_SIZE, "via_count": ps.I_VIACNT, "iface": ps.I_IFACE}
_NULLABLE = {"cseq": ps.I_CSEQ, "status": ps.I_STATUS, "max_forwards": ps.I_MAXFWD,
             "retry_after": ps.I_RETRY}
_STR_COLS = {"call_id": ps.S_CALLID, "cseq_method": ps.S_CSEQM, "method": ps.S_METHOD,
             "via_branch": ps.S_BRANCH, "from_uri": ps.S_FROMURI, "from_tag": ps.S_FROMTAG,
             "to_uri": ps.S_TOURI, "to_tag": ps.S_TOTAG, "contact_uri": ps.S_CONTACT,
             "corr_id": ps.S_CORR, "ua": ps.S_UA}
#: the string columns compact chunks are made from (the others are not built on that path)
_COMPACT_STR = ("call_id", "cseq_method", "method", "via_branch")
RECORDS_PER_CALL = 65536
#: copies of one datagram this close in time are one packet read twice (:mod:`.scan.dedup`); 0: keep
#: every copy
DUP_WINDOW_NS: int = ps.DUP_WINDOW_NS
#: a plain file larger than this is mapped, not read window by window (see _Source._map); None:
#: never.  Only the streaming engine's reader process (:mod:`.chunk_reader`) maps: a file cut
#: shorter while mapped ends the process that reads it (SIGBUS), and there that is a reader
#: process the analysis reports on, not the analysis itself
MAP_MIN_BYTES: int | None = None
#: a mapped file's read pages are dropped this many bytes at a time
RELEASE_BYTES = 1 << 26
_T = TypeVar("_T")


def sniff_format(path: str | os.PathLike, head: bytes) -> str:
    """``"pcap"`` or ``"pcapng"`` from the first bytes (of the decompressed stream for a
    compressed file); :class:`IngestError` naming the file otherwise."""
    if len(head) < 4:
        raise IngestError(path, "byte 0", f"not a capture file: only {len(head)} bytes")
    if head[:4] == PCAPNG_SHB:
        return "pcapng"
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    raise IngestError(path, "byte 0",
                      f"not a pcap/pcapng capture (magic {head[:4].hex()}); is it a log file?")


def is_capture(path: str | os.PathLike) -> bool:
    """True for a pcap/pcapng file, plain or compressed (gzip, xz, bzip2, zstd; judged by content)."""
    from sipperf.ingest.compression import read_head
    try:
        head, _ = read_head(path, 4)
    except OSError:
        return False
    return head[:4] == PCAPNG_SHB or head[:4] in PCAP_MAGICS


def _to_frame(cols: dict[str, list]) -> pd.DataFrame:
    """A packet table from Python lists (the pyshark path and small tools)."""
    return pd.DataFrame({c: pd.array(cols[c], dtype=DTYPES[c]) if DTYPES[c] != "int64"
                         else np.asarray(cols[c], dtype=np.int64) for c in COLUMNS})


def empty_packets() -> pd.DataFrame:
    return _to_frame({c: [] for c in COLUMNS})


# ------------------------------------------------------------------------------ the state
class _State:
    """Arrays the compiled pass keeps between calls (see :mod:`.scan`)."""

    def __init__(self) -> None:
        self.st = np.zeros(ps.NST, np.int64)
        self.st[ps.ST_UNDEF_POS] = -1
        self.st[ps.X_DUP_WINDOW] = DUP_WINDOW_NS
        self.st[ps.X_DEDUP] = ps.DEDUP_REMEMBER
        self.cnt = np.zeros(ps.NCNT, np.int64)
        self.ifs = np.zeros((ps.MAX_IF, ps.NIFC), np.int64)
        self.ak = np.zeros((1 << 12, 3), np.int64)
        self.av = np.full(1 << 12, -1, np.int64)
        self.alist = np.zeros((1 << 11, 3), np.int64)
        self.tk = np.zeros((1 << 10, 5), np.int64)
        self.tv = np.full(1 << 10, -1, np.int64)
        self.fs = np.zeros((1 << 9, ps.NF), np.int64)
        self.arena = np.empty(1 << 20, np.uint8)
        self.frs = np.zeros((ps.MAX_FRAG_SLOTS, ps.NFR), np.int64)
        self.frl = np.zeros((ps.MAX_FRAG_SLOTS, ps.MAX_FRAGS, 3), np.int64)
        self.farena = np.empty(1 << 16, np.uint8)
        self.scr = np.empty(1 << 21, np.uint8)
        self.hs = np.zeros(ps.NH, np.int64)
        self.he = np.zeros(2 * ps.NH, np.int64)
        self.dgram = np.empty(1 << 17, np.uint8)
        self.op = np.zeros((16, ps.OOO_PIECES + 1, 6), np.int64)  # out-of-order TCP slots
        self.ob = np.empty((16, ps.OOO_WINDOW), np.uint8)
        self.st[ps.ST_OOO_T0MIN] = np.iinfo(np.int64).max
        # output columns of one call (reused; the compiled pass grows them when needed)
        cap = RECORDS_PER_CALL + 20000
        self.I = np.empty((ps.NI, cap), np.int64)
        self.O = np.empty((ps.NS, cap + 1), np.int64)
        self.V = np.empty((ps.NS, cap), np.uint8)
        self.D = np.empty((ps.NS, RECORDS_PER_CALL * 64), np.uint8)
        self.addrs: list[str] = []
        self._addr_arrow = None

    def ensure(self, records: int) -> None:
        """Room for ``records`` more packets: 2 new addresses and 1 new flow each (a TCP
        segment that completes many HEP packets may add more: the compiled pass then stops
        before it, and the next call grows the table); a free slot in the out-of-order pool
        (the pass stops when it is full: the pool doubles here, up to OOO_MAX_SLOTS)."""
        st = self.st
        na = int(st[ps.ST_NADDR]) + 2 * records + 64
        if na > self.alist.shape[0]:
            al = np.zeros((max(na, 2 * self.alist.shape[0]), 3), np.int64)
            al[:self.alist.shape[0]] = self.alist
            self.alist = al
        if 2 * na > self.ak.shape[0]:
            size = 1 << (2 * na - 1).bit_length()
            ak, av = np.zeros((size, 3), np.int64), np.full(size, -1, np.int64)
            ps.rehash_addr(self.ak, self.av, ak, av)
            self.ak, self.av = ak, av
        if st[ps.ST_OOO_ACTIVE] >= self.op.shape[0] and self.op.shape[0] < ps.OOO_MAX_SLOTS:
            n = min(2 * self.op.shape[0], ps.OOO_MAX_SLOTS)  # the out-of-order pool is full
            op = np.zeros((n,) + self.op.shape[1:], np.int64)
            ob = np.empty((n, self.ob.shape[1]), np.uint8)
            op[:self.op.shape[0]] = self.op
            ob[:self.ob.shape[0]] = self.ob
            self.op, self.ob = op, ob
        nf = int(st[ps.ST_NFLOW]) + records
        if nf > self.fs.shape[0]:
            fs = np.zeros((max(nf, 2 * self.fs.shape[0]), ps.NF), np.int64)
            fs[:self.fs.shape[0]] = self.fs
            self.fs = fs
        if 2 * nf > self.tk.shape[0]:
            size = 1 << (2 * nf - 1).bit_length()
            tk, tv = np.zeros((size, 5), np.int64), np.full(size, -1, np.int64)
            ps.rehash_flows(self.tk, self.tv, tk, tv)
            self.tk, self.tv = tk, tv

    def addr_names(self) -> list[str]:
        """All interned addresses so far, as text (id -> text)."""
        n = int(self.st[ps.ST_NADDR])
        for hi, lo, fam in self.alist[len(self.addrs):n].tolist():
            if fam == 4:
                self.addrs.append(socket.inet_ntop(socket.AF_INET, struct.pack(">I", lo & 0xFFFFFFFF)))
            else:
                self.addrs.append(socket.inet_ntop(socket.AF_INET6, struct.pack(">qq", hi, lo)))
        return self.addrs

    def addr_strings(self):
        """All interned addresses so far, as an Arrow array (id -> text)."""
        import pyarrow as pa
        names = self.addr_names()
        if self._addr_arrow is None or len(self._addr_arrow) != len(names):
            self._addr_arrow = pa.array(names, pa.large_string())
        return self._addr_arrow


# ---------------------------------------------------------------------- columns -> frame
def _string_piece(n: int, O: np.ndarray, V: np.ndarray, D: np.ndarray, c: int, fix: np.ndarray | None):
    import pyarrow as pa
    offsets = O[c, :n + 1].copy()
    data = D[c, :offsets[-1]].copy()
    valid = V[c, :n]
    nulls = int(n - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if fix is not None and fix.any():
        # rows with bytes >= 0x80: decode as Python does (UTF-8, invalid -> U+FFFD)
        arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [bitmap, pa.py_buffer(offsets),
                                                                        pa.py_buffer(data)], nulls)
        vals = arr.to_pylist()
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in vals],
                        pa.large_string())
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), bitmap, nulls)


class _Builder:
    """Column pieces of the rows read so far, until a DataFrame (:meth:`frame`) or compact
    chunks (:meth:`compact`) are cut from them.  ``strings``: the string columns kept (all
    of them for a DataFrame, :data:`_COMPACT_STR` for compact chunks)."""

    def __init__(self, strings: tuple[str, ...] = tuple(_STR_COLS)) -> None:
        self.ints: dict[str, list[np.ndarray]] = {c: [] for c in (*_INT_COLS, *_NULLABLE)}
        self.ids: dict[str, list[np.ndarray]] = {"src": [], "dst": [], "transport": []}
        self.strs: dict[str, list] = {c: [] for c in strings}
        self.rows = 0
        self._joined: dict | None = None  # the pieces joined, once compact chunks are cut

    def add(self, n: int, I, O, V, D) -> None:
        for c, i in {**_INT_COLS, **_NULLABLE}.items():
            self.ints[c].append(I[i, :n].copy())
        self.ids["src"].append(I[ps.I_SRC, :n].copy())
        self.ids["dst"].append(I[ps.I_DST, :n].copy())
        self.ids["transport"].append(I[ps.I_TRANSPORT, :n].copy())
        fix = I[ps.I_NONASCII, :n]
        for c, pieces in self.strs.items():
            pieces.append(_string_piece(n, O, V, D, _STR_COLS[c], fix))
        self.rows += n

    def frame(self, state: _State) -> pd.DataFrame:
        import pyarrow as pa
        from pandas.arrays import ArrowStringArray, IntegerArray

        if not self.rows:
            return empty_packets()
        cols: dict[str, object] = {}
        for c in _INT_COLS:
            cols[c] = np.concatenate(self.ints[c])
        for c in _NULLABLE:
            v = np.concatenate(self.ints[c])
            m = v < 0
            cols[c] = IntegerArray(np.where(m, 0, v), m)
        dictionary = state.addr_strings()
        for c in ("src", "dst"):
            ids = np.concatenate(self.ids[c])
            arr = pa.DictionaryArray.from_arrays(pa.array(ids), dictionary).dictionary_decode()
            cols[c] = ArrowStringArray(pa.chunked_array([arr]))
        tr = np.concatenate(self.ids["transport"])
        arr = pa.DictionaryArray.from_arrays(pa.array(tr), pa.array(list(ps.TRANSPORTS), pa.large_string()))
        cols["transport"] = ArrowStringArray(pa.chunked_array([arr.dictionary_decode()]))
        for c in _STR_COLS:
            cols[c] = ArrowStringArray(pa.chunked_array(self.strs[c], pa.large_string()))
        return pd.DataFrame({c: cols[c] for c in COLUMNS})

    def compact(self, state: _State, start: int = 0, stop: int | None = None) -> tuple[dict, int]:
        """(compact chunk, rows dropped for a null or empty Call-ID) of rows ``start:stop``:
        what ``compact.compact_frame(self.frame(state).iloc[start:stop])`` gives, key for key
        and value for value, made from the pieces without the DataFrame -- addresses and
        transports stay integer ids until their few distinct values are named."""
        import pyarrow as pa
        from sipperf.ingest.capture import compact as C

        stop = self.rows if stop is None else min(stop, self.rows)
        if stop <= start:
            return C.compact_frame(empty_packets())
        j = self._join(state)
        n = stop - start
        strs = {c: j[c].slice(start, n) for c in _COMPACT_STR}
        call = C.hash_arrow(strs["call_id"].chunks, n)
        keep = call != 0  # the hash is 0 exactly for a null or empty value
        dropped = n - int(np.count_nonzero(keep))
        if dropped:
            mask = pa.array(keep)
            strs = {c: v.filter(mask) for c, v in strs.items()}
            call = call[keep]
            n -= dropped

        def rows(c: str) -> np.ndarray:
            v = j[c][start:stop]
            return v[keep] if dropped else v

        cseq, status = rows("cseq"), rows("status")
        out: dict = {"n": n, "ts": rows("ts_ns"), "frame": rows("frame"),
                     "cseq": np.where(cseq < 0, C.NA_INT, cseq), "status": np.where(status < 0, -1, status),
                     "via_count": rows("via_count"), "size": rows("size"), "iface": rows("iface"),
                     "clock": np.zeros(n, np.int64), "call": call,
                     "branch": C.hash_arrow(strs["via_branch"].chunks, n)}
        m_codes, m_uniq = C.arrow_codes(strs["method"])
        cm_codes, cm_uniq = C.arrow_codes(strs["cseq_method"].fill_null(""))
        out["method"] = m_codes
        out["cm"] = cm_codes + np.int32(len(m_uniq))
        out["strings"] = m_uniq + cm_uniq
        out["src"], out["dst"], out["endpoints"] = _endpoints(
            j["addr_id"][rows("src")], j["addr_id"][rows("dst")], rows("sport"), rows("dport"), j["addr_names"])
        t_codes, t_ids = pd.factorize(rows("transport"))
        out["transport"] = t_codes.astype(np.int32)
        out["transports"] = [ps.TRANSPORTS[i] for i in t_ids.tolist()]
        return out, dropped

    def compact_chunks(self, state: _State, chunk_rows: int) -> list[tuple[dict, int]]:
        """:meth:`compact` of every ``chunk_rows`` rows in turn (none when there is no row)."""
        return [self.compact(state, a, a + chunk_rows) for a in range(0, self.rows, chunk_rows)]

    def _join(self, state: _State) -> dict:
        """The pieces as whole columns (integers as numpy, strings as Arrow chunked arrays),
        plus ``addr_id`` (address id -> id of its text) and ``addr_names`` (text of each)."""
        import pyarrow as pa

        if self._joined is None:
            j: dict = {c: np.concatenate(v) for c, v in (*self.ints.items(), *self.ids.items())}
            for c, v in self.strs.items():
                j[c] = pa.chunked_array(v, pa.large_string())
            index: dict[str, int] = {}  # an address text interned twice gets one id
            j["addr_id"] = np.array([index.setdefault(a, len(index)) for a in state.addr_names()], np.int64)
            j["addr_names"] = list(index)
            self._joined = j
        return self._joined


def _endpoints(src_addr: np.ndarray, dst_addr: np.ndarray, sport: np.ndarray, dport: np.ndarray,
               names: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(src codes, dst codes, endpoint list) as :func:`.compact.compact_frame` makes them from
    'address' columns, here from address ids (into ``names``) and ports, hashing integers only:
    the addresses are numbered in order of first appearance over src then dst, the endpoints
    listed by (that number, port)."""
    from sipperf.ingest.capture import compact as C

    n = len(src_addr)
    key = np.concatenate([src_addr, dst_addr]) * 65536 + (np.concatenate([sport, dport]) & 0xFFFF)
    key_codes, keys = pd.factorize(key)  # the (address, port) pairs in order of first appearance
    # an address first appears with the first pair naming it
    addr_codes, addr_ids = pd.factorize(keys // 65536)
    ep = (addr_codes.astype(np.int64) + 1) * 65536 + keys % 65536
    order = np.argsort(ep)
    rank = np.empty(len(ep), np.int64)
    rank[order] = np.arange(len(ep))
    codes = rank[key_codes]
    addr_ids = addr_ids.tolist()
    endpoints = [C._endpoint_text(names[addr_ids[e // 65536 - 1]], e % 65536) for e in ep[order].tolist()]
    return codes[:n].astype(np.int32), codes[n:].astype(np.int32), endpoints


# -------------------------------------------------------------------------- the sources
class _Source:
    """The capture's bytes, a window at a time, in one reused numpy buffer: read with
    ``readinto`` from a plain file, or decompressed from a compressed stream (several members
    allowed).  ``buf[:end]`` holds the bytes from file offset ``base`` (of the decompressed
    stream for a compressed file); ``eof`` is set once the last byte is in."""

    def __init__(self, path: Path, window: int = 1 << 24):
        from sipperf.ingest import compression

        self.path = path
        self.fh = open(path, "rb")
        head = self.fh.read(8)
        self.fh.seek(0)
        self.comp = compression.kind(head)  # "gzip", "xz", "bzip2", "zstd" or None
        self.gz = self.comp is not None     # read through a decompressor
        why = compression.refused(head)
        if why is not None:
            self.fh.close()
            raise IngestError(path, "byte 0", f"not a capture: {why}")
        self.size = os.fstat(self.fh.fileno()).st_size
        self.problem: str | None = None  # a compressed stream cut short or corrupt
        self.end = 0
        self.base = 0
        self.eof = False
        self.pending = b""  # decompressed bytes that did not fit yet
        self.dec = compression.Decoder(self.comp) if self.gz else None
        self.mm = (self._map() if not self.gz and MAP_MIN_BYTES is not None and self.size > MAP_MIN_BYTES
                   else None)
        if self.mm is not None:
            self.buf = np.frombuffer(self.mm, np.uint8)
            self.end = self.size
            self.eof = True
            self.released = 0
        else:
            self.buf = np.empty(window, np.uint8)
            self.fill(0)
        if self.gz and self.end == 0 and self.problem:
            raise IngestError(path, "byte 0", f"{self.comp} data unreadable: {self.problem}")
        self.fmt = sniff_format(path, self.buf[:min(4, self.end)].tobytes())

    def _map(self):
        """The whole file mapped (copy-on-write: the array is writable, the file never
        written), so the compiled pass reads the page cache in place instead of a copy of it
        (2 s less for a 6 GB capture); None where the file cannot be mapped (then it is read
        window by window).  What is read is the file as long as it was when opened."""
        try:
            mm = mmap.mmap(self.fh.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            return None
        mm.madvise(mmap.MADV_SEQUENTIAL)  # read once, front to back: read ahead of the faults
        return mm

    def release(self, upto: int) -> None:
        """The bytes before ``upto`` are read: drop their pages from this process (a mapped
        file), so its resident memory stays a window, not the file."""
        if self.mm is None:
            return
        upto -= upto % mmap.PAGESIZE
        if upto - self.released >= RELEASE_BYTES:
            self.mm.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            self.released = upto

    def fill(self, keep_from: int) -> None:
        """Drop ``buf[:keep_from]``, then fill the window (grown if the rest already fills it)."""
        rest = self.end - keep_from
        if keep_from:
            self.buf[:rest] = self.buf[keep_from:self.end]
            self.base += keep_from
        elif rest == len(self.buf):  # one record longer than the window: grow it
            nb = np.empty(2 * len(self.buf), np.uint8)
            nb[:rest] = self.buf[:rest]
            self.buf = nb
        self.end = rest
        while self.end < len(self.buf) and not self.eof:
            if not self.gz:
                n = self.fh.readinto(memoryview(self.buf)[self.end:])
                if not n:
                    self.eof = True
                self.end += n or 0
                continue
            if not self.pending:
                self.pending = self._inflate()
                if not self.pending:
                    self.eof = True
                    break
            k = min(len(self.pending), len(self.buf) - self.end)
            self.buf[self.end:self.end + k] = np.frombuffer(self.pending, np.uint8, k)
            self.pending = self.pending[k:]
            self.end += k

    def _inflate(self) -> bytes:
        """The next decompressed bytes (b"" at the end or on an error, noted in ``problem``)."""
        from sipperf.ingest.compression import DecodeError

        step = 1 << 20 if self.comp == "gzip" else 1 << 16
        while self.problem is None:
            chunk = self.fh.read(step)
            if not chunk:
                if not self.dec.finish():
                    self.problem = self.dec.problem
                return b""
            saved = self.dec.copy()
            try:
                out = self.dec.decompress(chunk)
            except DecodeError as e:
                # keep what decompresses before the bad spot (gzip: replayed in small pieces)
                self.problem = str(e)
                out = []
                if saved is not None:
                    try:
                        for i in range(0, len(chunk), 512):
                            out.append(saved.decompress(chunk[i:i + 512]))
                    except DecodeError:
                        pass
                self.fh.seek(0, os.SEEK_END)
                return b"".join(out)
            if out:
                return out
        return b""

    def close(self) -> None:
        self.buf = None
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # an array still looks at it: unmapped when that goes
                pass
        self.fh.close()


def _header(src: _Source, state: _State) -> int:
    """Parse the pcap file header into the state; returns the first record's offset."""
    st = state.st
    if src.fmt == "pcapng":
        st[ps.ST_FMT] = ps.FMT_PCAPNG
        return 0
    if src.end < 24:
        raise IngestError(src.path, "byte 0", "truncated pcap file header")
    head = src.buf[:24].tobytes()
    big, mult, rechdr = PCAP_MAGICS[head[:4]]
    link = struct.unpack((">" if big else "<") + "I", head[20:24])[0] & 0xFFFF
    st[ps.ST_FMT] = ps.FMT_PCAP
    st[ps.ST_BIG] = int(big)
    st[ps.ST_LINK] = 101 if link in (12, 14) else link
    st[ps.ST_TSMUL] = mult
    st[ps.ST_RECHDR] = rechdr
    return 24


# ------------------------------------------------------------------------------ the reader
def iter_packets(path: str | os.PathLike, report: IngestReport | None = None, *,
                 chunk_rows: int = 200_000, on_truncated: str = "skip",
                 progress: bool | None = None) -> Iterator[pd.DataFrame]:
    """Stream the SIP messages of a capture as DataFrames of about ``chunk_rows`` rows.

    ``on_truncated``: ``"skip"`` (default) counts a cut-off or corrupt last record as skipped
    and keeps every packet before it; ``"raise"`` raises :class:`IngestError` naming the
    packet and byte offset.  The report is complete (and checked) when the iterator ends."""
    yield from _read(path, report, chunk_rows=chunk_rows, on_truncated=on_truncated, progress=progress,
                     strings=tuple(_STR_COLS), cut=lambda out, state: out.frame(state))


def iter_compact(path: str | os.PathLike, report: IngestReport | None = None, *,
                 chunk_rows: int = 200_000, on_truncated: str = "skip",
                 progress: bool | None = None) -> Iterator[tuple[dict, int]]:
    """Stream the SIP messages of a capture as compact chunks (:mod:`.compact`) of at most
    ``chunk_rows`` rows, each with the number of rows dropped from it for a null or empty
    Call-ID: ``compact_frame`` of every ``chunk_rows``-row slice of :func:`iter_packets`'
    DataFrames, made without building them.  Arguments and report as :func:`iter_packets`."""
    for chunks in _read(path, report, chunk_rows=chunk_rows, on_truncated=on_truncated, progress=progress,
                        strings=_COMPACT_STR, cut=lambda out, state: out.compact_chunks(state, chunk_rows)):
        yield from chunks


def _read(path: str | os.PathLike, report: IngestReport | None, *, chunk_rows: int, on_truncated: str,
          progress: bool | None, strings: tuple[str, ...], cut: Callable[[_Builder, _State], _T]) -> Iterator[_T]:
    """The reader loop: the compiled pass over the whole capture, its rows collected in a
    :class:`_Builder` keeping the string columns ``strings``; ``cut(builder, state)`` is
    yielded whenever the builder holds ``chunk_rows`` rows or more, and once at the end for
    the rest (possibly no row)."""
    if on_truncated not in ("skip", "raise"):
        raise ValueError(f"on_truncated must be 'skip' or 'raise', not {on_truncated!r}")
    path = Path(path)
    report = report if report is not None else IngestReport(source="pcap-bulk", path=str(path))
    try:
        if path.is_dir():
            raise IngestError(path, "open", "is a directory, not a capture file")
        fsize = path.stat().st_size
        if not path.is_file():
            raise IngestError(path, "open", "not a regular file (a FIFO or device?)")
    except OSError as e:
        raise IngestError(path, "open", e.strerror or str(e)) from None
    if fsize == 0:
        raise IngestError(path, "byte 0", "empty file, not a capture")
    try:
        src = _Source(path)
    except OSError as e:
        raise IngestError(path, "open", e.strerror or str(e)) from None
    state = _State()
    st, cnt = state.st, state.cnt
    bar = None
    # a bar only on a terminal: never in a pipe, a log or a notebook's captured output
    if progress or (progress is None and fsize > 50_000_000 and sys.stderr.isatty()):
        from tqdm.auto import tqdm
        bar = tqdm(total=fsize, unit="B", unit_scale=True, desc=path.name, leave=False)
    out = _Builder(strings)
    import gc
    gc_was = gc.isenabled()
    gc.disable()  # no cyclic garbage is made here; the collector only costs time
    try:
        pos = _header(src, state)
        while True:
            state.ensure(RECORDS_PER_CALL)
            res = ps.scan(src.buf, pos, src.end, src.eof, RECORDS_PER_CALL, RECORDS_PER_CALL,
                          st, cnt, state.ifs, state.ak, state.av, state.alist, state.tk, state.tv,
                          state.fs, state.arena, state.frs, state.frl, state.farena, state.scr,
                          state.hs, state.he, state.dgram,
                          state.I, state.O, state.V, state.D, state.op, state.ob)
            (pos, status, n, state.I, state.O, state.V, state.D, state.arena, state.farena,
             state.op, state.ob) = res
            if n:
                out.add(n, state.I, state.O, state.V, state.D)
            src.release(pos)
            if bar is not None:
                bar.update((src.fh.tell() if src.gz else src.base + pos) - bar.n)
            if out.rows >= chunk_rows:
                piece = cut(out, state)
                out = _Builder(strings)
                if gc_was:
                    gc.enable()  # the consumer runs with the collector as it had it
                yield piece
                gc.disable()
            if status == ps.DONE:
                break
            if status == ps.NEED_DATA:
                src.fill(pos)
                pos = 0
        _finish(path, src, state, report, on_truncated, src.base)
    finally:
        if gc_was:
            gc.enable()
        if bar is not None:
            bar.close()
        src.close()
    yield cut(out, state)  # the rest (possibly empty: a capture without SIP)


def _finish(path: Path, src: _Source, state: _State, report: IngestReport, on_truncated: str,
            base: int) -> None:
    st, cnt = state.st, state.cnt
    report.read += int(st[ps.ST_FRAME])
    report.parsed += int(cnt[ps.C_PARSED])
    for code in ps.REASONS:
        if cnt[code]:
            report.skip(reason_text(code, state.st), int(cnt[code]))
    pend = int(ps.pending_frames(state.fs, int(st[ps.ST_NFLOW]), state.frs, int(st[ps.ST_NFRAG])))
    pend += int(ps.pending_out_of_order(state.op))
    if pend:
        report.skip(ps.REASONS[ps.R_INCOMPLETE], pend)
    err = int(st[ps.ST_ERR])
    if err == ps.ERR_NONE and src.problem:
        err = ps.ERR_TRUNC if "cut short" in src.problem else ps.ERR_CORRUPT
        st[ps.ST_ERR_POS] = -1  # the compressed stream ended between records
        st[ps.ST_ERR_FRAME] = st[ps.ST_FRAME] + 1
    if err != ps.ERR_NONE:
        n = int(st[ps.ST_ERR_FRAME])
        at = int(st[ps.ST_ERR_POS])
        where = f"packet {n} at byte {base + at}" if at >= 0 else f"packet {n}"
        if src.gz:
            where += " of the decompressed data"
        what = ("truncated record" if err == ps.ERR_TRUNC else
                "corrupt record header (nothing after it can be read)")
        if src.problem:
            what = f"{what}: {src.problem}"
        if on_truncated == "raise":
            raise IngestError(path, where, f"{what}; {n - 1} packets read before it")
        report.read += 1
        report.skip("truncated record" if err == ps.ERR_TRUNC else "corrupt record", 1)
        report.notes.append(f"{path}: {where}: {what}; stopped there, {n - 1} packets read before it")
    if cnt[ps.R_LINK]:
        report.notes.append(f"{path}: link type {int(st[ps.ST_BADLINK])} is not supported "
                            f"({int(cnt[ps.R_LINK])} packets skipped)")
    if cnt[ps.R_UNDEF_IF]:
        report.notes.append(f"{path}: {int(cnt[ps.R_UNDEF_IF])} pcapng packet blocks name an "
                            f"interface no IDB defined (first at byte {int(st[ps.ST_UNDEF_POS])})")
    if cnt[ps.R_NO_TS]:
        report.notes.append(f"{path}: {int(cnt[ps.R_NO_TS])} pcapng simple packet blocks carry no "
                            "timestamp: skipped (a timing analysis cannot use them)")
    if st[ps.ST_TS_NONZERO] == 0 and st[ps.ST_TS_ZERO] > 0:
        report.notes.append(f"{path}: every packet timestamp is 0: the capture has no timing")
    if st[ps.ST_MIDSTREAM]:
        report.notes.append(f"{path}: {int(st[ps.ST_MIDSTREAM])} TCP flows start mid-stream "
                            f"(no SYN); {int(st[ps.ST_DISCARD_BYTES])} TCP bytes outside any "
                            "complete SIP message were discarded")
    transports_account(path, state, report)
    copies_account(path, state, report)
    clock_account(path, state, report)
    report.check()


def _ports(xs: np.ndarray, base: int) -> list[int]:
    return [int(p) for p in xs[base + 1:base + 1 + int(xs[base])]]


def reason_text(code: int, xs: np.ndarray) -> str:
    """The skip reason of counter ``code``; a TLS refusal names the server ports it saw
    ("TLS on port 5061: encrypted SIP cannot be read — ...")."""
    r = ps.REASONS[code]
    if code in (ps.R_TLS, ps.R_WSS):
        ports = _ports(xs, ps.XP_TLS if code == ps.R_TLS else ps.XP_WSS)
        if ports:
            what, rest = r.split(": ", 1)
            r = f"{what} on port{'s' if len(ports) > 1 else ''} {', '.join(map(str, ports))}: {rest}"
    return r


def transports_account(path, state: _State, report: IngestReport) -> None:
    """What the capture carried besides SIP in clear, in ``report.details["transports"]`` and
    the notes: each refused class (packets, bytes), SIP over WebSocket, HEP (per capture agent,
    with the collector's delay), and the TCP reassembly (out-of-order segments, gaps)."""
    xs, cnt = state.st, state.cnt  # the extended counters live at the end of st
    out: dict = {}
    refused = {}
    for code in ps.REFUSED:
        if cnt[code]:
            name = reason_text(code, xs)
            refused[name] = {"packets": int(cnt[code]), "bytes": int(xs[ps.XB + code])}
            report.notes.append(f"{path}: {name} ({int(cnt[code])} packets, "
                                f"{int(xs[ps.XB + code])} payload bytes)")
    if refused:
        out["refused"] = refused
    if xs[ps.X_WS_MSGS] or cnt[ps.R_WS_HANDSHAKE] or cnt[ps.R_WS_CONTROL]:
        out["websocket"] = {"messages": int(xs[ps.X_WS_MSGS]), "fragmented": int(xs[ps.X_WS_FRAGMENTED]),
                            "with_several_sip_messages": int(xs[ps.X_WS_MULTI]),
                            "control_frames": int(xs[ps.X_WS_CTRL]), "server_ports": _ports(xs, ps.XP_WS)}
        report.notes.append(f"{path}: SIP over WebSocket (RFC 7118) on port(s) "
                            f"{', '.join(map(str, _ports(xs, ps.XP_WS))) or '?'}: {int(xs[ps.X_WS_MSGS])} "
                            f"WebSocket messages ({int(xs[ps.X_WS_FRAGMENTED])} fragmented), "
                            f"{int(xs[ps.X_WS_CTRL])} control frames; transport 'ws' in the packet table")
    if xs[ps.X_HEP_MSGS] or xs[ps.X_HEP_V3] or xs[ps.X_HEP_V2] or xs[ps.X_HEP_V1]:
        agents = []
        for k in range(int(xs[ps.XA])):
            b = ps.XA + 1 + k * ps.NAG
            n = int(xs[b + ps.AG_N])
            agents.append({"capture_id": int(xs[b + ps.AG_ID]), "sip_messages": n,
                           "collector_minus_agent_ms": {
                               "mean": xs[b + ps.AG_DSUM] / n / 1e6 if n else None,
                               "min": int(xs[b + ps.AG_DMIN]) / 1e6, "max": int(xs[b + ps.AG_DMAX]) / 1e6}})
        out["hep"] = {"sip_messages": int(xs[ps.X_HEP_MSGS]), "packets_v1": int(xs[ps.X_HEP_V1]),
                      "packets_v2": int(xs[ps.X_HEP_V2]), "packets_v3": int(xs[ps.X_HEP_V3]),
                      "time": "the agent's capture time (HEP time chunks), not the collector's",
                      "without_time": int(xs[ps.X_HEP_NOTIME]), "agents": agents}
        d = "; ".join(f"agent {a['capture_id']}: {a['sip_messages']} messages, received "
                      f"{a['collector_minus_agent_ms']['mean']:.3f} ms later on average "
                      f"(min {a['collector_minus_agent_ms']['min']:.3f}, max "
                      f"{a['collector_minus_agent_ms']['max']:.3f})" for a in agents if a["sip_messages"])
        report.notes.append(f"{path}: {int(xs[ps.X_HEP_MSGS])} SIP messages came encapsulated in HEP "
                            f"from {len(agents)} capture agent(s), with the agents' original addresses, "
                            f"ports and capture times (the HEP time chunks, not the time the collector "
                            f"received them): {d}")
        if xs[ps.X_HEP_NOTIME]:
            report.notes.append(f"{path}: {int(xs[ps.X_HEP_NOTIME])} HEP packets (HEPv1 or without time "
                                "chunks) carry no capture time: the collector's is used for them")
    gaps = {"window": int(xs[ps.X_GAP_WINDOW]), f"waited_{ps.OOO_HOLD_NS // 10**9}s": int(xs[ps.X_GAP_HOLD]),
            "capture_end": int(xs[ps.X_GAP_END])}
    if xs[ps.X_OOO_STORED] or xs[ps.X_OOO_DUP] or any(gaps.values()):
        out["tcp_reassembly"] = {"segments_out_of_order": int(xs[ps.X_OOO_STORED]),
                                 "holes_filled": int(xs[ps.X_OOO_FILLED]),
                                 "duplicates_of_waiting_bytes": int(xs[ps.X_OOO_DUP]),
                                 "most_segments_waiting": int(xs[ps.X_OOO_MAXPIECES]), "gaps_declared": gaps}
        report.notes.append(f"{path}: TCP reassembled by sequence number: {int(xs[ps.X_OOO_STORED])} segments "
                            f"captured ahead of missing bytes waited for them ({int(xs[ps.X_OOO_FILLED])} "
                            f"holes filled); holes never filled (gaps): {gaps['window']} beyond the "
                            f"reassembly window, {int(xs[ps.X_GAP_HOLD])} after waiting "
                            f"{ps.OOO_HOLD_NS // 10**9} s, "
                            f"{gaps['capture_end']} at the end of the capture")
    sig = tcp_signals(state)
    if sig:
        out["tcp_signals"] = sig
        report.notes.append(
            f"{path}: TCP's own overload signals: {sig['zero_window']} zero-window advertisements (a "
            f"receiver's buffer was full and it told its sender to stop), {sig['resets']} resets, "
            f"{sig['retransmissions']} retransmitted segments" + "".join(
                f"; {e['endpoint']} advertised a zero window {e['zero_window']} times "
                f"({e['first_s']:.3f}-{e['last_s']:.3f} s into the capture)"
                for e in sig["senders"][:4] if e["zero_window"]))
    if out:
        report.details.setdefault("transports", {}).update(out)


def tcp_signals(state: _State) -> dict:
    """TCP's overload signals of the capture: zero-window advertisements (window 0 on a segment
    without SYN, FIN or RST: tshark's ``tcp.analysis.zero_window``) and resets, per sender
    (``"ip:port"``, first and last zero window in seconds from the capture's first packet), and
    the retransmitted segments (skipped as "TCP retransmission"); {} when the capture has none."""
    xs, cnt = state.st, state.cnt
    names = state.addr_names()
    senders = []
    for k in range(int(xs[ps.XZ])):
        b = ps.XZ + 1 + k * ps.NZWC
        sid, port = int(xs[b + ps.ZW_ID]), int(xs[b + ps.ZW_PORT])
        host = names[sid] if 0 <= sid < len(names) else "?"
        ep = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        senders.append({"endpoint": ep, "zero_window": int(xs[b + ps.ZW_N]), "resets": int(xs[b + ps.ZW_RST]),
                        "t_first_ns": int(xs[b + ps.ZW_T0]), "t_last_ns": int(xs[b + ps.ZW_T1])})
    retrans = int(cnt[ps.R_TCP_RETRANS])
    if not senders and not retrans and not xs[ps.XZ_OVER]:
        return {}
    first = _first_stamp(state)
    for e in senders:
        e["first_s"] = (e.pop("t_first_ns") - first) / 1e9 if e["zero_window"] else float("nan")
        e["last_s"] = (e.pop("t_last_ns") - first) / 1e9 if e["zero_window"] else float("nan")
    senders.sort(key=lambda e: (-e["zero_window"], -e["resets"]))
    return {"zero_window": sum(e["zero_window"] for e in senders), "resets": sum(e["resets"] for e in senders),
            "retransmissions": retrans, "senders": senders, "not_listed": int(xs[ps.XZ_OVER])}


def _first_stamp(state: _State) -> int:
    """The first packet stamp (ns) over the interfaces that carried packets (0 when none)."""
    ifs = state.ifs
    used = ifs[:, ps.IF_NPKT] > 0
    return int(ifs[used, ps.IF_T0].min()) if used.any() else 0


def copies_account(path, state: _State, report: IngestReport) -> None:
    """Datagrams read twice (:mod:`.scan.dedup`) and datagrams holding several SIP messages, in
    ``report.details`` and the notes."""
    xs = state.st
    n = int(xs[ps.X_DUP_N])
    n_tcp = int(xs[ps.X_DUP_TCP])
    if n_tcp:
        report.details.setdefault("duplicates", {})["tcp_segments"] = n_tcp
        report.notes.append(f"{path}: {n_tcp} TCP segments were copies of the segment before them on their "
                            "connection (same sequence number, length and IPv4 id, within the duplicate window): "
                            "skipped as duplicates, not retransmissions")
    if n:
        win_ms = int(xs[ps.X_DUP_WINDOW]) / 1e6
        d = {"messages": n, "packets_skipped": int(state.cnt[ps.R_DUPLICATE]), "window_ms": win_ms,
             "mean_gap_us": round(int(xs[ps.X_DUP_DTSUM]) / n / 1e3, 3),
             "max_gap_us": round(int(xs[ps.X_DUP_DTMAX]) / 1e3, 3), "hep_copies": int(xs[ps.X_DUP_HEP])}
        report.details.setdefault("duplicates", {}).update(d)
        hep = (f"; {d['hep_copies']} of them a HEP copy beside the packet it copies" if d["hep_copies"] else "")
        report.notes.append(
            f"{path}: {n} SIP messages were copies of a datagram already read (same bytes and addresses "
            f"within {win_ms:g} ms, {d['mean_gap_us']:.3f} µs apart on average, at most {d['max_gap_us']:.3f} "
            f"µs){hep}: each is read once, the first copy kept (a SPAN/mirror port, two taps, or HEP "
            f"beside the packets -- not retransmissions, which are new datagrams)")
    if xs[ps.X_UDP_MULTI]:
        d = {"datagrams": int(xs[ps.X_UDP_MULTI]), "further_messages": int(xs[ps.X_UDP_EXTRA]),
             "datagrams_with_an_unreadable_further_message": int(xs[ps.X_UDP_EXTRA_BAD])}
        report.details.setdefault("transports", {})["udp_several_messages"] = d
        report.notes.append(
            f"{path}: {d['datagrams']} UDP datagrams carried more than one SIP message (RFC 3261 §18.3 "
            f"has a receiver discard the bytes after the first message's body; a proxy may have done so): "
            f"their {d['further_messages']} further messages are read as messages of their own"
            + (f", {d['datagrams_with_an_unreadable_further_message']} datagrams with one that is not "
               "well-formed SIP" if d["datagrams_with_an_unreadable_further_message"] else ""))
    if xs[ps.X_GENEVE]:
        report.details.setdefault("transports", {})["geneve_packets"] = int(xs[ps.X_GENEVE])
        report.notes.append(f"{path}: {int(xs[ps.X_GENEVE])} packets came in Geneve tunnels (UDP 6081): "
                            "read from the inner frame")


def clock_account(path, state: _State, report: IngestReport) -> None:
    """What the file's timestamps are: per interface the resolution the file declares, the step
    its stamps actually show (the greatest common divisor of their distances), zero stamps and
    steps back, in ``report.details["clock"]``; ``resolution_ns``, the coarser of the two over the
    interfaces that carried packets, is what every duration read from the file is good to."""
    st, ifs = state.st, state.ifs
    n_if = 1 if st[ps.ST_FMT] == ps.FMT_PCAP else max(1, min(int(st[ps.ST_NIF]), ps.MAX_IF))
    rows = []
    for k in range(n_if):
        npkt, nzero = int(ifs[k, ps.IF_NPKT]), int(ifs[k, ps.IF_NZERO])
        if not npkt and not nzero:
            continue
        if st[ps.ST_FMT] == ps.FMT_PCAP:
            declared = float(st[ps.ST_TSMUL])
        else:
            declared = float(ifs[k, ps.IF_NUM]) / float(ifs[k, ps.IF_DEN] or 1)
        step = int(ifs[k, ps.IF_GCD])
        rows.append({"interface": k, "packets": npkt, "declared_resolution_ns": declared,
                     "observed_step_ns": step if npkt > 1 and step > 0 else None,
                     "zero_stamps": nzero, "steps_back": int(ifs[k, ps.IF_NBACK]),
                     "largest_step_back_ms": round(int(ifs[k, ps.IF_MAXBACK]) / 1e6, 6)})
    if not rows:
        return
    res = max(max(r["declared_resolution_ns"], r["observed_step_ns"] or 0) for r in rows)
    report.details["clock"] = {"resolution_ns": res, "interfaces": rows}
    coarse = [r for r in rows if (r["observed_step_ns"] or 0) > r["declared_resolution_ns"]
              and (r["observed_step_ns"] or 0) >= 10 * max(r["declared_resolution_ns"], 1)]
    for r in coarse:
        report.notes.append(
            f"{path}: interface {r['interface']}: the file stamps to {_dur(r['declared_resolution_ns'])}, but "
            f"every stamp is a multiple of {_dur(r['observed_step_ns'])} apart: the clock's resolution is "
            f"{_dur(r['observed_step_ns'])}, and no duration read from it is finer")


def _dur(ns: float) -> str:
    """A duration in ns as text in its natural unit (1 ns, 1 µs, 10 ms, 1 s)."""
    for unit, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= f:
            return f"{ns / f:g} {unit}"
    return f"{ns:g} ns"


def read_packets(path: str | os.PathLike, *, on_truncated: str = "skip",
                 progress: bool | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """All SIP messages of a capture, one row each (see :data:`COLUMNS`), and the account.

    A capture with no SIP message gives an empty table (the report says what was there)."""
    report = IngestReport(source="pcap-bulk", path=str(path))
    # one chunk: the column pieces are joined once, no DataFrame concatenation afterwards
    chunks = [c for c in iter_packets(path, report, on_truncated=on_truncated, progress=progress,
                                      chunk_rows=1 << 62) if len(c)] or [empty_packets()]
    df = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
    report.messages = len(df)
    report.check()
    return df, report


# ------------------------------------------------------------------- a plain record walker
def iter_records(path: str | os.PathLike) -> Iterator[tuple[int, int, bytes]]:
    """(ts_ns, link type, packet bytes) of every packet record, in Python (for tools and tests
    that rewrite captures; the reader itself uses the compiled pass).  Plain files only."""
    data = Path(path).read_bytes()
    fmt = sniff_format(path, data[:4])
    if fmt == "pcap":
        big, mult, hl = PCAP_MAGICS[data[:4]]
        bo = ">" if big else "<"
        link = struct.unpack(bo + "I", data[20:24])[0] & 0xFFFF
        pos = 24
        while pos + hl <= len(data):
            sec, frac, incl, _ = struct.unpack_from(bo + "IIII", data, pos)
            if pos + hl + incl > len(data):
                return
            yield sec * 1_000_000_000 + frac * mult, link, data[pos + hl:pos + hl + incl]
            pos += hl + incl
        return
    pos, bo, ifs = 0, "<", []
    while pos + 12 <= len(data):
        if data[pos:pos + 4] == PCAPNG_SHB:
            bo = "<" if data[pos + 8:pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            ifs = []
        btype, blen = struct.unpack_from(bo + "II", data, pos)
        if blen < 12 or pos + blen > len(data):
            return
        if btype == 1:
            link = struct.unpack_from(bo + "H", data, pos + 8)[0]
            res, o = 6, pos + 16
            while o + 4 <= pos + blen - 4:
                code, olen = struct.unpack_from(bo + "HH", data, o)
                if code == 0:
                    break
                if code == 9:
                    res = data[o + 4]
                o += 4 + ((olen + 3) & ~3)
            num, den = ((10 ** (9 - res), 1) if res <= 9 else (1, 10 ** (res - 9))) if not res & 0x80 \
                else (1_000_000_000, 1 << (res & 0x7F))
            ifs.append((link, num, den))
        elif btype == 6:
            iface, hi, lo, caplen = struct.unpack_from(bo + "IIII", data, pos + 8)
            link, num, den = ifs[iface]
            yield ((hi << 32) | lo) * num // den, link, data[pos + 28:pos + 28 + caplen]
        pos += blen


def _iter_blocks(path, mm=None, report=None, on_truncated="raise"):
    """Deprecated name of :func:`iter_records` (kept for callers of the old reader)."""
    return iter_records(path)


def scan_structure(path: str | os.PathLike) -> tuple[int, str | None]:
    """(complete packet records, problem or None): the problem names the packet and byte offset
    of a truncated or corrupt record.  The pyshark path uses it because tshark reports
    truncation unreliably."""
    rep = IngestReport(source="scan", path=str(path))
    try:
        for _ in iter_packets(path, rep, on_truncated="raise", chunk_rows=1 << 40):
            pass
    except IngestError as e:
        if not str(e.position).startswith("packet"):
            raise  # not a capture at all, unreadable, ...: not a truncation
        return rep.read, str(e)
    return rep.read, None
