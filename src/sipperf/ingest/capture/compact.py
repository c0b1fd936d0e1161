"""A packet table in compact numeric form, for the streaming engine (:mod:`.stream`).

A chunk of the packet table (:data:`sipperf.ingest.capture.fast.COLUMNS`) becomes integer columns:

===============  =====================================================================
``ts``           capture instant, int64 ns
``frame``        the packet's number in its file (the streaming engine adds the offset of
                 the file in a capture set)
``call``         64-bit hash of the Call-ID (FNV-1a, then a 64-bit finaliser)
``branch``       64-bit hash of the top Via branch, 0 when absent or empty
``cseq``         CSeq number (:data:`NA_INT` if absent)
``status``       status code, -1 for a request
``method``       code of the request method in ``strings`` (-1 for a response)
``cm``           code of the CSeq method in ``strings`` (absent = the empty string)
``src``, ``dst`` code of 'ip:port' (IPv6 in brackets) in ``endpoints``
``via_count``    number of Via values; ``size``: message bytes; ``transport``: code in
                 ``transports``
===============  =====================================================================

The codes are local to the chunk (``strings``, ``endpoints`` and ``transports`` list what
they stand for), so chunks made in different processes (Dask workers) are merged by
translating their small dictionaries (:class:`Codebook`), never their rows.

Identity by hash: two different Call-IDs (or branches) with the same 64-bit hash would be
taken for one.  For ``n`` distinct values the chance that any two collide is about
``n^2 / 2^65`` (1e-6 for six million Call-IDs); and only Call-IDs whose transactions are
open at the same time could be mixed up by the pairing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit

NA_INT = np.iinfo(np.int64).min
#: ``clock``: the clock check's flags of the row (:attr:`sipperf.ingest.clock.ClockCheck.flags`; 0 as read)
INT_COLUMNS = ("ts", "frame", "cseq", "status", "via_count", "size", "clock")
COLUMNS = (*INT_COLUMNS, "call", "branch", "method", "cm", "src", "dst", "transport")


@njit(cache=True, nogil=True)
def _hash_offsets(offsets, data, out):
    """FNV-1a 64 of data[offsets[i]:offsets[i+1]], finalised (murmur3 fmix64); 0 for empty."""
    for i in range(out.shape[0]):
        a = offsets[i]
        b = offsets[i + 1]
        if b <= a:
            out[i] = np.uint64(0)
            continue
        h = np.uint64(0xCBF29CE484222325)
        for k in range(a, b):
            h ^= np.uint64(data[k])
            h *= np.uint64(0x100000001B3)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
        if h == np.uint64(0):
            h = np.uint64(1)
        out[i] = h


def _arrow_chunks(s: pd.Series):
    """The column as pyarrow (large_)string arrays, without copying when it is Arrow-backed."""
    import pyarrow as pa

    arr = s.array
    pa_arr = getattr(arr, "_pa_array", None)
    if pa_arr is None:
        pa_arr = pa.chunked_array([pa.array(s.to_numpy(dtype=object, na_value=None), type=pa.large_string(),
                                            from_pandas=True)])
    out = []
    for ch in pa_arr.chunks:
        if ch.type not in (pa.string(), pa.large_string()):
            ch = ch.cast(pa.large_string())
        out.append(ch)
    return out


def hash_strings(s: pd.Series) -> np.ndarray:
    """uint64 hash of every value of a string column (0 for null or empty)."""
    return hash_arrow(_arrow_chunks(s), len(s))


def hash_arrow(chunks, n: int) -> np.ndarray:
    """uint64 hash of every value of Arrow string or large_string arrays holding ``n`` values
    in all, in order (0 for null or empty; never 0 otherwise)."""
    import pyarrow as pa

    out = np.empty(n, np.uint64)
    pos = 0
    for ch in chunks:
        k = len(ch)
        if not k:
            continue
        bufs = ch.buffers()
        odt = np.int64 if ch.type == pa.large_string() else np.int32
        offsets = np.frombuffer(bufs[1], dtype=odt)[ch.offset:ch.offset + k + 1].astype(np.int64, copy=False)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        h = out[pos:pos + k]
        _hash_offsets(offsets, data, h)
        if ch.null_count:
            h[np.asarray(ch.is_null().to_numpy(zero_copy_only=False), bool)] = 0
        pos += k
    if pos != n:
        raise ValueError(f"the Arrow chunks hold {pos} values, not {n}")
    return out


def arrow_codes(values) -> tuple[np.ndarray, list]:
    """(int32 codes, distinct values) of an Arrow string (chunked) array, the values in order of
    first appearance and -1 for null: what :func:`_codes` gives for the same column."""
    enc = values.dictionary_encode()
    if not len(enc):
        return np.zeros(0, np.int32), []
    enc = enc.combine_chunks() if hasattr(enc, "combine_chunks") else enc
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, [str(u) for u in enc.dictionary.to_pylist()]


def _codes(s: pd.Series) -> tuple[np.ndarray, list]:
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    return codes.astype(np.int32, copy=False), [str(u) for u in uniq]


def _endpoint_text(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _int(s: pd.Series, na: int) -> np.ndarray:
    if s.dtype == np.int64:
        return s.to_numpy()
    return s.to_numpy(dtype="int64", na_value=na)


def compact_frame(df: pd.DataFrame) -> tuple[dict, int]:
    """(compact chunk, rows dropped for an absent or empty Call-ID) of a packet-table chunk."""
    cid = df["call_id"]
    no_cid = (cid.isna() | (cid.astype("string") == "")).to_numpy(dtype=bool, na_value=True)
    dropped = int(no_cid.sum())
    if dropped:
        df = df[~no_cid].reset_index(drop=True)
    n = len(df)
    c: dict = {"n": n}
    c["ts"] = _int(df["ts_ns"], 0)
    c["frame"] = _int(df["frame"], 0)
    c["cseq"] = _int(df["cseq"], NA_INT)
    c["status"] = _int(df["status"], -1)
    c["via_count"] = _int(df["via_count"], -1) if "via_count" in df.columns else np.full(n, -1, np.int64)
    c["size"] = _int(df["size"], 0)
    # the capture interface: read by the clock check of the chunk's producer, not merged
    c["iface"] = _int(df["iface"], 0) if "iface" in df.columns else np.zeros(n, np.int64)
    c["clock"] = _int(df["clock_flags"], 0) if "clock_flags" in df.columns else np.zeros(n, np.int64)
    c["call"] = hash_strings(df["call_id"])
    c["branch"] = hash_strings(df["via_branch"])
    m_codes, m_uniq = _codes(df["method"])
    cm_codes, cm_uniq = _codes(df["cseq_method"].astype("string").fillna(""))
    # one local string list for both: methods first, then CSeq methods
    c["method"] = m_codes
    c["cm"] = cm_codes + np.int32(len(m_uniq))
    c["strings"] = m_uniq + cm_uniq
    # endpoints: the address strings of both columns, then (address, port) pairs
    addr_codes, addr_uniq = pd.factorize(pd.concat([df["src"], df["dst"]], ignore_index=True),
                                         use_na_sentinel=True)
    addr_uniq = ["" if u is None else str(u) for u in addr_uniq]
    ports = np.concatenate([_int(df["sport"], 0), _int(df["dport"], 0)])
    ep = (addr_codes.astype(np.int64) + 1) * 65536 + (ports & 0xFFFF)
    uniq_ep, inv = np.unique(ep, return_inverse=True)
    c["src"] = inv[:n].astype(np.int32)
    c["dst"] = inv[n:].astype(np.int32)
    c["endpoints"] = [_endpoint_text(addr_uniq[int(e // 65536) - 1] if e // 65536 > 0 else "", int(e % 65536))
                      for e in uniq_ep.tolist()]
    t_codes, t_uniq = _codes(df["transport"])
    c["transport"] = t_codes
    c["transports"] = t_uniq
    return c, dropped


class Codebook:
    """Global codes for the strings, endpoints and transports of every chunk merged so far."""

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self._s = {"": 0}
        self.endpoints: list[str] = []
        self._e: dict[str, int] = {}
        self.transports: list[str] = []
        self._t: dict[str, int] = {}

    @staticmethod
    def _add(values, table: list, index: dict) -> np.ndarray:
        lut = np.empty(len(values) + 1, np.int32)  # last slot: the local null code -1
        lut[-1] = -1
        for i, v in enumerate(values):
            code = index.get(v)
            if code is None:
                code = index[v] = len(table)
                table.append(v)
            lut[i] = code
        return lut

    def string_code(self, s: str) -> int:
        code = self._s.get(s)
        if code is None:
            code = self._s[s] = len(self.strings)
            self.strings.append(s)
        return code

    def code_of(self, s: str) -> int:
        """The code of ``s``, or -2 (matches nothing) when no chunk had it."""
        return self._s.get(s, -2)

    def merge(self, c: dict) -> dict:
        """The chunk with global codes (a new dict; ``n`` and the integer columns are shared)."""
        out = {k: c[k] for k in ("n", *INT_COLUMNS, "call", "branch")}
        slut = self._add(c["strings"], self.strings, self._s)
        out["method"] = slut[c["method"]]
        out["cm"] = slut[c["cm"]]
        out["cm"][out["cm"] < 0] = 0  # an absent CSeq method is the empty string
        elut = self._add(c["endpoints"], self.endpoints, self._e)
        out["src"] = elut[c["src"]]
        out["dst"] = elut[c["dst"]]
        tlut = self._add(c["transports"], self.transports, self._t)
        out["transport"] = tlut[c["transport"]]
        return out


def concat(chunks: list[dict]) -> dict:
    """Rows of several merged (global-code) chunks, in order."""
    chunks = [c for c in chunks if c["n"]]
    if not chunks:
        return empty()
    if len(chunks) == 1:
        return chunks[0]
    out = {"n": sum(c["n"] for c in chunks)}
    for k in chunks[0]:
        if k != "n":
            out[k] = np.concatenate([c[k] for c in chunks])
    return out


def empty() -> dict:
    out = {"n": 0}
    for k in INT_COLUMNS:
        out[k] = np.zeros(0, np.int64)
    for k in ("call", "branch"):
        out[k] = np.zeros(0, np.uint64)
    for k in ("method", "cm", "src", "dst", "transport"):
        out[k] = np.zeros(0, np.int32)
    return out


def take(c: dict, idx) -> dict:
    """Rows ``idx`` (an index array or boolean mask) of a merged chunk."""
    out = {"n": 0}
    for k, v in c.items():
        if k != "n" and isinstance(v, np.ndarray):
            out[k] = v[idx]
    out["n"] = len(out["ts"])
    return out
