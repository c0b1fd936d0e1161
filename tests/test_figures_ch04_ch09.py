"""Helpers behind the ingest (ch. 4) and simulation (ch. 9) chapters — one call's messages
(:mod:`sipperf.calls`), its ladder drawing, ECDFs (:mod:`sipperf.stats`) and the sweep's knee
(:mod:`sipperf.sim.sweep`) — against independent references."""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from sipperf import calls, stats  # noqa: E402
from sipperf.figures.ingest_figs import draw_call_ladder  # noqa: E402
from sipperf.sim.sweep import knee_cps  # noqa: E402
from sipperf.timeline import make_timeline  # noqa: E402

TYPES = [("request", "INVITE", None, "INVITE"), ("response", None, 180, "INVITE"),
         ("response", None, 200, "INVITE"), ("request", "ACK", None, "ACK"),
         ("request", "BYE", None, "BYE"), ("response", None, 200, "BYE")]


def _call(call_id: str, t0_ns: int, hold_ns: int = 250_000_000) -> pd.DataFrame:
    """A hand-built call: message k arrives at t0 + k ms (+ hold for BYE/200), stays 100+k µs."""
    rows = []
    for k, (kind, method, status, cm) in enumerate(TYPES):
        t_arr = t0_ns + k * 1_000_000 + (hold_ns if k >= 4 else 0)
        t = [t_arr + j * (100 + k) * 1000 // 6 for j in range(7)]
        t[6] = t_arr + (100 + k) * 1000
        rows.append({"call_id": call_id, "cseq": 1 if k < 4 else 2, "cseq_method": cm, "kind": kind,
                     "method": method, "status": status,
                     **dict(zip(["t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"], t))})
    return pd.DataFrame(rows)


def test_call_messages_times_against_hand_arithmetic():
    tl = make_timeline(pd.concat([_call("b", 5_000_000_000), _call("a", 1_000_000_000)]))
    m = calls.call_messages(tl, "a")
    assert list(m["msg_type"]) == ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"]
    # arrival k ms after the INVITE, plus 250 ms for the teardown
    np.testing.assert_allclose(m["t_in_ms"], [0, 1, 2, 3, 254, 255])
    np.testing.assert_allclose(m["in_proxy_us"], [100, 101, 102, 103, 104, 105])
    np.testing.assert_allclose(m["sojourn"], m["in_proxy_us"])
    assert calls.complete_call(tl) == "a"  # earliest INVITE among complete calls


def test_complete_call_skips_incomplete_and_unknown_call_raises():
    a = _call("a", 1_000_000_000)
    a.loc[5, "t_dep"] = None  # 200-BYE never left: not complete
    tl = make_timeline(pd.concat([a, _call("b", 2_000_000_000)]))
    assert calls.complete_call(tl) == "b"
    with pytest.raises(KeyError):
        calls.call_messages(tl, "nope")


def test_draw_call_ladder_annotates_every_message():
    tl = make_timeline(_call("a", 0))
    ax = draw_call_ladder(calls.call_messages(tl, "a"))
    texts = [t.get_text() for t in ax.texts]
    for us in (100, 101, 102, 103, 104, 105):
        assert f"{us} µs" in texts
    assert "t = 254.00 ms" in texts


def test_ecdf_matches_definition():
    rng = np.random.default_rng(0)
    x = np.append(rng.exponential(10, 500), np.nan)
    grid = np.array([0.0, 1.0, 5.0, 10.0, 50.0, 1e9])
    ref = [(x[np.isfinite(x)] <= g).mean() for g in grid]
    np.testing.assert_allclose(stats.ecdf_on_grid(x, grid), ref)
    # exponential: ECDF near the true CDF at the mean
    assert abs(stats.ecdf_on_grid(rng.exponential(10, 20000), np.array([10.0]))[0] - (1 - np.exp(-1))) < 0.02


def test_knee_interpolation_closed_form():
    r = np.array([1000.0, 2000.0, 3000.0])
    assert knee_cps(r, np.array([0.0, 0.005, 0.015])) == pytest.approx(2500.0)
    assert knee_cps(r, np.array([0.02, 0.03, 0.04])) == 1000.0
    assert np.isnan(knee_cps(r, np.zeros(3)))
