"""Timing of `sipperf report` on the lab's 13-run rate sweep (datasets/lab/runs/rate-*): the
whole report (read and analyse every run, measure, fit with a 200-replicate bootstrap, the HTML
page) and its parts; median of ``--reps`` runs each, with the machine's load (/proc/loadavg)
before and after.

Usage: .venv/bin/python bench/report.py [--reps 3]
"""
from __future__ import annotations

import argparse
import glob
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ")[0:3].__str__()
    except OSError:
        return "n/a"


def _median_s(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    from sipperf import fit
    from sipperf.report import build_report, fit_runs
    from sipperf.report.html import render

    runs = sorted(glob.glob(str(ROOT / "datasets" / "lab" / "runs" / "rate-*")))
    print(f"loadavg before: {_load()}  ({len(runs)} runs, {a.reps} repetitions, median)")
    with tempfile.TemporaryDirectory() as tmp:
        rep = build_report(runs, Path(tmp) / "warm", n_boot=200)   # warm-up (imports, numba caches)
        cases = {
            "report, whole (html, bootstrap 200)": lambda: build_report(runs, Path(tmp) / "a", n_boot=200),
            "report without html": lambda: build_report(runs, Path(tmp) / "b", n_boot=200, html=False),
            "read + measure + fit, no bootstrap": lambda: fit_runs(runs, n_boot=0),
            "fit alone, bootstrap 200": lambda: fit.fit_all([r.measure.fit_input for r in rep.runs], n_boot=200),
            "html page alone": lambda: render(rep),
        }
        print(f"{'case':40s} {'median s':>9s}")
        for name, fn in cases.items():
            print(f"{name:40s} {_median_s(fn, a.reps):9.2f}")
        print(f"html page size: {(Path(tmp) / 'a' / 'index.html').stat().st_size / 1e6:.1f} MB")
    print(f"loadavg after: {_load()}")


if __name__ == "__main__":
    main()
