"""``sipperf analyze PATH... --out DIR``: your own logs -> components, call metrics, report, figures.

Writes into ``DIR``:

* ``components.csv``: one row per msg_type plus ``ALL``: count and mean/median/p99 in µs of
  every derivable component, incl. ``sojourn``; plus the batch-means 95% CI half-width of each
  ALL mean (a capture at an endpoint has no component: counts only);
* ``components_by_hop.csv`` (several hops in one capture): the same per hop;
* ``calls.csv``: RFC 6076 metrics and the PDR (:mod:`sipperf.calls`), at the caller side;
* ``transactions.csv``: request -> response times per transaction type, retransmissions apart;
* ``counts.csv``: messages by method / status (and, at a proxy, by disposition);
* ``report.json``: the ingest account (read, parsed, skipped by reason, per input file), what
  each capture's vantage point is and what follows from it, and the drop rule's counts;
* ``components.png`` / ``timeline.png``.

Large captures are streamed (bounded memory, the same numbers: :mod:`sipperf.analysis.stream`);
the files of a ring buffer (``dumpcap -b``: PREFIX_NNNNN_YYYYmmddHHMMSS.pcapng) are one
capture, read in parallel on Dask (``--workers``, ``--scheduler``) and paired across files.

Unusable input (or an unusable ``--out`` / ``--proxy``) -> exit code 2 and a message naming the
file and position; never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd


def prepare_out_dir(out_dir) -> Path:
    """Create the output directory and prove it is writable, before any work is done."""
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise IngestError(display_path(out), "--out", "exists and is not a directory: give a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".sipperf-write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise IngestError(display_path(out), "--out", f"cannot write there: {e.strerror or e}") from None
    return out


def _write(path: Path, writer) -> Path:
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    try:
        writer(path)
    except OSError as e:
        raise IngestError(display_path(path), "--out", f"cannot write: {e.strerror or e}") from None
    return path


def analyze(paths, out_dir, *, proxy=None, strict: bool = False, offered: int | None = None,
            figures: bool = True, stream: bool | None = None, workers: int | None = None,
            scheduler: str | None = None, progress: bool | None = None) -> dict:
    """Do what ``sipperf analyze`` does; returns {"timeline", "components", "calls", "transactions",
    "counts", "report", "summary", "files", "engine"}.  Raises :class:`~sipperf.timeline.IngestError`
    for unusable input, ``--out`` or ``--proxy``.

    ``stream``: None (default) streams one capture -- a file, or the files of one ring buffer --
    of at least :data:`sipperf.analysis.stream.STREAM_MIN_BYTES`, or a ring buffer given
    ``workers``/``scheduler``; True streams any single capture; False never.  Several captures,
    other formats and B2BUA captures are read in memory.  A streamed analysis holds no
    timeline: ``"timeline"`` is None; ``"engine"`` says which path ran.  ``workers`` (local Dask workers) and
    ``scheduler`` (a Dask scheduler's address) distribute a ring buffer's files."""
    res = _analyze(paths, out_dir, proxy=proxy, strict=strict, offered=offered, stream=stream, workers=workers,
                   scheduler=scheduler, progress=progress)
    draw = res.pop("draw_figures")
    if figures:
        res["files"] += draw()
    return res


def _analyze(paths, out_dir, *, proxy=None, strict: bool = False, offered: int | None = None,
             stream: bool | None = None, workers: int | None = None, scheduler: str | None = None,
             progress: bool | None = None) -> dict:
    """:func:`analyze` without the figures: ``res["draw_figures"]()`` draws them (and returns
    their paths), so the command can print its answer first."""
    from sipperf import calls, components, stats
    from sipperf.ingest.pairing.vantage import parse_proxies
    from sipperf.timeline import IngestError

    if proxy is not None:
        try:
            parse_proxies(proxy)
        except ValueError as e:
            raise IngestError("--proxy", repr(proxy), f"unusable proxy address: {e}") from None
    if workers is not None and workers < 0:
        raise IngestError("--workers", repr(workers), "give 0 (no Dask) or a number of local workers")
    out = prepare_out_dir(out_dir)
    streamed = _stream(paths, stream, proxy=proxy, strict=strict, offered=offered, workers=workers,
                       scheduler=scheduler, progress=progress)
    if streamed is not None:
        return _finish_streamed(streamed, out, offered)
    from sipperf.ingest import load

    tl, report = load(paths, strict=strict, proxy=proxy)
    comp = _components(tl, components, stats)
    files = [_write(out / "components.csv", lambda p: comp.to_csv(p, index=False))]
    by_hop = None
    if "hop" in tl.columns and tl["hop"].nunique(dropna=True) > 1:
        parts = []
        for h, g in tl.groupby(tl["hop"].astype("Int64"), sort=True):
            c = _components(g.reset_index(drop=True), components, stats)
            c.insert(0, "proxy", str(g["proxy"].dropna().iloc[0]) if "proxy" in g and g["proxy"].notna().any() else "")
            c.insert(0, "hop", int(h))
            parts.append(c)
        by_hop = pd.concat(parts, ignore_index=True)
        files.append(_write(out / "components_by_hop.csv", lambda p: by_hop.to_csv(p, index=False)))
    cm = calls.metrics(tl, offered=offered)
    tx = calls.transactions(tl)
    counts = calls.message_counts(tl)
    res = _write_tables(out, files, comp, cm, tx, counts, report)
    res.update({"timeline": tl, "components_by_hop": by_hop, "engine": "in memory",
                "draw_figures": lambda: _figures(_order_key(tl), components.derive_arrays(tl), comp, out, tx)})
    return res


def _write_tables(out: Path, files: list, comp, cm, tx, counts, report) -> dict:
    """calls.csv, transactions.csv, counts.csv and report.json (the PDR blanked when the
    input cannot tell a drop from a missing line)."""
    unreliable = _pdr_unreliable(report)
    if unreliable:
        i = cm.index[cm["metric"] == "PDR"]
        cm.loc[i, "value"] = np.nan
        cm.loc[i, "definition"] = f"not computed: {unreliable}"
    files.append(_write(out / "calls.csv", lambda p: cm.to_csv(p, index=False)))
    files.append(_write(out / "transactions.csv", lambda p: tx.to_csv(p, index=False)))
    files.append(_write(out / "counts.csv", lambda p: counts.to_csv(p, index=False)))
    summary = _summary(report, None, cm, unreliable)
    rep_d = {**report.to_dict(), "summary": summary}
    files.append(_write(out / "report.json",
                        lambda p: p.write_text(json.dumps(_finite(rep_d), indent=2, default=str))))
    return {"components": comp, "calls": cm, "transactions": tx, "counts": counts, "report": report,
            "summary": summary, "files": files}


def _stream(paths, stream, *, proxy, strict, offered, workers, scheduler, progress):
    """The streaming engine's outputs when the input is one capture that should be streamed
    (see :func:`analyze`), else None."""
    if stream is False:
        return None
    from sipperf.ingest import expand, capture_sets, display_path, set_label
    from sipperf.analysis import stream as S
    from sipperf.ingest.capture.read import capture_stem
    from sipperf.timeline import IngestError

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    items = capture_sets(expand(list(paths)))
    if len(items) != 1 or items[0][1] not in ("pcap", "pcap-set"):
        return None  # the streaming engine takes one capture: anything else is read in memory
    item, kind = items[0]
    files = [Path(item)] if kind == "pcap" else list(item)
    size = sum(f.stat().st_size for f in files)
    distributed = kind == "pcap-set" and (scheduler is not None or (workers or 0) > 0)
    if not (stream or size >= S.STREAM_MIN_BYTES or distributed):
        return None
    if kind == "pcap":
        label, run_id = display_path(files[0]), capture_stem(files[0])
    else:
        label, run_id = set_label(files)
    mode = "auto"
    if kind == "pcap-set":
        mode = "dask" if distributed or (workers is None and size >= (256 << 20)) else "inline"
    try:
        return S.stream_capture(files, run_id=run_id, label=label, proxy=proxy, strict=strict, offered=offered,
                                mode=mode, workers=workers or None, scheduler=scheduler, progress=progress)
    except S.NotStreamable:
        return None


def _finish_streamed(o, out: Path, offered) -> dict:
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestReport

    rep = o.report
    rep.path = display_path(rep.path)
    report = IngestReport.combine([rep])
    report.details = dict(rep.details)
    report.check()
    files = [_write(out / "components.csv", lambda p: o.components.to_csv(p, index=False))]
    if o.components_by_hop is not None:
        files.append(_write(out / "components_by_hop.csv", lambda p: o.components_by_hop.to_csv(p, index=False)))
    res = _write_tables(out, files, o.components, o.calls, o.transactions, o.counts, report)
    res.update({"timeline": None, "components_by_hop": o.components_by_hop,
                "engine": rep.details.get("streaming", {}).get("engine", "streaming"),
                "draw_figures": lambda: _figures(o.figure_t, o.figure_arrays, o.components, out, o.transactions)})
    return res


def _components(tl: pd.DataFrame, components, stats) -> pd.DataFrame:
    comp = components.summary(tl, unit="us")
    arrays = components.derive_arrays(tl)
    order = np.argsort(_order_key(tl), kind="stable")
    for c, v in arrays.items():
        col = f"{c}_ci95_hw"
        vals = v[order]
        vals = vals[np.isfinite(vals)] / 1e3
        hw = stats.batch_means_ci(vals).half_width if len(vals) >= 2 * stats.DEFAULT_BATCHES else np.nan
        if f"{c}_mean" in comp.columns:
            comp[col] = np.where(comp["msg_type"] == "ALL", hw, np.nan)
    return comp


def _finite(x):
    """JSON has no NaN/inf: null instead."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    if isinstance(x, np.generic):
        return _finite(x.item())
    return x


def _file_reports(report) -> list:
    return report.files or [report]


def _pdr_unreliable(report) -> str:
    for f in _file_reports(report):
        order = f.details.get("log_order") if f.details else None
        if order and order.get("pdr_reliable") is False:
            return (f"{f.path}: {order['lines_out_of_time_order']} lines out of time order (a reordered or "
                    f"merged log): a missing send line cannot be told from a drop")
    return ""


def _summary(report, tl: pd.DataFrame, cm: pd.DataFrame, unreliable: str) -> dict:
    """What was found in each input and what follows from it (report.json "summary", printed)."""
    files = []
    for f in _file_reports(report):
        d = {"path": f.path, "format": f.source, "read": f.read, "parsed": f.parsed,
             "skipped": dict(f.skipped), "messages": f.messages}
        if f.details.get("vantage"):
            v = f.details["vantage"]
            d["vantage"] = v["kind"]
            d["what_follows"] = v["what_follows"]
            d["hops"] = v.get("per_hop", [])
            if v.get("seen"):
                d["seen"] = v["seen"]
        elif f.source in ("thesis_log", "lab-run", "lab-dataset", "sim"):
            d["vantage"] = "proxy (instrumented)" if f.source != "sim" else "proxy (simulated)"
            d["what_follows"] = "the proxy's time components (eq. 3.1-3.3), sojourn, PDR, RFC 6076 metrics"
        if f.details.get("capture_set"):
            d["capture_set"] = f.details["capture_set"]
        if f.details.get("streaming"):
            d["engine"] = f.details["streaming"]["engine"]
        if f.details.get("messages_account"):
            d["sip_messages_not_in_timeline"] = f.details["messages_account"]["not_in_timeline"]
        if f.details.get("dispositions"):
            d["dispositions"] = f.details["dispositions"]
        warn = [n for n in f.notes if n.startswith("WARNING")]
        if warn:
            d["warnings"] = warn
        files.append(d)
    pdr = cm.loc[cm["metric"] == "PDR", "value"]
    return {"files": files, "pdr_percent": None if pdr.isna().all() else float(pdr.iloc[0]),
            "pdr_note": unreliable or str(cm.loc[cm["metric"] == "PDR", "definition"].iloc[0])}


def _order_key(tl: pd.DataFrame) -> np.ndarray:
    """Each row's first instant (float ns), rows without any last."""
    from sipperf.timeline import first_instant

    key = first_instant(tl)
    return np.where(np.isnan(key), np.inf, key)


def _figures(t_key: np.ndarray, arrays: dict, comp, out: Path, tx: pd.DataFrame | None = None) -> list[Path]:
    """components.png and timeline.png (or transactions.png at an endpoint).  ``t_key``: each
    row's first instant (float ns, :func:`_order_key`), ``arrays``: each component's values
    (float ns, NaN where absent) on the same rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    names = [c for c in arrays if np.isfinite(arrays[c]).any()]
    if not names:  # no time component (a capture at an endpoint): request -> response instead
        return _transaction_figure(tx, out, plt) if tx is not None and len(tx) else []
    allrow = comp[comp["msg_type"] == "ALL"].iloc[0]
    types = [t for t in comp["msg_type"] if t != "ALL"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(len(types), 1)
    x = np.arange(len(names))
    for i, t in enumerate(types):
        row = comp[comp["msg_type"] == t].iloc[0]
        ax.bar(x + i * width, [row.get(f"{c}_mean", np.nan) for c in names], width, label=t)
    ax.plot(x + 0.4 - width / 2, [allrow.get(f"{c}_mean", np.nan) for c in names], "k_", ms=20, label="ALL")
    ax.set_xticks(x + 0.4 - width / 2, names, rotation=30)
    ax.set_ylabel("mean (µs)")
    ax.set_yscale("log")
    ax.set_title("Time components per message type")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    p = out / "components.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)
    key = "sojourn" if np.isfinite(arrays.get("sojourn", np.array([np.nan]))).any() else (names[0] if names else None)
    if key is not None:
        t = t_key
        v = arrays[key]
        m = np.isfinite(v) & np.isfinite(t)
        fig, ax = plt.subplots(figsize=(8, 3.5))
        if m.any():
            step = max(1, int(m.sum() // 200_000))
            ax.plot((t[m][::step] - t[m].min()) / 1e9, v[m][::step] / 1e3, ",", alpha=0.5)
        ax.set_xlabel("time since first message (s)")
        ax.set_ylabel(f"{key} (µs)")
        ax.set_title(f"{key} over the run")
        fig.tight_layout()
        p = out / "timeline.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    return files


def _transaction_figure(tx: pd.DataFrame, out: Path, plt) -> list[Path]:
    """Median and p99 of request -> final response per transaction type, retransmissions apart."""
    t = tx[np.isfinite(tx["final_clean_median_us"]) | np.isfinite(tx["final_retrans_median_us"])]
    if not len(t):
        return []
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(t) + 1.8))
    y = np.arange(len(t))
    for off, kind, label in ((-0.2, "clean", "no retransmission"), (0.2, "retrans", "with retransmissions")):
        med = t[f"final_{kind}_median_us"].to_numpy(dtype="float64") / 1e3
        p99 = t[f"final_{kind}_p99_us"].to_numpy(dtype="float64") / 1e3
        ax.barh(y + off, med, 0.4, label=f"median, {label}")
        ax.plot(p99, y + off, "k|", ms=12)
    ax.set_yticks(y, t["method"])
    ax.set_xscale("log")
    ax.set_xlabel("request -> final response (ms, log scale); | = p99")
    ax.set_title("Transactions seen at the capture point")
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out / "transactions.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]


def _run(args: argparse.Namespace) -> int:
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    stream = True if args.stream else (False if args.in_memory else None)
    try:
        res = _analyze(args.paths, args.out, proxy=args.proxy, strict=args.strict, offered=args.offered,
                       stream=stream, workers=args.workers, scheduler=args.scheduler,
                       progress=True if args.progress else None)
    except IngestError as e:
        print(f"sipperf analyze: unusable input: {_safe(str(e))}", file=sys.stderr)
        return 2
    try:
        _print_summary(res)  # the answer first; the figures take a moment (matplotlib)
        if not args.no_figures:
            figs = res["draw_figures"]()
            if figs:
                print(_safe(f"figures: {', '.join(display_path(f) for f in figs)}"))
        sys.stdout.flush()
    except BrokenPipeError:  # `sipperf analyze ... | head`: the reader left; the files are written
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        if not args.no_figures:
            res["draw_figures"]()
    return 0


def _print_summary(res: dict) -> None:
    from sipperf.ingest.paths import display_path

    print(_safe(str(res["report"])))
    for f in res["summary"]["files"]:
        line = f"  {f['path']}: {f['format']}"
        if "vantage" in f:
            line += f", vantage {f['vantage']}: {f['what_follows']}"
        print(_safe(line))
        for h in f.get("hops", []):
            soj = h["sojourn_us"]
            med = f"{soj['median']:.1f} µs" if soj["median"] is not None else "n/a"
            pdr = f"{h['pdr_percent']:.2f} %" if h["pdr_percent"] is not None else "n/a"
            print(_safe(f"    hop {h['hop']} {h['proxy']}: {h['messages']} messages "
                        f"({', '.join(f'{k} {v}' for k, v in h['dispositions'].items())}); "
                        f"median sojourn {med}; PDR {pdr}"))
        if f.get("seen"):
            s = f["seen"]
            print(_safe(f"    {s['messages']} messages seen ({s['retransmissions']} retransmissions), "
                        f"{s['call_ids']} Call-IDs; see transactions.csv and counts.csv"))
        if f.get("sip_messages_not_in_timeline"):
            print(_safe(f"    SIP messages not in the timeline: {f['sip_messages_not_in_timeline']}"))
        for w in f.get("warnings", []):
            print(_safe(f"    {w}"))
        cs = f.get("capture_set")
        if cs:
            print(_safe(f"    one capture in {len(cs['files'])} files: "
                        + "; ".join(f"{Path(x['path']).name} read {x['read']}, parsed {x['parsed']}, "
                                    f"skipped {sum(x['skipped'].values())}" for x in cs["files"][:6])
                        + (" ..." if len(cs["files"]) > 6 else "")))
            print(_safe(f"    across files: {cs['pairing']['transactions_across_files']} transactions, "
                        f"{cs['pairing']['messages_paired_across_files']} messages paired"))
    pdr = res["summary"]["pdr_percent"]
    print(f"PDR: {'n/a' if pdr is None else f'{pdr:.3f} %'} ({_safe(res['summary']['pdr_note'])})")
    print(_safe(f"engine: {res.get('engine', 'in memory')}"))
    print(_safe(f"wrote {', '.join(display_path(f) for f in res['files'])}"))
    sys.stdout.flush()


def _safe(s: str) -> str:
    """Printable on any terminal encoding (a file name that is not UTF-8 is shown escaped)."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return s.encode(enc, "backslashreplace").decode(enc, "replace")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="analyse logs/captures: components.csv, calls.csv, report.json, figures",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories, any mix of formats")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--proxy", default=None,
                   help="proxy ip:port (IPv6: [addr]:port) for captures, several comma-separated for several "
                        "hops, caller side first (default: found from the traffic)")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first skipped record of any kind instead of counting it")
    p.add_argument("--offered", type=int, default=None, help="messages offered (PDR denominator)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    eng = p.add_mutually_exclusive_group()
    eng.add_argument("--stream", action="store_true",
                     help="stream the capture (bounded memory; default for one capture of 64 MB or more, "
                          "or one ring buffer's files)")
    eng.add_argument("--in-memory", action="store_true", help="build the whole timeline in memory")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="ring buffer (dumpcap -b files): read its files on N local Dask workers "
                        "(default: a local cluster for 256 MB or more; 0: no Dask)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="ring buffer: read its files on this Dask cluster (e.g. tcp://10.0.0.5:8786); "
                        "its workers need sipperf installed and the files at the same paths")
    p.add_argument("--progress", action="store_true", help="show a progress bar (Dask)")
    p.set_defaults(func=_run)
