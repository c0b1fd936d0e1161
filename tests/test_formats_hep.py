"""HEP v1/v2/v3 from Homer capture agents (issue 23 item 3).

Each capture is a REAL fixture as a Homer collector would have received it from capture agents
(``tests/capgen.py`` ``to_hep``): every SIP packet HEP-encapsulated with its original
addresses, ports and capture time (to the µs, as HEP carries it) and sent to a collector on
port 9060, arriving later.  The encoder in capgen is written from the HEP specification
(sipcapture/HEP) independently of the readers.  References: the plain capture's table with its
times cut to the µs, the collector delays the generator drew, and the plain-Python decoder of
the pyshark engine (``sipperf.ingest.capture.hep``; tshark 4.0 has no HEP dissector).
"""
from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capgen as G
from sipperf.ingest.capture import fast
from sipperf.ingest.capture import hep as pyhep
from sipperf.ingest.capture import pyshark_engine as pe
from sipperf.ingest.capture import scan as ps
from sipperf.ingest.capture.read import read_capture

FIX = Path(__file__).parent / "fixtures"
COLS = [c for c in fast.COLUMNS if c not in ("frame", "iface")]  # iface: numbered by the file written


def rows(df, cols=COLS):
    return sorted(map(tuple, df[cols].astype("string").fillna("<NA>").to_numpy().tolist()))


def expected(ref: pd.DataFrame, expect: dict) -> pd.DataFrame:
    e = ref.copy()
    e["ts_ns"] = [expect[f - 1] for f in e["frame"]]
    return e


UAS = {15080, 15082, 15084}  # the callee's port in udp4, tcp4, udp6: that side captured plainly
TWO_AGENTS = dict(agents={101: "10.9.0.1", 202: "10.9.0.2"}, delay_ns={101: 300_000, 202: 2_500_000},
                  pick=lambda p: 101 if p.index % 2 else 202)
CASES = {
    "v3": G.HepOpt(),
    "v2": G.HepOpt(version=2),
    "v3-two-agents": G.HepOpt(**TWO_AGENTS),
    "v3-mixed-with-plain-sip": G.HepOpt(keep_plain=lambda p: p.sport in UAS or p.dport in UAS),
    "v3-over-tcp": G.HepOpt(over_tcp=True, coalesce=3, **TWO_AGENTS),
}


@pytest.mark.parametrize("fixture", ["udp4", "udp6", "tcp4"])
@pytest.mark.parametrize("case", list(CASES))
def test_hep_gives_the_agents_view(fixture, case, tmp_path):
    recs = G.records(FIX / f"{fixture}.pcapng")
    ref, _ = fast.read_packets(FIX / f"{fixture}.pcapng")
    out, expect = G.to_hep(recs, CASES[case])
    cap = G.write_records(tmp_path / "hep.pcapng", out)
    df, rep = fast.read_packets(cap)
    assert rows(df) == rows(expected(ref, expect))
    assert rep.read == len(out) and rep.balanced
    assert set(rep.skipped) <= {ps.REASONS[ps.R_TCP_EMPTY]}
    h = rep.details["transports"]["hep"]
    plain = (df["sport"].isin(UAS) | df["dport"].isin(UAS)).sum() if "mixed" in case else 0
    assert 0 < len(df) - plain == h["sip_messages"] == h["packets_v2" if case == "v2" else "packets_v3"]


def test_agents_time_is_used_and_the_collector_delay_shown(tmp_path):
    """Two agents whose packets reach the collector 0.3 ms and 2.5 ms (+ up to 50 µs) after
    they captured them: every row has the agent's time; the report shows each agent's delay,
    which is what the collector's own times would have added."""
    recs = G.records(FIX / "udp4.pcapng")
    out, expect = G.to_hep(recs, CASES["v3-two-agents"])
    cap = G.write_records(tmp_path / "hep.pcapng", out)
    df, rep = fast.read_packets(cap)
    col_ts = np.array([t for t, _, _ in out])
    # the collector's own times are later than the agents' by the drawn delays
    assert (col_ts[df["frame"].to_numpy() - 1] - df["ts_ns"].to_numpy()).min() >= 300_000
    agents = {a["capture_id"]: a for a in rep.details["transports"]["hep"]["agents"]}
    assert set(agents) == {101, 202}
    assert agents[101]["sip_messages"] + agents[202]["sip_messages"] == len(df) == 260
    for cid, lo in ((101, 0.300), (202, 2.500)):
        d = agents[cid]["collector_minus_agent_ms"]
        # + the µs cut of the HEP time (< 1 µs) and the drawn jitter (< 50 µs)
        assert lo <= d["min"] <= d["mean"] <= d["max"] < lo + 0.051
    assert any("not the time the collector received them" in n for n in rep.notes)
    tl, trep = read_capture(cap)
    assert trep.details["vantage"]["kind"] == "proxy"
    assert trep.details["vantage"]["hops"][0]["socket"] == "127.0.0.1:15060"


