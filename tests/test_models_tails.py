"""Delay distributions (src/sipperf/models/tails.py) against independent references.

References: the M/M/1 sojourn built from its definition (a geometric number of exponential
services, summed with mpmath's incomplete gamma); the M/M/c wait from the stationary distribution
summed in mpmath and its sojourn from the convolution integral (mpmath.quad); an M/M/c FCFS
simulation (Kiefer–Wolfowitz workload vector, written here); the M/D/1 waiting-time distribution
in Erlang's closed form (mpmath); the Pollaczek–Khinchine transform inverted by mpmath's own
Talbot method; Lindley-recursion simulations of M/G/1 and D/M/1; the D/M/1 wait in closed form
(root of σ = A*(μ(1 − σ))).  Nothing is compared with the module's own output.
"""
from __future__ import annotations

import heapq
import math

import mpmath as mp
import numpy as np
import pytest

from sipperf.models import lindley_waits
from sipperf.models.tails import (
    GammaMix, atom_exp_quantile, atom_exp_sf, cramer_lundberg, kingman_wait_quantile, kingman_wait_sf,
    mg1_quantile, mg1_sojourn_sf, mg1_wait_lst, mg1_wait_sf, mm1_sojourn_quantile, mm1_sojourn_sf,
    mmc_sojourn_quantile, mmc_sojourn_sf, mmc_wait_quantile, mmc_wait_sf,
)


# -- references --------------------------------------------------------------------------------------
def mm1_sojourn_from_definition(t: float, lam: float, mu: float) -> float:
    """An arrival finds N customers, P(N = n) = (1 - ρ) ρ^n (PASTA), and stays for N + 1
    exponential services (memoryless residual): P(S > t) = Σ (1 - ρ) ρ^n P(Erlang(n + 1, μ) > t)."""
    rho = mp.mpf(lam) / mu
    return float(mp.nsum(lambda n: (1 - rho) * rho**n * mp.gammainc(n + 1, mu * t, mp.inf, regularized=True),
                         [0, mp.inf]))


def mmc_p_wait(lam: float, mu: float, c: int) -> mp.mpf:
    """P(N ≥ c) from the M/M/c balance equations, summed in mpmath (no Erlang-C formula)."""
    a = mp.mpf(lam) / mu
    p = [a**n / mp.factorial(n) for n in range(c)]
    tail = a**c / mp.factorial(c) / (1 - a / c)
    return tail / (mp.fsum(p) + tail)


def mmc_sojourn_by_quad(t: float, lam: float, mu: float, c: int) -> float:
    """P(S > t) = P(X > t) + ∫_0^t μ e^{-μx} P(W > t - x) dx with P(W > u) = P_W e^{-(cμ - λ)u}."""
    pw, d = mmc_p_wait(lam, mu, c), c * mu - lam
    return float(mp.e ** (-mu * t) + mp.quad(lambda x: mu * mp.e ** (-mu * x) * pw * mp.e ** (-d * (t - x)), [0, t]))


