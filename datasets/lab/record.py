"""Record the lab datasets in this directory (needs root, kamailio, sip-tester, tshark, bpftrace).

    .venv/bin/python datasets/lab/record.py [--only SERIES] [--scratch DIR]

Series (see README.md): ``rate`` (1 worker, Poisson arrivals, light load into overload),
``workers`` (1, 2, 4, 8 workers at two rates), ``sched`` (default vs SCHED_FIFO vs pinned at
two rates), ``sched_load`` (the same while two busy loops compete for the CPUs).  Each run goes through ``sipperf.lab.run.run_lab`` into a scratch directory, is
joined by ``sipperf.ingest.lab_run.read_run`` and stored compactly by
``sipperf.ingest.lab_dataset.save_run``; ``index.csv`` gets one summary row per run.  The raw
files (pcapng, proxy log, tracer log; gzipped) are kept for the runs named in ``KEEP_RAW``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.ingest.lab_dataset import load_meta, load_run, save_run
from sipperf.ingest.lab_run import completeness, read_run
from sipperf.lab import sipp
from sipperf.lab.procs import exit_on_sigterm
from sipperf.lab.run import LabConfig, run_lab
from sipperf.timeline import INSTANTS

HERE = Path(__file__).resolve().parent
KEEP_RAW = ("rate-0025",)
RAW_FILES = ("capture.pcapng", "proxy.log", "trace.log")
RAW_PLAIN = ("meta.json", "kamailio.cfg", "tracer.bt", "uac_stats.csv", "poisson_offsets.csv")


def plan() -> list[tuple[str, str, LabConfig]]:
    runs = []
    for rate in (25, 50, 100, 150, 200, 250, 300, 400, 600, 900, 1500, 2000, 3000):
        calls = int(min(max(rate * 4, 150), 1000 if rate <= 600 else 1500))
        runs.append(("rate", f"rate-{rate:04d}", LabConfig(rate_cps=rate, calls=calls, workers=1,
                                                           arrivals="poisson", seed=rate)))
    for rate in (100, 250):
        for w in (1, 2, 4, 8):
            runs.append(("workers", f"workers-{w}-r{rate:04d}",
                         LabConfig(rate_cps=rate, calls=rate * 3, workers=w, arrivals="poisson",
                                   seed=1000 + rate)))
    for rate in (200, 300):
        for sched in ("default", "fifo", "pinned"):
            runs.append(("sched", f"sched-{sched}-r{rate:04d}",
                         LabConfig(rate_cps=rate, calls=rate * 3, workers=1, arrivals="poisson",
                                   sched=sched, seed=2000 + rate)))
    for rate in (200, 300):  # the same runs while BACKGROUND_HOGS busy loops compete for the CPUs
        for sched in ("default", "fifo", "pinned"):
            runs.append(("sched_load", f"schedload-{sched}-r{rate:04d}",
                         LabConfig(rate_cps=rate, calls=rate * 3, workers=1, arrivals="poisson",
                                   sched=sched, seed=2000 + rate)))
    return runs


BACKGROUND_HOGS = 2          #: CPU-bound competitors in the ``sched_load`` series (one per CPU)
BACKGROUND_LIMIT_S = 120.0   #: each hog exits by itself after this long, even if never stopped
_HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


def start_hogs(n: int) -> list[subprocess.Popen]:
    """Start ``n`` bounded busy-loop processes at nice 0 (not pinned): a controlled stand-in for
    the unrelated work a shared server runs.  Stop them with :func:`stop_hogs` (by pid)."""
    return [subprocess.Popen([sys.executable, "-c", _HOG.format(limit=BACKGROUND_LIMIT_S)])
            for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for h in hogs:
        if h.poll() is None:
            os.kill(h.pid, signal.SIGTERM)
    for h in hogs:
        try:
            h.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(h.pid, signal.SIGKILL)
            h.wait()


def arrival_lateness_ms(tl: pd.DataFrame, meta: dict) -> tuple[float, float]:
    """Median and p99 of how late each INVITE hit the wire against its planned Poisson offset."""
    cfg = meta["config"]
    if cfg["arrivals"] != "poisson":
        return float("nan"), float("nan")
    plan_ms = sipp.poisson_offsets_ms(cfg["rate_cps"], cfg["calls"], cfg["seed"])
    inv = tl[(tl["msg_type"] == "INVITE") & (tl["origin"] == "relayed")]
    first = inv.groupby("call_id")["t_wire_in"].min()
    k = first.index.str.split("-").str[0].astype(int) - 1
    t_ms = (first.astype("int64").to_numpy() - 0) / 1e6
    late = t_ms - plan_ms[k.to_numpy()]
    late = late - late.min()
    return round(float(np.median(late)), 3), round(float(np.percentile(late, 99)), 3)


def summarize(series: str, run_id: str, tl: pd.DataFrame, meta: dict) -> dict:
    rel = tl[tl["origin"] == "relayed"]
    late_med, late_p99 = arrival_lateness_ms(tl, meta)
    recv = rel[~rel["dropped"].fillna(False)]
    st = meta.get("sipp_stats", {})

    def med_us(a: pd.Series) -> float:
        a = a.dropna().astype("float64")
        return round(float(np.median(a)) / 1000.0, 2) if len(a) else float("nan")

    return {
        "run_id": run_id, "series": series,
        "rate_cps": meta["config"]["rate_cps"], "calls": meta["config"]["calls"],
        "workers": meta["config"]["workers"], "sched": meta["config"]["sched"],
        "arrivals": meta["config"]["arrivals"], "tracer": meta["tracer"]["mode"],
        "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
        "ingress_datagrams": len(rel), "dropped": int(rel["dropped"].fillna(False).sum()),
        "pdr": round(float(rel["dropped"].fillna(False).mean()), 5) if len(rel) else float("nan"),
        "rcvbuf_errors": meta["udp_snmp_delta"].get("RcvbufErrors"),
        "complete_7": round(completeness(tl), 4),
        "complete_7_forwarded": round(float(
            recv[recv["t_wire_out"].notna()][list(INSTANTS)].notna().all(axis=1).mean()), 4),
        "median_wire_us": med_us(recv["t_wire_out"] - recv["t_wire_in"]),
        "median_sojourn_us": med_us(recv["t_dep"] - recv["t_arr"]),
        "median_k_wait_us": med_us(recv["t_sockq"] - recv["t_stack"]),
        "median_k_copy_max_us": med_us(recv["recv_copied"] - recv["t_sockq"]),
        "arrival_late_median_ms": late_med, "arrival_late_p99_ms": late_p99,
        "cpu_busy": meta.get("cpu_busy_during_load", {}).get("cpu"),
        "loadavg_1m": meta.get("load_before", {}).get("loadavg", [None])[0],
        "start_utc": meta["start_utc"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("rate", "workers", "sched", "sched_load"), action="append")
    ap.add_argument("--runs", nargs="*", help="record only these run ids")
    ap.add_argument("--reindex", action="store_true", help="rebuild index.csv from runs/ and stop")
    ap.add_argument("--scratch", default="/tmp/sipperf-lab-record")
    ap.add_argument("--out", default=str(HERE))
    a = ap.parse_args(argv)
    exit_on_sigterm()
    out = Path(a.out)
    scratch = Path(a.scratch)
    index_p = out / "index.csv"
    index = pd.read_csv(index_p) if index_p.exists() else pd.DataFrame()
    if a.reindex:
        series = {run_id: s for s, run_id, _ in plan()}
        rows = [summarize(series[run_id], run_id, load_run(out / "runs" / run_id)[0],
                          load_meta(out / "runs" / run_id)) for run_id in index["run_id"]]
        pd.DataFrame(rows).to_csv(index_p, index=False)
        return 0
    for series, run_id, cfg in plan():
        if (a.only and series not in a.only) or (a.runs and run_id not in a.runs):
            continue
        rd = scratch / run_id
        shutil.rmtree(rd, ignore_errors=True)
        print(f"== {run_id}", flush=True)
        hogs = start_hogs(BACKGROUND_HOGS) if series == "sched_load" else []
        try:
            run_lab(cfg, rd, log=lambda s: print("  ", s, flush=True))
        except Exception as e:  # one failed run must not lose the others
            print(f"   FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        finally:
            stop_hogs(hogs)
        try:
            tl, rep = read_run(rd, run_id=run_id)
        except Exception as e:
            print(f"   FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        meta = json.loads((rd / "meta.json").read_text())
        meta["background"] = {"busy_loops": len(hogs), "nice": 0, "pinned": False,
                              "limit_s": BACKGROUND_LIMIT_S,
                              "what": "python busy loops started before and stopped (by pid) after the run"}
        meta["ingest_report"] = rep.to_dict()
        save_run(tl, meta, out / "runs" / run_id)
        row = summarize(series, run_id, tl, meta)
        print("  ", {k: row[k] for k in ("pdr", "complete_7", "median_wire_us", "median_k_wait_us")},
              flush=True)
        if len(index) and "run_id" in index:
            index = index[index["run_id"] != run_id]
        index = pd.concat([index, pd.DataFrame([row])], ignore_index=True)
        index.to_csv(index_p, index=False)
        if run_id in KEEP_RAW:
            raw = out / "raw" / run_id
            shutil.rmtree(raw, ignore_errors=True)
            raw.mkdir(parents=True)
            for name in RAW_FILES:
                if (rd / name).exists():
                    with open(rd / name, "rb") as src, gzip.open(raw / f"{name}.gz", "wb", 9) as dst:
                        shutil.copyfileobj(src, dst)
            for name in RAW_PLAIN:
                if (rd / name).exists():
                    shutil.copy(rd / name, raw / name)
        shutil.rmtree(rd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
