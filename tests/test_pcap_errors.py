"""Bad and odd captures (issue 13): every packet is parsed or skipped with a counted reason
(read = parsed + skipped, and true), unusable files are an IngestError naming the file and
the position, and the real-world variants (.gz, cooked/VLAN/extension headers, TSO lengths,
pcapng oddities, a TCP capture that starts mid-message) read as tshark reads them.

Captures here are the real fixtures or DERIVATIONS of them written by the test (each says what
it changes); none is committed."""
from __future__ import annotations

import asyncio
import gzip
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from capgen import eth, idb, ipv4_udp, records, shb, spb, write_pcap, write_records, epb
from sipperf.ingest.capture import pyshark_engine as pcap_pyshark
from sipperf.ingest.capture import fast as pcapfast
from sipperf.ingest.capture import scan as pcapscan
from sipperf.ingest.capture import sipmsg
from sipperf.ingest.capture.pcap import read_pcap
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


#: every test here twice: the capture read window by window, and mapped (conftest.reader_mode)
pytestmark = pytest.mark.usefixtures("reader_mode")


def tshark_count(path: Path) -> int:
    """Packets tshark can read before it gives up (its exit status is ignored)."""
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True).stdout
    return len(out.split())


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=True)


@pytest.fixture
def truncated(tmp_path) -> Path:
    src = (FIX / "udp4.pcapng").read_bytes()
    out = tmp_path / "cut.pcapng"
    out.write_bytes(src[: len(src) * 2 // 3])  # cut inside a packet block
    return out


@pytest.fixture
def not_a_capture(tmp_path) -> Path:
    out = tmp_path / "kamailio.log"
    out.write_text("Nov 21 19:50:01 host kamailio[1]: INFO: <core> started\n" * 20)
    return out


# ------------------------------------------------------------------------------ truncation
@needs_tshark
def test_truncated_keeps_every_complete_packet(truncated):
    """Default: the cut tail is one counted skip; every packet tshark can read is kept."""
    good = tshark_count(truncated)
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, ra = pcapfast.read_packets(truncated)
    assert ra.read == good + 1 and ra.skipped["truncated record"] == 1 and ra.balanced
    assert len(a) == int((full["frame"] <= good).sum())
    same(a, full[full["frame"] <= good])
    assert any("truncated record" in n and "byte" in n for n in ra.notes)
    b, rb = pcap_pyshark.read_packets(truncated)
    assert rb.skipped["truncated record"] == 1 and rb.balanced
    same(a, b)
    tl, rep = read_pcap(truncated)
    assert rep.balanced and len(tl) > 0


@needs_tshark
def test_truncated_raise_names_file_and_packet(truncated):
    """on_truncated="raise" (what --strict uses) names the file, the packet and its byte."""
    good = tshark_count(truncated)
    with pytest.raises(IngestError) as e:
        pcapfast.read_packets(truncated, on_truncated="raise")
    assert e.value.path == str(truncated)
    assert e.value.position.startswith(f"packet {good + 1} at byte ")
    assert "truncated" in str(e.value)
    with pytest.raises(IngestError) as e:
        pcap_pyshark.read_packets(truncated, on_truncated="raise")
    assert e.value.path == str(truncated) and e.value.position == f"packet {good + 1}"


def test_corrupt_block_length_stops_with_a_counted_skip(tmp_path):
    """DERIVED: udp4 with the 100th block's length field overwritten (a bit-flipped file):
    the 99 packets before it are kept, the rest cannot be walked: one 'corrupt record'."""
    data = bytearray((FIX / "udp4.pcapng").read_bytes())
    pos, n = 0, 0
    while True:
        btype, blen = struct.unpack_from("<II", data, pos)
        if btype == 6:
            n += 1
            if n == 100:
                break
        pos += blen
    data[pos + 4:pos + 8] = struct.pack("<I", 0x7FFFFFF1)
    out = tmp_path / "corrupt.pcapng"
    out.write_bytes(bytes(data))
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, rep = pcapfast.read_packets(out)
    assert rep.read == 100 and rep.skipped["corrupt record"] == 1 and rep.balanced
    same(a, full[full["frame"] <= 99])
    with pytest.raises(IngestError) as e:
        pcapfast.read_packets(out, on_truncated="raise")
    assert e.value.position == f"packet 100 at byte {pos}" and "corrupt" in str(e.value)


# ------------------------------------------------------------------------------- not captures
@pytest.mark.parametrize("reader", [pcapfast.read_packets, pcap_pyshark.read_packets])
def test_not_a_capture(not_a_capture, reader):
    with pytest.raises(IngestError) as e:
        reader(not_a_capture)
    assert e.value.path == str(not_a_capture) and e.value.position == "byte 0"
    assert "not a pcap/pcapng" in str(e.value)


def test_empty_missing_directory_fifo(tmp_path):
    (tmp_path / "empty.pcap").write_bytes(b"")
    with pytest.raises(IngestError, match="empty"):
        pcapfast.read_packets(tmp_path / "empty.pcap")
    with pytest.raises(IngestError):
        read_pcap(tmp_path / "missing.pcapng")
    with pytest.raises(IngestError, match="directory"):
        pcapfast.read_packets(tmp_path)
    fifo = tmp_path / "fifo.pcap"
    os.mkfifo(fifo)
    with pytest.raises(IngestError, match="not a regular file"):  # never blocks on open
        pcapfast.read_packets(fifo)
    gz_text = tmp_path / "notes.txt.gz"
    gz_text.write_bytes(gzip.compress(b"hello, not a capture\n" * 10))
    with pytest.raises(IngestError) as e:
        pcapfast.read_packets(gz_text)
    assert e.value.path == str(gz_text) and "not a pcap/pcapng" in str(e.value)
    assert not pcapfast.is_capture(gz_text) and not pcapfast.is_capture(tmp_path / "empty.pcap")


def test_zero_sip_packets_is_an_empty_table_and_an_account(tmp_path):
    """DERIVED: only the pure TCP ACKs (no payload) of tcp4: real packets, no SIP at all."""
    acks = []
    for ts, link, d in records(FIX / "tcp4.pcapng"):
        ihl = (d[16] & 15) * 4
        tot = struct.unpack(">H", d[18:20])[0]
        thl = (d[16 + ihl + 12] >> 4) * 4
        if tot == ihl + thl:
            acks.append((ts, link, d))
    assert len(acks) > 20
    out = write_records(tmp_path / "acks.pcapng", acks)
    df, rep = pcapfast.read_packets(out)
    assert len(df) == 0 and list(df.columns) == list(pcapfast.COLUMNS)
    assert rep.read == len(acks) and rep.parsed == 0 and rep.skipped == {"TCP without payload": len(acks)}
    assert (df.dtypes.astype(str).to_dict() == {c: str(pd.Series(dtype=t).dtype) for c, t in pcapfast.DTYPES.items()})


# ----------------------------------------------------------------------------------- gzip
@pytest.mark.parametrize("name", ["udp4", "tcp4", "frag4"])
def test_gzip_is_read_directly(tmp_path, name):
    """.pcapng.gz (and a two-member gzip) read by content, identical to the plain file."""
    plain = FIX / f"{name}.pcapng"
    ref, rref = pcapfast.read_packets(plain)
    gz = tmp_path / f"{name}.pcapng.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    assert pcapfast.is_capture(gz)
    a, ra = pcapfast.read_packets(gz)
    same(a, ref)
    assert (ra.read, ra.parsed, dict(ra.skipped)) == (rref.read, rref.parsed, dict(rref.skipped))
    data = plain.read_bytes()
    two = tmp_path / "two-members.dat"  # the name says nothing: sniffed by content
    two.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))
    b, _ = pcapfast.read_packets(two)
    same(b, ref)


