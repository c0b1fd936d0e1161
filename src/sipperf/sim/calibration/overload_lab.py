"""Overload runs of the real proxy (``sipperf lab run``), summarised for chapter 11.

The chapter reads every run directory ``datasets/lab/runs/overload-*`` (any other root and
pattern can be given).  A run directory is what ``sipperf lab run --out DIR`` writes; this module
needs only its ``meta.json``:

* ``config``: ``rate_cps`` and ``calls`` (required); ``retransmissions`` (SIPp and Kamailio
  retransmit unless ``--no-retransmissions``; default true), ``guard`` (``none``, ``ratelimit``,
  ``pike``; default ``none``) and ``guard_cps``;
* ``sipp_stats``: the UAC's last ``-trace_stat`` row (required: ``SuccessfulCall(C)``,
  ``FailedCall(C)``, ``Retransmissions(C)``); ``sipp_uas_stats`` the UAS's (optional);
* ``sipp_counts.uac``: SIPp's per-message counters (``-trace_counts``), from which the calls that
  completed (the 200 to the BYE) and the 503s are counted — SIPp's own "successful call" also
  counts a call its scenario ended after a 503; without them, ``SuccessfulCall(C)`` is used;
* ``proxy_xlog_in`` (messages the proxy read) and ``proxy_socket.drops`` (its socket's drops), or
  else the machine-wide ``udp_snmp_delta`` ``RcvbufErrors``;
* ``idle_check.busy``: whether other processes loaded the machine during the run.

A run that lacks a required field is not summarised: it is listed with the reason.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

LAB_RUNS = Path(__file__).resolve().parents[4] / "datasets" / "lab" / "runs"
#: the long recording's overload table (``datasets/lab/record.py --plan full``, sipperf.lab.store)
LAB_LONG_OVERLOAD = LAB_RUNS.parent / "long" / "overload.csv"
#: the protocol recording's (``record.py --plan protocol --series overload``): replicated points
#: from 0.5 to 3 x the knee, one row per guard and load (sipperf.lab.store.overload_table)
LAB_PROTOCOL_OVERLOAD = LAB_RUNS.parent / "protocol" / "overload.csv"
_COUNT = re.compile(r"^(\d+)_(\d{3}|[A-Z]+)_(Recv|Sent)$")


def _num(d: dict, key: str) -> float:
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{key} is not a number: {v!r}")
    return float(v)


def summarise_run(run_dir: str | Path) -> dict:
    """One overload run as a flat dict (see the module docstring); ValueError if unusable."""
    run_dir = Path(run_dir)
    try:
        meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ValueError("no meta.json") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"meta.json unreadable: {e}") from e
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict) \
            or not isinstance(meta.get("sipp_stats"), dict):
        raise ValueError("meta.json lacks the objects 'config' and 'sipp_stats'")
    cfg, uac = meta["config"], meta["sipp_stats"]
    try:
        rate, calls = _num(cfg, "rate_cps"), _num(cfg, "calls")
        successful, failed = _num(uac, "SuccessfulCall(C)"), _num(uac, "FailedCall(C)")
        retrans_uac = _num(uac, "Retransmissions(C)")
    except KeyError as e:
        raise ValueError(f"meta.json lacks {e.args[0]}") from e
    if not (math.isfinite(rate) and rate > 0 and calls >= 1):
        raise ValueError(f"config rate_cps={rate} calls={calls} make no run")
    counts = (meta.get("sipp_counts") or {}).get("uac") or {}
    recv_200 = sorted((int(m.group(1)), v) for k, v in counts.items()
                      if (m := _COUNT.match(k)) and m.group(2) == "200" and m.group(3) == "Recv")
    completed = float(recv_200[-1][1]) if recv_200 else successful   # the 200 to the BYE
    rejected = float(sum(v for k, v in counts.items()
                         if (m := _COUNT.match(k)) and m.group(2) == "503" and m.group(3) == "Recv"))
    uas = meta.get("sipp_uas_stats") or {}
    retrans_uas = float(uas.get("Retransmissions(C)", 0) or 0)
    sock = meta.get("proxy_socket") or {}
    drops = sock.get("drops")
    if drops is None:
        drops = (meta.get("udp_snmp_delta") or {}).get("RcvbufErrors", math.nan)
    read = meta.get("proxy_xlog_in", math.nan)
    offered_msgs = float(read) + float(drops) if read is not None else math.nan
    busy = (meta.get("idle_check") or {}).get("busy")
    return {
        "run_id": run_dir.name, "offered_cps": rate, "calls": int(calls),
        "retransmissions": bool(cfg.get("retransmissions", True)),
        "guard": str(cfg.get("guard") or "none"), "guard_cps": float(cfg.get("guard_cps") or 0.0),
        "completed": int(completed), "rejected_503": int(rejected),
        "sipp_successful": int(successful), "sipp_failed": int(failed),
        "completed_share": completed / calls,
        "goodput_cps": rate * completed / calls,
        "retransmissions_uac": int(retrans_uac), "retransmissions_uas": int(retrans_uas),
        "proxy_read": float(read) if read is not None else math.nan, "proxy_drops": float(drops),
        "drop_share": float(drops) / offered_msgs if offered_msgs and offered_msgs > 0 else math.nan,
        "amplification": offered_msgs / (6 * calls),
        "load_seconds": float(meta.get("load_seconds") or math.nan),
        "machine_busy": bool(busy) if busy is not None else None,
        "start_utc": meta.get("start_utc"),
    }


def _pos(v) -> float:
    """A positive finite number, else NaN (a table without the column, or a zero placeholder)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) and f > 0 else math.nan


