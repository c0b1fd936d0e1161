"""Cost of the honest knee (issue 21): :func:`sipperf.fit.knee_from_probes` on the lab's long
recording (every round of every point and every knee-search probe of one worker count, 1,000
bootstrap replicates), and the whole verdict of ``sipperf report`` on that recording (stored
summaries: read, fit with the default 200-replicate bootstrap, verdict, no HTML).  Median of
``--reps`` runs each, with the machine's load (/proc/loadavg) before and after.

Usage: .venv/bin/python bench/knee.py [--reps 5]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONG = ROOT / "datasets" / "lab" / "long"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
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
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    from sipperf.fit import knee_from_probes
    from sipperf.ingest.lab_runs.dataset import load_points
    from sipperf.report import build_report
    from sipperf.report.runs import point_probes, summary_probes

    print(f"load before: {_load()}")
    pts = load_points(LONG)
    pts = pts[pts["series"] == "workers"]
    extra = summary_probes(LONG)
    for c in (1, 2, 4, 8):
        g = pts[pts["workers"] == c]
        pr = [q for _, row in g.iterrows() for q in point_probes(LONG, row, c)] + [q for q in extra if q.threads == c]
        k = knee_from_probes(pr)
        t = _median_s(lambda: knee_from_probes(pr), a.reps)
        print(f"{c} worker(s): {len(pr)} drop measurements at {len(k['rates'])} rates; knee {k['knee']:,.0f} "
              f"({k['lo']:,.0f}-{k['hi']:,.0f}) calls/s; knee_from_probes median {1e3 * t:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        build_report([LONG], Path(tmp) / "warm", html=False, n_slowest=0)
        t = _median_s(lambda: build_report([LONG], Path(tmp) / "r", html=False, n_slowest=0), a.reps)
    print(f"sipperf report on datasets/lab/long (31 stored points, bootstrap 200, no HTML): median {t:.2f} s")
    print(f"load after: {_load()}")


if __name__ == "__main__":
    main()
