"""The recorded lab datasets (``datasets/lab/``): compact per-run timelines and a run index.

A run is stored as ``runs/<run_id>/timeline.parquet`` (the joined timeline of
:func:`sipperf.ingest.lab_runs.run.read_run`, instants as ns offsets from the run's first capture
timestamp, delta-encoded, zstd; ``t0_ns`` in the Parquet metadata) plus its ``meta.json``.
:func:`load_run` restores the absolute epoch-ns timeline; no root, kamailio or tshark needed.

The recordings made point by point (``datasets/lab/protocol/``, ``--plan protocol``, and the earlier
``datasets/lab/long/``, ``--plan full``; both by ``datasets/lab/record.py``) keep summaries for
every point and a timeline for only a few:

* ``runs.csv`` -- one row per point (:func:`load_points`);
* ``components.csv`` -- per point, message type (``ALL`` and each) and component: n, mean and
  its batch-means 95 % CI half-width, p50/p90/p99, max, in µs (:func:`load_components`);
* ``histograms.parquet`` -- the same groups' counts on fixed log-spaced bins
  (:func:`hist_edges_ns`, :func:`load_histograms`); bin 0 holds values below 0.1 µs (zero and
  negative included), bin ``HIST_BINS + 1`` values of 10 s and more;
* ``runs/<run_id>/meta.json`` -- the point's compact meta (``"format": "lab-point-v1"``); where a
  window of the timeline was kept, ``timeline.parquet`` + the round's full ``meta.json`` and the
  compact one as ``point.json``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import CALL_FLOW, INSTANTS, IngestError, IngestReport, make_timeline

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


def complete_span(tl: pd.DataFrame) -> tuple[int, int]:
    """``(start, end)`` in epoch ns (``t_arr``): the part of a kept *window* (every message of
    consecutive calls, ``meta.json`` ``stored.timeline == "window"``) in which every datagram the
    proxy received belongs to the window's calls.

    Before ``start`` the point's earlier calls, not kept, were still sending their ACKs, BYEs and
    200s: ``start`` is the window's first INVITE plus its longest call (first INVITE to last
    message) among the calls that have all six messages and lost none (a call that lost one
    ends with a retransmission or a timeout seconds later, which says nothing about the others).
    After ``end``, the arrival of the window's last INVITE, later calls began.  With drops a few
    late messages of earlier calls can still arrive inside the span.  A window with no complete
    call has no span: ``ValueError``."""
    ua = tl[(tl["origin"] != "proxy").to_numpy()] if "origin" in tl.columns else tl
    t0 = int(ua["t_arr"].min())                      # epoch ns exceed float64's 2**53: work relative
    t = (ua["t_arr"] - t0).to_numpy("float64")       # exact (a window spans far less than 2**53 ns)
    inv = (ua["msg_type"].astype(str) == "INVITE").to_numpy()
    c = pd.DataFrame({"call": ua["call_id"].to_numpy(), "t": t, "t_inv": np.where(inv, t, np.nan),
                      "drop": ua["dropped"].fillna(False).to_numpy(bool)}).groupby("call")
    ok = (c.size() == len(CALL_FLOW)) & ~c["drop"].any()
    if not ok.any() or not inv.any():
        raise ValueError("a window without a complete call (six messages, none dropped) has no complete span")
    longest = float((c["t"].max() - c["t_inv"].min())[ok].max())
    return t0 + int(np.nanmin(t[inv]) + longest), t0 + int(np.nanmax(t[inv]))


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, IngestReport]:
    """One stored run as a timeline (absolute epoch ns) and an account (one record per row)."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    p = run_dir / "timeline.parquet"
    if not p.exists():
        fmt = None
        try:
            fmt = json.loads((run_dir / "meta.json").read_text()).get("format")
        except (OSError, ValueError):
            pass
        if fmt == "lab-point-v1":
            raise IngestError(run_dir, "timeline.parquet",
                              "summary-only stored point: its per-message timeline was not kept. "
                              "Its statistics are in runs.csv, components.csv and "
                              "histograms.parquet of the dataset directory (two levels up): "
                              "sipperf.ingest.lab_runs.dataset.load_points / load_components / "
                              "load_histograms")
        raise IngestError(run_dir, "timeline.parquet",
                          "missing (neither a raw lab run with capture.pcapng nor a stored run)")
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


