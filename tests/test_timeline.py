"""The timeline schema: exact nanoseconds, validation naming the row, msg_type mapping, the account."""
from __future__ import annotations

import pandas as pd
import pytest

from sipperf.timeline import (INSTANTS, SCHEMA, IngestError, IngestReport, TimelineError,
                              canonical_msg_type, make_timeline, msg_type_vector)

NS = 1_763_750_000_123_456_789  # an epoch instant whose low digits float64 cannot hold


def test_exact_nanoseconds_with_nulls():
    tl = make_timeline({"call_id": ["a", "b"], "kind": ["request", "request"], "method": ["INVITE", "BYE"],
                        "t_arr": [NS, None], "t_dep": [NS + 211, None]})
    assert int(tl.t_arr[0]) == NS and int(tl.t_dep[0]) == NS + 211
    assert tl.t_arr.isna()[1]
    assert list(tl.columns[: len(SCHEMA)]) == list(SCHEMA)
    assert all(str(tl[c].dtype) == "Int64" for c in INSTANTS)


def test_negative_interval_names_row():
    with pytest.raises(TimelineError, match=r"row 1: t_dep < t_arr"):
        make_timeline({"call_id": ["a", "b"], "kind": ["request"] * 2, "method": ["ACK"] * 2,
                       "t_arr": [10, 50], "t_dep": [20, 40]})


def test_bad_kind_and_missing_call_id():
    with pytest.raises(TimelineError, match="row 0: kind"):
        make_timeline({"call_id": ["a"], "kind": ["reply"]})
    with pytest.raises(TimelineError, match="row 0: call_id is null"):
        make_timeline({"call_id": [None], "kind": ["request"]})


@pytest.mark.parametrize("kind,method,status,cm,expected", [
    ("request", "INVITE", None, "INVITE", "INVITE"),
    ("request", "ack", None, "ACK", "ACK"),
    ("request", "OPTIONS", None, "OPTIONS", "OTHER"),
    ("response", None, 180, "INVITE", "180"),
    ("response", None, 200, "INVITE", "200-INVITE"),
    ("response", None, 200, "BYE", "200-BYE"),
    ("response", None, 100, "INVITE", "OTHER"),
    ("response", None, 183, "INVITE", "OTHER"),
])
def test_msg_type(kind, method, status, cm, expected):
    assert canonical_msg_type(kind, method, status, cm) == expected
    vec = msg_type_vector(pd.Series([kind]), pd.Series([method]), pd.Series([status], dtype="Int64"),
                          pd.Series([cm]))
    assert vec.iloc[0] == expected


def test_report_balances_and_combines():
    a = IngestReport("x", "f1", read=10, parsed=8)
    a.skip("garbage", 2)
    b = IngestReport("y", "f2", read=5, parsed=4)
    assert a.check().balanced and not b.balanced
    with pytest.raises(AssertionError, match="f2"):
        b.check()
    b.skip("truncated")
    both = IngestReport.combine([a, b])
    assert (both.read, both.parsed, both.n_skipped) == (15, 12, 3)
    assert both.to_dict()["skipped"] == {"garbage": 2, "truncated": 1}
    assert len(both.to_dict()["files"]) == 2


def test_ingest_error_names_file_and_position():
    e = IngestError("/tmp/x.log", "line 7", "bad field")
    assert str(e) == "/tmp/x.log: line 7: bad field"


def test_report_details_in_json():
    import json
    r = IngestReport(source="pcap", path="x", read=2, parsed=2)
    r.details["vantage"] = {"kind": "endpoint", "hops": []}
    d = json.loads(r.to_json())
    assert d["vantage"]["kind"] == "endpoint" and d["balanced"]
    c = IngestReport.combine([r])
    assert c.files[0].details["vantage"]["kind"] == "endpoint"
    assert "vantage" not in IngestReport(source="tidy").to_dict()
