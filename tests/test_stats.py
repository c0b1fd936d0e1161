"""Batch means, MSER-5, percentiles against independent references."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from sipperf import stats


def _ar1(n, phi, rng, mu=0.0):
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0] / np.sqrt(1 - phi ** 2)
    for i in range(1, n):  # plain recurrence (reference, not vectorised)
        x[i] = phi * x[i - 1] + e[i]
    return x + mu


def test_iid_half_width_matches_t_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(5, 2, 30 * 1000)
    ci = stats.batch_means_ci(x, batches=30)
    y = x.reshape(30, 1000).mean(axis=1)
    ref = st.t.ppf(0.975, 29) * np.std(y, ddof=1) / np.sqrt(30)
    assert ci.half_width == pytest.approx(ref, rel=1e-12)
    assert ci.mean == pytest.approx(x.mean())


def test_ar1_half_width_matches_asymptotic_variance():
    # AR(1), unit innovations: n·Var(mean) -> 1/(1-phi)^2 (closed form)
    phi, n = 0.8, 300_000
    x = _ar1(n, phi, np.random.default_rng(7))
    ci = stats.batch_means_ci(x, batches=30)
    ref = st.t.ppf(0.975, 29) * np.sqrt(1 / (1 - phi) ** 2 / n)
    assert ci.half_width == pytest.approx(ref, rel=0.35)
    # a naive iid interval would be far too narrow: sd(x)/sqrt(n) with var 1/(1-phi^2)
    naive = 1.96 * np.sqrt(1 / (1 - phi ** 2) / n)
    assert ci.half_width > 2 * naive


def test_ar1_coverage():
    rng = np.random.default_rng(3)
    cov = []
    for _ in range(200):
        x = _ar1(6000, 0.5, rng, mu=1.0)
        ci = stats.batch_means_ci(x, batches=20)
        cov.append(ci.low <= 1.0 <= ci.high)
    assert 0.88 <= np.mean(cov) <= 0.99


def test_mser5_finds_transient():
    rng = np.random.default_rng(4)
    warm = 10 + np.linspace(40, 0, 500)  # decaying initial bias
    x = np.concatenate((warm + rng.normal(0, 1, 500), 10 + rng.normal(0, 1, 5000)))
    d = stats.mser5(x)
    assert d % 5 == 0 and 350 <= d <= 700
    assert stats.mser5(rng.normal(0, 1, 5000)) < 500
    assert len(stats.truncate_warmup(x)) == len(x) - d


def test_mser5_brute_force_reference():
    rng = np.random.default_rng(5)
    x = np.concatenate((rng.normal(3, 1, 50), rng.normal(0, 1, 300)))
    z = x[: len(x) // 5 * 5].reshape(-1, 5).mean(axis=1)
    k = len(z)
    ref = min(range(k // 2 + 1), key=lambda d: sum((v - np.mean(z[d:])) ** 2 for v in z[d:]) / (k - d) ** 2)
    assert stats.mser5(x) == 5 * ref


def test_percentiles_type7_reference():
    x = [5.0, 1.0, 4.0, 2.0, 3.0, np.nan, 10.0]
    s = sorted(v for v in x if v == v)
    def type7(q):
        h = (len(s) - 1) * q / 100
        lo = int(np.floor(h))
        return s[lo] + (h - lo) * (s[min(lo + 1, len(s) - 1)] - s[lo])
    got = stats.percentiles(x, [10, 50, 99])
    assert got == pytest.approx([type7(10), type7(50), type7(99)])


def test_too_few_observations():
    with pytest.raises(ValueError, match="at least 30"):
        stats.batch_means_ci(np.arange(10.0))


def test_tabled_t_quantiles_match_scipy():
    # the table lets batch_means_ci run without importing scipy.stats (start-up time)
    for (df, p), v in stats._T_QUANTILES.items():
        assert v == pytest.approx(st.t.ppf(p, df), rel=1e-14)
    assert stats.t_quantile(0.975, 7) == pytest.approx(st.t.ppf(0.975, 7), rel=1e-14)  # not tabled


# ---- run-length planning and comparisons (chapter "How to run a load test")

def _ar1_fast(n, phi, rng, reps=1):
    """AR(1) with unit innovations, stationary start, ``reps`` independent series (rows), by
    scipy's linear filter (an independent implementation of the recurrence above)."""
    from scipy.signal import lfilter

    e = rng.standard_normal((reps, n))
    e[:, 0] /= np.sqrt(1 - phi ** 2)
    x0 = e[:, :1].copy()
    out = lfilter([1.0], [1.0, -phi], e[:, 1:], axis=1, zi=phi * x0)[0]
    return np.concatenate([x0, out], axis=1)


