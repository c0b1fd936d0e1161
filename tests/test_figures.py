"""Tests for sipperf.figures (the helpers behind chapters 1–3 and 10).

References are independent of the code under test: the thesis's own printed statements and
tables, RFC 3261's call flow, and closed forms of queueing theory.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from sipperf.figures import beyond_udp as bu
from sipperf.figures import kernel_path as kp
from sipperf.figures import ladder
from sipperf.figures import observer as obs


def test_call_flow_every_message_crosses_the_proxy_once():
    hops = ladder.call_flow()
    assert len(hops) == 12
    for m in ("INVITE", "ACK", "BYE"):  # requests travel caller -> callee
        assert [(h.src, h.dst) for h in hops if h.msg_type == m] == [("UAC", "Proxy"), ("Proxy", "UAS")]
    for m in ("180", "200-INVITE", "200-BYE"):  # responses travel back
        assert [(h.src, h.dst) for h in hops if h.msg_type == m] == [("UAS", "Proxy"), ("Proxy", "UAC")]


def test_packet_rates_and_bytes():
    sizes = {"INVITE": 624, "180": 375, "200-INVITE": 542, "ACK": 466, "BYE": 466, "200-BYE": 367}
    r = ladder.proxy_packet_rates(250, sizes_b=sizes)
    assert r["total_pps"] == 1500
    assert r["total_Bps"] == 250 * 2840
    with pytest.raises(ValueError):
        ladder.proxy_packet_rates(-1)


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
        bd = kp.thesis_breakdown(arrivals).set_index("cps")
        stable = bd.loc[100:800, "k_copy"]
        assert stable.between(1.0, 3.0).all(), stable


def test_breakdown_reassembles_table_4_1_and_4_4():
    from sipperf.thesis import wide

    bd = kp.thesis_breakdown("poisson").set_index("cps")
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
    row = kp.thesis_breakdown("deterministic").iloc[3]
    t = kp.cumulative_instants(row)
    vals = list(t.values())
    assert vals == sorted(vals) and vals[0] == 0.0
    assert math.isclose(t["t_dep"], row["sojourn"])


def test_interrupts_per_packet_appendix_b():
    ipp = kp.interrupts_per_packet()
    assert list(ipp["cps"]) == [1000, 1500, 2000, 2500]
    assert math.isclose(ipp["per_packet_cpu0"].iloc[0], 8849.51 / 6000)
    assert ipp["intr_all"].is_monotonic_increasing


def test_observer_delta_zero_reproduces_printed_model_wait():
    from sipperf.thesis import wide

    t = wide("4.4").dropna(subset=["w_model_us"])
    w = obs.traced_wait_us(t["cps"].to_numpy(), 0.0)
    np.testing.assert_allclose(w, t["w_model_us"].to_numpy(), rtol=1e-9)


def test_observer_matches_pk_by_hand():
    # independent P-K evaluation at 400 cps from the printed Table 4.4 row
    lam = 2400e-6
    ex, w_printed = 174.53, 64.21
    rho = lam * ex
    ex2 = 2 * (1 - rho) * w_printed / lam
    d = 3.0
    expected = lam * (ex2 + 2 * d * ex + d * d) / (2 * (1 - lam * (ex + d)))
    assert math.isclose(float(obs.traced_wait_us(400, d)), expected, rel_tol=1e-12)
    assert float(obs.traced_wait_us(400, d)) > w_printed
    assert np.isnan(obs.traced_wait_us(1000, 0.0))  # rho > 1
    with pytest.raises(ValueError):
        obs.traced_wait_us(400, -1.0)


def test_saturation_cps():
    assert math.isclose(float(obs.saturation_cps(1e6 / 6000)), 1000.0)


def test_md1_closed_form():
    # M/D/1 at rho = 0.5: Wq = rho x / (2 (1 - rho)) = x / 2, so T = 1.5 x
    x = 0.2
    assert math.isclose(float(bu.md1_sojourn_ms(0.5 / (x * 1e-3), x)), 1.5 * x)
    assert np.isnan(bu.md1_sojourn_ms(1.0 / (x * 1e-3), x))


def test_md1_agrees_with_mg1_module():
    from sipperf.models import mg1_wait

    x_s = 0.39e-3
    lam = np.array([100.0, 1000.0, 2000.0])
    r = mg1_wait(lam, x_s, x_s ** 2)
    np.testing.assert_allclose(bu.md1_sojourn_ms(lam, 0.39), np.asarray(r.T_s) * 1e3, rtol=1e-9)


def test_tcp_numbers_from_paper():
    # Ono & Schulzrinne: 300 000 connections -> 690 MB of kernel memory at 2.3 KB each
    assert math.isclose(float(bu.tcp_kernel_memory_mb(300_000)), 690.0)
    assert math.isclose(bu.sustainable_ratio("invite"), 700 / 900)


def test_timeline_components_differences_of_instants():
    from sipperf.timeline import make_timeline

    tl = make_timeline({
        "call_id": ["a", "a"], "kind": ["request", "response"], "method": ["INVITE", None],
        "status": [None, 180], "cseq_method": ["INVITE", "INVITE"],
        "t_arr": [0, 0], "t_stack": [2_500, 1_000], "t_sockq": [40_500, None],
        "t_sip_in": [42_400, None], "t_sip_c": [90_000, None], "t_sip_out": [150_400, None],
        "t_dep": [156_000, None],
    })
    c = kp.timeline_components(tl)
    assert list(c["msg_type"]) == ["INVITE", "180"]
    np.testing.assert_allclose(c.loc[0, list(kp.COMPONENTS)].to_numpy(dtype=float),
                               [2.5, 38.0, 1.9, 47.6, 60.4, 5.6])
    assert c.loc[1, "k_stack"] == 1.0 and np.isnan(c.loc[1, "k_sockq"])
