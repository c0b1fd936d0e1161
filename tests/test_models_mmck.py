"""M/M/c/K against high-precision mpmath sums, the thesis's Tables 5.2–5.6 and limits."""
from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sipperf.models.mmck import erlang_b, erlang_c, mmc, mmck


def ref_direct(lam, mu, c, K, dps=50):
    """Stationary distribution by brute-force summation of every p_n (mpmath)."""
    with mp.workdps(dps):
        a = mp.mpf(lam) / mp.mpf(mu)
        p = [a ** n / mp.factorial(n) if n <= c else a ** c / mp.factorial(c) * (a / c) ** (n - c)
             for n in range(K + 1)]
        s = mp.fsum(p)
        pk = p[K] / s
        lq = mp.fsum((n - c) * p[n] for n in range(c, K + 1)) / s
        L = mp.fsum(n * p[n] for n in range(K + 1)) / s
        thr = lam * (1 - pk)
        return {"p_block": float(pk), "Lq": float(lq), "L": float(L), "W": float(L / thr), "Wq": float(lq / thr)}


def ref_closed(lam, mu, c, K, dps=80):
    """Same, with the tail summed by mpmath's exact geometric-series formulas (for K up to 1e5)."""
    with mp.workdps(dps):
        a = mp.mpf(lam) / mp.mpf(mu)
        r = a / c
        m = K - c
        head = mp.fsum(a ** n / mp.factorial(n) for n in range(c))
        pc_u = a ** c / mp.factorial(c)
        if r == 1:
            g, h = mp.mpf(m + 1), mp.mpf(m) * (m + 1) / 2
        else:
            g = (1 - r ** (m + 1)) / (1 - r)
            h = r * (1 - (m + 1) * r ** m + m * r ** (m + 1)) / (1 - r) ** 2
        s = head + pc_u * g
        pk = pc_u * r ** m / s
        lq = pc_u * h / s
        L = lq + a * (1 - pk)
        thr = lam * (1 - pk)
        return {"p_block": float(pk), "Lq": float(lq), "L": float(L), "W": float(L / thr), "Wq": float(lq / thr)}


CASES_DIRECT = [
    (0.5, 1.0, 1, 10), (9.5, 1.0, 10, 200), (1.0, 1.0, 1, 5), (100.0, 1.0, 10, 200), (0.001, 1.0, 50, 60),
    (13200.0, 1e6 / 151.0, 2, 200), (5.0, 1.0, 8, 8), (79.99, 1.0, 80, 400), (160.0, 1.0, 16, 2000),
    (30.0, 2.0, 16, 3000), (999.0, 1.0, 1000, 1500),
]
CASES_CLOSED = [
    (1.0, 1.0, 1, 100_000), (0.99, 1.0, 1, 100_000), (10.0, 1.0, 1, 100_000), (9_999.0, 10.0, 1000, 100_000),
    (1.0001 * 500, 1.0, 500, 100_000), (10_000.0, 1.0, 1000, 100_000), (1.0 + 1e-9, 1.0, 1, 50),
    (1.0 - 1e-7, 1.0, 1, 5000),
]


@pytest.mark.parametrize("lam,mu,c,K", CASES_DIRECT)
def test_matches_direct_mpmath_sum(lam, mu, c, K):
    ref = ref_direct(lam, mu, c, K)
    r = mmck(lam, mu, c, K)
    for k, v in ref.items():
        got = float(getattr(r, k))
        assert got == pytest.approx(v, rel=1e-9, abs=1e-300), k


@pytest.mark.parametrize("lam,mu,c,K", CASES_CLOSED)
def test_matches_mpmath_closed_form_large_K(lam, mu, c, K):
    ref = ref_closed(lam, mu, c, K)
    r = mmck(lam, mu, c, K)
    for k, v in ref.items():
        assert float(getattr(r, k)) == pytest.approx(v, rel=1e-8), k


def test_vectorised_equals_elementwise():
    lam = np.array([0.0, 1.0, 5.0, 9.0, 20.0, 100.0])
    r = mmck(lam, 1.0, 8, 40)
    assert r.p_block.shape == lam.shape
    for i, l in enumerate(lam):
        s = mmck(l, 1.0, 8, 40)
        assert r.p_block[i] == pytest.approx(float(s.p_block), rel=1e-14, abs=0)
        assert r.W[i] == pytest.approx(float(s.W), rel=1e-14)
    # broadcasting over c and K as well
    rb = mmck(lam[:, None], 1.0, np.array([1, 2, 8]), 40)
    assert rb.p_block.shape == (6, 3)
    assert rb.p_block[3, 1] == pytest.approx(float(mmck(9.0, 1.0, 2, 40).p_block), rel=1e-14)


