"""Benchmark of the SimPy kernel-path model: SimPy events/s and calls/s (medians of several runs).

Goals (issue 6 item 5): >= 500k events/s, and 100k calls (600k messages) in <= 20 s.
Run: ``.venv/bin/python bench/sim.py [--calls 100000] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

from sipperf.sim.params import make_params
from sipperf.sim.run import run_core, simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    p = make_params(rate_cps=a.rate, calls=a.calls, threads=a.threads, cores=a.cores)
    ev_s, ev_cpu, loop, total, tot_cpu, calls_s = [], [], [], [], [], []
    for r in range(a.repeats):
        kp, loop_s = run_core(p, seed=r)
        ev_s.append(kp.events / loop_s)
        ev_cpu.append(kp.events / kp.cpu_s)
        loop.append(loop_s)
        t, c = time.perf_counter(), time.process_time()
        tl, st = simulate(p, seed=r)          # full run incl. drawing + timeline DataFrame
        total.append(time.perf_counter() - t)
        tot_cpu.append(time.process_time() - c)
        calls_s.append(a.calls / total[-1])
    print(f"calls={a.calls} rate={a.rate:g} cps threads={a.threads} cores={a.cores} "
          f"messages={len(tl)} events/run={kp.events}")
    print(f"SimPy events/s (event loop only, median of {a.repeats}): {statistics.median(ev_s):,.0f}")
    print(f"SimPy events per CPU second (median; the box may be shared): {statistics.median(ev_cpu):,.0f}")
    print(f"event loop seconds (median): {statistics.median(loop):.2f}")
    print(f"full simulate() seconds incl. timeline (median): {statistics.median(total):.2f}")
    print(f"full simulate() CPU seconds (median): {statistics.median(tot_cpu):.2f}")
    print(f"calls/s (full simulate, median): {statistics.median(calls_s):,.0f}")


if __name__ == "__main__":
    main()
