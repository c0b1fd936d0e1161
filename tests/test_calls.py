"""RFC 6076 metrics and PDR on a hand-built set of calls with hand-computed answers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sipperf import calls
from sipperf.timeline import make_timeline

B = 1_700_000_000_000_000_000
MS = 1_000_000


def _msg(cid, kind, method=None, status=None, cm=None, arr=None, dep=None, cseq=1, dropped=False):
    return {"call_id": cid, "kind": kind, "method": method, "status": status, "cseq_method": cm or method,
            "cseq": cseq, "t_arr": arr, "t_dep": dep, "dropped": dropped}


def _tl():
    rows = [
        # A: successful call, 100 Trying from the proxy, 180, 200, ACK, BYE, 200
        _msg("A", "request", "INVITE", arr=0, dep=0), _msg("A", "response", status=100, cm="INVITE", dep=1),
        _msg("A", "response", status=180, cm="INVITE", arr=4, dep=5),
        _msg("A", "response", status=200, cm="INVITE", arr=7, dep=8),
        _msg("A", "request", "ACK", arr=9, dep=9), _msg("A", "request", "BYE", cseq=2, arr=1000, dep=1000),
        _msg("A", "response", status=200, cm="BYE", cseq=2, arr=1001, dep=1002),
        # B: busy 486 after 3 ms ; C: 503 after 6 ms ; D: redirected 302 ; E: never answered (dropped)
        _msg("B", "request", "INVITE", arr=10, dep=10), _msg("B", "response", status=486, cm="INVITE", arr=12, dep=13),
        _msg("C", "request", "INVITE", arr=20, dep=20), _msg("C", "response", status=503, cm="INVITE", arr=25, dep=26),
        _msg("D", "request", "INVITE", arr=30, dep=30), _msg("D", "response", status=302, cm="INVITE", arr=31, dep=32),
        _msg("E", "request", "INVITE", arr=40, dropped=True),
        # registrations: one answered 200 after 4 ms, one answered 401
        _msg("R1", "request", "REGISTER", arr=50, dep=50), _msg("R1", "response", status=200, cm="REGISTER", dep=54),
        _msg("R2", "request", "REGISTER", arr=60, dep=60), _msg("R2", "response", status=401, cm="REGISTER", dep=61),
    ]
    df = pd.DataFrame(rows)
    for c in ("t_arr", "t_dep"):  # ms offsets -> exact int ns (no float on the way)
        df[c] = pd.array([None if v is None or v != v else B + int(v) * MS for v in df[c]], dtype="Int64")
    for c in ("status", "cseq"):
        df[c] = pd.array([None if v is None or v != v else int(v) for v in df[c]], dtype="Int64")
    return make_timeline(df)


def test_rfc6076_hand_computed():
    m = calls.metrics(_tl()).set_index("metric")
    assert m.loc["SRD_successful", "value"] == pytest.approx(5_000.0)      # 180 leaves at 5 ms
    assert m.loc["SRD_failed", "count"] == 2
    assert m.loc["SRD_failed", "value"] == pytest.approx((3_000 + 6_000) / 2)
    assert m.loc["SDD", "value"] == pytest.approx(2_000.0)
    assert m.loc["SDT", "value"] == pytest.approx(992_000.0)
    assert m.loc["SER", "value"] == pytest.approx(100 * 1 / 4)    # 5 INVITEs, 1 redirected
    assert m.loc["SEER", "value"] == pytest.approx(100 * 2 / 4)   # 200 and 486
    assert m.loc["ISA", "value"] == pytest.approx(100 * 2 / 5)    # 503 and no answer
    assert m.loc["SCR", "value"] == pytest.approx(100 * 1 / 5)
    assert m.loc["RRD", "value"] == pytest.approx(4_000.0) and m.loc["RRD", "count"] == 1
    assert m.loc["IRA", "value"] == pytest.approx(50.0)
    assert m.loc["PDR", "value"] == pytest.approx(100 * 1 / 18)


def test_pdr_offered():
    tl = _tl()
    assert calls.pdr(tl) == pytest.approx(1 / 18)
    # 100 offered, 17 delivered -> 83 lost
    assert calls.pdr(tl, offered=100) == pytest.approx(0.83)