@needs_tshark
def test_gzip_classic_pcap(tmp_path):
    """editcap's classic ns pcap of tcp4, gzip-compressed, reads like the pcapng."""
    out = tmp_path / "tcp4.pcap"
    subprocess.run(["editcap", "-F", "nsecpcap", str(FIX / "tcp4.pcapng"), str(out)], check=True)
    gz = tmp_path / "tcp4.pcap.gz"
    gz.write_bytes(gzip.compress(out.read_bytes()))
    same(pcapfast.read_packets(gz)[0], pcapfast.read_packets(FIX / "tcp4.pcapng")[0])


def test_gzip_truncated_and_corrupt(tmp_path):
    plain = (FIX / "udp4.pcapng").read_bytes()
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    z = gzip.compress(plain)
    cut = tmp_path / "cut.pcapng.gz"
    cut.write_bytes(z[: len(z) // 2])
    a, rep = pcapfast.read_packets(cut)
    assert rep.skipped["truncated record"] == 1 and rep.balanced and 0 < len(a) < len(full)
    same(a, full.iloc[:len(a)])
    assert any("cut short" in n for n in rep.notes)
    with pytest.raises(IngestError, match="cut short"):
        pcapfast.read_packets(cut, on_truncated="raise")
    bad = bytearray(z)
    bad[len(bad) // 2] ^= 0xFF
    corrupt = tmp_path / "corrupt.pcapng.gz"
    corrupt.write_bytes(bytes(bad))
    b, rep = pcapfast.read_packets(corrupt)  # deflate data or CRC error: stop, keep what came before
    assert rep.balanced and (rep.skipped.get("corrupt record") or rep.skipped.get("truncated record"))
    with pytest.raises(IngestError):
        pcapfast.read_packets(corrupt, on_truncated="raise")


# ------------------------------------------------------------------------------ pcapng oddities
def test_undefined_interface_is_a_counted_skip(tmp_path):
    """DERIVED: udp4 with the 5th packet block's interface id set to 7 (only interface 0 exists)."""
    data = bytearray((FIX / "udp4.pcapng").read_bytes())
    pos, n = 0, 0
    while pos < len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        if btype == 6:
            n += 1
            if n == 5:
                data[pos + 8:pos + 12] = struct.pack("<I", 7)
                break
        pos += blen
    out = tmp_path / "badif.pcapng"
    out.write_bytes(bytes(data))
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, rep = pcapfast.read_packets(out)
    assert rep.skipped == {"pcapng packet names an undefined interface": 1} and rep.balanced
    same(a, full[full["frame"] != 5])
    assert any(f"first at byte {pos}" in note for note in rep.notes)


def test_simple_packet_blocks_have_no_timestamp(tmp_path):
    """DERIVED: udp4's first 40 packets as SPBs (no timestamp) then 40 as EPBs: the SPB
    packets are counted skips, never rows at 1970; the EPB ones read as in the original."""
    recs = records(FIX / "udp4.pcapng")
    blob = shb() + idb(1) + b"".join(spb(d) for _, _, d in recs[:40]) + b"".join(
        epb(d, ts) for ts, _, d in recs[40:80])
    out = tmp_path / "spb.pcapng"
    out.write_bytes(blob)
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, rep = pcapfast.read_packets(out)
    assert rep.read == 80 and rep.skipped == {"pcapng simple packet block (no timestamp)": 40}
    same(a, full[(full["frame"] > 40) & (full["frame"] <= 80)])
    assert any("no timestamp" in n for n in rep.notes)


def test_all_zero_timestamps_are_read_and_noted(tmp_path):
    recs = [(0, link, d) for _, link, d in records(FIX / "udp4.pcapng")[:30]]
    a, rep = pcapfast.read_packets(write_records(tmp_path / "zero.pcapng", recs))
    assert rep.parsed == 30 and (a["ts_ns"] == 0).all()
    assert any("timestamp is 0" in n for n in rep.notes)


# ----------------------------------------------------------------------- link and IP variants
def _ip_rewrite(name: str, fn) -> list:
    return [(ts, link, fn(link, bytes(d))) for ts, link, d in records(FIX / f"{name}.pcapng")]


@needs_tshark
def test_ipv4_total_length_zero_uses_captured_length(tmp_path):
    """DERIVED: udp4 with every IPv4 total length set to 0, as TSO/offload captures show it:
    the same records (tshark's TSO support does the same)."""
    recs = _ip_rewrite("udp4", lambda link, d: d[:16] + b"\0\0" + d[18:])
    out = write_records(tmp_path / "tso.pcapng", recs)
    ref, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, rep = pcapfast.read_packets(out)
    assert rep.parsed == rep.read
    same(a, ref)
    b, _ = pcap_pyshark.read_packets(out)
    same(b, ref)


@needs_tshark
def test_vlan_tags(tmp_path):
    """DERIVED: an 802.1Q tag (VLAN 42), and for the frag4 packets 802.1ad + 802.1Q (QinQ),
    inserted after the Ethernet addresses."""
    tag = lambda link, d: d[:12] + b"\x81\x00\x00\x2a" + d[12:]
    qinq = lambda link, d: d[:12] + b"\x88\xa8\x00\x07\x81\x00\x00\x2a" + d[12:]
    for name, fn in (("udp4", tag), ("frag4", qinq)):
        out = write_records(tmp_path / f"{name}-vlan.pcapng", _ip_rewrite(name, fn))
        ref, _ = pcapfast.read_packets(FIX / f"{name}.pcapng")
        a, _ = pcapfast.read_packets(out)
        same(a, ref)
    b, _ = pcap_pyshark.read_packets(tmp_path / "udp4-vlan.pcapng")
    same(b, pcapfast.read_packets(FIX / "udp4.pcapng")[0])


@needs_tshark
def test_ipv6_extension_headers(tmp_path):
    """DERIVED: udp6 (Linux cooked v2) with a hop-by-hop and a destination-options header
    (8 bytes each, PadN) between the IPv6 header and UDP."""
    def ext(link, d):
        assert link == 276
        ip = bytearray(d[20:])
        nxt = ip[6]
        hbh = bytes([60, 0, 1, 4, 0, 0, 0, 0])       # hop-by-hop -> destination options
        dst = bytes([nxt, 0, 1, 4, 0, 0, 0, 0])      # destination options -> UDP
        ip[6] = 0
        plen = struct.unpack(">H", ip[4:6])[0] + 16
        ip[4:6] = struct.pack(">H", plen)
        return d[:20] + bytes(ip[:40]) + hbh + dst + bytes(ip[40:])
    out = write_records(tmp_path / "udp6-ext.pcapng", _ip_rewrite("udp6", ext))
    ref, _ = pcapfast.read_packets(FIX / "udp6.pcapng")
    a, _ = pcapfast.read_packets(out)
    same(a, ref)
    b, _ = pcap_pyshark.read_packets(out)
    same(b, ref)


@needs_tshark
def test_linux_cooked_v1_and_v2_fixtures_match_tshark():
    """tcp4 is Linux cooked v1 (SLL), udp6 cooked v2 (SLL2): both read, as tshark reads them."""
    for name, link in (("tcp4", 113), ("udp6", 276)):
        assert {lk for _, lk, _ in records(FIX / f"{name}.pcapng")} == {link}
        a, rep = pcapfast.read_packets(FIX / f"{name}.pcapng")
        assert rep.read == tshark_count(FIX / f"{name}.pcapng") and len(a) > 100


# ------------------------------------------------------------------------ TCP mid-message start
def _split_first_invite(tmp_path) -> tuple[Path, int]:
    """DERIVED from tcp4: the first TCP segment carrying an INVITE is split in two halves
    (seq numbers adjusted) and every earlier packet of that flow (SYN, handshake) is dropped,
    so the flow starts in the middle of the INVITE.  Returns (capture, dropped INVITE's frame
    number in the original)."""
    recs = records(FIX / "tcp4.pcapng")
    for i, (ts, link, d) in enumerate(recs):
        ihl = (d[16] & 15) * 4
        t0 = 16 + ihl
        thl = (d[t0 + 12] >> 4) * 4
        payload = d[t0 + thl:]
        if payload.startswith(b"INVITE "):
            break
    flow = d[28:36] + d[t0:t0 + 4]
    seq = struct.unpack(">I", d[t0 + 4:t0 + 8])[0]
    k = len(payload) // 2
    ip = bytearray(d[16:t0])
    ip[2:4] = struct.pack(">H", ihl + thl + len(payload) - k)
    tcp = bytearray(d[t0:t0 + thl])
    tcp[4:8] = struct.pack(">I", (seq + k) & 0xFFFFFFFF)
    second = d[:16] + bytes(ip) + bytes(tcp) + payload[k:]
    out = []
    for j, (ts2, link2, d2) in enumerate(recs):
        if j < i and d2[28:36] + d2[16 + ((d2[16] & 15) * 4):16 + ((d2[16] & 15) * 4) + 4] == flow:
            continue
        out.append((ts2, link2, second if j == i else d2))
    return write_records(tmp_path / "midstream.pcapng", out), i + 1


def test_tcp_capture_starting_mid_message(tmp_path):
    cap, invite_frame = _split_first_invite(tmp_path)
    full, _ = pcapfast.read_packets(FIX / "tcp4.pcapng")
    a, rep = pcapfast.read_packets(cap)
    reason = pcapscan.REASONS[pcapscan.R_TCP_NOT_SIP]
    assert rep.skipped[reason] == 1 and rep.balanced  # the half INVITE: skipped, not parsed
    assert len(a) == len(full) - 1
    lost = full[full["frame"] == invite_frame]
    assert len(lost) == 1 and lost["method"].iloc[0] == "INVITE"
    key = ["call_id", "cseq", "method", "status", "via_branch", "size"]
    text = lambda d: sorted(d[key].astype(object).where(d[key].notna(), "").astype(str).values.tolist())
    assert text(a) == text(full[full["frame"] != invite_frame])
    assert any("start mid-stream" in n for n in rep.notes)


# ------------------------------------------------------------------------- malformed messages
@needs_tshark
def test_malformed_messages_are_counted_skips_in_both_engines(tmp_path):
    """SYNTHETIC: five UDP datagrams: fine, CSeq above 2^32-1, CSeq not numeric, status 700,
    no Call-ID.  One row; four skips, each with its reason; the pyshark path agrees."""
    base = (b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1\r\n"
            b"From: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:b@127.0.0.1>;tag=2\r\n")
    msgs = [base + b"Call-ID: ok\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n",
            base + b"Call-ID: big\r\nCSeq: 4294967296 INVITE\r\nContent-Length: 0\r\n\r\n",
            base + b"Call-ID: nan\r\nCSeq: one INVITE\r\nContent-Length: 0\r\n\r\n",
            base.replace(b"200 OK", b"700 Odd") + b"Call-ID: st\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n",
            base + b"CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"]
    cap = write_pcap(tmp_path / "bad.pcap", [eth(ipv4_udp(m)) for m in msgs])
    a, rep = pcapfast.read_packets(cap)
    assert a["call_id"].tolist() == ["ok"]
    assert dict(rep.skipped) == {sipmsg.MALFORMED_CSEQ: 2, sipmsg.MALFORMED_STATUS: 1, sipmsg.MALFORMED_CALLID: 1}
    b, rb = pcap_pyshark.read_packets(cap, decode_as={"udp.port==5060": "sip"})
    same(a, b)
    assert rb.parsed == 1 and sum(rb.skipped.values()) == 4


# ------------------------------------------------------------------------------ pyshark state
@needs_tshark
def test_pyshark_inside_running_event_loop():
    """What a Jupyter cell does: call the plain function while an asyncio loop runs."""
    async def cell():
        return pcap_pyshark.read_packets(FIX / "udp6.pcapng")

    df, rep = asyncio.run(cell())
    ref, _ = pcapfast.read_packets(FIX / "udp6.pcapng")
    assert rep.balanced and df.equals(ref)


PYSHARK_AFTER_MAIN_THREAD = r"""
import sys, threading, pyshark
from sipperf.ingest.capture import pyshark_engine as pcap_pyshark
cap = pyshark.FileCapture(sys.argv[1], keep_packets=False)  # pyshark on the main thread first
n = sum(1 for _ in cap)
cap.close()
df, rep = pcap_pyshark.read_packets(sys.argv[1])            # then the sipperf path
out = []
t = threading.Thread(target=lambda: out.append(pcap_pyshark.read_packets(sys.argv[1])))
t.start(); t.join()                                          # and from another thread
print(n, len(df), rep.read, len(out[0][0]))
"""


@needs_tshark
def test_pyshark_after_pyshark_on_the_main_thread():
    """Issue 13 item 6: pyshark used on the main thread installs a child watcher bound to the
    main loop; read_packets then failed with "asyncio.get_child_watcher() is not activated".
    Run in a fresh interpreter (it changes process-wide asyncio state)."""
    cap = FIX / "udp4.pcapng"
    out = subprocess.run([sys.executable, "-c", PYSHARK_AFTER_MAIN_THREAD, str(cap)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    n, rows, read, rows2 = map(int, out.stdout.split())
    ref, rref = pcapfast.read_packets(cap)
    assert n == read == rref.read and rows == rows2 == len(ref)


def test_fuzz_finding_call_id_name_bit_flip(tmp_path):
    """H1's fuzz case udp4:bitflip8 (handoff/parser_bugs.md #1): a bit flip in the Call-ID
    header *name* of a 200 OK leaves a message without Call-ID: a counted malformed skip, not a
    row with a null call_id.  DERIVED: udp4 with 'Call-ID' -> 'Call-MD' in frame 7."""
    recs = records(FIX / "udp4.pcapng")
    ts, link, d = recs[6]
    assert b"\r\nCall-ID:" in d
    recs[6] = (ts, link, d.replace(b"\r\nCall-ID:", b"\r\nCall-MD:", 1))
    a, rep = pcapfast.read_packets(write_records(tmp_path / "flip.pcapng", recs))
    assert rep.skipped == {sipmsg.MALFORMED_CALLID: 1} and rep.balanced
    assert a["call_id"].notna().all() and 7 not in set(a["frame"])


# ----------------------------------------------------------------------- TCP stream accounting
def _tcp4_data_segments():
    from capgen import tcp_parts
    recs = records(FIX / "tcp4.pcapng")
    data = [i for i, (_, _, d) in enumerate(recs) if tcp_parts(d)[4]]
    return recs, data


def test_tcp_retransmission_and_keepalive(tmp_path):
    """DERIVED from tcp4: the 10th data segment sent twice (a retransmission: the same bytes in a
    new IP packet, another IPv4 id), and a CRLF keep-alive (RFC 5626) after the last data segment
    of its flow: same rows, two skips.  The same segment copied with its own id (a mirror port)
    is a duplicate instead."""
    from capgen import tcp_frame, tcp_parts
    recs, data = _tcp4_data_segments()
    i = data[9]
    l2, ip, tcp, seq, payload = tcp_parts(recs[i][2])
    flow = ip[12:20] + tcp[:4]
    last = max(j for j in data if (lambda p: p[1][12:20] + p[2][:4])(tcp_parts(recs[j][2])) == flow)
    l2b, ipb, tcpb, seqb, payb = tcp_parts(recs[last][2])
    out = list(recs)
    out.insert(last + 1, (recs[last][0] + 1, 113, tcp_frame(l2b, ipb, tcpb, seqb + len(payb), b"\r\n\r\n")))
    copy = recs[i][2]
    ident = struct.unpack(">H", copy[16 + 4:16 + 6])[0]
    assert ident > 0
    resent = copy[:16 + 4] + struct.pack(">H", (ident + 7) & 0xFFFF) + copy[16 + 6:]
    full, _ = pcapfast.read_packets(FIX / "tcp4.pcapng")
    cols = [c for c in pcapfast.COLUMNS if c not in ("frame", "ts_ns", "iface")]
    for seg, reason in ((resent, "TCP retransmission"), (copy, pcapfast.ps.REASONS[pcapfast.ps.R_DUPLICATE])):
        o2 = list(out)
        o2.insert(i + 1, (recs[i][0] + 1, 113, seg))
        a, rep = pcapfast.read_packets(write_records(tmp_path / "rtx.pcapng", o2))
        assert rep.skipped[reason] == 1 and rep.skipped["TCP keep-alive (CRLF only)"] == 1
        assert rep.read == len(recs) + 2 and rep.balanced
        same(a[cols], full[cols])


def test_tcp_gap_drops_only_the_broken_message(tmp_path):
    """DERIVED from tcp4: a data segment split in two and its second half lost: the first
    half's packet is a counted 'TCP gap' skip, every other message is still read."""
    from capgen import tcp_frame, tcp_parts
    recs, data = _tcp4_data_segments()
    i = data[20]
    l2, ip, tcp, seq, payload = tcp_parts(recs[i][2])
    out = list(recs)
    out[i] = (recs[i][0], 113, tcp_frame(l2, ip, tcp, seq, payload[:len(payload) // 2]))
    full, _ = pcapfast.read_packets(FIX / "tcp4.pcapng")
    a, rep = pcapfast.read_packets(write_records(tmp_path / "gap.pcapng", out))
    n_msgs = int((full["frame"] == i + 1).sum())
    assert rep.skipped == {"TCP without payload": rep.skipped["TCP without payload"], "TCP gap (bytes lost before this segment)": 1}
    assert len(a) == len(full) - n_msgs and rep.balanced
