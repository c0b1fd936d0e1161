"""Finite birth–death queues against mpmath products, closed forms and an independent linear solve."""
from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from sipperf.models.birth_death import birth_death, slow_server_rates, work_conserving_rates
from sipperf.models.mmck import mmck


def ref_mp(lam, rates, dps=60):
    """p_n ∝ ∏ λ/μ_i summed exactly in mpmath."""
    with mp.workdps(dps):
        w = [mp.mpf(1)]
        for mu in rates:
            w.append(w[-1] * mp.mpf(lam) / mp.mpf(mu))
        s = mp.fsum(w)
        p = [x / s for x in w]
        L = mp.fsum(i * x for i, x in enumerate(p))
        return [float(x) for x in p], float(L)


def generator_solve(lam, rates):
    """Stationary vector of the CTMC generator Q by least squares on [Q^T; 1] (no product formula)."""
    K = len(rates)
    Q = np.zeros((K + 1, K + 1))
    for n in range(K):
        Q[n, n + 1] = lam
        Q[n + 1, n] = rates[n]
    Q -= np.diag(Q.sum(axis=1))
    A = np.vstack([Q.T, np.ones(K + 1)])
    b = np.zeros(K + 2)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


@pytest.mark.parametrize("lam,rates", [
    (1.0, [2.0, 3.0, 0.5, 7.0]),
    (9.0, [1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0, 4.0]),
    (0.01, [5.0] * 12),
    (50.0, [1.0, 1.5, 2.5, 2.5, 2.5]),
])
def test_against_mpmath_and_generator(lam, rates):
    r = birth_death(lam, rates)
    p_ref, L_ref = ref_mp(lam, rates)
    np.testing.assert_allclose(r.p, p_ref, rtol=1e-12, atol=1e-300)
    assert float(r.L) == pytest.approx(L_ref, rel=1e-12)
    np.testing.assert_allclose(r.p, generator_solve(lam, rates), rtol=1e-8, atol=1e-12)
    assert float(r.W) == pytest.approx(L_ref / (lam * (1 - p_ref[-1])), rel=1e-12)


@pytest.mark.parametrize("lam,mu,c,K", [(13200.0, 1e6 / 151.0, 2, 200), (5.0, 1.0, 8, 8), (30.0, 2.0, 16, 300),
                                        (0.3, 1.0, 1, 10), (17.0, 1.0, 16, 1000)])
def test_mmck_is_the_min_n_c_chain(lam, mu, c, K):
    rates = np.minimum(np.arange(1, K + 1), c) * mu
    r, m = birth_death(lam, rates), mmck(lam, mu, c, K)
    assert float(r.p_block) == pytest.approx(float(m.p_block), rel=1e-9)
    assert float(r.L) == pytest.approx(float(m.L), rel=1e-9)
    assert float(r.W) == pytest.approx(float(m.W), rel=1e-9)


@pytest.mark.parametrize("rho,K", [(0.5, 10), (0.9, 200), (1.3, 50), (0.999, 1000)])
def test_mm1k_closed_form(rho, K):
    r = birth_death(rho, np.ones(K))
    assert float(r.p_block) == pytest.approx((1 - rho) * rho**K / (1 - rho ** (K + 1)), rel=1e-10)


def test_large_buffer_overload_limit_and_vectorised():
    r = birth_death(np.array([0.5, 1.2]), np.ones(100_000))
    assert r.p.shape == (2, 100_001)
    assert float(r.p_block[0]) < 1e-300 or float(r.p_block[0]) == 0.0
    assert float(r.p_block[1]) == pytest.approx(1 - 1 / 1.2, rel=1e-9)
    assert np.all(np.isfinite(r.L))


def test_zero_arrivals():
    r = birth_death(0.0, [1.0, 1.0])
    np.testing.assert_array_equal(r.p, [1.0, 0.0, 0.0])
    assert float(r.throughput) == 0.0


def test_rate_helpers():
    np.testing.assert_allclose(slow_server_rates(1.0, 4, 6, beta=1.25), [0.2, 0.4, 0.6, 0.8, 0.8, 0.8])
    np.testing.assert_allclose(work_conserving_rates(2.0, 4, 4, beta=2.0), [2.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(work_conserving_rates(2.0, 1, 3, beta=2.0), [2.0, 2.0, 2.0])
    # the thesis's chain is M/M/c/K with mu = 1/(beta c E[X1])
    x1, c, K, b, lam = 65e-6, 4, 200, 1.3, 13200.0
    r = birth_death(lam, slow_server_rates(1 / x1, c, K, b))
    assert float(r.p_block) == pytest.approx(float(mmck(lam, 1 / (b * c * x1), c, K).p_block), rel=1e-9)


@pytest.mark.parametrize("lam,rates", [(np.nan, [1.0]), (np.inf, [1.0]), (-1.0, [1.0]), (1.0, [1.0, np.nan]),
                                       (1.0, [1.0, 0.0]), (1.0, [np.inf]), (1.0, [])])
def test_bad_input(lam, rates):
    with pytest.raises(ValueError):
        birth_death(lam, rates)


@pytest.mark.parametrize("args", [(np.nan, 2, 4), (1.0, 0, 4), (1.0, 2.5, 4), (1.0, 4, 2), (-1.0, 1, 1)])
def test_bad_core(args):
    with pytest.raises(ValueError):
        slow_server_rates(*args)
    with pytest.raises(ValueError):
        work_conserving_rates(*args)
    with pytest.raises(ValueError):
        work_conserving_rates(1.0, 2, 4, beta=0.5)
