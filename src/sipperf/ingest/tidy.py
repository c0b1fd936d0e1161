"""The documented tidy export format (docs/formats.md): CSV or Parquet, one row per message.

Columns are those of :data:`sipperf.timeline.SCHEMA`; only ``call_id`` and ``kind`` are
required, every other column may be absent or empty.  Instants are **int64 nanoseconds since
the Unix epoch** (``t_arr`` … ``t_dep``).  For convenience an instant may instead be given as
``<instant>_us`` (decimal microseconds since the epoch, e.g. ``t_arr_us`` =
``1300000000000000.5``): in CSV the decimal text is converted exactly (digits beyond the ns
are dropped); a Parquet float column is rounded to the ns, but float64 µs since the epoch only
resolve about 0.25 µs, so prefer int64 ns.  Giving both ``t_arr`` and ``t_arr_us`` is an error.  Extra columns are kept.

Row accounting: ``read`` = data rows; a row without ``call_id`` or with a ``kind`` other than
request/response is skipped ("missing field" / "bad kind"); a row whose present instants
decrease along the path is skipped ("negative interval") or, with ``strict=True``, raises
:class:`IngestError` naming the file and the row (1-based data row; the CSV line is row+1).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import INSTANTS, KINDS, SCHEMA, IngestError, IngestReport, make_timeline

PARQUET_MAGIC = b"PAR1"


def _read_frame(path: Path) -> pd.DataFrame:
    with open(path, "rb") as fh:
        head = fh.read(4)
    try:
        if head == PARQUET_MAGIC:
            return pd.read_parquet(path)
        dtypes = {c: "string" for c, t in SCHEMA.items() if t == "string"}
        dtypes.update({f"{c}_us": "string" for c in INSTANTS})
        return pd.read_csv(path, dtype=dtypes, keep_default_na=True, na_values=[""])
    except Exception as e:  # noqa: BLE001 - any parser failure is unusable input
        raise IngestError(path, "file", f"not a readable tidy CSV/Parquet: {e}") from e


def _us_to_ns(col: pd.Series) -> pd.arrays.IntegerArray:
    """µs (decimal text: exact to the ns; float: rounded, ~0.25 µs resolution near 2020) -> Int64 ns."""
    if col.dtype.kind in "fiu":
        v = col.to_numpy(dtype="float64")
        ns = np.round(v * 1e3)
        bad = np.isnan(ns)
        return pd.arrays.IntegerArray(np.where(bad, 0, ns).astype(np.int64), bad)
    s = col.astype("string").str.strip()
    neg = s.str.startswith("-").fillna(False).to_numpy(bool)
    s = s.str.lstrip("-")
    parts = s.str.split(".", n=1, expand=True)
    ip = pd.to_numeric(parts[0], errors="coerce")
    fr = parts[1] if parts.shape[1] > 1 else pd.Series(pd.NA, index=s.index, dtype="string")
    fr = fr.astype("string").fillna("").str.slice(0, 3).str.pad(3, side="right", fillchar="0")
    fv = pd.to_numeric(fr, errors="coerce")
    bad = (ip.isna() | fv.isna()).to_numpy(bool)
    v = ip.fillna(0).astype("int64").to_numpy() * 1000 + fv.fillna(0).astype("int64").to_numpy()
    return pd.arrays.IntegerArray(np.where(neg, -v, v), bad)


def read_tidy(path: str | os.PathLike, *, run_id: str | None = None, strict: bool = False
              ) -> tuple[pd.DataFrame, IngestReport]:
    """Read a tidy CSV/Parquet timeline (see module doc)."""
    path = Path(path)
    df = _read_frame(path)
    rep = IngestReport(source="tidy", path=str(path), read=len(df))
    missing = [c for c in ("call_id", "kind") if c not in df.columns]
    if missing:
        raise IngestError(path, "header", f"missing required column(s) {missing}")
    for name in INSTANTS:
        alt = f"{name}_us"
        if alt in df.columns:
            if name in df.columns:
                raise IngestError(path, "header", f"both {name} and {alt} given")
            df[name] = _us_to_ns(df.pop(alt))
        elif name in df.columns and df[name].dtype.kind == "O":
            df[name] = pd.to_numeric(df[name], errors="coerce")
    for name in INSTANTS:
        if name in df.columns and df[name].dtype.kind == "f":
            v = df[name].to_numpy()
            if np.any(np.abs(v[np.isfinite(v)]) >= 2 ** 53):
                rep.notes.append(f"{name}: float column beyond 2^53 ns, precision lost; write int64")
    if run_id is not None:
        df["run_id"] = run_id
    elif "run_id" not in df.columns or df["run_id"].isna().all():
        df["run_id"] = path.stem
    bad_id = df["call_id"].isna().to_numpy()
    kind = df["kind"].astype("string")
    bad_kind = ~kind.isin(KINDS).fillna(False).to_numpy() & ~bad_id
    neg = np.zeros(len(df), bool)
    last = np.full(len(df), -np.inf)
    for name in INSTANTS:
        if name in df.columns:
            v = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
            pres = ~np.isnan(v)
            neg |= pres & (v < last)
            last = np.where(pres, v, last)
    neg &= ~bad_id & ~bad_kind
    if strict:
        for mask, what in ((bad_id, "missing call_id"), (bad_kind, "kind not request/response"),
                           (neg, "negative interval")):
            if mask.any():
                raise IngestError(path, f"row {int(np.flatnonzero(mask)[0]) + 1}", what)
    rep.skip("missing field", int(bad_id.sum())) if bad_id.any() else None
    rep.skip("bad kind", int(bad_kind.sum())) if bad_kind.any() else None
    rep.skip("negative interval", int(neg.sum())) if neg.any() else None
    keep = ~(bad_id | bad_kind | neg)
    df = df[keep].reset_index(drop=True)
    if "msg_type" in df.columns and df["msg_type"].isna().any() and not df["msg_type"].isna().all():
        from sipperf.timeline import msg_type_vector
        for c in ("method", "status", "cseq_method"):
            if c not in df.columns:
                df[c] = pd.NA
        fill = msg_type_vector(df["kind"], df["method"], df["status"], df["cseq_method"])
        df["msg_type"] = df["msg_type"].astype("string").fillna(fill)
    try:
        tl = make_timeline(df)
    except Exception as e:  # noqa: BLE001
        raise IngestError(path, "rows", str(e)) from e
    rep.parsed = len(tl)
    rep.messages = len(tl)
    return tl, rep.check()


def write_tidy(timeline: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``timeline`` as Parquet (``.parquet``) or CSV (anything else), instants int64 ns."""
    path = Path(path)
    if path.suffix == ".parquet":
        timeline.to_parquet(path, index=False)
    else:
        timeline.to_csv(path, index=False)
    return path


def sniff(head: bytes) -> str | None:
    """"parquet", "csv" (a header line naming call_id and kind) or None."""
    if head[:4] == PARQUET_MAGIC:
        return "parquet"
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff").strip()
    cols = [c.strip().strip('"') for c in first.split(",")]
    if "call_id" in cols and "kind" in cols:
        return "csv"
    return None
