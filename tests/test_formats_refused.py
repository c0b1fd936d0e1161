"""A refusal names what it saw (issue 23 item 4): TLS, WebSocket over TLS, SCTP, ESP, SigComp
(and DTLS) are each a named skip with its packets and bytes in the account, never a generic
"not SIP"; a capture holding nothing else fails with an error that lists them.

The SIP traffic is the REAL ``udp4`` fixture; the refused classes are SYNTHETIC packets made by
``tests/capgen.py`` (``refused_traffic``: TLS records with random payloads, SCTP and ESP
packets, SigComp datagrams), whose packet and byte counts the generator reports itself.
"""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

import capgen as G
from sipperf.ingest.capture import fast
from sipperf.ingest.capture import scan as ps
from sipperf.ingest.capture.read import read_capture
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
TLS = "TLS on port 5061: encrypted SIP cannot be read — give its TLS key log (SSLKEYLOGFILE) as an input beside the capture, or capture before TLS"
WSS = ("WebSocket over TLS (wss://) on port 8443: encrypted SIP cannot be read — give its TLS key log "
       "(SSLKEYLOGFILE) as an input beside the capture, or capture before TLS")
NAMES = {"tls": TLS, "wss": WSS, "sctp": ps.REASONS[ps.R_SCTP], "esp": ps.REASONS[ps.R_ESP],
         "sigcomp": ps.REASONS[ps.R_SIGCOMP]}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    recs = G.records(FIX / "udp4.pcapng")
    bad, count = G.refused_traffic(recs[10][0], random.Random(23))
    cap = G.write_records(tmp_path_factory.mktemp("ref") / "mixed.pcapng", sorted(recs + bad, key=lambda r: r[0]))
    only = G.write_records(tmp_path_factory.mktemp("ref") / "only.pcapng", bad)
    return cap, only, count


def test_each_class_is_named_with_its_packets_and_bytes(mixed):
    cap, _, count = mixed
    df, rep = fast.read_packets(cap)
    ref, _ = fast.read_packets(FIX / "udp4.pcapng")
    cols = [c for c in fast.COLUMNS if c not in ("frame", "iface")]
    assert df[cols].reset_index(drop=True).equals(ref[cols].reset_index(drop=True))  # SIP untouched
    assert rep.balanced and rep.parsed == 260
    assert dict(rep.skipped) == {NAMES[k]: n for k, (n, _) in count.items()}
    refused = rep.details["transports"]["refused"]
    assert refused == {NAMES[k]: {"packets": n, "bytes": b} for k, (n, b) in count.items()}
    for k, (n, b) in count.items():
        assert any(n_.endswith(f"{NAMES[k]} ({n} packets, {b} payload bytes)") for n_ in rep.notes)
    assert not any("not SIP" in r for r in rep.skipped)


def test_a_capture_of_only_refused_traffic_says_what_it_held(mixed, tmp_path):
    _, only, count = mixed
    with pytest.raises(IngestError) as e:
        read_capture(only)
    msg = str(e.value)
    assert "no SIP message in this capture" in msg
    for k in count:
        assert NAMES[k] in msg
    r = subprocess.run([sys.executable, "-m", "sipperf.cli", "analyze", str(only), "--out", str(tmp_path / "o"),
                        "--no-figures"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "TLS on port 5061" in r.stderr


def test_dtls_and_esp_in_udp_and_ah(tmp_path):
    """DTLS records and UDP-encapsulated ESP (port 4500) are named too; an IPv4 AH header
    (authentication only) is skipped and the SIP behind it read."""
    recs = G.records(FIX / "udp4.pcapng")
    p = G.decode(*recs[0])
    eth = p.l2
    a, b = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
    dtls = b"\x16\xfe\xfd" + bytes(8) + b"\x00\x20" + bytes(32)
    esp = b"\x00\x00\x12\x34" + b"\x00\x00\x00\x01" + bytes(60)
    ah_sip = bytes([17, 4]) + bytes(2) + bytes(4) + bytes(4) + bytes(12)  # next header UDP, 24 bytes
    ah_sip += G.udp_layer(p.sport, p.dport, p.payload)
    frames = [eth + G.ip_layer(4, a, b, 17, G.udp_layer(5061, 5061, dtls)),
              eth + G.ip_layer(4, a, b, 17, G.udp_layer(4500, 4500, esp)),
              eth + G.ip_layer(4, p.src, p.dst, 51, ah_sip)]
    cap = G.write_pcap(tmp_path / "odd.pcap", frames)
    df, rep = fast.read_packets(cap)
    assert rep.skipped == {ps.REASONS[ps.R_DTLS]: 1, ps.REASONS[ps.R_ESP]: 1}
    assert len(df) == 1 and df["call_id"].iloc[0] == fast.read_packets(FIX / "udp4.pcapng")[0]["call_id"].iloc[0]
    assert rep.details["transports"]["refused"][ps.REASONS[ps.R_ESP]] == {"packets": 1, "bytes": len(esp)}