def simulate_mmc_waits(lam: float, mu: float, c: int, n: int, seed: int) -> np.ndarray:
    """FCFS M/M/c by the Kiefer–Wolfowitz recursion: the earliest-free server takes the next arrival."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1 / lam, n))
    x = rng.exponential(1 / mu, n)
    free = [0.0] * c
    w = np.empty(n)
    for i in range(n):
        f = heapq.heappop(free)
        start = max(f, arr[i])
        w[i] = start - arr[i]
        heapq.heappush(free, start + x[i])
    return w


def md1_wait_cdf(t: float, lam: float, d: float) -> float:
    """Erlang's M/D/1 waiting-time distribution: (1 - ρ) Σ_{k ≤ t/D} (λ(kD - t))^k / k! e^{-λ(kD - t)}
    (returned as 1 - P(W > t) to 80 digits, so 1 - it keeps its digits far out in the tail)."""
    with mp.workdps(80):                 # an alternating sum: exact inputs, many digits
        lam, d, t = mp.mpf(lam), mp.mpf(d), mp.mpf(t)
        s = mp.fsum((lam * (k * d - t)) ** k / mp.factorial(k) * mp.e ** (-lam * (k * d - t))
                    for k in range(int(mp.floor(t / d)) + 1))
        return float((1 - lam * d) * s)


def ks_distance(sample: np.ndarray, sf, grid: np.ndarray) -> float:
    emp = np.array([(sample > g).mean() for g in grid])
    return float(np.max(np.abs(emp - sf(grid))))


# -- M/M/1 and M/M/c -------------------------------------------------------------------------------------
@pytest.mark.parametrize("lam,mu", [(0.3, 1.0), (0.8, 1.0), (9000.0, 10000.0)])
def test_mm1_sojourn_is_the_geometric_sum_of_exponentials(lam, mu):
    for t in (0.5 / mu, 3.0 / mu, 20.0 / mu):
        ref = mm1_sojourn_from_definition(t, lam, mu)
        assert float(mm1_sojourn_sf(t, lam, mu)) == pytest.approx(ref, rel=1e-9, abs=1e-15)
    q = np.array([0.5, 0.95, 0.99])
    t = mm1_sojourn_quantile(q, lam, mu)
    assert [mm1_sojourn_from_definition(float(x), lam, mu) for x in t] == pytest.approx(1 - q, rel=1e-9)


def test_mm1_sojourn_against_lindley_simulation():
    rng = np.random.default_rng(3)
    lam, mu, n = 0.7, 1.0, 200_000
    gaps, x = rng.exponential(1 / lam, n), rng.exponential(1 / mu, n)
    s = (lindley_waits(gaps, x) + x)[n // 10:]
    assert ks_distance(s, lambda g: mm1_sojourn_sf(g, lam, mu), np.linspace(0, 15, 61)) < 0.01


@pytest.mark.parametrize("lam,mu,c", [(1.5, 1.0, 2), (3.0, 1.0, 4), (7.0, 1.0, 8), (1.0, 1.0, 2)])
def test_mmc_wait_and_sojourn_against_mpmath(lam, mu, c):
    pw = float(mmc_p_wait(lam, mu, c))
    d = c * mu - lam
    for t in (0.0, 0.3, 2.0, 9.0):
        assert float(mmc_wait_sf(t, lam, mu, c)) == pytest.approx(pw * math.exp(-d * t), rel=1e-9)
        assert float(mmc_sojourn_sf(t, lam, mu, c)) == pytest.approx(mmc_sojourn_by_quad(t, lam, mu, c), rel=1e-9)
    q = np.array([0.5, 0.9, 0.99])
    ts = mmc_sojourn_quantile(q, lam, mu, c)
    assert [mmc_sojourn_by_quad(float(x), lam, mu, c) for x in ts] == pytest.approx(1 - q, rel=1e-7)
    tw = mmc_wait_quantile(q, lam, mu, c)
    for qq, x in zip(q, tw):
        assert (x == 0 and 1 - qq >= pw) or pw * math.exp(-d * x) == pytest.approx(1 - qq, rel=1e-9)


def test_mmc_sojourn_continuous_where_the_two_rates_meet():
    # δ = cμ - λ equals μ at λ = (c - 1)μ: the closed form switches branches there
    at = float(mmc_sojourn_sf(2.0, 1.0, 1.0, 2))
    assert at == pytest.approx(mmc_sojourn_by_quad(2.0, 1.0, 1.0, 2), rel=1e-12)
    for eps in (1e-10, 1e-6, 1e-3):
        for s in (-1, 1):
            lam = 1.0 + s * eps
            assert float(mmc_sojourn_sf(2.0, lam, 1.0, 2)) == pytest.approx(mmc_sojourn_by_quad(2.0, lam, 1.0, 2),
                                                                           rel=1e-9)


def test_mmc_against_simulation():
    lam, mu, c = 3.2, 1.0, 4
    w = simulate_mmc_waits(lam, mu, c, 120_000, seed=7)[10_000:]
    assert ks_distance(w, lambda g: mmc_wait_sf(g, lam, mu, c), np.linspace(0, 6, 31)) < 0.015
    x = np.random.default_rng(8).exponential(1 / mu, len(w))      # FCFS: own service independent of W
    assert ks_distance(w + x, lambda g: mmc_sojourn_sf(g, lam, mu, c), np.linspace(0, 8, 33)) < 0.015


def test_atom_exp_is_mm1_and_mmc():
    lam, mu, c = 2.5, 1.0, 3
    pw = float(mmc_p_wait(lam, mu, c))
    mean_w = pw / (c * mu - lam)
    t = np.linspace(0, 5, 11)
    assert atom_exp_sf(t, pw, mean_w) == pytest.approx(mmc_wait_sf(t, lam, mu, c), rel=1e-9)
    q = np.array([0.3, 0.9, 0.999])
    assert atom_exp_quantile(q, pw, mean_w) == pytest.approx(mmc_wait_quantile(q, lam, mu, c), rel=1e-9, abs=1e-12)


# -- M/G/1 -----------------------------------------------------------------------------------------
def gamma_mix_lst_mp(s, weights, means, scvs):
    """X*(s) of a gamma mixture, in mpmath, written from the gamma density's transform."""
    out = 0
    for w, m, v in zip(weights, means, scvs):
        out += w * (mp.e ** (-m * s) if v == 0 else (1 + m * v * s) ** (-1 / mp.mpf(v)))
    return out