# ---- the long recordings (datasets/lab/long) ---------------------------------------------------

#: stored components: name -> (later instant, earlier instant); ``wire`` is the pcap time in the
#: proxy, ``k_copy_max`` the upper bound of K_copy (see sipperf.ingest.lab_runs.run)
HIST_COMPONENTS: dict[str, tuple[str, str]] = {
    "k_stack": ("t_stack", "t_arr"), "k_sockq": ("t_sockq", "t_stack"),
    "k_copy": ("t_sip_in", "t_sockq"), "k_rcv": ("t_sip_in", "t_arr"),
    "t_sip1": ("t_sip_c", "t_sip_in"), "t_sip2": ("t_sip_out", "t_sip_c"),
    "t_sip": ("t_sip_out", "t_sip_in"), "k_snd": ("t_dep", "t_sip_out"),
    "sojourn": ("t_dep", "t_arr"), "wire": ("t_wire_out", "t_wire_in"),
    "k_copy_max": ("recv_copied", "t_sockq"),
}
HIST_LO_NS = 100.0            #: 0.1 µs, lower edge of bin 1
HIST_DECADES = 8              #: up to 10 s
HIST_PER_DECADE = 20          #: bins per decade (ratio 10**(1/20) = 1.122 between edges)
HIST_BINS = HIST_DECADES * HIST_PER_DECADE


def hist_edges_ns() -> np.ndarray:
    """The ``HIST_BINS + 1`` edges (ns) of bins 1..HIST_BINS: 0.1 µs * 10**(k/20), k = 0..160."""
    return HIST_LO_NS * 10.0 ** (np.arange(HIST_BINS + 1) / HIST_PER_DECADE)


def hist_counts(values_ns) -> np.ndarray:
    """Counts of the finite ``values_ns`` in bins 0..HIST_BINS+1 (under/overflow at the ends);
    bin k (1 <= k <= HIST_BINS) holds edges[k-1] <= v < edges[k]."""
    v = np.asarray(values_ns, dtype=np.float64)
    v = v[np.isfinite(v)]
    idx = np.searchsorted(hist_edges_ns(), v, side="right")
    return np.bincount(idx, minlength=HIST_BINS + 2)


def load_points(root: str | Path) -> pd.DataFrame:
    """``runs.csv`` of a recording (``protocol/``, ``long/``): one row per recorded point (series,
    workers, rate, tuning, guard, calls, stop reason, sojourn mean and CI, pdr and CI, goodput,
    retransmissions, load flags, ...)."""
    return pd.read_csv(Path(root) / "runs.csv")


def load_components(root: str | Path) -> pd.DataFrame:
    """``components.csv`` of a recording: per point, message type and component: n, mean_us, ci_hw_us,
    p50_us, p90_us, p99_us, max_us.  Empty (those columns) while only counter-only points
    (overload) are recorded."""
    try:
        return pd.read_csv(Path(root) / "components.csv")
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=["run_id", "msg_type", "component", "n", "mean_us", "ci_hw_us",
                                     "p50_us", "p90_us", "p99_us", "max_us"])


def load_histograms(root: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """``histograms.parquet`` of a recording (optionally one point) with the bin edges added as
    ``lo_us``/``hi_us`` (NaN for the open under/overflow bins)."""
    d = pd.read_parquet(Path(root) / "histograms.parquet")
    if run_id is not None:
        d = d[d["run_id"] == run_id]
    e = hist_edges_ns() / 1e3
    lo = np.concatenate([[np.nan], e])
    hi = np.concatenate([e, [np.nan]])
    b = d["bin"].to_numpy()
    d = d.assign(lo_us=lo[b], hi_us=hi[b])
    return d.reset_index(drop=True)


def hist_quantile_us(h: pd.DataFrame, q: float) -> float:
    """A quantile (0..1) of one histogram group, interpolated log-linearly inside its bin."""
    h = h.sort_values("bin")
    c = h["count"].to_numpy(dtype=float)
    cum = np.cumsum(c)
    target = q * cum[-1]
    i = int(np.searchsorted(cum, target, side="left"))
    lo, hi = h["lo_us"].iloc[i], h["hi_us"].iloc[i]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return float(lo if np.isfinite(lo) else hi)
    prev = cum[i - 1] if i else 0.0
    f = (target - prev) / c[i] if c[i] else 0.0
    return float(lo * (hi / lo) ** f)
