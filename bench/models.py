"""Timing of the vectorised models (median of 5 runs each); prints a small table.

Usage: .venv/bin/python bench/models.py
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from sipperf.models import mg1_wait, mgck, mmck


def _median_s(fn, runs: int = 5) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    lam = np.linspace(0.0, 2.0, 10_000)
    cases = {
        "mmck c=1    K=200   10k rates": lambda: mmck(lam * 1, 1.0, 1, 200),
        "mmck c=16   K=200   10k rates": lambda: mmck(lam * 16, 1.0, 16, 200),
        "mmck c=1000 K=1e5   10k rates": lambda: mmck(lam * 1000, 1.0, 1000, 100_000),
        "mgck c=16   K=200   10k rates": lambda: mgck(lam * 16, 1.0, 4.0, 16, 200),
        "mg1  P-K            10k rates": lambda: mg1_wait(lam, 0.5, 0.5),
    }
    print(f"{'case':34s} {'median ms':>10s}")
    for name, fn in cases.items():
        print(f"{name:34s} {_median_s(fn) * 1e3:10.2f}")


if __name__ == "__main__":
    main()
