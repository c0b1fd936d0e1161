"""The pipeline: inputs -> timeline -> components -> calls -> tables, with the account.

:func:`analyze` reads the inputs (in memory, or streamed for one large capture) and returns an
:class:`~sipperf.analysis.result.Analysis`; it writes nothing.
"""
from __future__ import annotations

import importlib.util

import os
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.analysis.account import blank_pdr, clock_resolution_ns, pdr_unreliable, summary, with_resolution
from sipperf.analysis.result import Analysis, order_key

__all__ = ["analyze", "check_options"]


def check_options(*, proxy=None, workers: int | None = None, offered: int | None = None) -> None:
    """Refuse an unusable ``proxy`` (ip:port, several comma-separated), ``workers`` (< 0) or
    ``offered`` (not a positive count) with an :class:`~sipperf.timeline.IngestError` naming the option."""
    from sipperf.ingest.pairing.vantage import parse_proxies
    from sipperf.timeline import IngestError

    if proxy is not None:
        try:
            parse_proxies(proxy)
        except ValueError as e:
            raise IngestError("--proxy", repr(proxy), f"unusable proxy address: {e}") from None
    if workers is not None and workers < 0:
        raise IngestError("--workers", repr(workers), "give 0 (no Dask) or a number of local workers")
    if offered is not None and (isinstance(offered, bool) or not isinstance(offered, (int, np.integer))
                                or offered < 1):
        raise IngestError("--offered", repr(offered), "give the number of messages offered (1 or more)")


def analyze(paths, *, proxy=None, strict: bool = False, offered: int | None = None,
            stream: bool | None = None, workers: int | None = None, scheduler: str | None = None,
            progress: bool | None = None, measure_rows: bool = False) -> Analysis:
    """What ``sipperf analyze`` computes, as an :class:`~sipperf.analysis.result.Analysis`; writes
    nothing (:meth:`Analysis.write <sipperf.analysis.result.Analysis.write>` does).  Raises
    :class:`~sipperf.timeline.IngestError` for unusable input, ``proxy`` or ``workers``.

    ``stream``: None (default) streams one capture -- a file, or the files of one ring buffer --
    of at least :data:`sipperf.analysis.stream.STREAM_MIN_BYTES`, or a ring buffer given
    ``workers``/``scheduler``; True streams any single capture; False never.  Several captures,
    other formats and B2BUA captures are read in memory.  A streamed analysis holds no
    timeline: ``timeline`` is None; ``engine`` says which path ran.  ``workers`` (local Dask
    workers) and ``scheduler`` (a Dask scheduler's address) distribute a ring buffer's files.
    ``measure_rows``: a streamed analysis also keeps the caller side's rows with the columns
    ``sipperf report`` measures (``rows``, :meth:`Analysis.measure_frame
    <sipperf.analysis.result.Analysis.measure_frame>`), about 48 bytes per message."""
    from sipperf import calls, components, stats

    check_options(proxy=proxy, workers=workers, offered=offered)
    streamed = _stream(paths, stream, proxy=proxy, strict=strict, offered=offered, workers=workers,
                       scheduler=scheduler, progress=progress, keep_rows=measure_rows)
    if streamed is not None:
        return _from_stream(streamed)
    from sipperf.ingest import load

    tl, report = load(paths, strict=strict, proxy=proxy)
    comp = _components(tl, components, stats)
    by_hop = None
    if "hop" in tl.columns and tl["hop"].nunique(dropna=True) > 1:
        parts = []
        for h, g in tl.groupby(tl["hop"].astype("Int64"), sort=True):
            c = _components(g.reset_index(drop=True), components, stats)
            c.insert(0, "proxy", str(g["proxy"].dropna().iloc[0]) if "proxy" in g and g["proxy"].notna().any() else "")
            c.insert(0, "hop", int(h))
            parts.append(c)
        by_hop = pd.concat(parts, ignore_index=True)
    res = clock_resolution_ns(report)  # the clock's resolution beside every component
    comp, by_hop = with_resolution(comp, res), with_resolution(by_hop, res)
    return _finish(comp, by_hop, calls.metrics(tl, offered=offered), calls.transactions(tl),
                   calls.message_counts(tl), report, engine="in memory", timeline=tl)


