"""Tests for the drawing helpers of sipperf.figures and the computations behind chapters 1–2 and 10
(:func:`sipperf.audit.thesis_breakdown`, :mod:`sipperf.models.tcp`).

References are independent of the code under test: the thesis's own printed statements and
tables, and the TCP paper's own numbers.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np

from sipperf import audit
from sipperf.figures import kernel_path as kp
from sipperf.figures import ladder
from sipperf.models import tcp


def test_draw_functions_return_axes():
    import matplotlib.pyplot as plt

    ax = ladder.draw_ladder(trying=True, proxy_us={"INVITE": 30.0})
    assert ax.texts
    ax2 = kp.draw_instants(durations_us={"k_stack": 2.4})
    assert any("2.4" in t.get_text() for t in ax2.texts)
    plt.close("all")


def test_breakdown_k_copy_matches_thesis_statement():
    # §4.2.1: K_copy = K_rcv - K_stack - K_sockq is "also constant at around 2 µs"
    for arrivals in ("poisson", "deterministic"):
        bd = audit.thesis_breakdown(arrivals).set_index("cps")
        stable = bd.loc[100:800, "k_copy"]
        assert stable.between(1.0, 3.0).all(), stable


def test_breakdown_reassembles_table_4_1_and_4_4():
    from sipperf.thesis import wide

    bd = audit.thesis_breakdown("poisson").set_index("cps")
    t44 = wide("4.4").set_index("cps")
    # eq. 4.1 with the model's K_copy = 2 µs gives back the printed E[X]
    ex = bd["k_sockq_s"] + 2.0 + bd["t_sip"] + bd["k_snd"]
    np.testing.assert_allclose(ex, t44["ex_us"], rtol=1e-12)
    # the measured wait is the printed one and K^s = alpha * 7.9 (Table 4.3 overall mean)
    np.testing.assert_allclose(bd["k_sockq_s"], t44["alpha"] * 7.9)
    # T_sip rises with load (§4.2.2: "almost linearly"), and stays near 100-120 µs
    assert bd["t_sip"].is_monotonic_increasing
    assert bd["t_sip"].between(95, 125).all()


def test_cumulative_instants_are_ordered():
    row = audit.thesis_breakdown("deterministic").iloc[3]
    t = kp.cumulative_instants(row)
    vals = list(t.values())
    assert vals == sorted(vals) and vals[0] == 0.0
    assert math.isclose(t["t_dep"], row["sojourn"])


def test_tcp_numbers_from_paper():
    # Ono & Schulzrinne: 300 000 connections -> 690 MB of kernel memory at 2.3 KB each
    assert math.isclose(float(tcp.tcp_kernel_memory_mb(300_000)), 690.0)
    assert math.isclose(tcp.sustainable_ratio("invite"), 700 / 900)
