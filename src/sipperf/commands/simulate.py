"""``sipperf simulate``: run the kernel-path model and write a run directory.

DIR/timeline.parquet (the tidy timeline schema) and DIR/meta.json (``"source": "sim"``, every
parameter, the engine, the seed and the run's summary statistics), so ``sipperf analyze DIR``
reads it like a lab or published run.  ``--engine simpy`` runs the SimPy model of chapter 9,
``--engine twin`` (the default) its validated fast twin; the same seed gives both the same inputs.

Bad arguments never hang or produce nonsense: every number is checked against the bounds below
and the command exits with status 2 and a message naming the argument (or the file and line).
The library behind it: :mod:`sipperf.sim.rundir`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from sipperf.sim.rundir import MAX_CALLS, MAX_CORES, MAX_RATE_CPS, MAX_THREADS


def _run(args: argparse.Namespace) -> int:
    from sipperf.sim.rundir import simulate_run_dir

    n, st = simulate_run_dir(args.out, rate_cps=args.rate, calls=args.calls, threads=args.threads,
                             cores=args.cores, arrivals=args.arrivals, sched=args.sched,
                             rcvbuf_pkts=args.rcvbuf_pkts, rcvbuf_bytes=args.rcvbuf_bytes, engine=args.engine,
                             seed=args.seed, run_id=args.run_id)
    print(f"{n} messages ({st['dropped']} dropped, {100 * st['drop_rate']:.3f} %), "
          f"W = {st['w_us']:.1f} +- {st['w_ci_us']:.1f} us, "
          f"{st['messages'] / max(st['loop_s'], 1e-9):,.0f} messages/s ({args.engine}) -> {Path(args.out)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate the proxy's kernel path (SimPy model or its fast twin) "
                                        "and write a run directory")
    p.add_argument("--rate", type=float, required=True,
                   help=f"call rate, calls per second (0 < rate <= {MAX_RATE_CPS:g})")
    p.add_argument("--calls", type=int, required=True, help=f"number of calls (1 .. {MAX_CALLS})")
    p.add_argument("--threads", type=int, default=1, help=f"worker threads (1 .. {MAX_THREADS}, default 1)")
    p.add_argument("--cores", type=int, default=1, help=f"CPU cores (1 .. {MAX_CORES}, default 1)")
    p.add_argument("--arrivals", default="poisson",
                   help="poisson | deterministic | file:PATH (one inter-arrival time per line, seconds)")
    p.add_argument("--sched", default="baseline", choices=("default", "baseline", "enhanced"),
                   help="scheduler mode of thesis ch. 6-7 (default baseline)")
    p.add_argument("--rcvbuf-pkts", type=int, default=None, help="socket queue capacity in packets (default 200)")
    p.add_argument("--rcvbuf-bytes", type=int, default=None, help="socket queue capacity in bytes (SO_RCVBUF)")
    p.add_argument("--engine", default="twin", choices=("twin", "simpy"),
                   help="twin: the fast engine (default); simpy: the SimPy model of chapter 9 (slower)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-id", default=None)
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=_run)
