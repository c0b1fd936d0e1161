"""Is the fast twin the same model as the SimPy model?  A statistical check on a grid of cases.

``python -m sipperf.sim.calibration.twin_check [--reps 8 --calls 1500]`` runs every case of :data:`GRID`
(call rate x worker threads x cores x socket buffer, ch. 5 machine, baseline scheduler) with both
engines, ``reps`` seeded replications each, and writes one row per (case, engine, replication)
to ``datasets/precomputed/sim_twin_check.csv`` with a provenance note.

The two engines get *independent* seeds (twin: ``seed0 + 1000 r``, SimPy: ``seed0 + 1000 r +
500``), so their replications are independent samples of the same distribution if and only if
the engines implement the same model.  :func:`twin_test` then tests, per case and per metric
(mean wait ``w_us``, 99th percentile of the wait ``w_p99_us``, drop rate), the hypothesis of
equal means with Welch's two-sample t-test, and controls the family-wise error over all tests
with Holm's step-down procedure at level 0.05.  A case "agrees" when no test of it is rejected.
Each row of the SimPy engine is also re-run by the twin on the *same* seed (common random
numbers): ``crn_same_fate`` is the share of messages both engines served/dropped alike and
``crn_max_dt_us`` the largest difference of any instant.
"""
from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.sim.sweep import OUT_DIR, write_with_provenance

OUT = OUT_DIR / "sim_twin_check.csv"
METRICS = ("w_us", "w_p99_us", "drop_rate")
LABELS = {"w_us": "mean wait", "w_p99_us": "99th percentile of the wait", "drop_rate": "drop rate"}

#: call rates (calls/s) per (threads, cores): one below the 1 % knee, one above it, on the
#: ch. 5-7 machine with the baseline scheduler (knees from the sweep of chapter 9)
RATES: dict[tuple[int, int], tuple[float, float]] = {
    (1, 1): (2000.0, 2900.0), (4, 1): (1700.0, 2400.0), (16, 1): (800.0, 1300.0),
    (1, 2): (2000.0, 2900.0), (4, 2): (3300.0, 4400.0), (16, 2): (2600.0, 3500.0),
}
#: socket buffer sizes (packets)
BUFFERS = (20, 200)


def cases() -> list[dict]:
    out = []
    for (threads, cores), rates in RATES.items():
        for rate, buf in itertools.product(rates, BUFFERS):
            out.append({"rate_cps": rate, "threads": threads, "cores": cores, "rcvbuf_pkts": buf})
    return out


GRID = cases()


def _params(case: dict, calls: int):
    from sipperf.sim.params import make_params

    return make_params(rate_cps=case["rate_cps"], calls=calls, threads=case["threads"], cores=case["cores"],
                       machine="ch5", sched_mode="baseline", kernel_over={"rcvbuf_pkts": case["rcvbuf_pkts"]})


def run_case(case: dict, reps: int, calls: int, seed0: int = 0) -> list[dict]:
    """Both engines, ``reps`` replications each; the CRN comparison on the SimPy rows."""
    from sipperf.sim.run import _instants, message_arrays, run_core, stats_of

    p = _params(case, calls)
    rows = []
    for r in range(reps):
        for engine, seed in (("twin", seed0 + 1000 * r), ("simpy", seed0 + 1000 * r + 500)):
            c = time.process_time()
            kp, loop_s = run_core(p, seed, engine)
            st = stats_of(kp, loop_s)
            row = {**case, "calls": calls, "engine": engine, "rep": r, "seed": seed,
                   **{m: st[m] for m in METRICS}, "messages": st["messages"], "dropped": st["dropped"],
                   "cpu_s": time.process_time() - c, "loop_cpu_s": kp.cpu_s}
            if engine == "simpy":
                tw, _ = run_core(p, seed, "twin")
                oa, ob = message_arrays(tw)["outcome"], message_arrays(kp)["outcome"]
                ia, ib = _instants(tw), _instants(kp)
                dt = max(float(np.nanmax(np.abs(ia[k] - ib[k]), initial=0.0))
                         for k in ("t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"))
                row.update(crn_same_fate=float(np.mean(oa == ob)), crn_max_dt_us=dt)
            rows.append(row)
    return rows


