"""M/G/1 (thesis ch. 4): α(λ), the six-type service mixture, Pollaczek–Khinchine, Tables 4.4/4.5."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from sipperf.models.mg1 import (
    TABLE_4_3, ServiceMix, alpha, mg1_wait, mixture_moments, thesis_implied_inputs, thesis_mg1,
)

LAM = np.array([600, 1200, 2400, 3600, 4200, 4800, 5400, 6000, 7200.0])
# Thesis Table 4.4 (Poisson) and 4.5 (deterministic): printed alpha, E[X], rho, W(model) (us)
T44 = dict(alpha=[3.0, 5.0, 8.0, 8, 8, 8, 8, 8, 8],
           ex=[133.4, 149.88, 174.53, 179.98, 181.09, 181.185, 183.49, 185.23, 189.5],
           rho=[0.080, 0.1798, 0.4188, 0.6479, 0.7606, 0.8698, 0.9908, 1.111, 1.3644],
           w=[6.0, 16.89, 64.21, 169.19, 293.98, 617.77, 10171.9, np.nan, np.nan])
T45 = dict(alpha=[1.5, 3.0, 6.0, 6, 6, 6, 6, 6, 6],
           ex=[121.03, 130.22, 152.97, 159.89, 163.54, 164.77, 166.59, 168.2, 171.29],
           rho=[0.0726, 0.156, 0.3671, 0.5756, 0.686, 0.7909, 0.8995, 1.009, 1.233],
           w=[4.93, 12.45, 45.39, 111.12, 183.89, 319.68, 765.55, np.nan, np.nan])


def test_alpha_breakpoints_from_thesis_text():
    assert alpha([0, 600, 1200, 2400, 5000], "poisson").tolist() == [1, 3, 5, 8, 8]
    assert alpha([0, 600, 1200, 2400, 1e6], "deterministic").tolist() == [1, 1.5, 3, 6, 6]
    # piecewise linear in between
    assert float(alpha(300)) == pytest.approx(2.0)
    assert float(alpha(1800)) == pytest.approx(6.5)
    assert float(alpha(900, "deterministic")) == pytest.approx(2.25)


@pytest.mark.parametrize("arrivals,table", [("poisson", T44), ("deterministic", T45)])
def test_alpha_matches_tables_4_4_and_4_5(arrivals, table):
    assert np.allclose(alpha(LAM, arrivals), table["alpha"])


def test_alpha_custom_breakpoints_and_errors():
    assert float(alpha(600, breakpoints=([0, 1200], [1.0, 3.2]))) == pytest.approx(2.1)
    with pytest.raises(ValueError):
        alpha(-1.0)
    with pytest.raises(ValueError):
        alpha(10.0, "bursty")  # type: ignore[arg-type]


def test_mixture_moments_against_numerical_integration():
    means = np.array([100e-6, 150e-6, 300e-6])
    sds = np.array([10e-6, 30e-6, 50e-6])
    w = np.array([0.5, 0.3, 0.2])
    ex, ex2 = mixture_moments(means, sds, w)
    pdf = lambda x: sum(wi * stats.norm.pdf(x, m, s) for wi, m, s in zip(w, means, sds))  # noqa: E731
    m1 = integrate.quad(lambda x: x * pdf(x), 0, 1e-3, points=list(means), limit=200)[0]
    m2 = integrate.quad(lambda x: x * x * pdf(x), 0, 1e-3, points=list(means), limit=200)[0]
    assert ex == pytest.approx(m1, rel=1e-6)
    assert ex2 == pytest.approx(m2, rel=1e-6)
    # the common mistake (within-type variances only) understates E[X^2]
    wrong = float(np.dot(w, sds ** 2)) + ex ** 2
    assert ex2 > wrong


def test_servicemix_components_sum_independently():
    means = np.array([[8e-6, 2e-6, 150e-6, 6e-6], [7e-6, 2e-6, 90e-6, 5e-6]])
    sds = np.array([[1e-6, 0, 20e-6, 1e-6], [1e-6, 0, 10e-6, 1e-6]])
    mix = ServiceMix(means, sds, types=("INVITE", "ACK"))
    ex, ex2 = mixture_moments(mix)
    xi = means.sum(1)
    vi = (sds ** 2).sum(1)
    assert ex == pytest.approx(xi.mean())
    assert ex2 == pytest.approx(np.mean(vi + xi ** 2))
    with pytest.raises(ValueError):
        ServiceMix(means, sds, weights=np.array([0.7, 0.7]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 1e-3), st.floats(0, 1e-4)), min_size=1, max_size=8))
def test_property_law_of_total_variance(types):
    m = np.array([t[0] for t in types])
    s = np.array([t[1] for t in types])
    ex, ex2 = mixture_moments(m, s)
    assert ex2 - ex ** 2 == pytest.approx(np.mean(s ** 2) + np.var(m), rel=1e-7, abs=1e-20)


def test_pk_special_cases_mm1_md1():
    mu, lam = 1000.0, 700.0
    r = mg1_wait(lam, 1 / mu, 2 / mu ** 2)  # exponential
    assert float(r.W_s) == pytest.approx(lam / (mu * (mu - lam)))
    r = mg1_wait(lam, 1 / mu, 1 / mu ** 2)  # deterministic
    rho = lam / mu
    assert float(r.W_s) == pytest.approx(rho / (2 * mu * (1 - rho)))
    assert float(r.T_s) == pytest.approx(float(r.W_s) + 1 / mu)


def test_unstable_is_explicit_never_negative():
    r = mg1_wait(np.array([500.0, 1000.0, 1500.0]), 1e-3, 2e-6)
    assert r.stable.tolist() == [True, False, False]
    assert np.isinf(r.W_s[1:]).all() and (r.W_s > 0).all()


@pytest.mark.parametrize("args", [(-1.0, 1e-3, 2e-6), (1.0, 0.0, 1.0), (1.0, 1e-3, 0.5e-6)])
def test_mg1_invalid(args):
    with pytest.raises(ValueError):
        mg1_wait(*args)


@settings(max_examples=50, deadline=None)
@given(ex=st.floats(1e-6, 1e-2), scv=st.floats(0, 10), lams=st.lists(st.floats(0, 1.0), min_size=2, max_size=10))
def test_property_W_nonnegative_and_increasing(ex, scv, lams):
    lam = np.sort(np.asarray(lams)) / ex  # rho in [0, 1]
    r = mg1_wait(lam, ex, ex * ex * (1 + scv))
    assert np.all(r.W_s >= 0)
    assert np.all(r.W_s[1:] >= r.W_s[:-1])  # inf >= inf holds where rho >= 1
    assert np.array_equal(np.isinf(r.W_s), ~r.stable)


def test_thesis_mg1_by_hand():
    """Independent re-computation of eq. 4.1-4.4 for one rate with per-type T_sip."""
    tsip = np.array([160.0, 90.0, 110.0, 80.0, 100.0, 85.0])
    lam = 1800.0
    a = 5 + (8 - 5) * (lam - 1200) / (2400 - 1200)  # alpha(1800) by the thesis's line
    x = [a * kb + 2.0 + t + ks for kb, t, ks in zip(TABLE_4_3["k_sockq_base_us"], tsip, TABLE_4_3["k_snd_us"])]
    ex = sum(x) / 6
    ex2 = sum(v * v for v in x) / 6
    rho = lam * ex * 1e-6
    w = lam * ex2 * 1e-12 / (2 * (1 - rho)) * 1e6
    r = thesis_mg1(lam, tsip, "poisson")
    assert float(r.alpha[0]) == pytest.approx(a)
    assert float(r.ex_us[0]) == pytest.approx(ex)
    assert float(r.W_us[0]) == pytest.approx(w)
    # within-type sds add to E[X^2]
    r2 = thesis_mg1(lam, tsip, "poisson", t_sip_sd_us=20.0)
    assert float(r2.ex2_us2[0]) == pytest.approx(ex2 + 400.0)


@pytest.mark.parametrize("arrivals,table", [("poisson", T44), ("deterministic", T45)])
def test_thesis_tables_consistent_with_pk_and_small_between_type_scv(arrivals, table):
    """Printed W(model) lies between P-K with E[X^2] = E[X]^2 and with SCV 0.05 (i.e. the thesis
    used only the spread of the per-type means); the model is 'N/A' exactly where rho >= 1."""
    ex = np.array(table["ex"]) * 1e-6
    lo = mg1_wait(LAM, ex, ex ** 2)
    hi = mg1_wait(LAM, ex, ex ** 2 * 1.05)
    w = np.array(table["w"])
    ok = ~np.isnan(w)
    assert np.array_equal(lo.stable, ok)
    assert np.all(w[ok] >= lo.W_s[ok] * 1e6 * 0.999) and np.all(w[ok] <= hi.W_s[ok] * 1e6)
    assert np.allclose(lo.rho, table["rho"], atol=0.0011)  # the printed rho = lambda E[X]
    imp = thesis_implied_inputs(LAM, table["ex"], table["w"], table["alpha"])
    assert np.all((imp["scv"][ok] > 0.015) & (imp["scv"][ok] < 0.045))
    assert np.all((imp["t_sip_us"] > 95) & (imp["t_sip_us"] < 120))


def test_pps_from_cps_and_shape_errors():
    from sipperf.models.mg1 import pps_from_cps

    assert pps_from_cps([100, 1200]).tolist() == [600, 7200]  # Table 4.4 first row
    with pytest.raises(ValueError):
        thesis_mg1([600.0, 1200.0, 2400.0], [100.0, 101.0, 102.0])  # per-rate must be (n, 1)
    r = thesis_mg1([600.0, 1200.0, 2400.0], np.array([[100.0], [101.0], [102.0]]))
    assert r.ex_us[2] - r.ex_us[1] == pytest.approx(1.0 + (8 - 5) * 7.9)
