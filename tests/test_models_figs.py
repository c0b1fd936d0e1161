"""Checks of the book's model-figure helpers against published values and closed forms."""
from __future__ import annotations

import numpy as np

from sipperf import thesis
from sipperf.figures import models_figs as mf


def test_scaled_alpha_is_thesis_curve_at_scale_one():
    # thesis §4.3.1: Poisson α = 1, 3, 5, 8 at 0, 600, 1200, ≥2400 pkt/s
    lam = np.array([0, 600, 1200, 2400, 5000])
    assert np.allclose(mf.scaled_alpha(lam, 1.0, "poisson"), [1, 3, 5, 8, 8])
    assert np.allclose(mf.scaled_alpha(lam, 0.0, "poisson"), 1.0)
    assert np.allclose(mf.scaled_alpha(lam, 0.5, "deterministic"), [1, 1.25, 2, 3.5, 3.5])


def test_mg1_curve_reproduces_printed_table_4_4():
    w = thesis.wide("4.4")
    st = w[w["w_model_us"].notna()]
    got = mf.mg1_w_curve(st["lam_pps"].to_numpy(float), 1.0, "poisson")
    rel = np.abs(got / st["w_model_us"].to_numpy(float) - 1)
    assert rel.max() < 0.05, rel
    assert np.isnan(mf.mg1_w_curve([6000.0, 7200.0], 1.0, "poisson")).all()  # printed N/A (ρ > 1)


def test_single_thread_drop_curve_is_mm1k_closed_form():
    cps = np.array([1000.0, 2400.0, 2600.0])
    ex1 = 65.16
    pb = mf.drop_curves(cps, 1, ex1, K=200)["M/M/c/K, β = 1"]
    rho = 6 * cps * ex1 * 1e-6
    expected = (1 - rho) * rho**200 / (1 - rho**201)
    assert np.allclose(pb, expected, rtol=1e-9, atol=1e-300)


def test_servers_needed_by_hand():
    # 300 000 subscribers (seed 001 example): 1000 call msgs/s + 166.7 registration msgs/s
    assert mf.servers_needed(3e5, 1, 2)[0] == 1
    # 20 M subscribers: 77 778 msgs/s = 12 963 call equivalents; 0.8 × 4000 per 2-core server -> 5
    assert mf.servers_needed(2e7, 1, 2)[0] == 5
    assert np.isnan(mf.servers_needed(1e6, 2, 1)[0])  # two processors need at least two cores
