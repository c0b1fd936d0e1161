"""Parameter sweeps on Dask: rate x threads x cores x scheduler mode x replications.

``python -m sipperf.sim.sweep --rates 1000,2000 --threads 1,2,4 --cores 1,2 --modes baseline,enhanced
--reps 3 --calls 20000 [--scheduler tcp://host:8786] --out datasets/precomputed/sim_sweep.csv``

By default a local cluster (processes, ``--workers`` of them, one thread each) runs the points;
``--scheduler ADDRESS`` sends them to an existing Dask cluster instead.  A tqdm bar shows the
progress.  Each row is the stats dict of one run (no timelines), so the book's sliders read a
small CSV and never simulate at view time.  The CSV gets a ``.provenance.md`` note beside it.
"""
from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

OUT_DIR = Path(__file__).resolve().parents[3] / "datasets" / "precomputed"


def knee_cps(rates: np.ndarray, drop_rate: np.ndarray, level: float = 0.01) -> float:
    """Call rate at which a drop-rate curve (``rates`` ascending) first reaches ``level``, by linear
    interpolation between the two rates around the crossing: the "1 % knee" of thesis ch. 6–7.
    The first rate if the curve starts at or above ``level``; NaN if it never gets there."""
    r = np.asarray(rates, float)
    p = np.asarray(drop_rate, float)
    above = np.flatnonzero(p >= level)
    if not len(above):
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(r[0])
    return float(r[i - 1] + (level - p[i - 1]) * (r[i] - r[i - 1]) / (p[i] - p[i - 1]))


def run_point(point: dict[str, Any]) -> dict[str, Any]:
    """One simulation (runs on a Dask worker): ``point`` holds make_params keywords + seed."""
    from dataclasses import replace

    from sipperf.sim.params import make_params
    from sipperf.sim.run import simulate

    pt = dict(point)
    seed = int(pt.pop("seed", 0))
    sched_over = pt.pop("sched_over", None) or {}
    p = make_params(**pt)
    if sched_over:
        p = replace(p, sched=replace(p.sched, **sched_over))
    _, st = simulate(p, seed=seed, timeline=False)
    st.update({k: v for k, v in point.items() if k not in st and k != "sched_over"})
    st["machine"] = pt.get("machine") or ("ch4" if p.kernel.threads == 1 and p.kernel.cores == 1 else "ch5")
    return st


def grid(rates: Iterable[float], threads: Iterable[int], cores: Iterable[int], modes: Iterable[str],
         reps: int, calls: int, arrivals: str = "poisson", seed0: int = 0,
         machine: str = "ch5") -> list[dict[str, Any]]:
    pts = []
    for i, (r, c, n, m, k) in enumerate(itertools.product(rates, threads, cores, modes, range(reps))):
        pts.append({"rate_cps": float(r), "calls": int(calls), "threads": int(c), "cores": int(n),
                    "sched_mode": m, "arrivals": arrivals, "machine": machine,
                    "seed": seed0 + 1000 * k + i})
    return pts


def run_sweep(points: list[dict[str, Any]], scheduler: str | None = None, workers: int = 2,
              progress: bool = True) -> pd.DataFrame:
    """Run ``points`` on Dask (local cluster unless ``scheduler`` is an address); rows in input order."""
    from dask.distributed import Client, LocalCluster, as_completed
    from tqdm.auto import tqdm

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, host="127.0.0.1")
        client = Client(cluster)
    try:
        futs = client.map(run_point, points, pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        rows: list[dict[str, Any] | None] = [None] * len(points)
        # a bar only on a terminal: never in a pipe, a log or a notebook's captured output
        bar = tqdm(total=len(futs), desc="sim sweep", disable=not (progress and sys.stderr.isatty()))
        for f in as_completed(futs):
            rows[index[f.key]] = f.result()
            bar.update(1)
        bar.close()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return pd.DataFrame(rows)


#: what made the precomputed files by default: the fast twin of the kernel-path model
ENGINE_TWIN = ("the sipperf kernel-path model, run by its fast twin (src/sipperf/sim/fast_twin.py, "
               "checked against the SimPy model src/sipperf/sim/model.py: sim_twin_check.csv)")


def write_with_provenance(df: pd.DataFrame, out: Path, what: str, command: str,
                          source: str = ENGINE_TWIN) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False, float_format="%.6g")
    note = out.with_suffix(".provenance.md")
    note.write_text(
        f"# {out.name}\n\nSYNTHETIC data: output of {source}, not measurements.\n\n{what}\n\n"
        f"- made by: `{command}`\n- when: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}\n"
        f"- python {platform.python_version()} on {platform.machine()}\n"
        f"- rows: {len(df)}; parameters and seeds are columns of the CSV, so every row can be re-run "
        f"with `sipperf.sim.sweep.run_point`.\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Dask sweep of the SimPy kernel-path model")
    ap.add_argument("--rates", default="1000,1500,2000,2500,3000")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--cores", default="1")
    ap.add_argument("--modes", default="baseline,enhanced")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--arrivals", default="poisson")
    ap.add_argument("--machine", default="ch5", help="ch5 (Xeon, ch. 5-7) or ch4 (i3, ch. 4)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scheduler", default=None, help="address of a running Dask scheduler")
    ap.add_argument("--out", default=str(OUT_DIR / "sim_sweep.csv"))
    a = ap.parse_args(argv)
    f = lambda s, t: [t(x) for x in s.split(",") if x]  # noqa: E731
    pts = grid(f(a.rates, float), f(a.threads, int), f(a.cores, int), f(a.modes, str), a.reps, a.calls,
               a.arrivals, machine=a.machine)
    t = time.perf_counter()
    df = run_sweep(pts, a.scheduler, a.workers)
    cmd = "python -m sipperf.sim.sweep " + " ".join(argv if argv is not None else __import__("sys").argv[1:])
    write_with_provenance(df, Path(a.out), "Sweep rate x threads x cores x scheduler mode x replications.", cmd)
    print(f"{len(df)} runs in {time.perf_counter() - t:.1f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
