"""Networks of queues (sipperf.models.networks) against independent references: continuous-time
Markov chains solved numerically, Buzen's convolution algorithm, the finite-source (machine
repairman) closed form, and the asymptotic bounds as theorems."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sipperf.models import jackson, jackson_pmf, mva, network_bounds, traffic_rates


def _stationary(Q: np.ndarray) -> np.ndarray:
    """Stationary distribution of a generator matrix (rows sum to 0): πQ = 0, Σπ = 1."""
    n = Q.shape[0]
    A = np.vstack([Q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


def _open_ctmc(lam_ext, mu, P, c, cap):
    """The open network's Markov chain truncated at ``cap`` customers per station (arrivals to a
    full station are refused, which the truncation makes negligible for light loads)."""
    k = len(mu)
    states = list(itertools.product(range(cap + 1), repeat=k))
    idx = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for s in states:
        i = idx[s]
        for a in range(k):                                   # external arrival at a
            if s[a] < cap and lam_ext[a] > 0:
                t = list(s)
                t[a] += 1
                Q[i, idx[tuple(t)]] += lam_ext[a]
        for a in range(k):                                   # a service completion at a
            if s[a] == 0:
                continue
            rate = mu[a] * min(s[a], c[a])
            for b in range(k):
                if P[a][b] > 0:
                    t = list(s)
                    t[a] -= 1
                    if t[b] < cap:
                        t[b] += 1
                        Q[i, idx[tuple(t)]] += rate * P[a][b]
                    else:                                    # refused by the truncation: stays
                        Q[i, idx[tuple(t)]] += rate * P[a][b]
            leave = 1 - sum(P[a])
            if leave > 0:
                t = list(s)
                t[a] -= 1
                Q[i, idx[tuple(t)]] += rate * leave
        Q[i, i] = -Q[i].sum()
    return states, _stationary(Q)


def test_traffic_rates_feedback_closed_form():
    # one station fed back with probability q: λ = λ0 / (1 - q); a tandem after it carries the same
    q, lam0 = 0.3, 100.0
    lam = traffic_rates([lam0, 0.0], [[q, 1 - q], [0.0, 0.0]])
    assert lam[0] == pytest.approx(lam0 / (1 - q), rel=1e-12)
    assert lam[1] == pytest.approx(lam0, rel=1e-12)


def test_jackson_product_form_matches_the_markov_chain():
    # two stations with feedback from 2 to 1, the second with two servers
    lam_ext, mu, c = [1.0, 0.5], [4.0, 1.5], [1, 2]
    P = [[0.0, 0.6], [0.25, 0.0]]
    states, pi = _open_ctmc(lam_ext, mu, P, c, cap=30)
    r = jackson(lam_ext, mu, P, c)
    pf = jackson_pmf(np.array(states), r.lam_pps, mu, c)
    assert np.max(np.abs(pi - pf)) < 1e-6
    L_ctmc = np.array([sum(p * s[k] for s, p in zip(states, pi)) for k in range(2)])
    assert r.L == pytest.approx(L_ctmc, rel=1e-4)
    # Little's law on the whole network
    assert r.response_s == pytest.approx(L_ctmc.sum() / sum(lam_ext), rel=1e-4)


def test_jackson_tandem_mm1_closed_form():
    # a tandem of M/M/1 queues: the time in the network is Σ 1/(μ_k - λ)
    lam, mu = 80.0, np.array([100.0, 150.0, 120.0])
    P = [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    r = jackson([lam, 0, 0], mu, P)
    assert r.response_s == pytest.approx(float(np.sum(1 / (mu - lam))), rel=1e-12)
    assert r.rho == pytest.approx(lam / mu)


def test_jackson_unstable_station_is_infinite():
    r = jackson([10.0, 0.0], [5.0, 100.0], [[0, 1], [0, 0]])
    assert not r.stable[0] and r.stable[1]
    assert math.isinf(r.response_s)
    with pytest.raises(ValueError, match="unstable"):
        jackson_pmf([[0, 0]], r.lam_pps, [5.0, 100.0])


def _buzen(d: np.ndarray, n_max: int) -> np.ndarray:
    """Buzen's convolution: normalising constants G(0..N) of a closed network of single-server
    stations with demands d; Λ(N) = G(N-1)/G(N)."""
    g = np.zeros(n_max + 1)
    g[0] = 1.0
    for dk in d:
        for n in range(1, n_max + 1):
            g[n] = g[n] + dk * g[n - 1]
    return g


def test_mva_matches_buzen_convolution():
    d = np.array([0.004, 0.010, 0.007, 0.002])
    n_max = 25
    g = _buzen(d, n_max)
    r = mva(d, n_max)
    x_ref = g[:-1] / g[1:]
    assert r.throughput == pytest.approx(x_ref, rel=1e-10)
    # mean number at station k: Σ_{j=1..N} D_k^j G(N - j) / G(N)
    k = 1
    L_ref = sum(d[k] ** j * g[n_max - j] for j in range(1, n_max + 1)) / g[n_max]
    assert r.L[-1, k] == pytest.approx(L_ref, rel=1e-10)


def test_mva_machine_repairman_closed_form():
    # N sources thinking Z on average, one exponential server of demand D: finite-source M/M/1//N
    D, Z, N = 0.02, 0.5, 40
    r = mva([D], N, think_s=Z)
    for n in (1, 5, 25, 40):
        terms = [math.factorial(n) / math.factorial(n - j) * (D / Z) ** j for j in range(n + 1)]
        p0 = 1.0 / sum(terms)
        assert r.throughput[n - 1] == pytest.approx((1 - p0) / D, rel=1e-10)


def _closed_ctmc_throughput(mu, c, N, delay_rate=None):
    """Cyclic closed network: stations in a ring (the last feeds the first), station k with c_k
    servers of rate mu_k; optionally a delay (think) station with rate delay_rate per customer
    ahead of the first.  Throughput at the first station by solving the Markov chain."""
    k = len(mu)
    rates = list(mu) + ([delay_rate] if delay_rate else [])
    cs = list(c) + ([N] if delay_rate else [])
    m = len(rates)
    states = [s for s in itertools.product(range(N + 1), repeat=m) if sum(s) == N]
    idx = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for s in states:
        i = idx[s]
        for a in range(m):
            if s[a]:
                t = list(s)
                t[a] -= 1
                t[(a + 1) % m] += 1
                Q[i, idx[tuple(t)]] += rates[a] * min(s[a], cs[a])
        Q[i, i] = -Q[i].sum()
    pi = _stationary(Q)
    return sum(p * mu[0] * min(s[0], c[0]) for s, p in zip(states, pi))


def test_mva_multiserver_and_think_time_match_the_markov_chain():
    mu, c, N, Z = [50.0, 20.0, 35.0], [1, 3, 1], 8, 0.2
    r = mva([1 / m for m in mu], N, think_s=Z, servers=c)
    for n in (1, 3, N):
        ref = _closed_ctmc_throughput(mu, c, n, delay_rate=1 / Z)
        assert r.throughput[n - 1] == pytest.approx(ref, rel=1e-9)


def test_mva_delay_station_is_a_pure_delay():
    # a delay station inside the cycle adds its demand to S whatever the population
    r = mva([0.01, 0.3], 20, delay=[False, True])
    ref = mva([0.01], 20, think_s=0.3)
    assert r.throughput == pytest.approx(ref.throughput, rel=1e-12)
    assert r.residence_s[:, 1] == pytest.approx(0.3)


@settings(max_examples=40, deadline=None)
@given(d=st.lists(st.floats(1e-4, 0.05), min_size=1, max_size=5), z=st.floats(0.0, 1.0),
       n=st.integers(1, 60))
def test_mva_lies_within_the_asymptotic_bounds(d, z, n):
    r = mva(d, n, think_s=z)
    b = network_bounds(d, think_s=z, population=np.arange(1, n + 1))
    assert np.all(r.throughput <= b.throughput_upper * (1 + 1e-9))
    assert np.all(r.throughput >= b.throughput_lower * (1 - 1e-9))
    assert np.all(r.response_s >= b.response_lower_s * (1 - 1e-9))
    assert np.all(r.response_s <= b.response_upper_s * (1 + 1e-9))
    # and the throughput never exceeds the bottleneck's 1/D_max
    assert r.throughput[-1] <= 1 / max(d) * (1 + 1e-9)


def test_bounds_of_one_station():
    b = network_bounds([0.01, 0.004], think_s=0.1, population=[1, 100])
    assert b.bottleneck == 0 and b.throughput_max == pytest.approx(100.0)
    assert b.n_star == pytest.approx((0.014 + 0.1) / 0.01)
    assert b.throughput_upper == pytest.approx([1 / 0.114, 100.0])
    assert b.response_lower_s == pytest.approx([0.014, 100 * 0.01 - 0.1])


def test_bad_routing_is_refused():
    with pytest.raises(ValueError, match="square"):
        traffic_rates([1.0, 1.0], [[0.5, 0.5]])
    with pytest.raises(ValueError, match="more than 1"):
        traffic_rates([1.0, 1.0], [[0.6, 0.6], [0, 0]])
    with pytest.raises(ValueError, match="never leave"):
        traffic_rates([1.0, 0.0], [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="stations"):
        traffic_rates([1.0, 0.0, 0.0], [[0, 1], [0, 0]])
