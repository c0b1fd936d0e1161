"""The account of an analysis: what was found in each input and what follows from it.

:func:`summary` is ``report.json``'s ``"summary"``; :func:`pdr_unreliable` the rule that blanks
the PDR when the input cannot tell a drop from a missing line; :func:`describe` the same
account as the lines ``sipperf analyze`` prints.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["summary", "pdr_unreliable", "blank_pdr", "describe", "input_checks", "clock_resolution_ns",
           "with_resolution"]


def _file_reports(report) -> list:
    return report.files or [report]


def pdr_unreliable(report) -> str:
    """Why the PDR cannot be computed from this input ("" when it can): a reordered or merged
    log, where a missing send line cannot be told from a drop."""
    for f in _file_reports(report):
        order = f.details.get("log_order") if f.details else None
        if order and order.get("pdr_reliable") is False:
            return (f"{f.path}: {order['lines_out_of_time_order']} lines out of time order (a reordered or "
                    f"merged log): a missing send line cannot be told from a drop")
    return ""


def blank_pdr(cm: pd.DataFrame, unreliable: str) -> None:
    """The PDR row of the calls table set to NaN, its definition to the reason (in place)."""
    import numpy as np

    if unreliable:
        i = cm.index[cm["metric"] == "PDR"]
        cm.loc[i, "value"] = np.nan
        cm.loc[i, "definition"] = f"not computed: {unreliable}"


def summary(report, cm: pd.DataFrame, unreliable: str) -> dict:
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
        checks = input_checks(f.details or {})
        if checks:
            d["checks"] = checks
        warn = [n for n in f.notes if n.startswith("WARNING")]
        if warn:
            d["warnings"] = warn
        files.append(d)
    pdr = cm.loc[cm["metric"] == "PDR", "value"]
    out = {"files": files, "pdr_percent": None if pdr.isna().all() else float(pdr.iloc[0]),
           "pdr_note": unreliable or str(cm.loc[cm["metric"] == "PDR", "definition"].iloc[0])}
    rep_in = (report.details or {}).get("repeated_inputs")
    if rep_in:
        out["repeated_inputs"] = rep_in
    return out


def _dur(ns) -> str:
    for unit, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= f:
            return f"{ns / f:g} {unit}"
    return f"{ns:g} ns"


def input_checks(details: dict) -> list[str]:
    """What the checks of a capture found (report.json "checks", printed under the file): the
    clock's resolution, copies read twice, impossible stamps and clock steps, egress copies
    stamped before their ingress, datagrams holding several messages."""
    out = []
    clock = details.get("clock") or {}
    if clock.get("resolution_ns") is not None:
        out.append(f"clock resolution {_dur(clock['resolution_ns'])}")
    d = details.get("duplicates")
    if d and d.get("tcp_segments"):
        out.append(f"{d['tcp_segments']} duplicate TCP segments (copies of the one before them) skipped")
    if d and d.get("messages"):
        hep = f", {d['hep_copies']} of them HEP copies" if d.get("hep_copies") else ""
        out.append(f"{d['messages']} duplicate copies read once (same datagram within {d['window_ms']:g} ms, "
                   f"{d['mean_gap_us']:.3f} µs apart on average{hep})")
    for k, c in (clock.get("checks") or {}).items():
        if "stray_stamps" in c:
            out.append(f"interface {k}: {sum(c['stray_stamps'].values())} impossible timestamps "
                       f"({', '.join(f'{n} {r}' for r, n in c['stray_stamps'].items())}) repaired")
        if "clock_steps_back" in c:
            s = c["clock_steps_back"]
            out.append(f"interface {k}: the clock stepped back {s['count']} time(s), by up to "
                       f"{s['largest_ms']:.3f} ms: undone")
        if "file_order_steps_back" in c:
            out.append(f"interface {k}: {c['file_order_steps_back']['count']} step(s) back to an earlier "
                       "recording (merged files): read in time order")
        if "steps_back_left" in c:
            out.append(f"interface {k}: {c['steps_back_left']['count']} step(s) back by up to "
                       f"{c['steps_back_left']['largest_ms']:.3f} ms left as stamped")
        if "not_in_time_order" in c:
            out.append(f"interface {k}: records not in time order: read in time order")
    if details.get("egress_before_ingress"):
        out.append(f"{details['egress_before_ingress']} messages with the egress copy stamped before the "
                   "ingress copy: relayed, sojourn left out")
    if details.get("time_unknown"):
        out.append(f"{details['time_unknown']} messages with a repaired stamp or a clock step between their "
                   "copies: counted, their time in the proxy left out")
    multi = (details.get("transports") or {}).get("udp_several_messages")
    if multi:
        out.append(f"{multi['datagrams']} UDP datagrams held several SIP messages: "
                   f"{multi['further_messages']} more read")
    return out


def describe(report, summ: dict, engine: str) -> list[str]:
    """The account in lines of text: the ingest report, each input's vantage and what follows,
    per hop, what was seen at an endpoint, warnings, a ring buffer's files, the PDR, the engine."""
    lines = [str(report)]
    for f in summ["files"]:
        line = f"  {f['path']}: {f['format']}"
        if "vantage" in f:
            line += f", vantage {f['vantage']}: {f['what_follows']}"
        lines.append(line)
        for h in f.get("hops", []):
            soj = h["sojourn_us"]
            med = f"{soj['median']:.1f} µs" if soj["median"] is not None else "n/a"
            pdr = f"{h['pdr_percent']:.2f} %" if h["pdr_percent"] is not None else "n/a"
            lines.append(f"    hop {h['hop']} {h['proxy']}: {h['messages']} messages "
                         f"({', '.join(f'{k} {v}' for k, v in h['dispositions'].items())}); "
                         f"median sojourn {med}; PDR {pdr}")
        if f.get("seen"):
            s = f["seen"]
            lines.append(f"    {s['messages']} messages seen ({s['retransmissions']} retransmissions), "
                         f"{s['call_ids']} Call-IDs; see transactions.csv and counts.csv")
        if f.get("sip_messages_not_in_timeline"):
            lines.append(f"    SIP messages not in the timeline: {f['sip_messages_not_in_timeline']}")
        for c in f.get("checks", []):
            lines.append(f"    check: {c}")
        for w in f.get("warnings", []):
            lines.append(f"    {w}")
        cs = f.get("capture_set")
        if cs:
            lines.append(f"    one capture in {len(cs['files'])} files: "
                         + "; ".join(f"{Path(x['path']).name} read {x['read']}, parsed {x['parsed']}, "
                                     f"skipped {sum(x['skipped'].values())}" for x in cs["files"][:6])
                         + (" ..." if len(cs["files"]) > 6 else ""))
            lines.append(f"    across files: {cs['pairing']['transactions_across_files']} transactions, "
                         f"{cs['pairing']['messages_paired_across_files']} messages paired")
    coarse = summ.get("below_clock_resolution")
    if coarse:
        lines.append(f"  below the clock's resolution ({coarse['resolution_us']:g} µs, more than a tenth of the "
                     f"median): {', '.join(coarse['components'])} -- the clock cannot resolve them; their medians "
                     "and percentiles are given to its step only; recapture with a finer clock (ns or µs stamps)")
    for r in summ.get("repeated_inputs", []):
        lines.append(f"  {r['path']}: {r['why']} as {r['same_as']}: read once")
    pdr = summ["pdr_percent"]
    lines.append(f"PDR: {'n/a' if pdr is None else f'{pdr:.3f} %'} ({summ['pdr_note']})")
    lines.append(f"engine: {engine}")
    return lines