MIX = dict(weights=[0.5, 0.3, 0.2], means=[60e-6, 120e-6, 400e-6], scvs=[0.2, 1.0, 0.5])


def test_pk_transform_inverted_by_mpmath_talbot():
    mix = GammaMix(np.array(MIX["weights"]), np.array(MIX["means"]), np.array(MIX["scvs"]))
    lam = 0.85 / mix.moment(1)
    rho = lam * mix.moment(1)

    def wait_tail_mp(s):           # (1 - W*(s)) / s
        x = gamma_mix_lst_mp(s, **MIX)
        return (1 - (1 - rho) * s / (s - lam * (1 - x))) / s

    def sojourn_tail_mp(s):
        x = gamma_mix_lst_mp(s, **MIX)
        return (1 - (1 - rho) * s / (s - lam * (1 - x)) * x) / s

    mp.mp.dps = 30
    for t in (50e-6, 400e-6, 2e-3, 8e-3):
        ref_w = float(mp.invertlaplace(wait_tail_mp, t, method="talbot"))
        ref_s = float(mp.invertlaplace(sojourn_tail_mp, t, method="talbot"))
        assert float(mg1_wait_sf(t, lam, mix)) == pytest.approx(ref_w, rel=1e-6)
        assert float(mg1_sojourn_sf(t, lam, mix)) == pytest.approx(ref_s, rel=1e-6)
    mp.mp.dps = 15
    # and the transform itself
    s = np.array([1e3, 1e4 + 2e4j])
    ref = [complex((1 - rho) * z / (z - lam * (1 - gamma_mix_lst_mp(z, **MIX)))) for z in s]
    assert mg1_wait_lst(s, lam, mix) == pytest.approx(np.array(ref), rel=1e-10)


@pytest.mark.parametrize("rho", [0.3, 0.7, 0.95])
def test_md1_against_erlangs_closed_form(rho):
    d = 1.0
    lam = rho / d
    mix = GammaMix.constant(d)
    for t in (0.4, 1.7, 3.2, 6.5):
        ref = 1 - md1_wait_cdf(t, lam, d)
        assert float(mg1_wait_sf(t, lam, mix)) == pytest.approx(ref, abs=2e-4, rel=2e-3)


def test_mm1_is_the_exponential_special_case():
    lam, mu = 0.6, 1.0
    mix = GammaMix.exponential(1 / mu)
    t = np.array([0.2, 1.0, 5.0, 15.0])
    assert mg1_wait_sf(t, lam, mix) == pytest.approx(lam / mu * np.exp(-(mu - lam) * t), rel=1e-6)
    assert mg1_sojourn_sf(t, lam, mix) == pytest.approx(np.exp(-(mu - lam) * t), rel=1e-6)
    assert float(mg1_wait_sf(0.0, lam, mix)) == pytest.approx(lam / mu)     # P(W > 0) = ρ


