"""G/G/1: Lindley recursion, Kingman's bound and approximation (ch. 5), against closed forms.

References independent of the module: the Pollaczek–Khinchine closed form (M/G/1), the exact
GI/M/1 mean wait (root of σ = A*(μ(1-σ)), solved here with scipy), M/M/1's ρ/(μ-λ), and a plain
Python loop for the recursion.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from sipperf.models.kingman import implied_ca2, kingman_bound, kingman_wait, lindley_waits


def _lindley_loop(a, x):
    w = [0.0]
    for n in range(1, len(a)):
        w.append(max(0.0, w[-1] + x[n - 1] - a[n]))
    return np.array(w)


def gi_m_1_wait(lam: float, mu: float, laplace) -> float:
    """Exact mean wait of GI/M/1: σ solves σ = A*(μ(1-σ)); W = σ / (μ(1-σ))."""
    sigma = brentq(lambda s: s - laplace(mu * (1.0 - s)), 1e-12, 1.0 - 1e-12)
    return sigma / (mu * (1.0 - sigma))


def test_lindley_by_hand():
    # arrivals at 0, 1, 2, 7; services 2, 2, 2, 1 -> waits 0, 1, 2, 0
    assert lindley_waits([0, 1, 1, 5], [2, 2, 2, 1]).tolist() == [0, 1, 2, 0]


def test_lindley_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    a, x = rng.exponential(1.0, 2000), rng.gamma(0.5, 1.6, 2000)
    assert np.allclose(lindley_waits(a, x), _lindley_loop(a, x), atol=1e-9)


def test_lindley_mm1_mean_wait():
    rng = np.random.default_rng(7)
    n, lam, mu = 400_000, 0.7, 1.0
    w = lindley_waits(rng.exponential(1 / lam, n), rng.exponential(1 / mu, n))
    exact = lam / (mu * (mu - lam))          # M/M/1: ρ/(μ-λ)
    assert w[n // 10:].mean() == pytest.approx(exact, rel=0.06)


@pytest.mark.parametrize("rho,cs2", [(0.1, 0.0), (0.5, 0.03), (0.9, 1.0), (0.97, 4.0)])
def test_kingman_is_pollaczek_khinchine_for_poisson(rho, cs2):
    ex = 150e-6
    lam = rho / ex
    pk = lam * (1 + cs2) * ex ** 2 / (2 * (1 - rho))
    assert float(kingman_wait(lam, ex, 1.0, cs2)) == pytest.approx(pk, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 4, 50])
@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_bound_holds_for_erlang_arrivals_exponential_service(k, rho):
    mu, lam = 1.0, rho
    exact = gi_m_1_wait(lam, mu, lambda s: (k * lam / (k * lam + s)) ** k)   # E_k/M/1
    assert float(kingman_bound(lam, 1 / mu, 1 / k, 1.0)) >= exact * (1 - 1e-9)


def test_deterministic_arrivals_bound_and_heavy_traffic():
    mu = 1.0
    for rho in (0.5, 0.8, 0.99):
        exact = gi_m_1_wait(rho, mu, lambda s: np.exp(-s / rho))               # D/M/1
        assert float(kingman_bound(rho, 1.0, 0.0, 1.0)) >= exact
    # approximation error vanishes as rho -> 1 (Kingman's heavy-traffic limit)
    exact = gi_m_1_wait(0.995, mu, lambda s: np.exp(-s / 0.995))
    assert float(kingman_wait(0.995, 1.0, 0.0, 1.0)) == pytest.approx(exact, rel=0.01)


def test_kingman_approximation_against_simulated_dg1():
    """D/Gamma/1 by the Lindley recursion (c_a² = 0, c_s² = 0.5) at ρ = 0.95: within 10 %."""
    rng = np.random.default_rng(11)
    n, ex, rho = 600_000, 1.0, 0.95
    a = np.full(n, ex / rho)
    x = rng.gamma(2.0, ex / 2.0, n)
    sim = lindley_waits(a, x)[n // 10:].mean()
    assert float(kingman_bound(rho / ex, ex, 0.0, 0.5)) >= sim * 0.97
    assert float(kingman_wait(rho / ex, ex, 0.0, 0.5)) == pytest.approx(sim, rel=0.10)


def test_deterministic_queue_never_waits():
    assert float(kingman_wait(0.5, 1.0, 0.0, 0.0)) == 0.0
    assert lindley_waits(np.full(100, 2.0), np.full(100, 1.0)).max() == 0.0


def test_unstable_is_inf_and_implied_ca2_round_trip():
    assert np.isinf(kingman_wait(2.0, 1.0, 1.0, 1.0))
    assert np.isinf(kingman_bound(1.0, 1.0, 1.0, 1.0))
    lam, ex, cs2 = np.array([600.0, 3600.0, 5400.0]), 160e-6, 0.03
    ca2 = np.array([0.05, 0.6, 1.3])
    w = kingman_wait(lam, ex, ca2, cs2)
    assert np.allclose(implied_ca2(lam, ex, w, cs2), ca2)
    assert np.isnan(implied_ca2(7000.0, ex, 1e-3, cs2))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_raise(bad):
    for f in (kingman_wait, kingman_bound):
        with pytest.raises(ValueError):
            f(bad, 1e-4, 1.0, 1.0)
        with pytest.raises(ValueError):
            f(100.0, 1e-4, bad, 1.0)
    with pytest.raises(ValueError):
        implied_ca2(100.0, 1e-4, bad, 0.0)
    with pytest.raises(ValueError):
        lindley_waits([0.0, bad], [1.0, 1.0])


def test_bad_values_raise():
    with pytest.raises(ValueError):
        kingman_wait(-1.0, 1e-4, 1.0, 1.0)
    with pytest.raises(ValueError):
        kingman_wait(1.0, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        kingman_wait(1.0, 1e-4, -0.1, 1.0)
    with pytest.raises(ValueError):
        kingman_bound(0.0, 1e-4, 1.0, 1.0)
    with pytest.raises(ValueError):
        lindley_waits([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        lindley_waits([1.0, -2.0], [1.0, 1.0])
