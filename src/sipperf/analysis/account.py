"""The account of an analysis: what was found in each input and what follows from it.

:func:`summary` is ``report.json``'s ``"summary"``; :func:`pdr_unreliable` the rule that blanks
the PDR when the input cannot tell a drop from a missing line; :func:`describe` the same
account as the lines ``sipperf analyze`` prints.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["summary", "pdr_unreliable", "blank_pdr", "describe"]


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
        warn = [n for n in f.notes if n.startswith("WARNING")]
        if warn:
            d["warnings"] = warn
        files.append(d)
    pdr = cm.loc[cm["metric"] == "PDR", "value"]
    return {"files": files, "pdr_percent": None if pdr.isna().all() else float(pdr.iloc[0]),
            "pdr_note": unreliable or str(cm.loc[cm["metric"] == "PDR", "definition"].iloc[0])}


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
    pdr = summ["pdr_percent"]
    lines.append(f"PDR: {'n/a' if pdr is None else f'{pdr:.3f} %'} ({summ['pdr_note']})")
    lines.append(f"engine: {engine}")
    return lines
