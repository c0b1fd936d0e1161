"""Benchmark of the SimPy kernel-path model: SimPy events/s and calls/s (medians of several runs).

Goals (issue 6 item 5): >= 500k events/s, and 100k calls (600k messages) in <= 20 s.
Run: ``.venv/bin/python bench/sim.py [--calls 100000] [--repeats 3] [--threads 8 --cores 2]``
or a matrix ``--configs 1x1,2x1,8x2,16x4`` (threads x cores).

"events" are the events the model puts on SimPy's queue (message arrivals, service ends, slice
ticks, and the stale ends of preempted runs), the same count for the same seed and parameters
whatever the engine's speed.  Every figure is given per wall second and per CPU second of this
process: on a shared box the CPU-second figure is the steadier one; the load average is printed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from sipperf.sim.params import make_params
from sipperf.sim.run import run_core, simulate


def bench_one(calls: int, rate: float, threads: int, cores: int, mode: str, repeats: int,
              full: bool = True) -> dict[str, float]:
    p = make_params(rate_cps=rate, calls=calls, threads=threads, cores=cores, sched_mode=mode)
    ev_s, ev_cpu, loop, total, tot_cpu = [], [], [], [], []
    events = msgs = 0
    for r in range(repeats):
        kp, loop_s = run_core(p, seed=r)
        events, msgs = kp.events, kp.wl.n_msgs
        ev_s.append(kp.events / loop_s)
        ev_cpu.append(kp.events / kp.cpu_s)
        loop.append(loop_s)
        if full:
            t, c = time.perf_counter(), time.process_time()
            simulate(p, seed=r)          # full run incl. drawing + timeline DataFrame + stats
            total.append(time.perf_counter() - t)
            tot_cpu.append(time.process_time() - c)
    med = statistics.median
    out = {"threads": threads, "cores": cores, "events": events, "messages": msgs,
           "ev_s": med(ev_s), "ev_cpu_s": med(ev_cpu), "loop_s": med(loop)}
    if full:
        out.update(total_s=med(total), total_cpu_s=med(tot_cpu), calls_s=calls / med(total),
                   calls_cpu_s=calls / med(tot_cpu))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--configs", default="", help="comma list of THREADSxCORES, e.g. 1x1,8x2,16x4")
    ap.add_argument("--mode", default="baseline", help="scheduler preset (default, baseline, enhanced)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loop-only", action="store_true", help="skip the full simulate() timing")
    a = ap.parse_args()
    configs = ([tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")] if a.configs
               else [(a.threads, a.cores)])
    print(f"calls={a.calls} rate={a.rate:g} cps mode={a.mode} repeats={a.repeats} (medians); "
          f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'thr':>3} {'cores':>5} {'events':>9} {'ev/msg':>6} {'events/s':>10} {'ev/CPU-s':>10} "
          f"{'loop s':>7} {'full s':>7} {'full CPU s':>10} {'calls/s':>8} {'calls/CPU-s':>11} {'load':>5}")
    for th, co in configs:
        r = bench_one(a.calls, a.rate, th, co, a.mode, a.repeats, full=not a.loop_only)
        full = (f"{r['total_s']:7.2f} {r['total_cpu_s']:10.2f} {r['calls_s']:8,.0f} {r['calls_cpu_s']:11,.0f}"
                if "total_s" in r else f"{'-':>7} {'-':>10} {'-':>8} {'-':>11}")
        print(f"{th:3d} {co:5d} {r['events']:9d} {r['events'] / r['messages']:6.2f} {r['ev_s']:10,.0f} "
              f"{r['ev_cpu_s']:10,.0f} {r['loop_s']:7.2f} {full} {os.getloadavg()[0]:5.2f}", flush=True)


if __name__ == "__main__":
    main()
