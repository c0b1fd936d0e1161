"""SIP over WebSocket (RFC 7118, ws://), issue 23 item 2.

The captures are REAL fixtures re-framed by ``tests/capgen.py`` (``to_websocket``): the UDP leg
between a SIPp user agent and Kamailio becomes a WebSocket connection (HTTP Upgrade, masked
client frames, unmasked server frames, each SIP datagram a WebSocket message at its own
capture time), the other leg stays UDP: a WebRTC gateway's capture.  References: the plain
capture's table and timeline, and tshark's WebSocket + SIP dissection (the pyshark engine).
"""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

import capgen as G
from sipperf import calls
from sipperf.ingest.capture import fast
from sipperf.ingest.capture import pyshark_engine as pe
from sipperf.ingest.capture import scan as ps
from sipperf.ingest.capture.read import read_capture

FIX = Path(__file__).parent / "fixtures"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
UAC, PROXY = ("127.0.0.1", 15070), ("127.0.0.1", 15060)  # udp4's SIPp UAC and Kamailio
HANDSHAKE = ps.REASONS[ps.R_WS_HANDSHAKE]
CONTROL = ps.REASONS[ps.R_WS_CONTROL]
EMPTY = ps.REASONS[ps.R_TCP_EMPTY]

VARIANTS = {
    "one-frame-per-message": G.WsLeg(),
    "fragmented-split-reordered-pings": G.WsLeg(fragment=0.5, split=0.4, reorder=True, ping_every=4),
    "no-upgrade-in-capture": G.WsLeg(upgrade=False),
    "several-sip-per-frame": G.WsLeg(bundle=0.35),
}


def expected(ref: pd.DataFrame, expect: dict) -> pd.DataFrame:
    """The plain table as the re-framed capture must give it: the caller leg's rows with
    transport ws, the WebSocket ports and the time of the frame that carried them."""
    e = ref.copy()
    for i, (ts, sp, dp) in expect.items():
        m = e["frame"] == i + 1
        e.loc[m, "ts_ns"] = ts
        e.loc[m, "sport"] = sp
        e.loc[m, "dport"] = dp
        e.loc[m, "transport"] = "ws"
    return e


def rows(df, cols):
    return sorted(map(tuple, df[cols].astype("string").fillna("<NA>").to_numpy().tolist()))


@pytest.fixture(scope="module")
def udp4():
    recs = G.records(FIX / "udp4.pcapng")
    df, _ = fast.read_packets(FIX / "udp4.pcapng")
    return recs, df


@pytest.fixture(scope="module", params=list(VARIANTS))
def ws(request, udp4, tmp_path_factory):
    recs, ref = udp4
    out, expect = G.to_websocket(recs, UAC, PROXY, VARIANTS[request.param])
    cap = G.write_records(tmp_path_factory.mktemp("ws") / f"{request.param}.pcapng", out)
    return request.param, cap, out, expected(ref, expect)


def test_packet_table_is_the_plain_one_on_websocket(ws):
    name, cap, out, exp = ws
    df, rep = fast.read_packets(cap)
    cols = [c for c in fast.COLUMNS if c not in ("frame", "iface")]
    assert rows(df, cols) == rows(exp, cols)
    assert (df["transport"] == "ws").sum() == 140 and (df["transport"] == "udp").sum() == 120
    assert rep.read == len(out) and rep.balanced
    assert set(rep.skipped) <= {EMPTY, HANDSHAKE, CONTROL}
    assert rep.skipped[CONTROL] == rep.details["transports"]["websocket"]["control_frames"] >= 2
    # the handshake's packets: those carrying bytes of the GET or of the 101
    hand = sum(1 for r in out if (p := G.decode(*r)) is not None and p.proto == 6 and p.payload
               and (p.payload in G.WS_GET % (b"127.0.0.1", 8080, b"127.0.0.1") or p.payload in G.WS_101))
    assert rep.skipped.get(HANDSHAKE, 0) == hand
    assert hand == 0 if name == "no-upgrade-in-capture" else hand >= 2
    w = rep.details["transports"]["websocket"]
    assert w["server_ports"] == [8080]
    if name == "fragmented-split-reordered-pings":
        assert w["fragmented"] > 40
    if name == "several-sip-per-frame":
        assert w["with_several_sip_messages"] > 10


