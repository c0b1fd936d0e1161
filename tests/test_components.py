"""Components (eq. 3.1-3.3, 4.1, 4.4) against hand-computed values."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sipperf import components
from sipperf.timeline import make_timeline

B = 1_700_000_000_000_000_000


def I(*v):  # noqa: E743 - exact Int64 (a list with None would go through float64 and lose ns)
    return pd.array(list(v), dtype="Int64")


def _tl():
    # two messages; the second lacks t_stack and t_dep (a source that fills less)
    return make_timeline({
        "call_id": ["a", "a"], "kind": ["request", "response"], "method": ["INVITE", None],
        "status": [None, 180], "cseq_method": ["INVITE", "INVITE"],
        "t_arr": I(B + 0, B + 1000), "t_stack": I(B + 2000, None), "t_sockq": I(B + 10_000, B + 9000),
        "t_sip_in": I(B + 12_000, B + 12_000), "t_sip_c": I(B + 20_000, B + 30_000),
        "t_sip_out": I(B + 50_000, B + 31_000), "t_dep": I(B + 56_000, None),
    })


def test_derive_hand_values():
    d = components.derive(_tl())
    r0 = {c: int(d[c].iloc[0]) for c in components.COMPONENTS}
    assert r0 == {"k_stack": 2000, "k_sockq": 8000, "k_copy": 2000, "k_rcv": 12_000, "t_sip1": 8000,
                  "t_sip2": 30_000, "t_sip": 38_000, "k_snd": 6000, "sojourn": 56_000}
    r1 = d.iloc[1]
    assert pd.isna(r1.k_stack) and pd.isna(r1.k_sockq) and pd.isna(r1.k_snd) and pd.isna(r1.sojourn)
    assert int(r1.k_rcv) == 11_000 and int(r1.t_sip) == 19_000
    assert str(d.k_stack.dtype) == "Int64"


def test_summary_and_service_wait():
    s = components.summary(_tl(), unit="us", alpha=3.0, k_sockq_s_base_ns=2000.0)
    assert list(s.msg_type) == ["INVITE", "180", "ALL"]
    allr = s.set_index("msg_type").loc["ALL"]
    assert allr["count"] == 2 and allr["k_rcv_count"] == 2
    assert allr["k_rcv_mean"] == pytest.approx(11.5) and allr["k_rcv_median"] == pytest.approx(11.5)
    assert allr["k_rcv_p99"] == pytest.approx(11 + 0.99 * 1)
    # X = 3*2 µs + k_copy 2 + T_sip 38 + k_snd 6 = 52 µs ; W = 8 - 6 = 2 µs (message 0 only)
    assert allr["x_mean"] == pytest.approx(52.0) and allr["w_mean"] == pytest.approx(2.0)
    assert "sojourn_mean" in s.columns


def test_summary_drops_underivable_components():
    tl = make_timeline({"call_id": ["a"], "kind": ["request"], "method": ["BYE"], "t_arr": [B], "t_dep": [B + 5000]})
    s = components.summary(tl)
    assert [c for c in s.columns if c.endswith("_mean")] == ["sojourn_mean"]
    assert s.sojourn_mean.iloc[-1] == pytest.approx(5.0)


def test_summary_matches_plain_numpy():
    # reference: boolean-mask selection + np.mean / np.median / np.percentile per type
    from sipperf.ingest.thesis_logs.read import synthetic_timeline
    tl = synthetic_timeline(400, seed=4)
    rng = np.random.default_rng(4)
    for c in ("t_stack", "t_dep"):
        tl.loc[rng.random(len(tl)) < 0.2, c] = pd.NA
    tl.loc[rng.random(len(tl)) < 0.1, "msg_type"] = "OTHER"
    s = components.summary(tl, unit="us", quantile=0.95).set_index("msg_type")
    mt = tl.msg_type.astype(str).to_numpy()
    for comp, (a, b) in components.COMPONENTS.items():
        d = tl[a].to_numpy("int64", na_value=0) - tl[b].to_numpy("int64", na_value=0)  # exact ns
        v = np.where(tl[a].isna() | tl[b].isna(), np.nan, d.astype(float)) / 1e3
        for t in list(s.index):
            x = v[(mt == t) | (t == "ALL")]
            x = x[np.isfinite(x)]
            assert s.loc[t, f"{comp}_count"] == len(x)
            assert s.loc[t, f"{comp}_mean"] == pytest.approx(np.mean(x), rel=1e-12)
            assert s.loc[t, f"{comp}_median"] == pytest.approx(np.median(x), rel=1e-12)
            assert s.loc[t, f"{comp}_p99"] == pytest.approx(np.percentile(x, 95), rel=1e-12)
