"""``build_report(paths, out)``: read the inputs run by run, measure each, fit the models, write
the CSVs, the JSON and the self-contained HTML report.

Each run is read with :func:`sipperf.analysis.analyze` and its tables written with
``Analysis.write`` (so its ``DIR/runs/<run>/`` holds what ``sipperf analyze`` writes, figures
apart), measured (:func:`sipperf.report.runs.measure`) and fitted together with the others
(:func:`sipperf.fit.fit_all`).  Top level of ``DIR``:

* ``index.html`` -- the report (plotly.js inlined: opens from disk, offline);
* ``runs.csv`` -- one row per run: rates, steady window, Q, PDR, SCV, utilisation, predictions;
* ``components.csv``, ``calls.csv``, ``transactions.csv``, ``counts.csv`` -- every run's tables as
  ``analyze`` writes them, one after the other with a leading ``run`` column;
* ``components_ci.csv`` -- per run, component and message type: mean with its batch-means 95 % CI,
  median and p99 over the steady-state window;
* ``fit.json`` -- the fitted constants (service demand, α(λ), β, C_{1,1}) with 95 % intervals and
  the runs each came from (``sipperf model ... --fit fit.json`` reads it);
* ``report.json`` -- the ingest account of every run, the verdict, the warnings, the fit.

An input that cannot be read is listed in the report with its reason (or, with ``strict``, stops
everything); only when no run at all can be read is it an error (exit code 2 in the CLI).

Any capture ``analyze`` reads is a run: one of 64 MB or more (and a ring buffer's files, which
form one run) is streamed in bounded memory (``stream``: force it either way) and measured on
the streaming engine's caller-side rows (:func:`sipperf.analysis.stream.measure_table`: about
48 bytes per message, plus 45 for the null instant columns while it is measured, against about
1.6 kB per packet on the in-memory path), with the same numbers; only the ladder diagrams of
the slowest calls need the whole timeline.
"""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sipperf.report.result import Report, RunResult, clean, fit_json, runs_table
from sipperf.report.runs import group_inputs, measure, parse_gap, run_meta, split_timeline

__all__ = ["build_report", "fit_runs", "fit_summary", "out_dir"]


def out_dir(path) -> Path:
    """Create ``path`` and prove it is writable (an IngestError naming it otherwise): the same
    check as ``sipperf analyze --out``."""
    from sipperf.analysis import prepare_out_dir

    return prepare_out_dir(path)


