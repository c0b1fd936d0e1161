"""Figure helpers of the ingest (ch. 4) and simulation (ch. 9) chapters, against independent references."""
from __future__ import annotations

import gzip

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from sipperf.figures import ingest_figs as ig  # noqa: E402
from sipperf.figures import sim_figs as sf  # noqa: E402
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
    m = ig.call_messages(tl, "a")
    assert list(m["msg_type"]) == ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"]
    # arrival k ms after the INVITE, plus 250 ms for the teardown
    np.testing.assert_allclose(m["t_in_ms"], [0, 1, 2, 3, 254, 255])
    np.testing.assert_allclose(m["in_proxy_us"], [100, 101, 102, 103, 104, 105])
    np.testing.assert_allclose(m["sojourn"], m["in_proxy_us"])
    assert ig.complete_call(tl) == "a"  # earliest INVITE among complete calls


def test_complete_call_skips_incomplete_and_unknown_call_raises():
    a = _call("a", 1_000_000_000)
    a.loc[5, "t_dep"] = None  # 200-BYE never left: not complete
    tl = make_timeline(pd.concat([a, _call("b", 2_000_000_000)]))
    assert ig.complete_call(tl) == "b"
    with pytest.raises(KeyError):
        ig.call_messages(tl, "nope")


def test_draw_call_ladder_annotates_every_message():
    tl = make_timeline(_call("a", 0))
    ax = ig.draw_call_ladder(ig.call_messages(tl, "a"))
    texts = [t.get_text() for t in ax.texts]
    for us in (100, 101, 102, 103, 104, 105):
        assert f"{us} µs" in texts
    assert "t = 254.00 ms" in texts


def test_ecdf_matches_definition():
    rng = np.random.default_rng(0)
    x = np.append(rng.exponential(10, 500), np.nan)
    grid = np.array([0.0, 1.0, 5.0, 10.0, 50.0, 1e9])
    ref = [(x[np.isfinite(x)] <= g).mean() for g in grid]
    np.testing.assert_allclose(ig.ecdf_on_grid(x, grid), ref)
    # exponential: ECDF near the true CDF at the mean
    assert abs(ig.ecdf_on_grid(rng.exponential(10, 20000), np.array([10.0]))[0] - (1 - np.exp(-1))) < 0.02


def test_mser_curve_agrees_with_stats_mser5():
    from sipperf import stats

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.exponential(300, 100), rng.exponential(30, 2000)])
    d, v = ig.mser_curve(x)
    assert d[np.argmin(v)] == stats.mser5(x)


def test_gunzip_to(tmp_path):
    src = tmp_path / "x.pcapng.gz"
    with gzip.open(src, "wb") as f:
        f.write(b"\x0a\x0d\x0d\x0a" + b"abc")
    out = ig.gunzip_to(src, tmp_path)
    assert out.name == "x.pcapng" and out.read_bytes() == b"\x0a\x0d\x0d\x0aabc"


def test_knee_interpolation_closed_form():
    r = np.array([1000.0, 2000.0, 3000.0])
    assert sf.knee_cps(r, np.array([0.0, 0.005, 0.015])) == pytest.approx(2500.0)
    assert sf.knee_cps(r, np.array([0.02, 0.03, 0.04])) == 1000.0
    assert np.isnan(sf.knee_cps(r, np.zeros(3)))


def test_sweep_curves_average_replications():
    df = pd.DataFrame({"rate_cps": [1000, 1000, 2000, 2000, 1000], "threads": [2, 2, 2, 2, 4],
                       "cores": [1] * 5, "sched_mode": ["baseline"] * 5,
                       "drop_rate": [0.0, 0.02, 0.1, 0.3, 0.9]})
    r, p = sf.sweep_curves(df, 2, 1)["baseline"]
    np.testing.assert_allclose(r, [1000, 2000])
    np.testing.assert_allclose(p, [0.01, 0.2])


def test_calibration_view_counts():
    cal = pd.DataFrame({"table": ["6.1", "6.2", "7.1"], "quantity": ["knee"] * 3,
                        "gap_pct": [5.0, -12.0, 30.0], "within_10pct": [True, False, False]})
    v = sf.calibration_view(cal).set_index("thesis tables")
    assert v.loc["6.1–6.2", "points"] == 2 and v.loc["6.1–6.2", "within 10 %"] == 1
    assert v.loc["6.1–6.2", "worst gap (%)"] == -12.0
    assert v.loc["7.1–7.1", "median |gap| (%)"] == 30.0


def test_quiet_asyncio_restores_level():
    import logging

    log = logging.getLogger("asyncio")
    before = log.level
    with ig.quiet_asyncio():
        assert log.level == logging.ERROR
    assert log.level == before
