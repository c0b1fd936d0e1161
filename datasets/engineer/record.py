"""Record the engineer's worked example: what a production proxy gives, and nothing more.

    sudo .venv/bin/python datasets/engineer/record.py [--out datasets/engineer] [--keep-all DIR]

An untraced Kamailio 5.6 (the second lab of ``tests/lab2``: its own configuration with 2 UDP
workers, tm's retransmission timers, SIPp's retransmissions on, one call in ten answered 486 Busy
Here, constant-rate arrivals, nothing pinned, nothing reniced, no tracepoints) is swept past its
1 %-drop knee: the rates of ``SWEEP_CPS`` until the kernel drops 3 % of the datagrams, the two
rates bracketing 1 % once more, then four bisection steps.  During every run, what an engineer
has on a production host and nothing else:

* a plain capture on the proxy's interface (``dumpcap -i lo -f 'udp port 5260' -B 128``);
* ``sipperf collect --pid <kamailio> --port 5260`` beside the load: the proxy's CPU from
  ``/proc/PID/stat`` and the kernel's UDP/TCP counters, one row per run (``cpu.csv``) and one
  row per second (``samples.csv``);
* SIPp's own statistics (``-trace_stat``): calls started, succeeded, failed, retransmissions.

What is kept (``--out``): ``cpu.csv`` and ``samples.csv`` as collected; ``runs.csv``, one row per
run, with the driver's own count of each run (kernel socket drops, datagrams and INVITEs read
from the capture with dpkt, not with sipperf), SIPp's counters and the 1-minute load before the
run; ``captures/``: the first capture of each offered rate up to ``--ship-up-to`` (zstd -19,
about 21 times smaller; the heavier captures are tens of MB each and stay out of git, ``--keep-all``
keeps them elsewhere); ``report/``: ``runs.csv``, ``fit.json`` and ``report.json`` of
``sipperf report`` on *every* capture of the sweep with ``--cpu cpu.csv`` (made here, where
all captures exist); ``machine.json``.  Loopback only; every process stopped by its pid.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from lab2.driver import Lab2Config, SecondLab, missing_tools, sweep  # noqa: E402

from sipperf.lab.sipp import read_stats  # noqa: E402

SIPPERF = str(Path(sys.executable).with_name("sipperf"))
SIPP_COLUMNS = {"OutgoingCall(C)": "sipp_calls", "SuccessfulCall(C)": "sipp_successful",
                "FailedCall(C)": "sipp_failed", "Retransmissions(C)": "sipp_retransmissions",
                "FailedMaxUDPRetrans(C)": "sipp_failed_max_retrans", "FailedCallRejected(C)": "sipp_rejected",
                "FailedUnexpectedMessage(C)": "sipp_failed_unexpected", "FailedCmdNotSent(C)": "sipp_failed_not_sent",
                "ResponseTime1(C)": "sipp_srd_mean_s"}


def _version(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def _srd_seconds(v) -> float | None:
    """SIPp's ResponseTime1(C) is 'HH:MM:SS:mmm...' or seconds; None when absent."""
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.count(":") >= 2:
        h, m, s, *rest = v.split(":")
        frac = float("0." + rest[0]) if rest and rest[0].isdigit() else 0.0
        return int(h) * 3600 + int(m) * 60 + int(s) + frac
    return None


def _shipped(r, sw, up_to: float) -> bool:
    """The first run at each offered rate up to ``up_to`` (not its replication, not the bisection's)."""
    return r in sw.runs and not r.label.endswith("-b") and r.nominal_cps <= up_to


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--ship-up-to", type=float, default=1500.0,
                    help="ship the captures of the runs offered at most this rate (calls/s)")
    ap.add_argument("--keep-all", type=Path, default=None, help="keep every capture here (not in git)")
    a = ap.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"cannot record: lab tools not installed: {', '.join(missing)}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sipperf-engineer-"))
    out = a.out
    for f in ("cpu.csv", "samples.csv", "runs.csv"):
        (out / f).unlink(missing_ok=True)
    (out / "captures").mkdir(parents=True, exist_ok=True)
    for old in (out / "captures").glob("*"):
        old.unlink()
    cfg = Lab2Config()
    load_before = Path("/proc/loadavg").read_text().strip()
    t0 = time.time()
    collect_out = work / "cpu.csv"
    with SecondLab(cfg, work / "lab") as lab:
        orig_run = lab.run
        lab.run = lambda label, cps: orig_run(label, cps, collect_out=collect_out)   # every run collected
        sw = sweep(lab)
    wall = time.time() - t0
    import pandas as pd

    rows = []
    for r in sw.runs + sw.bisection:
        row = r.row()
        st = read_stats(work / "lab", f"{r.label}_uac_stats.csv")
        for k, name in SIPP_COLUMNS.items():
            v = st.get(k)
            row[name] = _srd_seconds(v) if name == "sipp_srd_mean_s" else v
        row["in_sweep"] = r in sw.runs
        row["capture"] = f"captures/{r.label}.pcapng.zst" if _shipped(r, sw, a.ship_up_to) else ""
        rows.append(row)
    runs = pd.DataFrame(rows)
    runs.to_csv(out / "runs.csv", index=False)
    shutil.copy(collect_out, out / "cpu.csv")
    samples = sorted((work).glob("*_samples.csv"))
    pd.concat([pd.read_csv(p) for p in samples]).to_csv(out / "samples.csv", index=False)
    # the report on every capture of the sweep (what the book cannot re-run: the heavy captures)
    rep_dir = work / "report"
    p = subprocess.run([SIPPERF, "report", *[str(r.capture) for r in sw.runs], "--threads", str(cfg.workers),
                        "--cpu", str(collect_out), "--out", str(rep_dir)], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
        return 1
    (out / "report").mkdir(exist_ok=True)
    for f in ("runs.csv", "fit.json", "report.json"):
        shutil.copy(rep_dir / f, out / "report" / f)
    for r in sw.runs:
        if _shipped(r, sw, a.ship_up_to):
            subprocess.run(["zstd", "-q", "-19", "-f", str(r.capture), "-o",
                            str(out / "captures" / f"{r.label}.pcapng.zst")], check=True)
    if a.keep_all:
        a.keep_all.mkdir(parents=True, exist_ok=True)
        for r in sw.runs + sw.bisection:
            shutil.copy(r.capture, a.keep_all / r.capture.name)
    machine = {
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "wall_s": round(wall, 1),
        "loadavg_before": load_before, "loadavg_after": Path("/proc/loadavg").read_text().strip(),
        "kernel": platform.release(), "cpus": os.cpu_count(), "kamailio": _version(["kamailio", "-v"]),
        "sipp": _version(["sipp", "-v"]), "dumpcap": _version(["dumpcap", "-v"]),
        "config": {"workers": cfg.workers, "busy_chance": cfg.busy_chance, "seconds_per_run": cfg.seconds,
                   "proxy_port": cfg.proxy_port},
        "bisection_knee_cps": sw.knee_cps, "bisection_bracket_cps": sw.bracket,
    }
    (out / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(f"recorded {len(sw.runs)} sweep runs and {len(sw.bisection)} bisection runs in {wall:.0f} s; "
          f"bisection knee {sw.knee_cps} calls/s, bracket {sw.bracket}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