def read_overload_runs(root: str | Path = LAB_RUNS, pattern: str = "overload-*"
                       ) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Every run directory under ``root`` matching ``pattern``: (one row per usable run, sorted by
    guard, retransmissions and offered rate; [(run, why it was left out)])."""
    rows, problems = [], []
    root = Path(root)
    for d in sorted(root.glob(pattern)) if root.is_dir() else []:
        if not d.is_dir():
            continue
        try:
            rows.append(summarise_run(d))
        except ValueError as e:
            problems.append((d.name, str(e)))
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(["guard", "retransmissions", "offered_cps"]).reset_index(drop=True)
    return df, problems


def read_long_overload(csv: str | Path = LAB_LONG_OVERLOAD) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The long recording's ``overload.csv`` (one row per point, columns
    :data:`sipperf.lab.store.OVERLOAD_COLUMNS`) in the columns of :func:`summarise_run`, so the
    chapter shows both kinds side by side: ([rows], [(run, why it was left out)]).  That plan
    always runs SIPp with its retransmissions on; SIPp counts a call its scenario ended after a
    503 as successful, so the completed calls are ``successful_calls - rejected_503`` (minus
    ``bye_refused_503``, the BYEs an all-request limit refused, where the table has them).  The
    protocol recording's table reads the same way, with its ``knee_cps``, ``fraction_of_knee``,
    ``replicates`` and ``goodput_ci_hw_cps`` kept (NaN where a table lacks them).  A missing
    file is no rows."""
    csv = Path(csv)
    if not csv.is_file():
        return pd.DataFrame(), []
    d = pd.read_csv(csv)
    need = ["run_id", "guard", "rate_cps", "calls_offered", "successful_calls", "rejected_503",
            "uac_retransmissions", "proxy_read", "proxy_socket_drops"]
    missing = [c for c in need if c not in d.columns]
    if missing:
        return pd.DataFrame(), [(csv.name, f"lacks the columns {missing}")]
    rows, problems = [], []
    for r in d.to_dict("records"):
        calls, rate = r["calls_offered"], r["rate_cps"]
        if not (pd.notna(calls) and calls >= 1 and pd.notna(rate) and rate > 0):
            problems.append((str(r["run_id"]), f"rate_cps={rate} calls_offered={calls} make no run"))
            continue
        bye = r.get("bye_refused_503")
        completed = (float(r["successful_calls"]) - float(r["rejected_503"])
                     - (float(bye) if pd.notna(bye) else 0.0))
        read, drops = float(r["proxy_read"]), float(r["proxy_socket_drops"])
        seen = read + drops
        rows.append({
            "run_id": str(r["run_id"]), "offered_cps": float(rate), "calls": int(calls),
            "retransmissions": True, "guard": str(r["guard"]),
            "guard_cps": float(r.get("guard_cps") or 0.0) if pd.notna(r.get("guard_cps")) else 0.0,
            "completed": int(completed), "rejected_503": int(r["rejected_503"]),
            "sipp_successful": int(r["successful_calls"]),
            "sipp_failed": int(r["failed_calls"]) if pd.notna(r.get("failed_calls")) else 0,
            "completed_share": completed / calls,
            "goodput_cps": float(r["goodput_cps"]) if pd.notna(r.get("goodput_cps")) else rate * completed / calls,
            "retransmissions_uac": int(r["uac_retransmissions"]),
            "retransmissions_uas": int(r["uas_retransmissions"]) if pd.notna(r.get("uas_retransmissions")) else 0,
            "proxy_read": read, "proxy_drops": drops,
            "drop_share": drops / seen if seen > 0 else math.nan,
            "amplification": seen / (6 * calls),
            "load_seconds": float(r["offered_seconds"]) if pd.notna(r.get("offered_seconds")) else math.nan,
            "machine_busy": bool(r["machine_busy"]) if pd.notna(r.get("machine_busy")) else None,
            "start_utc": r.get("start_utc"),
            "knee_cps": _pos(r.get("knee_cps")), "fraction_of_knee": _pos(r.get("fraction_of_knee")),
            "replicates": int(r["replicates"]) if pd.notna(r.get("replicates")) else 1,
            "goodput_ci_hw_cps": float(r["goodput_ci_hw_cps"]) if pd.notna(r.get("goodput_ci_hw_cps")) else math.nan,
            "generator_bound": bool(r["generator_bound"]) if pd.notna(r.get("generator_bound")) else None,
        })
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(["guard", "offered_cps"]).reset_index(drop=True)
    return df, problems


def read_overload(root: str | Path = LAB_RUNS, long_csv: str | Path = LAB_LONG_OVERLOAD,
                  protocol_csv: str | Path = LAB_PROTOCOL_OVERLOAD
                  ) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Every overload run the lab has: the run directories under ``root``, the long recording's
    table and the protocol recording's, one frame, with a column ``source`` (``runs``, ``long``
    or ``protocol``)."""
    a, pa = read_overload_runs(root)
    b, pb = read_long_overload(long_csv)
    c, pc = read_long_overload(protocol_csv)
    parts = [f.assign(source=s) for f, s in ((a, "runs"), (b, "long"), (c, "protocol")) if len(f)]
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if len(df):
        df = df.sort_values(["guard", "retransmissions", "offered_cps"]).reset_index(drop=True)
    return df, pa + pb + pc
