"""Priority M/G/1 (src/sipperf/models/priority.py) against independent references.

References: the Pollaczek–Khinchine mean (one class), M/M/1 alone for the top class under
preemption (it never sees the others), and an event-by-event simulation of the priority queue
written here with plain Python (no SimPy, no package code) for both disciplines.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from sipperf.models.priority import conservation_rhs, priority_mg1


def simulate_priority(lam, mean, scv, n, preemptive, seed):
    """Mean wait per class (T - X) of a priority M/G/1 queue, gamma service times, FCFS within a
    class, preemptive resume or not.  Returns (mean wait per class, their SEs from 20 batches)."""
    rng = np.random.default_rng(seed)
    lam, mean, scv = (np.asarray(v, float) for v in (lam, mean, scv))
    k = len(lam)
    total = lam.sum()
    arr = np.cumsum(rng.exponential(1 / total, n))
    cls = rng.choice(k, n, p=lam / total)
    x = rng.gamma(1 / scv[cls], mean[cls] * scv[cls])
    done = np.zeros(n)
    queues = [deque() for _ in range(k)]              # entries: [job, remaining work]
    cur, rem, now = None, 0.0, 0.0

    def next_job():
        for q in queues:
            if q:
                return q.popleft()
        return None

    def advance(until):
        nonlocal cur, rem, now
        while cur is not None and now + rem <= until:
            now += rem
            done[cur] = now
            nxt = next_job()
            cur, rem = (nxt[0], nxt[1]) if nxt else (None, 0.0)
        if cur is not None:
            rem -= until - now
        now = until

    for j in range(n):
        advance(arr[j])
        c = cls[j]
        if cur is None:
            cur, rem = j, x[j]
        elif preemptive and c < cls[cur]:
            queues[cls[cur]].appendleft([cur, rem])       # resumes first among its class
            cur, rem = j, x[j]
        else:
            queues[c].append([j, x[j]])
    advance(np.inf)
    w = done - arr - x
    keep = np.arange(n) >= n // 10
    means, ses = [], []
    for c in range(k):
        wc = w[keep & (cls == c)]
        b = np.array([v.mean() for v in np.array_split(wc, 20)])
        means.append(wc.mean())
        ses.append(b.std(ddof=1) / np.sqrt(len(b)))
    return np.array(means), np.array(ses)


def pk_wait(lam, ex, ex2):
    rho = lam * ex
    return lam * ex2 / (2 * (1 - rho))


def test_one_class_is_pollaczek_khinchine():
    r = priority_mg1([0.8], [1.0], [3.0])
    assert float(r.W_s[0]) == pytest.approx(pk_wait(0.8, 1.0, 3.0))
    rp = priority_mg1([0.8], [1.0], [3.0], preemptive=True)
    assert float(rp.W_s[0]) == pytest.approx(pk_wait(0.8, 1.0, 3.0))


def test_preempting_top_class_is_mm1_alone():
    lam1, lam2, mu = 0.3, 0.5, 1.0
    r = priority_mg1([lam1, lam2], [1 / mu, 1 / mu], [2 / mu**2, 2 / mu**2], preemptive=True)
    assert float(r.T_s[0]) == pytest.approx(1 / (mu - lam1))
    # and the two classes together carry the FCFS M/M/1 mean sojourn (exponential: any order
    # that does not look at service times gives the same mean number in system)
    lam = lam1 + lam2
    assert float((lam1 * r.T_s[0] + lam2 * r.T_s[1]) / lam) == pytest.approx(1 / (mu - lam))


@pytest.mark.parametrize("preemptive", [False, True])
def test_against_simulation(preemptive):
    lam, mean, scv = [0.25, 0.30, 0.20], [0.8, 1.0, 1.5], [0.5, 1.0, 2.0]
    ex = np.array(mean)
    ex2 = (1 + np.array(scv)) * ex**2
    r = priority_mg1(lam, ex, ex2, preemptive=preemptive)
    sim, se = simulate_priority(lam, mean, scv, 300_000, preemptive, seed=3 + preemptive)
    assert float(r.sigma[-1]) == pytest.approx(0.25 * 0.8 + 0.3 + 0.3)
    for k in range(3):
        assert abs(sim[k] - r.W_s[k]) < max(4 * se[k], 0.03 * r.W_s[k]), (k, sim[k], r.W_s[k], se[k])


def test_conservation_law():
    lam = np.array([0.2, 0.3, 0.25])
    ex = np.array([0.5, 1.0, 1.2])
    ex2 = np.array([0.5, 2.5, 2.0])
    r = priority_mg1(lam, ex, ex2)
    rho = float((lam * ex).sum())
    fcfs = pk_wait(lam.sum(), float((lam * ex).sum() / lam.sum()), float((lam * ex2).sum() / lam.sum()))
    assert float((r.rho * r.W_s).sum()) == pytest.approx(rho * fcfs, rel=1e-12)
    assert float(conservation_rhs(lam, ex, ex2)) == pytest.approx(rho * fcfs, rel=1e-12)
    # reversing the order moves the waiting between classes, not its ρ-weighted total
    rev = priority_mg1(lam[::-1], ex[::-1], ex2[::-1])
    assert float((rev.rho * rev.W_s).sum()) == pytest.approx(rho * fcfs, rel=1e-12)
    assert not np.allclose(rev.W_s[::-1], r.W_s)


def test_overloaded_low_class_leaves_high_class_finite():
    r = priority_mg1([0.5, 0.7], [1.0, 1.0], [2.0, 2.0])
    assert r.stable.tolist() == [True, False]
    assert np.isfinite(r.W_s[0]) and r.W_s[1] == np.inf
    # non-preemptive: the top class still waits for residual work of the overloaded class
    assert float(r.W_s[0]) == pytest.approx((0.5 * 2 + 0.7 * 2) / 2 / (1 - 0.5))
    assert float(conservation_rhs([0.5, 0.7], [1.0, 1.0], [2.0, 2.0])) == np.inf


def test_leading_axes_broadcast():
    lam = np.array([[0.1, 0.2], [0.3, 0.4]])
    r = priority_mg1(lam, [1.0, 1.0], [2.0, 2.0])
    for i in range(2):
        ri = priority_mg1(lam[i], [1.0, 1.0], [2.0, 2.0])
        assert np.allclose(r.W_s[i], ri.W_s)


def test_impossible_moments_refused():
    with pytest.raises(ValueError):
        priority_mg1([0.5], [1.0], [0.5])
