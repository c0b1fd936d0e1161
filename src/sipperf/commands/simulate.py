"""``sipperf simulate``: run the SimPy kernel-path model and write a run directory.

DIR/timeline.parquet (the tidy timeline schema) and DIR/meta.json (``"source": "sim"``, every
parameter, the seed and the run's summary statistics), so ``sipperf analyze DIR`` reads it like
a lab or published run.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    from sipperf import __version__
    from sipperf.sim.params import make_params
    from sipperf.sim.run import simulate

    if args.rate <= 0 or args.calls <= 0 or args.threads <= 0 or args.cores <= 0:
        raise ValueError("--rate, --calls, --threads and --cores must be positive")
    if args.arrivals.startswith("file:") and not Path(args.arrivals[5:]).is_file():
        raise FileNotFoundError(f"inter-arrival file not found: {args.arrivals[5:]}")
    p = make_params(rate_cps=args.rate, calls=args.calls, threads=args.threads, cores=args.cores,
                    sched_mode=args.sched, arrivals=args.arrivals)
    if args.rcvbuf_bytes:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_bytes=args.rcvbuf_bytes, rcvbuf_pkts=None))
    elif args.rcvbuf_pkts is not None:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_pkts=args.rcvbuf_pkts))
    p.run_id = args.run_id or f"sim-{args.rate:g}cps-c{args.threads}-n{args.cores}-s{args.seed}"
    t = time.perf_counter()
    tl, st = simulate(p, seed=args.seed)
    wall = time.perf_counter() - t
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tl.to_parquet(out / "timeline.parquet", index=False)
    meta = {
        "source": "sim", "synthetic": True, "generator": "sipperf.sim (sipperf simulate)",
        "sipperf": __version__, "seed": args.seed, "run_id": p.run_id,
        "params": p.to_dict(), "stats": st, "wall_s": wall,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=float))
    print(f"{len(tl)} messages ({st['dropped']} dropped, {100 * st['drop_rate']:.3f} %), "
          f"W = {st['w_us']:.1f} +- {st['w_ci_us']:.1f} us, {st['events_per_s']:.0f} events/s -> {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate the proxy's kernel path (SimPy) and write a run directory")
    p.add_argument("--rate", type=float, required=True, help="call rate, calls per second")
    p.add_argument("--calls", type=int, required=True, help="number of calls")
    p.add_argument("--threads", type=int, default=1, help="worker threads (default 1)")
    p.add_argument("--cores", type=int, default=1, help="CPU cores (default 1)")
    p.add_argument("--arrivals", default="poisson",
                   help="poisson | deterministic | file:PATH (one inter-arrival time per line, seconds)")
    p.add_argument("--sched", default="baseline", choices=("default", "baseline", "enhanced"),
                   help="scheduler mode of thesis ch. 6-7 (default baseline)")
    p.add_argument("--rcvbuf-pkts", type=int, default=None, help="socket queue capacity in packets (default 200)")
    p.add_argument("--rcvbuf-bytes", type=int, default=None, help="socket queue capacity in bytes (SO_RCVBUF)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-id", default=None)
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=_run)