def test_zero_arrivals():
    r = mmck(0.0, 2.0, 3, 10)
    assert float(r.p_block) == 0 and float(r.L) == 0 and float(r.W) == pytest.approx(0.5)


def test_erlang_b_and_c_against_mpmath():
    for c, a in [(1, 0.5), (10, 7.0), (100, 95.0), (1000, 950.0), (50, 0.01)]:
        with mp.workdps(60):
            terms = [mp.mpf(a) ** k / mp.factorial(k) for k in range(c + 1)]
            b = terms[-1] / mp.fsum(terms)
            cc = c * b / (c - a * (1 - b))
        assert float(erlang_b(c, a)) == pytest.approx(float(b), rel=1e-10)
        assert float(erlang_c(c, a)) == pytest.approx(float(cc), rel=1e-10)


def test_K_equal_c_is_erlang_b():
    assert float(mmck(7.3, 1.0, 9, 9).p_block) == pytest.approx(float(erlang_b(9, 7.3)), rel=1e-13)


def test_mm1k_closed_form():
    rho, K = 0.8, 12
    pk = (1 - rho) * rho ** K / (1 - rho ** (K + 1))
    L = rho / (1 - rho) - (K + 1) * rho ** (K + 1) / (1 - rho ** (K + 1))
    r = mmck(rho, 1.0, 1, K)
    assert float(r.p_block) == pytest.approx(pk, rel=1e-12)
    assert float(r.L) == pytest.approx(L, rel=1e-12)


# The thesis's own M/M/c/K cells: Tables 5.2-5.6, K = 200, mu = 1/E[X] with the printed E[X].
THESIS_5 = [  # c, lambda pkt/s, E[X] us, printed drop probability (model)
    (2, 13200, 151.0, 0.0035), (2, 14400, 140.37, 0.0119),
    (4, 10800, 372.0, 0.0075), (4, 13200, 342.57, 0.115),
    (6, 8400, 711.0, 0.0031), (6, 9600, 629.0, 0.0088), (6, 10800, 563.31, 0.0147),
    (8, 7200, 1113.0, 0.0059), (8, 8400, 959.0, 0.0093), (8, 9600, 874.75, 0.047),
    (16, 4800, 3325.0, 0.00425), (16, 5400, 2980.0, 0.0087), (16, 6000, 2758.0, 0.0334),
]


@pytest.mark.parametrize("c,lam,ex_us,printed", THESIS_5)
def test_reproduces_thesis_tables_5_2_to_5_6(c, lam, ex_us, printed):
    # printed values have 2-3 significant digits and E[X] is itself rounded: 4 % tolerance
    assert float(mmck(lam, 1e6 / ex_us, c, 200).p_block) == pytest.approx(printed, rel=0.04)


@pytest.mark.parametrize("bad", [dict(c=0), dict(c=2.5), dict(K=1, c=2), dict(lam=-1.0), dict(mu=0.0),
                                 dict(lam=np.nan)])
def test_invalid_parameters_raise(bad):
    kw = dict(lam=1.0, mu=1.0, c=2, K=10) | bad
    with pytest.raises(ValueError):
        mmck(**kw)


@settings(max_examples=50, deadline=None)
@given(c=st.integers(1, 64), extra=st.integers(0, 500), mu=st.floats(0.1, 10.0),
       lams=st.lists(st.floats(0.0, 1000.0), min_size=2, max_size=8))
def test_property_pblock_in_unit_interval_and_monotone(c, extra, mu, lams):
    lam = np.sort(np.asarray(lams))
    r = mmck(lam, mu, c, c + extra)
    pb = r.p_block
    assert np.all((pb >= 0) & (pb <= 1))
    assert np.all(np.diff(pb) >= -1e-12 * np.maximum(pb[1:], 1e-300))
    assert np.all(r.utilisation <= 1 + 1e-12) and np.all(r.L >= r.Lq - 1e-12)
    assert np.allclose(r.L, r.throughput * r.W, rtol=1e-10)


@settings(max_examples=50, deadline=None)
@given(c=st.integers(1, 100), rho=st.floats(0.01, 0.9), mu=st.floats(0.1, 10.0))
def test_property_tends_to_mmc_as_K_grows(c, rho, mu):
    lam = rho * c * mu
    inf = mmc(lam, mu, c)
    r = mmck(lam, mu, c, c + 5000)  # rho^5000 < 1e-228
    assert float(r.Wq) == pytest.approx(float(inf.Wq), rel=1e-9, abs=1e-300)
    assert float(r.p_wait) == pytest.approx(float(inf.p_wait), rel=1e-9)
    # and the approach is monotone: a bigger buffer never blocks more
    assert float(mmck(lam, mu, c, c + 10).p_block) >= float(mmck(lam, mu, c, c + 20).p_block)
