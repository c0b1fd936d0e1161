"""A simulated run as a run directory: what ``sipperf simulate`` writes.

:func:`check_run_args` refuses nonsense before anything runs (every number against the bounds
below, the arrivals file read and checked); :func:`simulate_run_dir` runs the model once and
writes ``DIR/timeline.parquet`` (the tidy timeline schema) and ``DIR/meta.json`` (``"source":
"sim"``, every parameter, the engine, the seed and the run's summary statistics), so
``sipperf analyze DIR`` reads it like a lab or published run.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

__all__ = ["MAX_RATE_CPS", "MAX_CALLS", "MAX_THREADS", "MAX_CORES", "MAX_RCVBUF_PKTS", "MAX_RCVBUF_BYTES",
           "MAX_SPAN_S", "check_run_args", "simulate_run_dir"]

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


def check_run_args(*, rate_cps: float, calls: int, threads: int, cores: int, rcvbuf_pkts: int | None,
                   rcvbuf_bytes: int | None, seed: int, arrivals: str) -> None:
    """Refuse nonsense with a clear message naming the option (ValueError / FileNotFoundError)."""
    _finite_positive("--rate", rate_cps, MAX_RATE_CPS)
    _int_in("--calls", calls, 1, MAX_CALLS)
    _int_in("--threads", threads, 1, MAX_THREADS)
    _int_in("--cores", cores, 1, MAX_CORES)
    if rcvbuf_pkts is not None:
        _int_in("--rcvbuf-pkts", rcvbuf_pkts, 1, MAX_RCVBUF_PKTS)
    if rcvbuf_bytes is not None:
        _int_in("--rcvbuf-bytes", rcvbuf_bytes, 1, MAX_RCVBUF_BYTES)
    if seed < 0:
        raise ValueError(f"--seed must be >= 0, not {seed}")
    if arrivals.startswith("file:"):
        from sipperf.sim.workload import read_iat_file

        path = Path(arrivals[5:])
        if not path.exists():
            raise FileNotFoundError(f"inter-arrival file not found: {path}")
        if not path.is_file():
            raise ValueError(f"inter-arrival file is not a regular file: {path}")
        iat = read_iat_file(path)          # refuses non-numbers, NaN, inf and negative values
        reps, rest = divmod(calls, len(iat))
        span = reps * float(iat.sum()) + float(iat[:rest].sum())
    elif arrivals in ("poisson", "deterministic"):
        span = calls / rate_cps
    else:
        raise ValueError(f"--arrivals must be poisson, deterministic or file:PATH, not {arrivals!r}")
    if span > MAX_SPAN_S:
        raise ValueError(f"the calls would span {span:.3g} s of simulated time (bound {MAX_SPAN_S:g} s): "
                         "raise --rate or lower --calls")


def simulate_run_dir(out_dir, *, rate_cps: float, calls: int, threads: int = 1, cores: int = 1,
                     arrivals: str = "poisson", sched: str = "baseline", rcvbuf_pkts: int | None = None,
                     rcvbuf_bytes: int | None = None, engine: str = "twin", seed: int = 0,
                     run_id: str | None = None) -> tuple[int, dict[str, Any]]:
    """Check the arguments (:func:`check_run_args`), simulate once and write the run directory
    ``out_dir``; returns (messages in the timeline, the run's statistics).  Problems are
    ValueError / FileNotFoundError naming the option or the directory."""
    from sipperf import __version__
    from sipperf.sim.params import make_params
    from sipperf.sim.run import simulate

    check_run_args(rate_cps=rate_cps, calls=calls, threads=threads, cores=cores, rcvbuf_pkts=rcvbuf_pkts,
                   rcvbuf_bytes=rcvbuf_bytes, seed=seed, arrivals=arrivals)
    p = make_params(rate_cps=rate_cps, calls=calls, threads=threads, cores=cores, sched_mode=sched, arrivals=arrivals)
    if rcvbuf_bytes:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_bytes=rcvbuf_bytes, rcvbuf_pkts=None))
    elif rcvbuf_pkts is not None:
        p = replace(p, kernel=replace(p.kernel, rcvbuf_pkts=rcvbuf_pkts))
    p.run_id = run_id or f"sim-{rate_cps:g}cps-c{threads}-m{cores}-s{seed}"
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the output directory {out}: {e.strerror or e}") from e
    t = time.perf_counter()
    tl, st = simulate(p, seed=seed, engine=engine)
    wall = time.perf_counter() - t
    meta = {
        "source": "sim", "synthetic": True, "generator": f"sipperf.sim (sipperf simulate, engine {engine})",
        "engine": engine, "sipperf": __version__, "seed": seed, "run_id": p.run_id,
        "params": p.to_dict(), "stats": st, "wall_s": wall,
    }
    try:
        tl.to_parquet(out / "timeline.parquet", index=False)
        (out / "meta.json").write_text(json.dumps(meta, indent=2, default=float))
    except OSError as e:
        raise ValueError(f"cannot write the run into {out}: {e.strerror or e}") from e
    return len(tl), st
