"""The simulator against queueing theory (issue 6 item 3): closed forms computed here,
independently of the simulator's code (a birth-death chain solved numerically for M/M/c/K)."""
from __future__ import annotations

import numpy as np
import pytest

from sipperf.sim.run import batch_means, simulate
from sipperf.sim.calibration.validate import queue_only


def _close(sim: float, hw: float, theory: float) -> None:
    # 95 % batch-means CI; a 1.5x margin keeps the seeded test from sitting on a coin toss
    assert abs(sim - theory) <= 1.5 * hw, f"sim {sim:.4g} +- {hw:.3g} vs theory {theory:.4g}"
    assert hw < 0.1 * theory, "CI too wide for a meaningful comparison"


def test_mm1_mean_wait():
    ex_us, lam_pps = 100.0, 7000.0                     # rho = 0.7
    p = queue_only((ex_us,) * 6, lam_pps, 150_000, "exp")
    _, st = simulate(p, seed=11, timeline=False)
    rho = lam_pps * ex_us * 1e-6
    _close(st["w_us"], st["w_ci_us"], rho / (1 - rho) * ex_us)
    assert st["dropped"] == 0


@pytest.mark.parametrize("dist", ["det", "exp"])
def test_pollaczek_khinchin_six_mode_mixture(dist):
    x = np.array([130.0, 60.0, 90.0, 70.0, 110.0, 80.0])
    lam_us = 0.65 / x.mean()
    p = queue_only(tuple(x), lam_us * 1e6, 120_000, dist)
    _, st = simulate(p, seed=12, timeline=False)
    ex2 = np.mean(x ** 2) * (2 if dist == "exp" else 1)   # E[X^2] of the equal-weight mixture
    _close(st["w_us"], st["w_ci_us"], lam_us * ex2 / (2 * (1 - lam_us * x.mean())))


def _mmck_blocking_chain(lam: float, mu: float, c: int, k: int) -> float:
    """Stationary distribution of the birth-death chain, normalised numerically."""
    w = np.ones(k + 1)
    for n in range(1, k + 1):
        w[n] = w[n - 1] * lam / (min(n, c) * mu)
    return float(w[-1] / w.sum())


@pytest.mark.parametrize("c,kq,rho", [(3, 6, 0.95), (1, 20, 1.1)])
def test_mmck_blocking(c, kq, rho):
    ex_us = 100.0
    lam_pps = rho * c / (ex_us * 1e-6)
    p = queue_only((ex_us,) * 6, lam_pps, 150_000, "exp", threads=c, rcvbuf_pkts=kq)
    _, st = simulate(p, seed=13, timeline=False)
    theory = _mmck_blocking_chain(lam_pps, 1e6 / ex_us, c, kq + c)   # K counts those in service
    _close(st["drop_rate_bm"], st["drop_rate_ci"], theory)


def test_batch_means_covers_known_mean():
    rng = np.random.default_rng(0)
    m, hw = batch_means(rng.exponential(3.0, 40_000))
    assert abs(m - 3.0) < 2 * hw and hw < 0.1
