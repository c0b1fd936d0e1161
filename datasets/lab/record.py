"""Record the lab datasets in this directory (needs root, kamailio, sip-tester, tshark, bpftrace).

The long recording (``long/``, see README.md), resumable point by point, on an idle machine::

    .venv/bin/python datasets/lab/record.py --plan full              # everything (prints an estimate first)
    .venv/bin/python datasets/lab/record.py --plan full --estimate   # only the estimate
    .venv/bin/python datasets/lab/record.py --plan pilot             # a short try-out into /tmp

Options: ``--series workers sched overload`` (a subset), ``--force`` (record on a busy machine
and flag it instead of refusing), ``--wait-idle S`` (how long to wait for an idle machine before
refusing, default 300 s), ``--redo RUN_ID`` (record a done point again), ``--reprobe`` (test the
scheduler knobs again), ``--more-searches N`` (N searches of the protocol's own one-worker
knee beyond the plan's three: it is the base of every set-up comparison), ``--restore`` (put back any knob an interrupted run left changed, then
stop).  Exit codes: 0 done, 2 cannot run here, 3 refused (machine busy; run the same command
again later: done points are kept), 130 interrupted.

The re-recording under the recording protocol (``protocol/``; docs/lab.md "The recording
protocol"), one command, resumable, on an idle machine::

    .venv/bin/python datasets/lab/record.py --plan protocol --estimate   # the estimate only
    .venv/bin/python datasets/lab/record.py --plan protocol              # everything into protocol/
    .venv/bin/python datasets/lab/record.py --plan protocol-pilot --force --out /tmp/pilot

Its series: ``setup workers sched overload netns chain`` (``--series`` takes a subset; each
needs the protocol's 1-worker knee, searched first if ``knees.csv`` lacks it).  ``overload``
compares no guard, the INVITE-only and the all-request limit from 0.5 to 3 x the knee with three
replications (issue 25); ``chain`` records the chain of proxies into ``protocol/chain/``
(:func:`chain_series`, ``sipperf.lab.chain``).

The short series of the first recording (``index.csv``, ``runs/``; 150-1500 calls per run)::

    .venv/bin/python datasets/lab/record.py --plan short [--only SERIES] [--scratch DIR]

Short series (see README.md): ``rate`` (1 worker, Poisson arrivals, light load into overload),
``workers`` (1, 2, 4, 8 workers at two rates), ``sched`` (default vs SCHED_FIFO vs pinned at
two rates), ``sched_load`` (the same while two busy loops compete for the CPUs).  Each run goes through ``sipperf.lab.run.run_lab`` into a scratch directory, is
joined by ``sipperf.ingest.lab_runs.run.read_run`` and stored compactly by
``sipperf.ingest.lab_runs.dataset.save_run``; ``index.csv`` gets one summary row per run.  The raw
files (pcapng, proxy log, tracer log; gzipped) are kept for the runs named in ``KEEP_RAW``.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.ingest.lab_runs.dataset import load_meta, load_run, save_run
from sipperf.ingest.lab_runs.run import completeness, read_run
from sipperf.lab import background, sipp
from sipperf.lab.procs import exit_on_sigterm
from sipperf.lab.run import LabConfig, run_lab
from sipperf.timeline import INSTANTS

HERE = Path(__file__).resolve().parent
KEEP_RAW = ("rate-0025",)
RAW_FILES = ("capture.pcapng", "proxy.log", "trace.log")
RAW_PLAIN = ("meta.json", "kamailio.cfg", "tracer.bt", "uac_stats.csv", "poisson_offsets.csv")


#: the short series' set-up, kept so that --plan short reproduces it: nothing pinned (except the
#: "pinned" policy), SIPp at nice -10 (before the recording protocol, docs/lab.md)
_FIRST = dict(placement="shared", load_nice=-10)


def plan() -> list[tuple[str, str, LabConfig]]:
    runs = [(s, r, dataclasses.replace(c, **_FIRST)) for s, r, c in _plan()]
    return runs


def _plan() -> list[tuple[str, str, LabConfig]]:
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


def start_hogs(n: int) -> list[subprocess.Popen]:
    """The short series' busy loops: nice 0, not pinned, in the recorder's own session."""
    return background.start_hogs(n, BACKGROUND_LIMIT_S, new_session=False)


stop_hogs = background.stop_hogs


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


def legacy_main(argv: list[str] | None = None) -> int:
    """The short series (``--plan short``): index.csv and runs/ as first recorded."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", choices=("short",))
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