def clock_resolution_ns(report) -> float | None:
    """The coarsest clock resolution among the captures of the report (ns), None for inputs
    that carry none (logs, tidy tables, simulations)."""
    res = [f.details["clock"]["resolution_ns"] for f in _file_reports(report)
           if f.details and (f.details.get("clock") or {}).get("resolution_ns") is not None]
    if not res and report.details and (report.details.get("clock") or {}).get("resolution_ns") is not None:
        res = [report.details["clock"]["resolution_ns"]]
    return max(res) if res else None


def with_resolution(comp: pd.DataFrame, res_ns: float | None) -> pd.DataFrame:
    """The components table with the clock's resolution beside every component
    (``clock_resolution_us``) and, where the resolution is coarser than a tenth of a component's
    median, that component named in ``below_clock_resolution`` and its median and p99 given to
    the resolution only (no digit the clock does not hold)."""
    import numpy as np

    if comp is None or res_ns is None or not len(comp):
        return comp
    comp = comp.copy()
    res_us = float(res_ns) / 1e3
    comp["clock_resolution_us"] = res_us
    below = [[] for _ in range(len(comp))]
    for col in [c for c in comp.columns if c.endswith("_median")]:
        name = col[: -len("_median")]
        med = comp[col].to_numpy(dtype=float)
        coarse = np.isfinite(med) & (res_us > 0.1 * np.abs(med))
        if res_us > 0.001:  # coarser than 1 ns: percentiles to the clock's step
            for q in (col, f"{name}_p99"):
                if q in comp.columns:
                    v = comp[q].to_numpy(dtype=float)
                    comp[q] = np.where(np.isfinite(v), np.round(v / res_us) * res_us, v)
        for i in np.flatnonzero(coarse):
            below[i].append(name)
    comp["below_clock_resolution"] = [",".join(b) for b in below]
    return comp
