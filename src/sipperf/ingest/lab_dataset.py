"""The recorded lab datasets (``datasets/lab/``): compact per-run timelines and a run index.

A run is stored as ``runs/<run_id>/timeline.parquet`` (the joined timeline of
:func:`sipperf.ingest.lab_run.read_run`, instants as ns offsets from the run's first capture
timestamp, delta-encoded, zstd; ``t0_ns`` in the Parquet metadata) plus its ``meta.json``.
:func:`load_run` restores the absolute epoch-ns timeline; no root, kamailio or tshark needed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..timeline import INSTANTS, IngestError, IngestReport, make_timeline

TIME_COLS: tuple[str, ...] = (*INSTANTS, "t_wire_in", "t_wire_out", "t_script_in", "recv_enter",
                              "recv_copied", "send_enter")
KEEP: tuple[str, ...] = (
    "call_id", "cseq", "cseq_method", "kind", "method", "status", "msg_type", "src", "dst",
    "size", *INSTANTS, "dropped", "drop_reason", "worker", "t_wire_in", "t_wire_out",
    "t_script_in", "recv_copied", "sockq_src", "origin",
)
_DICT = ["call_id", "cseq_method", "kind", "method", "msg_type", "src", "dst", "drop_reason",
         "sockq_src", "origin"]


def save_run(tl: pd.DataFrame, meta: dict, out_dir: str | Path) -> Path:
    """Write one run's timeline (compact Parquet) and meta.json into ``out_dir``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d = tl[[c for c in KEEP if c in tl.columns]].copy()
    t0 = int(pd.concat([d["t_wire_in"], d["t_wire_out"]]).min())
    for c in TIME_COLS:
        if c in d.columns:
            d[c] = (d[c] - t0).astype("Int64")
    table = pa.Table.from_pandas(d, preserve_index=False)
    md = dict(table.schema.metadata or {})
    md[b"sipperf.t0_ns"] = str(t0).encode()
    md[b"sipperf.format"] = b"lab-timeline-v1"
    table = table.replace_schema_metadata(md)
    pq.write_table(table, out / "timeline.parquet", compression="zstd", compression_level=19,
                   use_dictionary=[c for c in _DICT if c in d.columns],
                   column_encoding={c: "DELTA_BINARY_PACKED" for c in TIME_COLS if c in d.columns})
    (out / "meta.json").write_text(json.dumps(meta, separators=(",", ":"), default=str))
    return out


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, IngestReport]:
    """One stored run as a timeline (absolute epoch ns) and an account (one record per row)."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    p = run_dir / "timeline.parquet"
    if not p.exists():
        raise IngestError(run_dir, "timeline.parquet", "missing")
    table = pq.read_table(p)
    md = table.schema.metadata or {}
    if md.get(b"sipperf.format") != b"lab-timeline-v1" or b"sipperf.t0_ns" not in md:
        raise IngestError(p, "metadata", "not a sipperf lab timeline (no sipperf.t0_ns)")
    t0 = int(md[b"sipperf.t0_ns"])
    d = table.to_pandas()
    for c in TIME_COLS:
        if c in d.columns:
            d[c] = d[c].astype("Int64") + t0
    d.insert(0, "run_id", run_dir.name)
    tl = make_timeline(d)
    rep = IngestReport(source="lab-dataset", path=str(p), read=len(d), parsed=len(d), messages=len(tl))
    return tl, rep.check()


def load_meta(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "meta.json").read_text())


def load_index(root: str | Path) -> pd.DataFrame:
    """``index.csv`` of a dataset directory: one row per run (series, rate, workers, sched, ...)."""
    return pd.read_csv(Path(root) / "index.csv")