def holm(p: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down procedure: True where the hypothesis is rejected (family-wise level alpha)."""
    p = np.asarray(p, float)
    order = np.argsort(p)
    m = len(p)
    reject = np.zeros(m, bool)
    for rank, i in enumerate(order):
        if p[i] <= alpha / (m - rank):
            reject[i] = True
        else:
            break
    return reject


def twin_test(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per (case, metric): means and standard deviations of both engines, Welch's t and
    two-sided p, the 95 % CI of the difference (twin - SimPy) relative to the SimPy mean, and
    ``rejected`` after Holm's correction over every test in ``df``."""
    from scipy import stats

    keys = ["rate_cps", "threads", "cores", "rcvbuf_pkts"]
    rows = []
    for case, d in df.groupby(keys, sort=False):
        for m in METRICS:
            a = d.loc[d["engine"] == "twin", m].to_numpy(float)
            b = d.loc[d["engine"] == "simpy", m].to_numpy(float)
            va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
            diff = a.mean() - b.mean()
            se = np.sqrt(va + vb)
            if se == 0:                       # both engines constant (e.g. no drop at all)
                t, p, dof = 0.0, 1.0 if diff == 0 else 0.0, np.nan
                half = 0.0
            else:
                dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
                t = diff / se
                p = float(2 * stats.t.sf(abs(t), dof))
                half = float(stats.t.ppf(0.975, dof) * se)
            ref = abs(b.mean())
            rows.append({**dict(zip(keys, case)), "metric": m, "twin_mean": a.mean(), "simpy_mean": b.mean(),
                         "twin_sd": a.std(ddof=1), "simpy_sd": b.std(ddof=1), "n_twin": len(a), "n_simpy": len(b),
                         "t": t, "dof": dof, "p": p,
                         "diff_lo_pct": 100 * (diff - half) / ref if ref > 0 else np.nan,
                         "diff_hi_pct": 100 * (diff + half) / ref if ref > 0 else np.nan})
    out = pd.DataFrame(rows)
    out["rejected"] = holm(out["p"].to_numpy(), alpha)
    return out


def speeds(df: pd.DataFrame) -> pd.DataFrame:
    """Messages per CPU second of the event loop, per engine (median over every run of the grid)."""
    d = df.assign(msgs_per_cpu_s=df["messages"] / df["loop_cpu_s"])
    return d.groupby("engine")["msgs_per_cpu_s"].median()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sipperf.sim.calibration.twin_check", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    t = time.perf_counter()
    load0 = os.getloadavg()[0]
    rows = []
    for i, case in enumerate(GRID):
        rows += run_case(case, a.reps, a.calls, a.seed)
        print(f"{i + 1}/{len(GRID)} {case} {time.perf_counter() - t:.0f} s", flush=True)
    df = pd.DataFrame(rows)
    res = twin_test(df)
    write_with_provenance(
        df, a.out,
        "Twin check: the fast twin (src/sipperf/sim/fast_twin.py) against the SimPy model of chapter 9 "
        "(src/sipperf/sim/model.py) on a grid of cases: call rate x worker threads x cores x socket "
        "buffer (packets), ch. 5 machine, baseline scheduler, Poisson calls.  One row per case, engine and "
        "replication, independent seeds per engine (twin seed0 + 1000 r, SimPy seed0 + 1000 r + 500); "
        "`w_us`, `w_p99_us` (µs) and `drop_rate` as in `sipperf.sim.run.stats_of` (2 % warm-up dropped).  "
        "SimPy rows also hold the common-random-numbers comparison with the twin on the same seed "
        "(`crn_same_fate`, `crn_max_dt_us`).  `cpu_s` = CPU seconds of the whole run, `loop_cpu_s` of "
        "the event loop.  Test: `sipperf.sim.calibration.twin_check.twin_test` (Welch, Holm at 0.05): "
        f"{int(res['rejected'].sum())} of {len(res)} tests rejected.  Load average "
        f"{load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} CPUs; "
        f"{time.perf_counter() - t:.0f} s wall.",
        f"python -m sipperf.sim.calibration.twin_check --reps {a.reps} --calls {a.calls} --seed {a.seed}",
        source="the two engines of the sipperf kernel-path model, the SimPy model (src/sipperf/sim/model.py) "
               "and its fast twin (src/sipperf/sim/fast_twin.py)")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(res.round(3).to_string(index=False))
        print(speeds(df))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
