"""Benchmark of the two engines of the kernel-path model: the SimPy model of chapter 9
(``sipperf.sim.model``) and its fast twin (``sipperf.sim.fast_twin``).  Medians of several runs.

Run: ``.venv/bin/python bench/sim.py [--calls 20000] [--repeats 3] [--configs 1x1,8x1,16x4]``
(THREADSxCORES).  The same seeds give both engines the same inputs.

"events" are each engine's own events, so they are not comparable between engines: the twin
counts the entries of its heap (arrivals, service ends, slice ticks, stale ends of preempted
runs); the SimPy model counts every event SimPy processes (timeouts, resource requests and
releases, process starts and ends, interrupts), stepping the environment one event at a time.
"messages/s" is the comparable figure.  Every rate is given per wall second and per CPU second of
this process: on a shared box the CPU-second figure is the steadier one; the load average is
printed at the start and on every line.
"""
from __future__ import annotations

import argparse
import os
import statistics

from sipperf.sim.params import make_params
from sipperf.sim.run import run_core


def bench_one(engine: str, calls: int, rate: float, threads: int, cores: int, mode: str,
              repeats: int) -> dict[str, float]:
    p = make_params(rate_cps=rate, calls=calls, threads=threads, cores=cores, sched_mode=mode)
    ev_s, ev_cpu, msg_s, msg_cpu = [], [], [], []
    events = msgs = 0
    for r in range(repeats):
        kp, loop_s = run_core(p, seed=r, engine=engine, count_events=True)
        events, msgs = kp.events, kp.wl.n_msgs
        ev_s.append(events / loop_s)
        ev_cpu.append(events / kp.cpu_s)
        msg_s.append(msgs / loop_s)
        msg_cpu.append(msgs / kp.cpu_s)
    med = statistics.median
    return {"events": events, "messages": msgs, "ev_s": med(ev_s), "ev_cpu_s": med(ev_cpu),
            "msg_s": med(msg_s), "msg_cpu_s": med(msg_cpu)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--configs", default="1x1,8x1,16x4", help="comma list of THREADSxCORES")
    ap.add_argument("--mode", default="baseline", help="scheduler preset (default, baseline, enhanced)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default="twin,simpy")
    a = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    print(f"calls={a.calls} rate={a.rate:g} cps mode={a.mode} repeats={a.repeats} (medians); "
          f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'engine':>6} {'thr':>3} {'cores':>5} {'events':>9} {'ev/msg':>6} {'events/s':>10} "
          f"{'ev/CPU-s':>10} {'msgs/s':>9} {'msgs/CPU-s':>10} {'load':>5}")
    for th, co in configs:
        for engine in a.engines.split(","):
            r = bench_one(engine, a.calls, a.rate, th, co, a.mode, a.repeats)
            print(f"{engine:>6} {th:3d} {co:5d} {r['events']:9d} {r['events'] / r['messages']:6.2f} "
                  f"{r['ev_s']:10,.0f} {r['ev_cpu_s']:10,.0f} {r['msg_s']:9,.0f} {r['msg_cpu_s']:10,.0f} "
                  f"{os.getloadavg()[0]:5.2f}", flush=True)


if __name__ == "__main__":
    main()