def test_variance_inflation_of_ar1_is_its_closed_form():
    # Φ = 1 + 2 Σ r^j = (1 + r)/(1 - r) for an AR(1) series
    rng = np.random.default_rng(11)
    for phi in (0.0, 0.5, 0.8):
        x = _ar1_fast(300_000, phi, rng)[0]
        assert stats.variance_inflation(x) == pytest.approx((1 + phi) / (1 - phi), rel=0.35)
    # and the recurrence helper agrees with the filter on one series
    rng1, rng2 = np.random.default_rng(2), np.random.default_rng(2)
    assert _ar1(50, 0.7, rng1) == pytest.approx(_ar1_fast(50, 0.7, rng2)[0], rel=1e-12)


def test_run_length_formula_by_hand():
    # n = Φ (t σ / ε)², t on b - 1 degrees of freedom, rounded up
    n = stats.run_length(sd=40.0, half_width=2.0, inflation=9.0, level=0.95, batches=30)
    assert n == int(np.ceil(9.0 * (st.t.ppf(0.975, 29) * 40.0 / 2.0) ** 2))
    assert stats.run_length(sd=1.0, half_width=100.0) == 30        # at least one per batch
    with pytest.raises(ValueError):
        stats.run_length(sd=1.0, half_width=0.0)
    with pytest.raises(ValueError):
        stats.run_length(sd=np.nan, half_width=1.0)


def test_planned_run_reaches_the_target_half_width_and_coverage():
    # plan n for an AR(1) series from its known σ and Φ, then run 300 such series: the batch-means
    # half-width is near the target on average and the interval covers the mean about 95 % of the time
    phi, target = 0.6, 0.05
    sd = np.sqrt(1 / (1 - phi ** 2))
    n = stats.run_length(sd, target, inflation=(1 + phi) / (1 - phi))
    xs = _ar1_fast(n, phi, np.random.default_rng(12), reps=300)
    cis = [stats.batch_means_ci(x) for x in xs]
    hw = np.array([c.half_width for c in cis])
    cover = np.mean([c.low <= 0.0 <= c.high for c in cis])
    assert np.median(hw) == pytest.approx(target, rel=0.15)
    assert 0.91 <= cover <= 0.985


def test_paired_and_welch_intervals_match_scipy():
    rng = np.random.default_rng(13)
    a = rng.normal(10, 3, 12)
    b = a - 1.0 + rng.normal(0, 0.5, 12)            # positively correlated pairs
    p = stats.paired_ci(a, b)
    ref = st.ttest_rel(a, b).confidence_interval(0.95)
    assert (p.low, p.high) == pytest.approx((ref.low, ref.high), rel=1e-12)
    w = stats.welch_ci(a, b[:9])
    ref_w = st.ttest_ind(a, b[:9], equal_var=False).confidence_interval(0.95)
    assert (w.low, w.high) == pytest.approx((ref_w.low, ref_w.high), rel=1e-12)
    # with correlated pairs the paired interval is the narrower one
    assert p.half_width < stats.welch_ci(a, b).half_width
    assert p.excludes_zero
    with pytest.raises(ValueError):
        stats.paired_ci(a, b[:5])
    with pytest.raises(ValueError):
        stats.welch_ci([1.0], b)


def test_fractional_degrees_of_freedom_are_not_rounded():
    assert stats.t_quantile(0.975, 29.4) == pytest.approx(st.t.ppf(0.975, 29.4), rel=1e-14)