def test_mg1_against_lindley_simulation():
    rng = np.random.default_rng(11)
    n = 300_000
    comp = rng.choice(3, n, p=MIX["weights"])
    m, v = np.array(MIX["means"])[comp], np.array(MIX["scvs"])[comp]
    x = rng.gamma(1 / v, m * v)
    mix = GammaMix(np.array(MIX["weights"]), np.array(MIX["means"]), np.array(MIX["scvs"]))
    lam = 0.8 / mix.moment(1)
    w = lindley_waits(rng.exponential(1 / lam, n), x)[n // 10:]
    grid = np.linspace(0, 3e-3, 31)
    assert ks_distance(w, lambda g: mg1_wait_sf(g, lam, mix), grid) < 0.01
    q = np.array([0.5, 0.95, 0.99])
    assert mg1_quantile(q, lam, mix) == pytest.approx(np.quantile(w, q), rel=0.06, abs=2e-6)


def test_from_samples_keeps_mean_and_variance():
    x = np.random.default_rng(2).lognormal(-9, 0.8, 5000)
    mix = GammaMix.from_samples(x, groups=64)
    assert mix.moment(1) == pytest.approx(x.mean(), rel=1e-12)
    assert mix.moment(2) == pytest.approx((x**2).mean(), rel=1e-12)
    few = GammaMix.from_samples([1.0, 2.0, 4.0])          # fewer values than groups: point masses
    assert list(few.scvs) == [0, 0, 0] and few.moment(3) == pytest.approx((1 + 8 + 64) / 3)


# -- Cramér–Lundberg and Kingman ---------------------------------------------------------------------------
def test_cramer_lundberg_mm1_and_md1():
    cl = cramer_lundberg(0.7, GammaMix.exponential(1.0))
    assert float(cl.rate_per_s) == pytest.approx(0.3, rel=1e-10)
    assert float(cl.wait_prefactor) == pytest.approx(0.7, rel=1e-8)
    assert float(cl.sojourn_prefactor) == pytest.approx(1.0, rel=1e-8)
    # M/D/1: λ(e^{γD} - 1) = γ solved by mpmath; the inversion's tail approaches C e^{-γt}
    lam, d = 0.8, 1.0
    g_ref = float(mp.findroot(lambda g: lam * (mp.e ** (g * d) - 1) - g, 0.5))
    cl = cramer_lundberg(lam, GammaMix.constant(d))
    assert float(cl.rate_per_s) == pytest.approx(g_ref, rel=1e-9)
    c_ref = (1 - lam * d) / (lam * d * math.exp(g_ref * d) - 1)
    assert float(cl.wait_prefactor) == pytest.approx(c_ref, rel=1e-8)
    t = 25.0
    assert float(mg1_wait_sf(t, lam, GammaMix.constant(d))) == pytest.approx(float(cl.wait_sf(t)), rel=1e-3)
    assert (1 - md1_wait_cdf(t, lam, d)) == pytest.approx(float(cl.wait_sf(t)), rel=1e-3)


def test_cramer_lundberg_vectorised_and_unstable():
    mix = GammaMix(np.array(MIX["weights"]), np.array(MIX["means"]), np.array(MIX["scvs"]))
    lam = np.array([0.5, 0.9, 1.2]) / mix.moment(1)
    cl = cramer_lundberg(lam, mix)
    for i in range(2):       # each root satisfies the equation; mpmath evaluates M(γ)
        g = float(cl.rate_per_s[i])
        assert float(lam[i] * (gamma_mix_lst_mp(-g, **MIX) - 1)) == pytest.approx(g, rel=1e-8)
    assert cl.rate_per_s[2] == 0 and cl.wait_sf(1.0)[2] == 1.0
    assert mg1_quantile(0.99, float(lam[2]), mix) == np.inf
    assert float(mg1_wait_sf(1e-3, float(lam[2]), mix)) == 1.0


def test_kingman_heavy_traffic_against_dm1():
    """D/M/1: P(W > t) = σ e^{-μ(1-σ)t}, σ the root in (0, 1) of σ = e^{-μ(1-σ)/λ}.  Kingman's
    exponential (c_a² = 0, c_s² = 1) has the right decay rate as ρ → 1, not before."""
    mu = 1.0
    errs = []
    for rho in (0.5, 0.9, 0.99):
        lam = rho * mu
        sigma = float(mp.findroot(lambda s: s - mp.e ** (-mu * (1 - s) / lam), (0, 1 - 1e-9), solver="illinois"))
        rate_exact = mu * (1 - sigma)
        w = -1.0 / math.log(float(kingman_wait_sf(1.0, lam, 1 / mu, 0.0, 1.0)))   # its mean
        errs.append(abs(1 / w / rate_exact - 1))
    assert errs[2] < 0.02 and errs[0] > errs[1] > errs[2]


def test_kingman_quantile_against_gg1_simulation_in_heavy_traffic():
    rng = np.random.default_rng(4)
    n, rho = 400_000, 0.95
    x = rng.gamma(4.0, 0.25, n)                          # c_s² = 0.25, E[X] = 1
    gaps = rng.gamma(2.0, 0.5 / rho, n)                   # c_a² = 0.5
    w = lindley_waits(gaps, x)[n // 10:]
    q99 = float(kingman_wait_quantile(0.99, rho, 1.0, 0.5, 0.25))
    assert q99 == pytest.approx(np.quantile(w, 0.99), rel=0.15)
    assert float(kingman_wait_sf(q99, rho, 1.0, 0.5, 0.25)) == pytest.approx(0.01)


def test_quantiles_invert_the_survival_functions():
    mix = GammaMix(np.array(MIX["weights"]), np.array(MIX["means"]), np.array(MIX["scvs"]))
    lam = 0.7 / mix.moment(1)
    q = np.array([0.5, 0.95, 0.99, 0.999])
    tw = mg1_quantile(q, lam, mix)
    ts = mg1_quantile(q, lam, mix, what="sojourn")
    rho = lam * mix.moment(1)
    for qq, a, b in zip(q, tw, ts):
        assert (a == 0 and 1 - qq >= rho) or float(mg1_wait_sf(a, lam, mix)) == pytest.approx(1 - qq, rel=1e-5)
        assert float(mg1_sojourn_sf(b, lam, mix)) == pytest.approx(1 - qq, rel=1e-5)
    cl = cramer_lundberg(lam, mix)
    tc = mg1_quantile(q, lam, mix, what="sojourn", method="cramer-lundberg")
    assert cl.sojourn_sf(tc) == pytest.approx(1 - q, rel=1e-9)


@pytest.mark.parametrize("call", [
    lambda: mm1_sojourn_quantile(1.0, 0.5, 1.0),
    lambda: mmc_wait_quantile(0.0, 0.5, 1.0, 2),
    lambda: atom_exp_sf(1.0, 1.5, 1.0),
    lambda: mmc_wait_sf(1.0, 0.5, 1.0, 2.5),
    lambda: mg1_wait_sf(1.0, 0.5, "exponential"),
    lambda: mg1_quantile(0.5, 0.5, GammaMix.exponential(1.0), what="response"),
    lambda: GammaMix(np.array([1.0]), np.array([0.0]), np.array([1.0])),
    lambda: GammaMix(np.array([0.0]), np.array([1.0]), np.array([1.0])),
])
def test_nonsense_is_refused(call):
    with pytest.raises(ValueError):
        call()


def test_unstable_queues_have_no_percentiles():
    assert float(mm1_sojourn_sf(5.0, 1.0, 1.0)) == 1.0 and float(mm1_sojourn_quantile(0.5, 2.0, 1.0)) == np.inf
    assert float(mmc_sojourn_sf(5.0, 2.0, 1.0, 2)) == 1.0 and float(mmc_sojourn_quantile(0.5, 3.0, 1.0, 2)) == np.inf
    assert float(kingman_wait_quantile(0.5, 1.0, 1.0, 1.0, 1.0)) == np.inf


def test_near_constant_parts_behave_as_point_masses():
    """A group of equal measured values can get a variance of rounding noise (SCV 1e-30): the
    transform must treat it as the constant it is, not overflow."""
    rng = np.random.default_rng(5)
    base = np.repeat([40e-6, 60e-6, 90e-6, 250e-6], 500)
    x = base * (1 + rng.normal(0, 1e-15, base.size))
    noisy = GammaMix.from_samples(x, groups=4)
    exact = GammaMix(np.full(4, 0.25), np.array([40e-6, 60e-6, 90e-6, 250e-6]), np.zeros(4))
    lam = 0.6 / exact.moment(1)
    q = np.array([0.5, 0.95, 0.99, 0.999])
    a = mg1_quantile(q, lam, noisy, what="sojourn")
    assert np.all(np.diff(a) > 0)
    assert a == pytest.approx(mg1_quantile(q, lam, exact, what="sojourn"), rel=1e-6)
