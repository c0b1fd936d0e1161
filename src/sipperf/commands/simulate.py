"""``sipperf simulate``: run the kernel-path model and write a run directory.

DIR/timeline.parquet (the tidy timeline schema) and DIR/meta.json (``"source": "sim"``, every
parameter, the engine, the seed and the run's summary statistics), so ``sipperf analyze DIR``
reads it like a lab or published run.  ``--engine simpy`` runs the SimPy model of chapter 9,
``--engine twin`` (the default) its validated fast twin; the same seed gives both the same inputs.

Bad arguments never hang or produce nonsense: every number is checked against the bounds below
and the command exits with status 2 and a message naming the argument (or the file and line).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

#: bounds of the arguments (a run outside them is refused with exit status 2)
MAX_RATE_CPS = 1e6
MAX_CALLS = 1_000_000          # 6 million messages: a few GB of per-message data at most
MAX_THREADS = 1024
MAX_CORES = 256
MAX_RCVBUF_PKTS = 10_000_000
MAX_RCVBUF_BYTES = 1 << 34     # 16 GiB
#: longest simulated span (calls / rate, or the arrivals file's total), seconds: instants are
#: int64 nanoseconds, and a run this long is already far beyond any experiment of the book
MAX_SPAN_S = 1e6


def _finite_positive(name: str, x: float, upper: float) -> None:
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a finite number > 0, not {x!r}")
    if x > upper:
        raise ValueError(f"{name} = {x:g} is above the bound {upper:g}")


def _int_in(name: str, x: int, lo: int, hi: int) -> None:
    if not lo <= x <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, not {x}")


def check_args(args: argparse.Namespace) -> None:
    """Refuse nonsense with a clear message (ValueError / FileNotFoundError -> exit 2)."""
    _finite_positive("--rate", args.rate, MAX_RATE_CPS)
    _int_in("--calls", args.calls, 1, MAX_CALLS)
    _int_in("--threads", args.threads, 1, MAX_THREADS)
    _int_in("--cores", args.cores, 1, MAX_CORES)
    if args.rcvbuf_pkts is not None:
        _int_in("--rcvbuf-pkts", args.rcvbuf_pkts, 1, MAX_RCVBUF_PKTS)
    if args.rcvbuf_bytes is not None:
        _int_in("--rcvbuf-bytes", args.rcvbuf_bytes, 1, MAX_RCVBUF_BYTES)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, not {args.seed}")
    if args.arrivals.startswith("file:"):
        from sipperf.sim.workload import read_iat_file

        path = Path(args.arrivals[5:])
        if not path.exists():
            raise FileNotFoundError(f"inter-arrival file not found: {path}")
        if not path.is_file():
            raise ValueError(f"inter-arrival file is not a regular file: {path}")
        iat = read_iat_file(path)          # refuses non-numbers, NaN, inf and negative values
        reps, rest = divmod(args.calls, len(iat))
        span = reps * float(iat.sum()) + float(iat[:rest].sum())
    elif args.arrivals in ("poisson", "deterministic"):
        span = args.calls / args.rate
    else:
        raise ValueError(f"--arrivals must be poisson, deterministic or file:PATH, not {args.arrivals!r}")
    if span > MAX_SPAN_S:
        raise ValueError(f"the calls would span {span:.3g} s of simulated time (bound {MAX_SPAN_S:g} s): "
                         "raise --rate or lower --calls")


def _run(args: argparse.Namespace) -> int:
    from sipperf import __version__
    from sipperf.sim.params import make_params
    from sipperf.sim.run import simulate

    check_args(args)
    p = make_params(rate_cps=args.rate, calls=args.calls, threads=args.threads, cores=args.cores,
                    sched_mode=args.sched, arrivals=args.arrivals)
    if args.rcvbuf_bytes:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_bytes=args.rcvbuf_bytes, rcvbuf_pkts=None))
    elif args.rcvbuf_pkts is not None:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_pkts=args.rcvbuf_pkts))
    p.run_id = args.run_id or f"sim-{args.rate:g}cps-c{args.threads}-m{args.cores}-s{args.seed}"
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the output directory {out}: {e.strerror or e}") from e
    t = time.perf_counter()
    tl, st = simulate(p, seed=args.seed, engine=args.engine)
    wall = time.perf_counter() - t
    meta = {
        "source": "sim", "synthetic": True, "generator": f"sipperf.sim (sipperf simulate, engine {args.engine})",
        "engine": args.engine, "sipperf": __version__, "seed": args.seed, "run_id": p.run_id,
        "params": p.to_dict(), "stats": st, "wall_s": wall,
    }
    try:
        tl.to_parquet(out / "timeline.parquet", index=False)
        (out / "meta.json").write_text(json.dumps(meta, indent=2, default=float))
    except OSError as e:
        raise ValueError(f"cannot write the run into {out}: {e.strerror or e}") from e
    print(f"{len(tl)} messages ({st['dropped']} dropped, {100 * st['drop_rate']:.3f} %), "
          f"W = {st['w_us']:.1f} +- {st['w_ci_us']:.1f} us, "
          f"{st['messages'] / max(st['loop_s'], 1e-9):,.0f} messages/s ({args.engine}) -> {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate the proxy's kernel path (SimPy model or its fast twin) "
                                        "and write a run directory")
    p.add_argument("--rate", type=float, required=True, help=f"call rate, calls per second (0 < rate <= {MAX_RATE_CPS:g})")
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
