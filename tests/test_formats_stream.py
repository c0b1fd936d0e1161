"""The streaming engine gives the in-memory answer on the issue-23 framings too: TCP segments
out of order (and a truly lost one, whose later messages are replayed after the hole), a
WebRTC gateway's WebSocket leg, and HEP from two capture agents.  Captures: REAL fixtures
re-framed by ``tests/capgen.py``; chunks and batches tiny so that groups close while the
capture is read."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import capgen as G
from sipperf.analysis import analyze as _analyze
from sipperf.analysis import stream
from sipperf.ingest.capture.fast import read_packets
from sipperf.ingest.pairing.vantage import classify

FIX = Path(__file__).parent / "fixtures"


def _lost(recs):
    out = G.tcp_reframe(recs, random.Random(2), pieces=(2, 2), shuffle=True)
    data = [i for i, r in enumerate(out) if (p := G.decode(*r)) is not None and p.payload]
    del out[data[40]]
    return out


BUILD = {
    "tcp-shuffled": ("tcp4", lambda r: G.tcp_reframe(r, random.Random(3), duplicate=0.2, overlap=0.2)),
    "tcp-swapped": ("tcp4", lambda r: G.tcp_reframe(r, random.Random(4), pieces=(1, 2), shuffle=False, cross=0.5)),
    "tcp-segment-lost": ("tcp4", _lost),
    "ws-gateway": ("udp4", lambda r: G.to_websocket(r, ("127.0.0.1", 15070), ("127.0.0.1", 15060),
                                                    G.WsLeg(fragment=0.4, split=0.3, reorder=True, ping_every=4))[0]),
    "hep-two-agents": ("udp4", lambda r: G.to_hep(r, G.HepOpt(agents={1: "10.0.0.1", 2: "10.0.0.2"},
                                                             pick=lambda p: 1 + p.index % 2,
                                                             delay_ns={1: 200_000, 2: 1_500_000}))[0]),
}


def _rows(df):
    return df.reset_index(drop=True).astype("string").fillna("<NA>").to_numpy().tolist()


@pytest.mark.parametrize("name", list(BUILD))
def test_streaming_equals_in_memory_on_new_framings(name, tmp_path):
    fixture, build = BUILD[name]
    path = G.write_records(tmp_path / f"{name}.pcapng", build(G.records(FIX / f"{fixture}.pcapng")))
    ref = _analyze([path], stream=False)
    packets, _ = read_packets(path)
    v, _ = classify(packets[packets["call_id"].notna()].reset_index(drop=True))
    assert v.kind == "proxy"
    out = stream.stream_capture([path], run_id=path.stem, label=str(path), figures=False,
                                chunk_rows=7, batch_rows=11, vantage=v)
    st = out.report.details["streaming"]
    assert st["late_rows"] == 0 and st["closed_early_rows"] == 0
    for t in ("components", "calls", "transactions", "counts"):
        assert _rows(getattr(ref, t)) == _rows(getattr(out, t)), t
    r = ref.report.files[0] if ref.report.files else ref.report
    assert json.dumps(r.details["vantage"], sort_keys=True, default=str) == \
        json.dumps(out.report.details["vantage"], sort_keys=True, default=str)
    assert (r.read, r.parsed, dict(r.skipped)) == (out.report.read, out.report.parsed, dict(out.report.skipped))