@pytest.mark.parametrize("case", ["v3-two-agents", "v2", "v3-mixed-with-plain-sip"])
def test_pyshark_engine_decodes_hep_the_same_way(case, tmp_path):
    recs = G.records(FIX / "udp4.pcapng")
    out, _ = G.to_hep(recs, CASES[case])
    cap = G.write_records(tmp_path / "hep.pcapng", out)
    a, ra = fast.read_packets(cap)
    b, rb = pe.read_packets(cap)
    assert ra.read == rb.read
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_hep_v1_has_no_time_and_uses_the_collectors(tmp_path):
    recs = G.records(FIX / "udp4.pcapng")
    out, expect = G.to_hep(recs, G.HepOpt(version=1))
    cap = G.write_records(tmp_path / "hep1.pcapng", out)
    df, rep = fast.read_packets(cap)
    ref, _ = fast.read_packets(FIX / "udp4.pcapng")
    assert rows(df) == rows(expected(ref, expect))
    h = rep.details["transports"]["hep"]
    assert h["packets_v1"] == 260 and h["without_time"] == 260


def test_hep_that_carries_no_sip_is_named(tmp_path):
    """Non-SIP payload types (RTCP = 5, logs = 100), a compressed payload and a broken chunk
    length are counted by name, next to SIP read from the same agent."""
    recs = G.records(FIX / "udp4.pcapng")
    pk = [p for p in G.packets(recs)][:4]
    agent, col = bytes([10, 9, 0, 1]), bytes([10, 9, 0, 100])
    eth = b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00"

    def udp(payload):
        return eth + G.ip_layer(4, agent, col, 17, G.udp_layer(9060, 9060, payload))
    bad = bytearray(G.hep3(pk[3], pk[3].ts, 7))
    bad[4:6] = struct.pack(">H", len(bad) + 40)  # total length beyond the datagram
    frames = [udp(G.hep3(pk[0], pk[0].ts, 7)), udp(G.hep3(pk[1], pk[1].ts, 7, proto_type=5)),
              udp(G.hep3(pk[1], pk[1].ts, 7, proto_type=100)), udp(G.hep3(pk[2], pk[2].ts, 7, compressed=True)),
              udp(bytes(bad))]
    cap = G.write_pcap(tmp_path / "hep-odd.pcap", frames)
    df, rep = fast.read_packets(cap)
    assert len(df) == 1 and rep.parsed == 1 and rep.read == 5
    assert rep.skipped == {ps.REASONS[ps.R_HEP_NOT_SIP]: 2, ps.REASONS[ps.R_HEP_COMPRESSED]: 1,
                           ps.REASONS[ps.R_HEP_BAD]: 1}
    assert rep.details["transports"]["refused"][ps.REASONS[ps.R_HEP_COMPRESSED]]["packets"] == 1
    b, rb = pe.read_packets(cap)
    assert dict(rb.skipped) == dict(rep.skipped)
    pd.testing.assert_frame_equal(df.reset_index(drop=True), b.reset_index(drop=True))


def test_python_decoder_reads_the_hep_specification_layout():
    """The plain-Python decoder on a HEPv3 packet built byte by byte here (chunk ids from the
    specification), and on a HEPv2 one: addresses, ports, time and payload come back."""
    sip = b"OPTIONS sip:a@b SIP/2.0\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\n\r\n"

    def chunk(t, body):
        return struct.pack(">HHH", 0, t, 6 + len(body)) + body
    body = (chunk(1, b"\x0a") + chunk(2, b"\x11") + chunk(5, bytes(15) + b"\x01") + chunk(6, bytes(15) + b"\x02")
            + chunk(7, struct.pack(">H", 5060)) + chunk(8, struct.pack(">H", 5070))
            + chunk(9, struct.pack(">I", 1_700_000_000)) + chunk(10, struct.pack(">I", 123_456))
            + chunk(11, b"\x01") + chunk(12, struct.pack(">I", 2001)) + chunk(15, sip))
    h = pyhep.decode(b"HEP3" + struct.pack(">H", 6 + len(body)) + body)
    assert (h.version, h.src, h.dst, h.sport, h.dport, h.ip_proto) == (3, "::1", "::2", 5060, 5070, 17)
    assert h.ts_ns == 1_700_000_000_123_456_000 and h.capture_id == 2001 and h.payload == sip
    v2 = (struct.pack(">BBBBHH", 2, 16, 2, 17, 5060, 5070) + bytes([10, 0, 0, 1, 10, 0, 0, 2])
          + struct.pack("<IIHH", 1_700_000_000, 5, 42, 0) + sip)
    h = pyhep.decode(v2)
    assert (h.version, h.src, h.dst, h.ts_ns, h.capture_id) == (2, "10.0.0.1", "10.0.0.2", 1_700_000_000_000_005_000, 42)
