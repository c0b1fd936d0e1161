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

LAB_RUNS = Path(__file__).resolve().parents[3] / "datasets" / "lab" / "runs"
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
