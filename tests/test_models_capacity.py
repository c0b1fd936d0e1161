"""Capacity (thesis §7.6), the traffic model of seed `tcp`, and the max-rate bisection."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from sipperf.models.capacity import capacity, max_rate, threads_for_capacity, traffic_requests_per_s
from sipperf.models.mmck import erlang_b, mmck


def test_thesis_capacity_examples():
    # §7.6: 4000 cps for 2 cores, 6000 for 4 cores (1 processor) and for 6 cores on 2 processors
    assert capacity(1, 2) == 4000 and capacity(1, 4) == 6000 and capacity(2, 6) == 6000
    assert [threads_for_capacity(1, 2), threads_for_capacity(1, 4), threads_for_capacity(2, 6)] == [4, 6, 6]
    assert capacity(1, 1, c11=800) == 2400
    for bad in [(0, 1), (3, 2), (1, 0)]:
        with pytest.raises(ValueError):
            capacity(*bad)


def test_seed_traffic_model_numbers():
    t = traffic_requests_per_s(300_000, 0.1, 180.0, 3600.0, mid_call_requests=4)
    assert t.registration_bhca == pytest.approx(300_000)
    assert t.call_bhca == pytest.approx(600_000)
    assert round(t.registrations_per_s) == 83 and round(t.calls_per_s) == 167
    assert round(t.call_requests_per_s) == 833
    assert t.packets_per_s == pytest.approx(6 * 600_000 / 3600 + 2 * 300_000 / 3600)
    with pytest.raises(ValueError):
        traffic_requests_per_s(10, 0.1, 0.0, 3600)


def test_max_rate_against_closed_form_erlang_b_one_server():
    # B(1, a) = a / (1 + a)  ->  largest a with B <= t is t / (1 - t)
    for t in (0.001, 0.01, 0.05):
        a = max_rate(lambda x: float(erlang_b(1, x)), t, 0.0, 10.0)
        assert a == pytest.approx(t / (1 - t), rel=1e-8)


def test_max_rate_against_brentq_on_mmck():
    f = lambda lam: float(mmck(lam, 1e6 / 151.0, 2, 200).p_block)  # noqa: E731
    got = max_rate(f, 0.01, 1.0, 20000.0)
    ref = optimize.brentq(lambda x: f(x) - 0.01, 1.0, 20000.0, xtol=1e-9)
    assert got == pytest.approx(ref, rel=1e-7)
    assert f(got) <= 0.01 < f(got * (1 + 1e-6))


def test_max_rate_edges():
    assert max_rate(lambda x: 0.0, 0.01, 0.0, 5.0) == 5.0
    with pytest.raises(ValueError):
        max_rate(lambda x: 0.5, 0.01, 0.0, 5.0)
    with pytest.raises(ValueError):
        max_rate(lambda x: x, 0.01, 5.0, 1.0)
    # vectorised models work via float()
    assert max_rate(lambda x: np.float64(x / 100), 0.2, 0.0, 100.0) == pytest.approx(20.0, rel=1e-8)
