"""Operational laws (utilisation, Little, service demand, PASTA) against brute force and M/M/1."""
from __future__ import annotations

import numpy as np
import pytest

from sipperf.models.kingman import lindley_waits
from sipperf.models.operational import (
    busy_at, busy_fraction, demand_with_background, interarrival_scv, merge_intervals, service_demand,
    time_average_count,
)


def _random_intervals(rng, n=300):
    s = rng.uniform(0, 100, n)
    return s, s + rng.exponential(0.4, n)


def test_merge_by_hand():
    s, e = merge_intervals([5, 0, 1, 10, 2], [6, 2, 3, 10, 2.5])
    assert s.tolist() == [0, 5] and e.tolist() == [3, 6]     # empty [10,10) dropped


def test_busy_at_against_a_loop():
    rng = np.random.default_rng(1)
    s, e = _random_intervals(rng)
    t = rng.uniform(-1, 101, 5000)
    brute = np.array([np.any((s < ti) & (ti < e)) for ti in t])
    assert np.array_equal(busy_at(t, s, e), brute)


def test_busy_fraction_against_a_fine_grid():
    rng = np.random.default_rng(2)
    s, e = _random_intervals(rng)
    grid = np.linspace(10, 60, 2_000_001)[:-1]
    brute = np.mean([np.any((s <= g) & (g < e)) for g in grid[::200]])   # 10 000 points
    assert busy_fraction(s, e, 10, 60) == pytest.approx(brute, abs=0.01)
    assert busy_fraction([0, 1], [2, 3], 0, 4) == pytest.approx(0.75)    # union [0, 3)


def test_time_average_count_by_hand_and_grid():
    # two overlapping stays count twice where they overlap: (2 + 2) / 4
    assert time_average_count([0, 1], [2, 3], 0, 4) == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    s, e = _random_intervals(rng)
    g = np.linspace(20, 70, 20001)[:-1]
    brute = np.mean([np.sum((s <= x) & (x < e)) for x in g])
    assert time_average_count(s, e, 20, 70) == pytest.approx(brute, rel=0.01)


def test_mm1_utilisation_little_and_pasta():
    """M/M/1 at ρ = 0.6 simulated with the Lindley recursion: U = ρ, L = ρ/(1-ρ), and a Poisson
    arrival finds the server busy with probability ρ (PASTA)."""
    rng = np.random.default_rng(5)
    n, lam, mu = 200_000, 0.6, 1.0
    arr = np.cumsum(rng.exponential(1 / lam, n))
    x = rng.exponential(1 / mu, n)
    w = lindley_waits(np.diff(arr, prepend=0.0), x)
    start, dep = arr + w, arr + w + x
    t0, t1 = arr[n // 10], arr[-1]
    assert busy_fraction(start, dep, t0, t1) == pytest.approx(lam / mu, rel=0.03)
    assert time_average_count(arr, dep, t0, t1) == pytest.approx((lam / mu) / (1 - lam / mu), rel=0.06)
    found_busy = busy_at(arr[n // 10:], start, dep).mean()
    assert found_busy == pytest.approx(lam / mu, rel=0.03)
    # the service-demand law recovers E[X] = 1/mu from U and the throughput
    thr = np.sum((dep >= t0) & (dep < t1)) / (t1 - t0)
    assert float(service_demand(busy_fraction(start, dep, t0, t1), thr)) == pytest.approx(1 / mu, rel=0.03)


def test_pasta_fails_for_regular_arrivals():
    """D/D/1 with A = 2, X = 1: busy half the time, yet no arrival ever finds the server busy."""
    arr = np.arange(0.0, 200.0, 2.0)
    start, dep = arr, arr + 1.0
    assert busy_fraction(start, dep, 0, 200) == pytest.approx(0.5)
    assert not busy_at(arr, start, dep).any()


def test_interarrival_scv():
    rng = np.random.default_rng(8)
    assert interarrival_scv(np.cumsum(rng.exponential(1.0, 100_000))) == pytest.approx(1.0, rel=0.03)
    assert interarrival_scv(np.arange(10.0)) == pytest.approx(0.0, abs=1e-20)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        busy_at([0.0, bad], [0.0], [1.0])
    with pytest.raises(ValueError):
        busy_fraction([0.0], [bad], 0, 1)
    with pytest.raises(ValueError):
        time_average_count([0.0], [1.0], 0, bad)
    with pytest.raises(ValueError):
        interarrival_scv([0.0, 1.0, bad])
    with pytest.raises(ValueError):
        service_demand(bad, 1.0)
    with pytest.raises(ValueError):
        merge_intervals([0.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        merge_intervals([2.0], [1.0])
    with pytest.raises(ValueError):
        busy_fraction([0.0], [1.0], 1.0, 1.0)
    with pytest.raises(ValueError):
        service_demand(0.5, 0.0)


def test_demand_with_background_recovers_a_known_line_and_its_noise():
    """U = U0 + λ D: exact on a noiseless line; on noisy lines the 95 % interval of D covers the
    true D in about 95 % of repetitions; U/λ overstates D by U0/λ, the more the lighter the load."""
    lam = np.array([85.0, 210, 420, 580, 710, 790])
    fit = demand_with_background(0.015 + lam * 270e-6, lam)
    assert fit.demand == pytest.approx(270e-6) and fit.background == pytest.approx(0.015)
    assert service_demand(0.015 + 85 * 270e-6, 85) > service_demand(0.015 + 790 * 270e-6, 790) > 270e-6
    rng = np.random.default_rng(7)
    cover = 0
    for _ in range(400):
        f = demand_with_background(0.015 + lam * 270e-6 + rng.normal(0, 0.004, lam.size), lam)
        lo, hi = f.interval()
        cover += lo <= 270e-6 <= hi
    assert 0.90 <= cover / 400 <= 0.99
    with pytest.raises(ValueError):
        demand_with_background([0.1, 0.2], [10, 20])
    with pytest.raises(ValueError):
        demand_with_background([0.1, 0.2, 0.3], [10, 10, 10])


def test_saturation_throughput_is_where_the_utilisation_law_fills_the_servers():
    from sipperf.models import saturation_throughput

    # 4 ms per call, 5 % idle work, one CPU: (1 - 0.05) / 0.004 = 237.5 calls/s; two CPUs: 487.5
    assert saturation_throughput(0.004, 0.05) == pytest.approx(237.5)
    assert saturation_throughput(0.004, 0.05, 2) == pytest.approx(487.5)
    # a fitted law recovers a planted ceiling: U = 0.05 + 0.004 X on runs below it
    x = np.array([100.0, 150.0, 200.0])
    fit = demand_with_background(0.05 + 0.004 * x, x)
    assert saturation_throughput(fit.demand, fit.background) == pytest.approx(237.5, rel=1e-9)
    for bad in ((0.0, 0.0), (-1.0, 0.0), (0.004, 1.0), (float("nan"), 0.0)):
        with pytest.raises(ValueError):
            saturation_throughput(*bad)
