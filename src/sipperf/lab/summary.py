"""What the ``sipperf lab`` commands report, and the options they turn into a run's settings.

* :func:`tuning_from_options` -- the scheduling options of ``lab run`` as a
  :class:`~sipperf.lab.knobs.Tuning` dict (None: leave the scheduler alone);
* :func:`run_summary` -- a finished run directory in a few numbers (calls, drops, machine load,
  placement, the proxy's and the generator's CPU seconds, whether the generator was the bottleneck);
* :func:`join_run` -- a run directory joined into ``timeline.parquet`` + ``ingest_report.json``;
* :func:`knobs_lines` / :func:`restore_lines` -- the knob probe and a restore, as text lines.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["tuning_from_options", "run_summary", "join_run", "knobs_lines", "restore_lines"]


def tuning_from_options(*, policy=None, priority: int = 50, nice=None, slice_us=None, cgroup_weight=None,
                        knobs: list[str] | None = None, name: str | None = None) -> dict | None:
    """A :class:`~sipperf.lab.knobs.Tuning` as a dict, or None when no option asks for one;
    ``knobs``: FILE=VALUE strings (a ValueError for anything else)."""
    if not (any(x is not None for x in (policy, nice, slice_us, cgroup_weight)) or knobs):
        return None
    files = {}
    for kv in knobs or []:
        if "=" not in kv:
            raise ValueError(f"--knob wants FILE=VALUE, not {kv!r}")
        k, v = kv.split("=", 1)
        files[k] = v
    return {"name": name or "cli", "policy": policy or "other", "priority": priority, "nice": nice or 0,
            "slice_us": slice_us, "cgroup_weight": cgroup_weight, "files": files}


def run_summary(run_dir) -> dict:
    """The run directory, SIPp's successful / failed calls, the kernel's receive-buffer errors,
    the proxy socket's drops, the other processes' CPU share, whether the machine was busy, the
    placement, CPU seconds of proxy and generator over the load window, the generator's verdict
    and what the run skipped (from its ``meta.json``)."""
    meta = json.loads((Path(run_dir) / "meta.json").read_text())
    st = meta.get("sipp_stats", {})
    return {
        "run_dir": str(run_dir),
        "successful_calls": st.get("SuccessfulCall(C)"),
        "failed_calls": st.get("FailedCall(C)"),
        "rcvbuf_errors": meta["udp_snmp_delta"].get("RcvbufErrors"),
        "proxy_socket_drops": meta.get("proxy_socket", {}).get("drops"),
        "other_processes_cpu": meta.get("load_samples", {}).get("foreign_mean"),
        "machine_busy": meta.get("load_samples", {}).get("busy"),
        "placement": (meta.get("placement") or {}).get("mode"),
        "placement_ok": ((meta.get("placement") or {}).get("check") or {}).get("ok"),
        "proxy_cpu_s": (meta.get("proxy_cpu") or {}).get("cpu_s"),
        "generator_cpu_s": (meta.get("generator_cpu") or {}).get("cpu_s"),
        "load_window_s": (meta.get("proxy_cpu") or {}).get("window_s"),
        "generator_bound": (meta.get("generator") or {}).get("bound"),
        "generator_bound_why": (meta.get("generator") or {}).get("why"),
        "skipped": meta["skipped"],
    }


def join_run(run_dir):
    """Read a run directory (:func:`sipperf.ingest.lab_runs.run.read_run`) and write its timeline
    (``timeline.parquet``) and ingest account (``ingest_report.json``) next to it; the account."""
    from sipperf.ingest.lab_runs.run import read_run

    tl, report = read_run(run_dir)
    tl.to_parquet(Path(run_dir) / "timeline.parquet", index=False)
    (Path(run_dir) / "ingest_report.json").write_text(report.to_json())
    return report


def knobs_lines(table: dict) -> list[str]:
    """The table of :func:`sipperf.lab.knobs.probe` as text: per group each knob's state
    (writable, refused, exists, absent), whether it was restored and any error; then where the
    thesis's CFS knobs are now."""
    lines = []
    for group in ("proc_sys", "proc_sys_extra", "debugfs", "per_process", "cgroup", "kamailio"):
        lines.append(f"== {group}")
        for r in table.get(group, []):
            state = ("writable" if r.get("writable") else "refused" if r.get("writable") is False
                     else "exists" if r.get("exists") else "absent")
            err = r.get("write_error") or r.get("read_error") or r.get("parser") or r.get("note") or ""
            rest = f"restored={r['restored']}" if "restored" in r else ""
            lines.append(f"  {r['knob']:45s} {state:9s} {rest:15s} {err}")
    lines.append("== the thesis's CFS knobs")
    for r in table["thesis"]:
        where = ("/proc/sys/kernel" if r["in_proc_sys"] else
                 f"debugfs {r['debugfs_name']} ({r['debugfs_error'] or 'ok'})" if r["in_debugfs"] else "gone")
        lines.append(f"  {r['knob']:30s} {where:45s} {r['history']}")
    return lines


def restore_lines(done: list[dict], log_path) -> list[str]:
    """What :func:`sipperf.lab.knobs.restore_pending` did, one line per knob (or "nothing")."""
    if not done:
        return [f"nothing to restore ({log_path})"]
    return [f"{r.get('kind')} {r.get('path')}: restored={r.get('restored')} {r.get('error', '')}" for r in done]
