"""The tidy per-message timeline: one schema shared by every source.

One row is one SIP message passing through the proxy.  The seven instants are the
measurement points of seed 000 (§3.3, Fig. 3.4), stored as int64 nanoseconds since the
epoch, nullable (pandas ``Int64``) because every source fills only what it can:

=============  ==========================================================  =========
column         meaning                                                     thesis
=============  ==========================================================  =========
``t_arr``      packet reaches the kernel device layer (netif_receive_skb)  T1
``t_stack``    packet enqueued on the socket receive queue                 T2
``t_sockq``    the application is ready to dequeue it (recvfrom entry)     T3
``t_sip_in``   the SIP layer has the message (recvfrom returned)           T4
``t_sip_c``    common SIP processing (parsing, lookup) is done             T5
``t_sip_out``  SIP processing done; the message is handed to sendto       T6
``t_dep``      sendto returned / packet on the wire                        T7
=============  ==========================================================  =========

Every ingest returns ``(timeline, IngestReport)``; the report accounts for every input
record: ``parsed + skipped == read``.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

INSTANTS: tuple[str, ...] = (
    "t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep",
)
MSG_TYPES: tuple[str, ...] = ("INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE", "OTHER")
#: the six message types of the thesis call flow, in call order
CALL_FLOW: tuple[str, ...] = MSG_TYPES[:6]
KINDS: tuple[str, ...] = ("request", "response")

#: column -> pandas dtype, in canonical order
SCHEMA: dict[str, str] = {
    "run_id": "string",
    "call_id": "string",
    "cseq": "Int64",
    "cseq_method": "string",
    "kind": "string",
    "method": "string",
    "status": "Int64",
    "msg_type": "string",
    "src": "string",
    "dst": "string",
    "size": "Int64",
    **{name: "Int64" for name in INSTANTS},
    "dropped": "boolean",
    "drop_reason": "string",
}
REQUIRED: tuple[str, ...] = ("call_id", "kind")


class TimelineError(ValueError):
    """A timeline that breaks the schema."""


class IngestError(ValueError):
    """Unusable input; the message names the file and the position (line, packet, byte)."""

    def __init__(self, path: Any, position: Any, message: str):
        self.path = str(path)
        self.position = position
        super().__init__(f"{self.path}: {position}: {message}")


@dataclass
class IngestReport:
    """The account of one ingest: every input record is either parsed or skipped with a reason.

    ``read`` counts input records (log lines, packets, CSV rows); ``parsed`` those that
    became (part of) a timeline row; ``skipped`` maps reason -> count.
    ``messages`` is the number of timeline rows produced (pairing may merge records).
    """

    source: str
    path: str = ""
    read: int = 0
    parsed: int = 0
    skipped: Counter = field(default_factory=Counter)
    messages: int = 0
    notes: list[str] = field(default_factory=list)
    files: list["IngestReport"] = field(default_factory=list)
    #: structured findings of the reader (e.g. ``vantage``: what the capture shows), in report.json
    details: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    @property
    def n_skipped(self) -> int:
        return int(sum(self.skipped.values()))

    @property
    def balanced(self) -> bool:
        return self.parsed + self.n_skipped == self.read

    def check(self) -> "IngestReport":
        """Raise if the account does not balance (a bug in an ingest, never the input's fault)."""
        if not self.balanced:
            raise AssertionError(
                f"{self.path or self.source}: read {self.read} != parsed {self.parsed} "
                f"+ skipped {self.n_skipped} ({dict(self.skipped)})"
            )
        return self

    @classmethod
    def combine(cls, reports: Iterable["IngestReport"], source: str = "combined") -> "IngestReport":
        reports = list(reports)
        total = cls(source=source, path=";".join(r.path for r in reports))
        for r in reports:
            total.read += r.read
            total.parsed += r.parsed
            total.skipped.update(r.skipped)
            total.messages += r.messages
            total.notes.extend(r.notes)
            total.files.extend(r.files or [r])
        return total

    def to_dict(self) -> dict[str, Any]:
        d = {
            "source": self.source, "path": self.path, "read": self.read, "parsed": self.parsed,
            "skipped": dict(self.skipped), "n_skipped": self.n_skipped,
            "messages": self.messages, "balanced": self.balanced, "notes": list(self.notes),
        }
        if self.details:
            d.update(self.details)
        if self.files:
            d["files"] = [f.to_dict() for f in self.files]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def __str__(self) -> str:
        sk = ", ".join(f"{k}: {v}" for k, v in sorted(self.skipped.items())) or "none"
        return (f"{self.source} {self.path}: read {self.read}, parsed {self.parsed}, "
                f"skipped {self.n_skipped} ({sk}) -> {self.messages} messages")


def first_instant(tl: pd.DataFrame) -> np.ndarray:
    """The earliest recorded instant of each row in the order of :data:`INSTANTS` (the first one
    present), as float ns; NaN where a row has none."""
    key = np.full(len(tl), np.nan)
    for c in reversed(INSTANTS):
        v = tl[c].to_numpy(dtype="float64", na_value=np.nan)
        key = np.where(np.isfinite(v), v, key)
    return key


def canonical_msg_type(kind: Any, method: Any, status: Any, cseq_method: Any) -> str:
    """Map one message to the thesis's six types (INVITE, 180, 200-INVITE, ACK, BYE, 200-BYE) or OTHER."""
    if kind == "request":
        m = str(method).upper()
        return m if m in ("INVITE", "ACK", "BYE") else "OTHER"
    try:
        s = int(status)
    except (TypeError, ValueError):
        return "OTHER"
    cm = str(cseq_method).upper()
    if s == 180 and cm == "INVITE":
        return "180"
    if s == 200 and cm in ("INVITE", "BYE"):
        return f"200-{cm}"
    return "OTHER"


def msg_type_vector(kind: pd.Series, method: pd.Series, status: pd.Series,
                    cseq_method: pd.Series) -> pd.Series:
    """Vectorised :func:`canonical_msg_type`."""
    kind = kind.astype("string")
    method = method.astype("string").str.upper()
    cm = cseq_method.astype("string").str.upper()
    st = pd.to_numeric(status, errors="coerce")
    out = pd.Series("OTHER", index=kind.index, dtype="string")
    req = (kind == "request").fillna(False)
    for m in ("INVITE", "ACK", "BYE"):
        out[req & (method == m).fillna(False)] = m
    resp = (kind == "response").fillna(False)
    out[resp & (st == 180).fillna(False) & (cm == "INVITE").fillna(False)] = "180"
    out[resp & (st == 200).fillna(False) & (cm == "INVITE").fillna(False)] = "200-INVITE"
    out[resp & (st == 200).fillna(False) & (cm == "BYE").fillna(False)] = "200-BYE"
    return out


def _null_column(dtype: str, n: int, fill_false: bool = False):
    """An all-null (or all-False) column of ``dtype``, built without Python lists."""
    if dtype == "Int64":
        return pd.arrays.IntegerArray(np.zeros(n, "int64"), np.ones(n, bool))
    if dtype == "boolean":
        return pd.arrays.BooleanArray(np.zeros(n, bool), np.full(n, not fill_false))
    return pd.array(np.full(n, None, dtype=object), dtype=dtype)


def empty() -> pd.DataFrame:
    return make_timeline({})


def make_timeline(data: pd.DataFrame | Mapping[str, Any], *, validate: bool = True) -> pd.DataFrame:
    """Build a schema-conforming timeline from a DataFrame or a dict of columns.

    Missing optional columns are added as nulls; ``msg_type`` is derived when absent;
    columns outside the schema are kept after the schema's columns (sources may add extras,
    e.g. ``via_branch``, ``worker``).  Instants may be given as integers (ns) or floats
    (ns); they are stored as ``Int64``.
    """
    if isinstance(data, pd.DataFrame):
        df = data.copy()
    else:
        # convert integer columns given as Python lists exactly (a list with None would
        # otherwise become float64 and lose nanoseconds near 1e18)
        df = pd.DataFrame({
            k: (pd.array(list(v), dtype="Int64")
                if SCHEMA.get(k) == "Int64" and isinstance(v, (list, tuple)) else v)
            for k, v in data.items()
        })
    n = len(df)
    for col, dtype in SCHEMA.items():
        if col not in df.columns:
            df[col] = _null_column(dtype, n, fill_false=(col == "dropped"))
    if df["msg_type"].isna().all() and n:
        df["msg_type"] = msg_type_vector(df["kind"], df["method"], df["status"], df["cseq_method"])
    for col, dtype in SCHEMA.items():
        if str(df[col].dtype) != dtype:
            try:
                if dtype == "Int64" and df[col].dtype.kind == "f":
                    vals = df[col].to_numpy()
                    nan = np.isnan(vals)
                    df[col] = pd.arrays.IntegerArray(np.where(nan, 0, vals).astype("int64"), nan)
                elif dtype == "Int64" and df[col].dtype == object:
                    # exact: Python ints with None must not pass through float64 (ns near 1e18)
                    df[col] = pd.array(df[col].tolist(), dtype="Int64")
                else:
                    df[col] = df[col].astype(dtype)
            except (TypeError, ValueError) as e:
                raise TimelineError(f"column {col!r} cannot be {dtype}: {e}") from e
    extras = [c for c in df.columns if c not in SCHEMA]
    df = df[list(SCHEMA) + extras]
    if validate:
        validate_timeline(df)
    return df.reset_index(drop=True)


def validate_timeline(df: pd.DataFrame) -> None:
    """Raise :class:`TimelineError` naming the first offending row when the schema is broken."""
    missing = [c for c in SCHEMA if c not in df.columns]
    if missing:
        raise TimelineError(f"missing columns: {missing}")
    for col in REQUIRED:
        bad = df[col].isna()
        if bad.any():
            raise TimelineError(f"row {int(np.flatnonzero(bad.to_numpy())[0])}: {col} is null")
    bad = ~df["kind"].isin(KINDS)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise TimelineError(f"row {i}: kind {df['kind'].iloc[i]!r} not in {KINDS}")
    bad = ~df["msg_type"].isin(MSG_TYPES)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise TimelineError(f"row {i}: msg_type {df['msg_type'].iloc[i]!r} not in {MSG_TYPES}")
    # instants must be non-decreasing along the path, also across missing ones (in place, no
    # per-step copies: a 6 M-row timeline is validated within ~150 MB of scratch)
    last = _values(df[INSTANTS[0]]).copy()
    last_idx = np.zeros(len(df), dtype=np.int8)
    have = df[INSTANTS[0]].notna().to_numpy().copy()
    for k, b in enumerate(INSTANTS[1:], start=1):
        vb = _values(df[b])
        hb = df[b].notna().to_numpy()
        neg = hb & have & (vb < last)
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise TimelineError(
                f"row {i}: {b} < {INSTANTS[last_idx[i]]} (negative interval {int(vb[i]) - int(last[i])} ns)")
        del neg
        np.copyto(last, vb, where=hb)
        last_idx[hb] = k
        have |= hb


def _values(s: pd.Series) -> np.ndarray:
    """int64 values of an Int64 column (null slots hold arbitrary values: mask them)."""
    data = getattr(s.array, "_data", None)
    if isinstance(data, np.ndarray) and data.dtype == np.int64:
        return data
    return s.to_numpy(dtype="int64", na_value=0)