# ---- the long recording (long/) --------------------------------------------------------------

LOCK = Path("/var/tmp/sipperf-lab-record.lock")


def _hms(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def print_estimate(est: dict, params, log=print) -> None:
    log(f"estimate for --plan {params.name} (expected, and if every point ran to its cap):")
    for k, v in est.items():
        if k in ("knees_assumed",):
            continue
        log(f"  {k:9s} {_hms(v[0]):>8s}   (at most {_hms(v[1])})")
    log(f"  knees (calls/s at 1 % drops) by workers: {est['knees_assumed']}")


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--plan")
    known, _ = pre.parse_known_args(argv)
    if known.plan is None and not {"-h", "--help"} & set(argv):
        print("record.py: give --plan full (the long recording), --plan pilot or --plan short; "
              "see python datasets/lab/record.py --help")
        return 2
    if known.plan == "short":
        return legacy_main(argv)
    from sipperf.lab import knobs, machine, plan as P
    from sipperf.lab.longrun import MachineBusy, find_knee, record_point
    from sipperf.lab.store import Dataset

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=tuple(P.PLANS), required=True)
    ap.add_argument("--series", nargs="+", choices=("setup", "workers", "sched", "overload", "netns", "chain"),
                    default=None, help="a subset of the series (default: all of the plan's)")
    ap.add_argument("--workers", nargs="+", type=int, default=None, help="subset of the worker counts")
    ap.add_argument("--out", default=None, help="dataset directory (full: datasets/lab/long; "
                                                "pilot: /tmp/sipperf-lab-pilot)")
    ap.add_argument("--scratch", default="/tmp/sipperf-lab-record")
    ap.add_argument("--force", action="store_true", help="record on a busy machine (flagged)")
    ap.add_argument("--wait-idle", type=float, default=300.0)
    ap.add_argument("--estimate", action="store_true", help="print the duration estimate and stop")
    ap.add_argument("--redo", nargs="*", default=[])
    ap.add_argument("--reprobe", action="store_true")
    ap.add_argument("--more-searches", type=int, default=0,
                    help="searches of the protocol's own 1-worker knee beyond the plan's (it is the base of every "
                         "set-up comparison: more where its searches spread widely)")
    ap.add_argument("--restore", action="store_true")
    a = ap.parse_args(argv)
    params = P.PLANS[a.plan]
    if a.series is None:
        a.series = (["setup", "workers", "sched", "overload", "netns", "chain"] if params.protocol
                    else ["workers", "sched", "overload"])
    if a.workers:
        params = dataclasses.replace(params, workers=tuple(w for w in params.workers if w in a.workers)
                                     or tuple(a.workers))
    default_out = {"full": HERE / "long", "protocol": HERE / "protocol",
                   "protocol-pilot": Path("/tmp/sipperf-lab-protocol-pilot")}
    out = Path(a.out) if a.out else default_out.get(a.plan, Path("/tmp/sipperf-lab-pilot"))
    ds = Dataset(out)
    table = json.loads((out / "knobs.json").read_text()) if (out / "knobs.json").exists() else None
    names, skipped = P.available_treatments(table) if table else (
        [n for n in P.TREATMENTS if all(f.startswith("/proc/") for f in P.treatment_files(n))], {})
    print_estimate(P.estimate(params, a.series, ds.knees(), names), params)
    if a.estimate:
        return 0
    if os.geteuid() != 0:
        print("record.py: needs root (bpftrace, scheduler knobs, cgroups)")
        return 2
    import fcntl

    lock = open(LOCK, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"record.py: another recording holds {LOCK}")
        return 2
    exit_on_sigterm()
    fixed = knobs.restore_pending()
    for f in fixed:
        print(f"restored after an interrupted run: {f.get('path')} -> {f.get('value', '')} ({f.get('restored')})")
    if a.restore:
        return 0
    log = lambda s: print(s, flush=True)  # noqa: E731
    mpath = out / "machine.json"
    mach = json.loads(mpath.read_text()) if mpath.exists() else {"machine": machine.describe(), "sessions": []}
    idle = machine.idle_check(3.0)
    mach["sessions"].append({"plan": a.plan, "series": a.series, "force": a.force, "utc": idle["utc"],
                             "idle_check": idle, "machine_now": machine.describe()["cpu"]})
    ds.write_json("machine.json", mach)
    if table is None or a.reprobe:
        log("probing the scheduler knobs (read, write, read back, restore)")
        table = knobs.probe()
        ds.write_json("knobs.json", table)
        names, skipped = P.available_treatments(table)
    for n, why in skipped.items():
        log(f"treatment {n} skipped: {why}")
    scratch = Path(a.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    done = ds.done() - set(a.redo)
    common = dict(force=a.force, wait_idle_s=a.wait_idle, pilot=a.plan not in ("full", "protocol"), log=log)
    if params.protocol:
        return protocol_run(a, params, ds, out, scratch, names, done, common, log)

    def run_points(points) -> None:
        for p in points:
            if p.run_id in done:
                log(f"== {p.run_id}: done")
                continue
            log(f"== {p.run_id}  ({p.series}, {p.cfg.workers} workers, {p.cfg.rate_cps:g} cps)")
            res = record_point(p, out, scratch, **common)
            ds.add_point(res)
            s = res["summary"]
            log(f"   -> {s['stop_reason']}: {s['calls_offered']} calls, pdr {s['pdr']:.4f}, "
                f"sojourn {s['sojourn_mean_us']:.1f} +- {s['sojourn_ci_hw_us']:.1f} us, "
                f"goodput {s['goodput_cps']:.0f} cps")

    def knee(c: int) -> float | None:
        k = ds.knees()
        if c in k:
            return k[c]
        start = params.probe_start_cps if c == 1 or 1 not in k else max(50.0, 0.5 * k[1])
        log(f"== knee search, {c} worker(s), from {start:g} cps")
        res = find_knee(P.base_config(params, workers=c), start_cps=start, factor=params.probe_factor,
                        refine_steps=params.refine_steps, probe_s=params.probe_s,
                        max_rate_cps=params.max_rate_cps, scratch=scratch, force=a.force,
                        wait_idle_s=a.wait_idle, on_probe=ds.add_probe, log=log)
        ds.set_knee(res)
        log(f"   knee {res['knee_cps']} cps ({res['probes']} probes)")
        return res["knee_cps"]

    def past_knee(c: int, kc: float) -> None:
        """Extra points beyond the sweep until one drops at least the knee's 1 % (bounded)."""
        for k in range(1, params.past_knee_max + 1):
            pts_ = ds.points()
            mine = pts_[(pts_["series"] == "workers") & (pts_["workers"] == c)] if len(pts_) else pts_
            if len(mine) and (mine["pdr"] >= P.KNEE_PDR).any():
                return
            p = P.past_knee_point(params, c, kc, k)
            log(f"   no {c}-worker point reached {P.KNEE_PDR:.0%} drops: one more at {p.cfg.rate_cps:g} cps")
            run_points([p])

    t0 = time.monotonic()
    try:
        ws = list(params.workers) if "workers" in a.series else []
        if ws and ws[0] == 1:
            k1 = knee(1)
            if k1:
                run_points(P.worker_points(params, 1, k1))
                past_knee(1, k1)
            ws = ws[1:]
        need_k1 = ("overload" in a.series) or ("sched" in a.series)
        k1 = knee(1) if need_k1 else None
        if "overload" in a.series and k1:
            run_points(P.overload_points(params, k1))
        if "sched" in a.series and k1:
            run_points(P.sched_points(params, k1, names))
        for c in ws:
            kc = knee(c)
            if kc:
                run_points(P.worker_points(params, c, kc))
                past_knee(c, kc)
    except MachineBusy as e:
        log(f"record.py: refused, {e}.  Done points are kept; run the same command again on an "
            f"idle machine (or add --force to record and flag).")
        return 3
    except KeyboardInterrupt:
        log("record.py: interrupted; processes stopped, knobs restored; done points are kept")
        return 130
    log(f"done in {_hms(time.monotonic() - t0)}; {out} holds {ds.size_bytes() / 1e6:.2f} MB")
    return 0


def protocol_run(a, params, ds, out: Path, scratch: Path, names: list[str], done: set[str],
                 common: dict, log) -> int:
    """The protocol plan: replicated knees (series ``setup`` and each worker count), the
    series with their tracer on/off pairs, loopback against namespaces (docs/lab.md)."""
    from sipperf.lab import plan as P, protocol
    from sipperf.lab.longrun import MachineBusy, find_knee_replicated, record_point

    if (os.cpu_count() or 1) < 2:
        log("record.py: the protocol needs two CPUs (proxy and generator on disjoint CPUs)")
        return 2
    ds.write_json("protocol.json", {
        "proxy_cpus": protocol.PROXY_CPUS, "generator_cpus": protocol.GENERATOR_CPUS,
        "generator_nice": protocol.GENERATOR_NICE, "ci_target": params.ci_target,
        "knee_replicates": params.knee_replicates, "late_ms": protocol.LATE_MS,
        "generator_limits": protocol.generator_verdict({})["limits"], "plan": dataclasses.asdict(params),
        "setups": {n: {"overrides": P.SETUPS[n].overrides, "what": P.SETUPS[n].what,
                       "probe_s": P.setup_probe_s(params, n)} for n in params.setups}})

    def run_points(points) -> None:
        for p in points:
            if p.run_id in done:
                log(f"== {p.run_id}: done")
                continue
            log(f"== {p.run_id}  ({p.series}, {p.cfg.workers} workers, {p.cfg.rate_cps:g} cps, "
                f"tracer {p.cfg.tracer}{', netns' if p.cfg.netns else ''})")
            res = record_point(p, out, scratch, **common)
            ds.add_point(res)
            s = res["summary"]
            log(f"   -> {s['stop_reason']}: {s['calls_offered']} calls, pdr {s['pdr']:.4f}, "
                f"sojourn {s['sojourn_mean_us']:.1f} +- {s['sojourn_ci_hw_us']:.1f} us, "
                f"proxy CPU {s['proxy_cpu_us_per_call']:.0f} us/call"
                + (f", GENERATOR-BOUND: {s['generator_bound_why']}" if s["generator_bound"] else ""))

    def knee(c: int, setup: str = "protocol") -> float | None:
        have = ds.knee_replicates(setup, c)
        k = ds.knees(setup)
        want = params.knee_replicates + (a.more_searches if (setup, c) == ("protocol", 1) else 0)
        if c in k and len(have) >= want and not a.reprobe:
            return k[c]
        k1 = ds.knees("protocol").get(1)
        start = params.probe_start_cps if c == 1 or k1 is None else max(50.0, 0.5 * k1)
        log(f"== knee, set-up {setup}, {c} worker(s): {want} searches "
            f"({len(have)} done), from {start:g} cps")

        def on_probe(row):
            ds.add_probe({"setup": setup, **row})

        def on_rep(row):
            ds.add_knee_replicate({"setup": setup, **row})

        est, _ = find_knee_replicated(
            P.probe_config(params, c, setup), replicates=want, start_cps=start,
            factor=params.probe_factor, refine_steps=params.refine_steps,
            probe_s=P.setup_probe_s(params, setup), max_rate_cps=params.max_rate_cps, scratch=scratch,
            force=a.force, wait_idle_s=a.wait_idle, on_probe=on_probe, on_replicate=on_rep,
            done=have, log=log)
        ds.set_knee({"setup": setup, "workers": c, **est.as_row(),
                     "what_setup": P.SETUPS[setup].what})
        log(f"   knee ({setup}, {c} worker(s)): {est.what}")
        return est.knee_cps

    def past_knee(c: int, kc: float) -> None:
        for k in range(1, params.past_knee_max + 1):
            pts_ = ds.points()
            mine = pts_[(pts_["series"] == "workers") & (pts_["workers"] == c)] if len(pts_) else pts_
            if len(mine) and "generator_bound" in mine:   # a generator-bound point says nothing
                mine = mine[~mine["generator_bound"].fillna(False).astype(bool)]
            if len(mine) and (mine["pdr"] >= P.KNEE_PDR).any():
                return
            p = P.past_knee_point(params, c, kc, k)
            log(f"   no {c}-worker point reached {P.KNEE_PDR:.0%} drops: one more at {p.cfg.rate_cps:g} cps")
            run_points([p])

    t0 = time.monotonic()
    try:
        k1 = knee(1, "protocol") if {"setup", "workers", "sched", "overload", "netns", "chain"} & set(a.series) else None
        if not k1:
            log("record.py: no 1-worker knee under the protocol (censored or not bracketed); "
                "the series that are fractions of it cannot be placed")
            return 4
        if "setup" in a.series:
            for name in params.setups:
                if name != "protocol":
                    knee(1, name)
        if "workers" in a.series:
            for c in params.workers:
                kc = k1 if c == 1 else knee(c)
                if kc:
                    run_points(P.worker_points(params, c, kc))
                    past_knee(c, kc)
        if "sched" in a.series:
            run_points(P.sched_points(params, k1, names))
        if "overload" in a.series:
            run_points(P.overload_points(params, k1))
        if "netns" in a.series:
            run_points(P.netns_points(params, k1))
        if "chain" in a.series and params.chain_fractions:
            chain_series(params, k1, out / "chain", scratch, a, log)
    except MachineBusy as e:
        log(f"record.py: refused, {e}.  Done points are kept; run the same command again on an "
            f"idle machine (or add --force to record and flag).")
        return 3
    except KeyboardInterrupt:
        log("record.py: interrupted; processes stopped, knobs restored; done points are kept")
        return 130
    log(f"done in {_hms(time.monotonic() - t0)}; {out} holds {ds.size_bytes() / 1e6:.2f} MB")
    return 0


def chain_series(params, k1: float, root: Path, scratch: Path, a, log) -> None:
    """The chain of proxies (``chain/``, docs/lab.md "A chain of proxies"): a light-load run
    measures each hop's CPU per call, the bottleneck law predicts the chain's capacity from it
    (``prediction.json``), then the open sweep around that prediction (and up to three points
    further out until a hop drops 1 %), a short run whose capture is kept, the closed runs."""
    from sipperf.lab import chain as C, plan as P
    from sipperf.lab.store import ChainDataset

    ds = ChainDataset(root)
    done = ds.done() - set(a.redo)
    rec = dict(force=a.force, wait_idle_s=a.wait_idle, log=log)

    def run(pt) -> None:
        if pt.run_id in done:
            log(f"== {pt.run_id}: done")
            return
        c = pt.cfg
        log(f"== {pt.run_id}  (chain, " + (f"{c.users} users" if c.closed else f"{c.rate_cps:g} cps")
            + f", {c.calls} calls)")
        r = C.record_chain_point(pt, ds, scratch, **rec)
        s = r["run"]
        log(f"   -> X {s['throughput_cps']:.1f} calls/s, hops found {s['hops_found_ok']}, "
            f"max drop rate {s['max_pdr']:.4f}" + (f" at {s['max_pdr_hop']}" if s["max_pdr_hop"] else "")
            + "; CPU per call " + ", ".join(f"{h['name']} {h['cpu_us_per_call']:.0f} us" for h in r["hops"])
            + (f"; GENERATOR-BOUND: {s['generator_bound_why']}" if s["generator_bound"] else ""))

    light = P.chain_light_point(params, k1)
    run(light)
    hops = ds.hops()
    rows = hops[hops["run_id"] == light.run_id].to_dict("records") if len(hops) else []
    pred = C.predicted_knee(rows)
    if not pred.get("knee_cps"):
        log(f"record.py: the chain's light run gave no CPU per hop ({pred.get('why')}); no sweep")
        return
    pk = P.round_rate(pred["knee_cps"])
    ds.write_json("prediction.json", {**pred, "knee_cps_rounded": pk, "from_run": light.run_id,
                                      "knee1_cps": k1})
    log(f"   chain capacity predicted by the bottleneck law: {pk:g} calls/s ({pred['binding']}; "
        f"bottleneck hop {pred['bottleneck_hop']})")
    pts = P.chain_points(params, k1, pk)
    for pt in [p for p in pts if p.label["role"] == "sweep"]:
        run(pt)
    for k in range(1, params.past_knee_max + 1):
        r = ds.points()
        opn = r[(r["kind"] == "open") & (r["run_id"] != light.run_id)] if len(r) else r
        if len(opn) and (opn["max_pdr"].fillna(0) >= P.KNEE_PDR).any():
            break
        pt = P.chain_past_knee_point(params, k1, pk, k)
        log(f"   no chain point reached {P.KNEE_PDR:.0%} drops at a hop: one more at {pt.cfg.rate_cps:g} cps")
        run(pt)
    for pt in [p for p in pts if p.label["role"] != "sweep"]:
        run(pt)
    log(f"   chain: {root} holds {ds.size_bytes() / 1e6:.2f} MB")


if __name__ == "__main__":
    sys.exit(main())
