"""Dask sweep plumbing and the calibration helpers (small and quick)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from sipperf.sim.calibration.calibrate import KNEES, crossing, measured_knee
from sipperf.sim.sweep import grid, run_point, run_sweep, write_with_provenance


def test_grid_is_the_cartesian_product_with_distinct_seeds():
    pts = grid([1000, 2000], [1, 4], [1, 2], ["baseline", "enhanced"], reps=3, calls=100)
    assert len(pts) == 2 * 2 * 2 * 2 * 3
    assert len({p["seed"] for p in pts}) == len(pts)


def test_sweep_on_a_local_cluster_matches_direct_runs(tmp_path):
    pts = grid([400, 900], [2], [1], ["enhanced"], reps=1, calls=300)
    df = run_sweep(pts, workers=1, progress=False)
    assert list(df["rate_cps"]) == [400.0, 900.0]                 # input order kept
    direct = run_point(pts[1])
    assert df.iloc[1]["w_us"] == direct["w_us"]                   # same seed -> same result
    out = tmp_path / "sim_x.csv"
    write_with_provenance(df, out, "test", "pytest")
    assert len(pd.read_csv(out)) == 2
    assert "SYNTHETIC" in out.with_suffix(".provenance.md").read_text()


def test_knee_interpolation():
    # Table 5.2: 2200 cps -> 0.39 %, 2400 cps -> 1.39 %: 1 % is crossed at 2322 cps
    assert measured_knee(2200, 0.0039, 2400, 0.0139) == 2322
    r, b = crossing(np.array([1, 2, 3.0]), np.array([0, 0.001, 0.002]))
    assert b == ">" and r == 3
    assert all(k[4] < k[6] and k[5] < 0.01 <= k[7] for k in KNEES)