def _finish(comp, by_hop, cm, tx, counts, report, **rest) -> Analysis:
    """The PDR blanked when the input cannot tell a drop from a missing line; the summary (with
    the components below the clock's resolution)."""
    unreliable = pdr_unreliable(report)
    blank_pdr(cm, unreliable)
    res = clock_resolution_ns(report)
    summ = summary(report, cm, unreliable)
    coarse = sorted({c for v in (comp["below_clock_resolution"] if comp is not None and "below_clock_resolution"
                                 in comp.columns else []) for c in str(v).split(",") if c})
    if coarse:
        summ["below_clock_resolution"] = {"components": coarse, "resolution_us": res / 1e3}
    return Analysis(comp, by_hop, cm, tx, counts, report, summ, **rest)


def _stream(paths, stream, *, proxy, strict, offered, workers, scheduler, progress, keep_rows=False):
    """The streaming engine's outputs when the input is one capture that should be streamed
    (see :func:`analyze`), else None."""
    if stream is False:
        return None
    from sipperf.ingest import expand, capture_sets, display_path, set_label, unique_inputs
    from sipperf.ingest.paths import repeat_notes
    from sipperf.analysis import stream as S
    from sipperf.ingest.capture.read import capture_stem

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    unique, repeated = unique_inputs(expand(list(paths)))
    items = capture_sets(unique)
    if len(items) != 1 or items[0][1] not in ("pcap", "pcap-set"):
        return None  # the streaming engine takes one capture: anything else is read in memory
    item, kind = items[0]
    files = [Path(item)] if kind == "pcap" else list(item)
    size = sum(f.stat().st_size for f in files)
    distributed = kind == "pcap-set" and (scheduler is not None or (workers or 0) > 0)
    if not (stream or size >= S.STREAM_MIN_BYTES or distributed):
        return None
    from sipperf.ingest.capture.tls import has_dsb
    if any(has_dsb(f) for f in files):
        return None  # TLS secrets inside the capture: decrypted in memory (sipperf.ingest.capture.tls)
    if kind == "pcap":
        label, run_id = display_path(files[0]), capture_stem(files[0])
    else:
        label, run_id = set_label(files)
    mode = "auto"
    if kind == "pcap-set":
        # a large ring buffer goes to Dask unasked only where Dask is installed (the [distributed]
        # extra); asked for with --workers/--scheduler, its absence is said (sipperf.cli)
        big = workers is None and size >= (256 << 20) and importlib.util.find_spec("distributed") is not None
        mode = "dask" if distributed or big else "inline"
    try:
        out = S.stream_capture(files, run_id=run_id, label=label, proxy=proxy, strict=strict, offered=offered,
                               mode=mode, workers=workers or None, scheduler=scheduler, progress=progress,
                               keep_rows=keep_rows)
    except S.NotStreamable:
        return None
    if repeated:
        out.report.details["repeated_inputs"] = repeated
        out.report.notes.extend(repeat_notes(repeated))
    return out


def _from_stream(o) -> Analysis:
    """An :class:`Analysis` from the streaming engine's :class:`~sipperf.analysis.stream.Outputs`."""
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestReport

    rep = o.report
    rep.path = display_path(rep.path)
    report = IngestReport.combine([rep])
    report.details = dict(rep.details)
    report.check()
    return _finish(o.components, o.components_by_hop, o.calls, o.transactions, o.counts, report,
                   engine=rep.details.get("streaming", {}).get("engine", "streaming"), timeline=None,
                   figure_t=o.figure_t, figure_arrays=o.figure_arrays, rows=o.rows)


def _components(tl: pd.DataFrame, components, stats) -> pd.DataFrame:
    """components.summary in µs, with the batch-means 95 % CI half-width of each ALL mean
    (the rows in the order of their first instant)."""
    comp = components.summary(tl, unit="us")
    arrays = components.derive_arrays(tl)
    order = np.argsort(order_key(tl), kind="stable")
    for c, v in arrays.items():
        col = f"{c}_ci95_hw"
        vals = v[order]
        vals = vals[np.isfinite(vals)] / 1e3
        hw = stats.batch_means_ci(vals).half_width if len(vals) >= 2 * stats.DEFAULT_BATCHES else np.nan
        if f"{c}_mean" in comp.columns:
            comp[col] = np.where(comp["msg_type"] == "ALL", hw, np.nan)
    return comp
