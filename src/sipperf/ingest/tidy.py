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

from sipperf.timeline import INSTANTS, KINDS, MSG_TYPES, IngestError, IngestReport, make_timeline

PARQUET_MAGIC = b"PAR1"


#: suffix of an instant column given in another unit -> ns per unit
UNIT_SUFFIXES: dict[str, int] = {"_s": 1_000_000_000, "_ms": 1_000_000, "_us": 1_000, "_ns": 1}
#: (low, high) of epoch instants 2000-01-01 .. 2100-01-01 in each unit: an ns column whose
#: every value falls in one of these ranges holds that unit, not ns
_EPOCH_RANGES = {"seconds": (946_684_800, 4_102_444_800), "milliseconds": (946_684_800e3, 4_102_444_800e3),
                 "microseconds": (946_684_800e6, 4_102_444_800e6)}
_ALT_SUFFIX = {"seconds": "_s", "milliseconds": "_ms", "microseconds": "_us"}


def _header(path: Path, head: bytes) -> list[str]:
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff").strip()
    import csv
    return [c.strip() for c in next(csv.reader([first]), [])]


def _read_frame(path: Path) -> pd.DataFrame:
    from sipperf.ingest.paths import read_head
    head = read_head(path, 1 << 16)
    try:
        if head[:4] == PARQUET_MAGIC:
            df = pd.read_parquet(path)
            cols = [str(c) for c in df.columns]
        else:
            cols = _header(path, head)
            dup = sorted({c for c in cols if cols.count(c) > 1})
            if dup:
                raise IngestError(path, "header", f"duplicate column(s) {dup}: each column once")
            dtypes = {c: "string" for c in cols}  # everything as text first: numbers are checked below
            from sipperf.ingest.compression import kind
            with open(path, "rb") as fh:
                comp = kind(fh.read(8))
            df = pd.read_csv(path, dtype=dtypes, keep_default_na=False, na_values=[""],
                             compression={"bzip2": "bz2"}.get(comp, comp))
    except IngestError:
        raise
    except Exception as e:  # noqa: BLE001 - any parser failure is unusable input
        raise IngestError(path, "file", f"not a readable tidy CSV/Parquet: {e}") from e
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise IngestError(path, "header", f"duplicate column(s) {dup}: each column once")
    return df


def _decimal_to_ns(col: pd.Series, per_unit: int) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """Decimal text (or numbers) in a unit of ``per_unit`` ns -> (Int64 ns, bad mask).  Text
    converts exactly (digits beyond the ns dropped); floats round to the ns.  Bad: a value
    present but not a finite decimal number."""
    if col.dtype.kind in "iu":  # exact integers (Parquet int64, Int64)
        miss = col.isna().to_numpy(bool)
        v = col.to_numpy(dtype="int64", na_value=0)
        big = np.abs(v) > (2 ** 63 - 1) // per_unit
        return pd.arrays.IntegerArray(np.where(big, 0, v) * per_unit, miss | big), big & ~miss
    if col.dtype.kind == "b":
        return pd.arrays.IntegerArray(np.zeros(len(col), np.int64), np.ones(len(col), bool)), ~col.isna().to_numpy(bool)
    if col.dtype.kind == "f":
        v = col.to_numpy(dtype="float64", na_value=np.nan)
        bad = ~np.isfinite(v) & ~col.isna().to_numpy()
        ns = np.round(np.where(np.isfinite(v), v, 0) * per_unit)
        miss = ~np.isfinite(v)
        return pd.arrays.IntegerArray(ns.astype(np.int64), miss), bad
    if not len(col):
        return pd.arrays.IntegerArray(np.zeros(0, np.int64), np.zeros(0, bool)), np.zeros(0, bool)
    s = col.astype("string").str.strip()
    present = s.notna() & (s != "")
    ok = s.str.fullmatch(r"[+-]?\d+(\.\d*)?|[+-]?\.\d+").fillna(False)
    bad = (present & ~ok).to_numpy(bool)
    neg = s.str.startswith("-").fillna(False).to_numpy(bool)
    s = s.where(ok, "0").str.lstrip("+-")
    parts = s.str.split(".", n=1, expand=True)
    ip = pd.to_numeric(parts[0].replace("", "0"), errors="coerce")
    digits = len(str(per_unit)) - 1
    fr = parts[1] if parts.shape[1] > 1 else pd.Series(pd.NA, index=s.index, dtype="string")
    fr = fr.astype("string").fillna("").str.slice(0, digits).str.pad(digits, side="right", fillchar="0")
    if digits:
        fv = pd.to_numeric(fr, errors="coerce")
    else:  # an integer unit (ns): a fraction other than zeros is not an instant
        rest = parts[1] if parts.shape[1] > 1 else pd.Series("", index=s.index, dtype="string")
        bad |= (rest.astype("string").fillna("").str.strip("0") != "").to_numpy(bool) & present.to_numpy(bool)
        fv = pd.Series(0, index=s.index)
    big = (ip.abs() >= 2 ** 63 / per_unit).fillna(False).to_numpy(bool)
    bad |= big & present.to_numpy(bool)
    good = ok.to_numpy(bool) & ~big
    v = ip.where(good, 0).fillna(0).astype("int64").to_numpy() * per_unit + fv.where(good, 0).fillna(0).astype("int64").to_numpy()
    miss = ~(present.to_numpy(bool) & good)
    return pd.arrays.IntegerArray(np.where(neg, -v, v).astype(np.int64), miss), bad


def _us_to_ns(col: pd.Series) -> pd.arrays.IntegerArray:
    """µs (decimal text: exact to the ns; float: rounded, ~0.25 µs resolution near 2020) -> Int64 ns."""
    return _decimal_to_ns(col, 1_000)[0]