def _safe(label: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "run"
    return s[:80]


def _with_instants(tl: pd.DataFrame | None) -> pd.DataFrame | None:
    """A streamed capture's rows (:meth:`sipperf.analysis.Analysis.measure_frame`) with the instants
    a capture never has (t_stack ... t_sip_out) as null columns, so the per-run code reads them as
    it reads a timeline (one shared all-null array: no copy per column)."""
    from sipperf.timeline import INSTANTS

    if tl is None:
        return None
    miss = [c for c in INSTANTS if c not in tl.columns]
    if not miss:
        return tl
    na = pd.array(np.zeros(len(tl), np.int64), dtype="Int64")
    na[:] = pd.NA
    return tl.assign(**{c: na for c in miss})


def _tables(tl: pd.DataFrame, out: Path | None, offered=None) -> dict[str, pd.DataFrame]:
    """The tables ``analyze`` writes, for a part of a file's timeline (a split by run_id or gap)."""
    from sipperf import calls, components

    t = {"components": components.summary(tl, unit="us"), "calls": calls.metrics(tl, offered=offered),
         "transactions": calls.transactions(tl), "counts": calls.message_counts(tl)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for k, v in t.items():
            v.to_csv(out / f"{k}.csv", index=False)
    return t


def build_report(paths, out, *, group_by: str = "auto", proxy=None, strict: bool = False,
                 offered: int | None = None, threads: int | None = None, cores: int | None = None,
                 processors: int | None = None, buffer_pkts: float | None = None, n_slowest: int = 5,
                 n_boot: int = 200, seed: int = 0, html: bool = True, title: str | None = None,
                 cpu=None, stream: bool | None = None) -> Report:
    """Everything ``sipperf report`` does (see the module docstring); returns the :class:`Report`.
    ``cpu``: a CSV of the proxy's CPU accounting (:func:`sipperf.report.runs.read_cpu_file`).
    ``stream``: as for :func:`sipperf.analysis.analyze` (None: a capture of 64 MB or more is
    streamed; True/False force it); a streamed run is measured on its caller-side rows
    (:meth:`~sipperf.analysis.result.Analysis.measure_frame`), with the same numbers."""
    from sipperf import fit as fitmod
    from sipperf.analysis import analyze
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [str(p) for p in paths]
    if not paths:
        raise IngestError("(no input)", "PATH", "give at least one file or directory")
    out = out_dir(out)
    gap = parse_gap(group_by)
    from sipperf.report.runs import is_summary_dataset, summary_measures
    from sipperf.timeline import IngestReport

    runs: list[RunResult] = []
    summaries = [p for p in paths if is_summary_dataset(p)]
    for p in summaries:
        try:
            for rid, meta, m in summary_measures(p, fit_over={"threads": threads, "k_pkts": buffer_pkts}):
                acc = IngestReport(source="lab-summary", path=display_path(Path(p) / "runs.csv"), read=1, parsed=1)
                runs.append(RunResult(rid, [p], None, acc, {}, meta, m))
        except (OSError, ValueError, KeyError) as e:
            raise IngestError(display_path(p), "runs.csv", f"not a readable summary dataset: {e}") from None
    paths = [p for p in paths if p not in summaries]
    groups, ignored = group_inputs(paths, group_by) if paths else ([], [])
    failed: list[dict] = []
    used: set[str] = set()
    for g in groups:
        safe = _safe(g.label)
        while safe in used:
            safe += "_"
        used.add(safe)
        tmp = None
        try:
            target = out / "runs" / safe
            res = analyze(g.paths, proxy=proxy, strict=strict, offered=offered, stream=stream, measure_rows=True)
            res.write(target)
        except IngestError as e:
            if strict or (len(groups) == 1 and not runs):
                raise
            failed.append({"run": g.label, "paths": [display_path(p) for p in g.paths], "error": str(e)})
            shutil.rmtree(out / "runs" / safe, ignore_errors=True)
            continue
        meta = run_meta(g.paths)
        sig = ((res.report.details or {}).get("transports") or {}).get("tcp_signals")
        if sig:
            meta["tcp_signals"] = sig
        tls = ((res.report.details or {}).get("transports") or {}).get("tls") or {}
        unread = [g for g in tls.get("legs", []) if not g.get("segments_decrypted")]
        if unread:
            meta["tls_unread"] = unread
        if tls:
            meta["tls_handshakes"] = {"full": tls.get("handshakes_full", 0), "resumed": tls.get("handshakes_resumed", 0)}
            meta["tls_hello_waits"] = tls.get("hello_waits") or {}
        for k, v in (("threads", threads), ("cores", cores), ("processors", processors), ("k_pkts", buffer_pkts)):
            if v is not None:
                meta[k] = v
        frame = _with_instants(res.measure_frame())
        parts = split_timeline(frame, g.label, gap,
                               by_run_id=(group_by or "auto") in ("auto", "file") and len(g.paths) == 1)
        if len(parts) == 1:
            runs.append(RunResult(g.label if parts[0][0] == g.label else parts[0][0], g.paths, frame,
                                  res.report, {k: getattr(res, k) for k in ("components", "calls", "transactions",
                                                                            "counts")},
                                  meta, None, out=target))
        else:
            shutil.rmtree(target, ignore_errors=True)
            for lab, tl in parts:
                s2 = _safe(lab)
                while s2 in used:
                    s2 += "_"
                used.add(s2)
                runs.append(RunResult(lab, g.paths, tl, res.report, _tables(tl, out / "runs" / s2, offered),
                                      meta, None, out=out / "runs" / s2))
    if not runs:
        raise IngestError(";".join(display_path(p) for p in paths), "input",
                          ("no run could be read: " + "; ".join(f["error"] for f in failed)) if failed
                          else "no run found (no capture, log or run directory in it)")
    for r in runs:
        if r.timeline is None:   # a stored summary: measured already
            continue
        try:
            r.measure = measure(r.label, r.timeline, r.meta)
        except Exception as e:  # a run the measurement cannot handle is shown as such, never a traceback
            r.error = f"could not be measured: {type(e).__name__}: {e}"
            r.measure = None
        if r.measure is not None and r.out is not None and r.measure.components is not None:
            r.measure.components.to_csv(r.out / "components_ci.csv", index=False)
    measures = [r.measure for r in runs if r.measure is not None]
    from sipperf.report.runs import apply_cpu_rows, read_cpu_file, summary_probes

    cpu_left_out: list[str] = []
    cpu_points = apply_cpu_rows(read_cpu_file(cpu), measures, cpu_left_out) if cpu is not None else []
    probes = []
    for p in summaries:
        try:
            probes += summary_probes(p)
        except (OSError, ValueError) as e:
            raise IngestError(display_path(p), "probes.csv", f"not readable: {e}") from None
    ratio = [m.lam_pps / m.lam_cps for m in measures
             if math.isfinite(m.lam_cps) and m.lam_cps > 0 and math.isfinite(m.lam_pps) and m.lam_pps > 0]
    mpc = float(np.median(ratio)) if ratio else 6.0
    fit, fit_error = None, ""
    inputs = [m.fit_input for m in measures if m.has_sojourn]
    if inputs:
        try:
            fit = fitmod.fit_all(inputs, msgs_per_call=mpc, n_boot=n_boot, seed=seed,
                                 processors=processors, cores=cores, probes=probes, cpu_points=cpu_points)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            fit_error = f"{type(e).__name__}: {e}"
            fit = None
    from sipperf.report.verdict import verdict as make_verdict

    try:
        v = make_verdict(measures, fit, mpc)
    except Exception as e:  # noqa: BLE001
        v = {"headline": [], "cannot": [f"the verdict could not be formed: {type(e).__name__}: {e}"],
             "warnings": [], "numbers": {}, "models": {}}
    if cpu_left_out:
        v.setdefault("warnings", []).append(
            f"--cpu {display_path(cpu)}: {len(cpu_left_out)} row(s) name runs not given here, left out: "
            + ", ".join(cpu_left_out[:8]) + (" …" if len(cpu_left_out) > 8 else ""))
    rep = Report(runs, failed, ignored, fit, fit_error, v, mpc,
                 title=title or ("sipperf report: " + ", ".join(Path(p).name or p for p in paths[:3])
                                 + (" …" if len(paths) > 3 else "")))
    rep.files = _write_outputs(rep, out)
    if html:
        from sipperf.report.html import render

        p = out / "index.html"
        p.write_text(render(rep, n_slowest=n_slowest), encoding="utf-8")
        rep.html = p
        rep.files.append(p)
    return rep


def fit_runs(paths, *, n_boot: int = 0, seed: int = 0, **meta_over):
    """The fit alone (:func:`sipperf.fit.fit_all`) on runs given as paths, one run per path (a
    summary dataset such as ``datasets/lab/long`` gives one run per stored point): read
    (:func:`sipperf.analysis.analyze`, streamed when large), measured, fitted; no files
    written.  ``meta_over`` (``threads``, ``cores``, ``processors``, ``k_pkts``) overrides what
    the runs' metadata say.  For chapters
    and scripts that need the constants only; ``build_report`` does the same and more."""
    from sipperf import fit as fitmod
    from sipperf.analysis import analyze
    from sipperf.report.runs import is_summary_dataset, summary_measures, summary_probes

    inputs, probes = [], []
    for p in paths:
        if is_summary_dataset(p):      # stored per-point summaries (the lab's long recording)
            probes += summary_probes(p)
            over = {k: meta_over.get(k) for k in ("threads", "cores", "processors", "k_pkts")}
            for _, _, m in summary_measures(p, fit_over=over):
                if m.has_sojourn:
                    inputs.append(m.fit_input)
            continue
        tl = _with_instants(analyze([p], measure_rows=True).measure_frame())   # streamed if large
        meta = {**run_meta([str(p)]), **{k: v for k, v in meta_over.items() if v is not None}}
        m = measure(Path(p).name, tl, meta)
        if m.has_sojourn:
            inputs.append(m.fit_input)
    ratio = [i.lam_pps / i.lam_cps for i in inputs if i.lam_cps and math.isfinite(i.lam_cps) and i.lam_pps > 0]
    return fitmod.fit_all(inputs, msgs_per_call=float(np.median(ratio)) if ratio else 6.0, n_boot=n_boot, seed=seed,
                          processors=meta_over.get("processors"), cores=meta_over.get("cores"), probes=probes)


def fit_summary(paths, **options) -> dict[str, Any]:
    """What ``sipperf fit`` prints: :func:`fit_json` of the report on ``paths`` plus its verdict,
    with nothing left on disk (the runs are read into a temporary directory, no HTML, no
    ladders).  ``options``: those of :func:`build_report` (``group_by``, ``proxy``, ``strict``,
    ``offered``, ``threads``, ``cores``, ``processors``, ``buffer_pkts``, ``n_boot``, ``seed``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sipperf-fit-") as tmp:
        rep = build_report(paths, tmp, html=False, n_slowest=0, **options)
    d = fit_json(rep)
    d["verdict"] = rep.verdict
    return d


def _write_outputs(rep: Report, out: Path) -> list[Path]:
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    files = []

    def w(name: str, fn) -> None:
        p = out / name
        try:
            fn(p)
        except OSError as e:
            raise IngestError(display_path(p), "--out", f"cannot write: {e.strerror or e}") from None
        files.append(p)

    w("runs.csv", lambda p: runs_table(rep).to_csv(p, index=False))
    for name in ("components", "calls", "transactions", "counts"):
        parts = []
        for r in rep.runs:
            t = r.tables.get(name)
            if t is not None and len(t):
                t = t.copy()
                t.insert(0, "run", r.label)
                parts.append(t)
        w(f"{name}.csv", lambda p, parts=parts: (pd.concat(parts, ignore_index=True) if parts
                                                  else pd.DataFrame()).to_csv(p, index=False))
    ci = [r.measure.components.assign(run=r.label) for r in rep.runs
          if r.measure is not None and r.measure.components is not None]
    w("components_ci.csv", lambda p: (pd.concat(ci, ignore_index=True)[["run"] + [c for c in ci[0].columns if c != "run"]]
                                      if ci else pd.DataFrame()).to_csv(p, index=False))
    w("fit.json", lambda p: p.write_text(json.dumps(fit_json(rep), indent=2, default=str)))
    body = {
        "format": "sipperf-report-v1", "title": rep.title, "verdict": rep.verdict,
        "runs": [{"run": r.label, "inputs": [display_path(x) for x in r.paths], "error": r.error,
                  "account": r.account.to_dict() if r.account is not None else None,
                  "warnings": r.measure.warnings if r.measure else []} for r in rep.runs],
        "failed_inputs": rep.failed, "ignored_files": rep.ignored, "fit_error": rep.fit_error,
        "fit": fit_json(rep)}
    w("report.json", lambda p: p.write_text(json.dumps(clean(body), indent=2, default=str)))
    return files
