"""The statistical check of the fast twin against the SimPy model (src/sipperf/sim/twin_check.py):
the test itself against scipy and Holm's definition, its power on a planted bias, and the stored
grid (datasets/precomputed/sim_twin_check.csv)."""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sipperf.sim.calibration.twin_check import GRID, METRICS, holm, run_case, twin_test
from sipperf.sim.precomputed import load_precomputed


def test_holm_against_its_definition():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 0.2, rng.integers(1, 12))
        # Holm: reject H_(1..k) where k is the largest index with p_(j) <= a/(m-j+1) for all j <= k
        order = np.sort(p)
        m = len(p)
        k = 0
        while k < m and order[k] <= 0.05 / (m - k):
            k += 1
        expect = p <= order[k - 1] if k else np.zeros(m, bool)
        np.testing.assert_array_equal(holm(p), expect)


def _frame(a, b, metric="w_us"):
    rows = [{"rate_cps": 1.0, "threads": 1, "cores": 1, "rcvbuf_pkts": 20, "engine": e, **{m: np.nan for m in METRICS}}
            for e in ("twin",) * len(a) + ("simpy",) * len(b)]
    df = pd.DataFrame(rows)
    df[list(METRICS)] = 1.0
    df[metric] = np.r_[a, b]
    return df


def test_welch_matches_scipy_and_detects_a_planted_bias():
    rng = np.random.default_rng(1)
    a, b = rng.normal(100, 5, 8), rng.normal(100, 15, 8)
    r = twin_test(_frame(a, b)).set_index("metric").loc["w_us"]
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    # a 10 % bias with small spread is found; equal constant metrics are not "different"
    biased = twin_test(_frame(rng.normal(110, 2, 8), rng.normal(100, 2, 8)))
    assert biased.set_index("metric").loc["w_us", "rejected"]
    assert not biased.set_index("metric").loc["drop_rate", "rejected"]


def test_the_grid_is_rates_threads_cores_buffers():
    keys = {(c["threads"], c["cores"]) for c in GRID}
    assert {c["rcvbuf_pkts"] for c in GRID} == {20, 200}
    assert {t for t, _ in keys} == {1, 4, 16} and {m for _, m in keys} == {1, 2}
    assert len(GRID) == len(set(tuple(sorted(c.items())) for c in GRID)) == 24


def test_stored_check_passes_and_is_complete():
    df = load_precomputed("twin_check")
    cases = df.groupby(["rate_cps", "threads", "cores", "rcvbuf_pkts"])
    assert cases.ngroups == len(GRID)
    assert (cases["engine"].value_counts().unstack() >= 8).all().all()
    res = twin_test(df)
    assert not res["rejected"].any()
    simpy_rows = df[df["engine"] == "simpy"]
    assert (simpy_rows["crn_same_fate"] == 1.0).all() and simpy_rows["crn_max_dt_us"].max() < 1e-3
    # independent seeds: no seed shared between the engines of a case
    for _, d in df.groupby(["rate_cps", "threads", "cores", "rcvbuf_pkts"]):
        assert not set(d.loc[d.engine == "twin", "seed"]) & set(d.loc[d.engine == "simpy", "seed"])


def test_run_case_small():
    rows = run_case({"rate_cps": 1700.0, "threads": 4, "cores": 2, "rcvbuf_pkts": 20}, reps=1, calls=200)
    assert [r["engine"] for r in rows] == ["twin", "simpy"]
    assert rows[1]["crn_same_fate"] == 1.0 and rows[1]["crn_max_dt_us"] < 1e-3