def _guess_unit(v: np.ndarray) -> str | None:
    """'seconds'/'milliseconds'/'microseconds' when every value of an ns column is an epoch
    instant of 2000-2100 in that unit (a column that cannot be ns since the epoch)."""
    v = v[np.isfinite(v)]
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    for unit, (a, b) in _EPOCH_RANGES.items():
        if a <= lo and hi <= b:
            return unit
    return None


def read_tidy(path: str | os.PathLike, *, run_id: str | None = None, strict: bool = False
              ) -> tuple[pd.DataFrame, IngestReport]:
    """Read a tidy CSV/Parquet timeline (see module doc)."""
    path = Path(path)
    df = _read_frame(path)
    rep = IngestReport(source="tidy", path=str(path), read=len(df))
    if not len(df):
        raise IngestError(path, "row 1", "no data rows (a header line only)")
    missing = [c for c in ("call_id", "kind") if c not in df.columns]
    if missing:
        raise IngestError(path, "header", f"missing required column(s) {missing}")
    bad_num = np.zeros(len(df), bool)
    first_bad: dict[int, str] = {}

    def note_bad(mask: np.ndarray, col: str) -> None:
        nonlocal bad_num
        for i in np.flatnonzero(mask & ~bad_num)[:1]:
            first_bad.setdefault(int(i), col)
        bad_num |= mask

    for name in INSTANTS:
        given = [name + suf for suf in UNIT_SUFFIXES if name + suf in df.columns]
        if name in df.columns:
            given.append(name)
        if len(given) > 1:
            raise IngestError(path, "header", f"{name} given {len(given)} times ({given}): give it once")
        if not given:
            continue
        col = given[0]
        per = UNIT_SUFFIXES.get(col[len(name):], 1)
        vals, bad = _decimal_to_ns(df.pop(col), per)
        note_bad(bad, col)
        if col == name:
            unit = _guess_unit(vals.to_numpy(dtype="float64", na_value=np.nan))
            if unit:
                raise IngestError(path, f"column {name}", f"values look like {unit} since the epoch, not ns "
                                  f"(e.g. {int(vals.dropna()[0])}): write int64 ns, or name the column "
                                  f"{name}{_ALT_SUFFIX[unit]} to have it converted")
        df[name] = vals
    for name in ("cseq", "status", "size"):
        if name in df.columns:
            vals, bad = _decimal_to_ns(df[name], 1)
            s = df[name].astype("string").str.strip()
            frac = s.str.contains(".", regex=False).fillna(False).to_numpy(bool)
            bad |= frac
            note_bad(bad, name)
            df[name] = vals
    if run_id is not None:
        df["run_id"] = run_id
    elif "run_id" not in df.columns or df["run_id"].isna().all():
        from sipperf.ingest.paths import display_path
        df["run_id"] = display_path(path.stem)
    if "dropped" in df.columns and df["dropped"].dtype.kind not in "b":
        d = df["dropped"].astype("string").str.strip().str.lower()
        ok = d.isin(["true", "false", "1", "0"]) | d.isna()
        note_bad(~ok.to_numpy(bool), "dropped")
        df["dropped"] = pd.array(d.where(ok).map({"true": True, "1": True, "false": False, "0": False}).to_numpy(object),
                                 dtype="boolean")
    bad_id = df["call_id"].isna().to_numpy()
    kind = df["kind"].astype("string")
    bad_kind = ~kind.isin(KINDS).fillna(False).to_numpy() & ~bad_id
    bad_num &= ~bad_id & ~bad_kind
    neg = np.zeros(len(df), bool)
    last = np.full(len(df), -np.inf)
    for name in INSTANTS:
        if name in df.columns:
            v = df[name].to_numpy(dtype="float64", na_value=np.nan)
            pres = ~np.isnan(v)
            neg |= pres & (v < last)
            last = np.where(pres, v, last)
    neg &= ~bad_id & ~bad_kind & ~bad_num
    if strict:
        for mask, what in ((bad_id, "missing call_id"), (bad_kind, "kind not request/response"),
                           (bad_num, "bad number"), (neg, "negative interval")):
            if mask.any():
                i = int(np.flatnonzero(mask)[0])
                col = f" in column {first_bad[i]}" if mask is bad_num and i in first_bad else ""
                raise IngestError(path, f"row {i + 1}", what + col)
    for mask, why in ((bad_id, "missing field"), (bad_kind, "bad kind"), (bad_num, "bad number"),
                      (neg, "negative interval")):
        if mask.any():
            rep.skip(why, int(mask.sum()))
    if bad_num.any():
        i = int(np.flatnonzero(bad_num)[0])
        rep.notes.append(f"bad number: first at row {i + 1} (column {first_bad.get(i, '?')}): not a finite "
                         f"integer / decimal")
    keep = ~(bad_id | bad_kind | neg | bad_num)
    df = df[keep].reset_index(drop=True)
    if "msg_type" in df.columns and df["msg_type"].isna().any() and not df["msg_type"].isna().all():
        from sipperf.timeline import msg_type_vector
        for c in ("method", "status", "cseq_method"):
            if c not in df.columns:
                df[c] = pd.NA
        fill = msg_type_vector(df["kind"], df["method"], df["status"], df["cseq_method"])
        df["msg_type"] = df["msg_type"].astype("string").fillna(fill)
    if "msg_type" in df.columns:
        bad_mt = ~df["msg_type"].isin(MSG_TYPES).fillna(True).to_numpy(bool) & df["msg_type"].notna().to_numpy(bool)
        if bad_mt.any():
            raise IngestError(path, "rows", f"msg_type {df['msg_type'][bad_mt].iloc[0]!r} not one of {MSG_TYPES}")
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