@needs_tshark
def test_tshark_reads_the_same_websocket_messages(ws):
    """tshark's WebSocket dissector hands each message to SIP after the upgrade; it reads only
    the first SIP message of a WebSocket message, so the bundled variant is compared on those."""
    name, cap, out, exp = ws
    if name == "no-upgrade-in-capture":
        pytest.skip("tshark finds WebSocket only from the upgrade")
    a, ra = fast.read_packets(cap)
    b, rb = pe.read_packets(cap)
    assert ra.read == rb.read
    if name == "several-sip-per-frame":
        # tshark dissects only the first SIP message of a WebSocket message, and gives it the
        # whole message's length as size
        firsts = a[~a["frame"].duplicated(keep="first")]
        assert len(b) == len(firsts) < len(a)
        keep = [c for c in fast.COLUMNS if c not in ("size", "iface")]
        pd.testing.assert_frame_equal(firsts[keep].reset_index(drop=True), b[keep].reset_index(drop=True))
        return
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_gateway_capture_is_a_proxy_with_both_legs_paired(ws, udp4):
    """Callers on WebSocket, callee on UDP: one forwarding element with both sockets, every
    message paired as in the plain capture (same instants, dispositions, PDR)."""
    name, cap, out, exp = ws
    if name == "several-sip-per-frame":
        pytest.skip("bundling moves the earlier message's time to its frame's: compared above")
    tl, rep = read_capture(cap)
    ref, _ = read_capture(FIX / "udp4.pcapng")
    v = rep.details["vantage"]
    assert v["kind"] == "proxy" and len(v["hops"]) == 1
    assert set(v["hops"][0]["sockets"]) == {"127.0.0.1:8080", "127.0.0.1:15060"}
    cols = ["call_id", "cseq", "method", "status", "t_arr", "t_dep", "disposition"]
    assert rows(tl, cols) == rows(ref, cols)
    assert calls.pdr(tl) == calls.pdr(ref) == 0.0
    assert tl["t_dep"].notna().sum() == ref["t_dep"].notna().sum() > 100


def test_pure_websocket_endpoint_capture(tmp_path):
    """A capture with SIP only over WebSocket (SIPp UAC to UAS, both legs one connection) is
    read, not refused: the endpoint view of the plain capture, retransmissions included."""
    recs = G.records(FIX / "endpoint.pcapng")
    out, _ = G.to_websocket(recs, ("127.0.0.1", 15121), ("127.0.0.1", 15120), G.WsLeg(ws_port=15120))
    cap = G.write_records(tmp_path / "ws-endpoint.pcapng", out)
    tl, rep = read_capture(cap)
    ref, rrep = read_capture(FIX / "endpoint.pcapng")
    assert rep.details["vantage"]["kind"] == "endpoint"
    assert rep.details["vantage"]["seen"] == rrep.details["vantage"]["seen"]
    assert rows(tl, ["call_id", "cseq", "method", "status", "t_arr", "retrans"]) == \
        rows(ref, ["call_id", "cseq", "method", "status", "t_arr", "retrans"])


def test_websocket_frames_across_lost_bytes_resynchronise(udp4, tmp_path):
    """A segment of the WebSocket connection missing from the capture: the message it held is
    lost (counted), the frames after it are found again and read."""
    recs, ref = udp4
    out, expect = G.to_websocket(recs, UAC, PROXY, G.WsLeg(split=1.0, seed=3))
    data = [i for i, r in enumerate(out) if (p := G.decode(*r)) is not None and p.proto == 6
            and p.payload and p.dport == 8080]
    del out[data[30]]  # the second part of one client frame
    cap = G.write_records(tmp_path / "ws-gap.pcapng", out)
    df, rep = fast.read_packets(cap)
    assert rep.balanced
    assert len(ref) - 3 <= len(df) < len(ref)
    assert (df["transport"] == "ws").sum() >= 137
