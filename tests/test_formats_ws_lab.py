"""A real SIP-over-WebSocket capture (``tests/fixtures/ws``: Kamailio's websocket module, the
callee over TCP) read as a stream transport, in memory and by the streaming engine alike: its
runs are WebSocket runs whose loss is the failed calls, never datagram drops."""
from __future__ import annotations

from pathlib import Path

import pytest

from sipperf.ingest import load

CAP = Path(__file__).parent / "fixtures" / "ws" / "ws.pcapng"


def test_the_capture_holds_both_legs_and_every_upgrade():
    tl, rep = load([CAP])
    assert set(tl["transport"].dropna()) == {"ws", "tcp"}
    assert tl["call_id"].nunique() == 60
    assert rep.skipped["WebSocket handshake (HTTP Upgrade)"] == 2 * 5      # GET and 101, per connection
    assert rep.details["transports"]["websocket"]["server_ports"] == [5960]


@pytest.mark.parametrize("stream", [False, True])
def test_a_websocket_run_is_read_as_one_whose_loss_is_failed_calls(stream, tmp_path):
    from sipperf.report.build import build_report
    from sipperf.report.result import runs_table

    rep = build_report([str(CAP)], tmp_path / "rep", html=False, n_boot=0, stream=stream)
    m, row = rep.runs[0].measure, runs_table(rep).iloc[0]
    assert m.transport == "ws" and m.loss_kind == "failed calls"
    assert row["transport"] == "ws" and row["calls"] == 60 and row["calls_failed"] == 0
    assert rep.verdict["numbers"]["loss_kind"] == "failed calls"
