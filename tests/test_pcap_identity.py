"""The bulk reader and the pyshark path give identical records on every real capture,
and both agree with tshark's own field export (an independent reference)."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from sipperf.ingest.capture import pyshark_engine as pcap_pyshark
from sipperf.ingest.capture import fast as pcapfast

FIX = Path(__file__).parent / "fixtures"
CAPTURES = sorted(FIX.glob("*.pcapng"))
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


#: every test here twice: the capture read window by window, and mapped (conftest.reader_mode)
pytestmark = pytest.mark.usefixtures("reader_mode")


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) == list(pcapfast.COLUMNS)
    assert len(a) == len(b)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=True)


def test_fixtures_present_and_small():
    names = {p.stem for p in CAPTURES}
    assert {"udp4", "udp6", "tcp4", "retrans", "frag4", "prack", "odd"} <= names
    assert all(p.stat().st_size < 1_000_000 for p in CAPTURES)


@needs_tshark
@pytest.mark.parametrize("cap", CAPTURES, ids=lambda p: p.stem)
def test_bulk_equals_pyshark(cap):
    a, ra = pcapfast.read_packets(cap)
    b, rb = pcap_pyshark.read_packets(cap)
    ra.check(), rb.check()
    assert ra.read == rb.read  # same packet count
    _same(a, b)


#: packet-table column -> Wireshark field read independently with `tshark -T fields`
TSHARK_FIELDS = {
    "call_id": "sip.Call-ID", "cseq": "sip.CSeq.seq", "cseq_method": "sip.CSeq.method",
    "method": "sip.Method", "status": "sip.Status-Code", "via_branch": "sip.Via.branch",
    "from_uri": "sip.from.addr", "from_tag": "sip.from.tag", "to_uri": "sip.to.addr",
    "to_tag": "sip.to.tag", "contact_uri": "sip.contact.uri", "max_forwards": "sip.Max-Forwards",
}


def _tshark_fields(cap: Path, fields: list[str], occurrence: str = "f") -> list[list[str]]:
    out = subprocess.run(
        ["tshark", "-n", "-r", str(cap), "--disable-protocol", "sdp", "-Y", "sip", "-T", "fields",
         "-E", f"occurrence={occurrence}", "-E", "separator=/t", *sum((["-e", f] for f in fields), [])],
        capture_output=True, text=True, check=True).stdout
    # tshark keeps the line break of a folded header in the value: unfold as RFC 3261 7.3.1 says
    unfold = lambda v: re.sub(r"[ \t]*(\\r)?\\n[ \t]+", " ", v)
    return [[unfold(v) for v in line.split("\t")] for line in out.splitlines() if line]


_WS_COLON = re.compile(rb"\n[!-9;-~]+[ \t]+:")


def _tshark_blind(cap: Path) -> set[int]:
    """Frames with a header written ``Name SP ":"``: legal (HCOLON, RFC 3261 §25.1) but
    Wireshark 4.0 does not recognise such a header, so its fields are no reference there."""
    out = set()
    for i, (_, _, data) in enumerate(pcapfast.iter_records(cap), start=1):
        head = data.split(b"\r\n\r\n", 1)[0]
        if _WS_COLON.search(head):
            out.add(i)
    return out


@needs_tshark
@pytest.mark.parametrize("cap", CAPTURES, ids=lambda p: p.stem)
def test_bulk_matches_tshark_fields(cap):
    """Frame numbers, exact ns timestamps and every SIP column Wireshark dissects itself,
    against `tshark -T fields` (an independent reference; first message of each frame)."""
    cols = list(TSHARK_FIELDS)
    ref = _tshark_fields(cap, ["frame.number", "frame.time_epoch", "sip.User-Agent", "sip.Server",
                               "sip.Session-ID", *TSHARK_FIELDS.values()])
    a, _ = pcapfast.read_packets(cap)
    first = a.drop_duplicates("frame")  # tshark prints one line per frame
    assert first["frame"].tolist() == [int(r[0]) for r in ref]
    assert first["ts_ns"].tolist() == [pcap_pyshark.epoch_ns(r[1]) for r in ref]
    blind = _tshark_blind(cap)
    keep = [int(r[0]) not in blind for r in ref]
    ref = [r for r, k in zip(ref, keep) if k]
    first = first[keep]
    assert first["ua"].fillna("").tolist() == [r[2] or r[3] for r in ref]
    # Session-ID is the first correlation header; the X-... ones are unknown to Wireshark
    sess = [r[4] for r in ref]
    assert [c for c, s_ in zip(first["corr_id"].fillna(""), sess) if s_] == [s_ for s_ in sess if s_]
    for i, c in enumerate(cols, start=5):
        got = first[c].astype("string").fillna("").tolist()
        assert got == [r[i] for r in ref], c
    assert first["from_tag"].notna().all() and first["contact_uri"].notna().any()


@needs_tshark
@pytest.mark.parametrize("cap", CAPTURES, ids=lambda p: p.stem)
def test_via_count_matches_tshark(cap):
    """Via values counted as Wireshark dissects them (one sent-protocol per value), on the
    frames that carry one SIP message."""
    ref = _tshark_fields(cap, ["frame.number", "sip.Via.transport"], occurrence="a")
    a, _ = pcapfast.read_packets(cap)
    single = a[~a["frame"].duplicated(keep=False)].set_index("frame")["via_count"]
    checked = 0
    blind = _tshark_blind(cap)
    for r in ref:
        if int(r[0]) in single.index and int(r[0]) not in blind:
            assert single[int(r[0])] == len([t for t in r[1].split(",") if t]), r
            checked += 1
    assert checked > 0.5 * len(ref)
    if cap.stem in ("udp4", "udp6", "tcp4", "prack"):  # through a proxy: two Vias downstream
        assert (single > 1).any()


@needs_tshark
def test_classic_pcap_and_ns_resolution(tmp_path):
    """editcap's classic pcap (ns) of the TCP capture reads the same as the pcapng."""
    out = tmp_path / "tcp4.pcap"
    subprocess.run(["editcap", "-F", "nsecpcap", str(FIX / "tcp4.pcapng"), str(out)], check=True)
    a, _ = pcapfast.read_packets(FIX / "tcp4.pcapng")
    b, _ = pcapfast.read_packets(out)
    _same(a, b)
    c, _ = pcap_pyshark.read_packets(out)
    _same(b, c)


def _to_null_link(src: Path, dst: Path) -> None:
    """SYNTHETIC conversion: the Ethernet fixture rewritten as BSD loopback (DLT_NULL) pcap:
    the 14-byte Ethernet header replaced by a 4-byte host-order address family."""
    with open(dst, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 0))
        for ts, link, data in pcapfast.iter_records(src):
            assert link == 1
            etype = struct.unpack(">H", data[12:14])[0]
            fam = 2 if etype == 0x0800 else 30
            pkt = struct.pack("<I", fam) + data[14:]
            out.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(pkt), len(pkt)))
            out.write(pkt)


@needs_tshark
@pytest.mark.parametrize("name", ["frag4", "udp4"])
def test_null_linktype(tmp_path, name):
    out = tmp_path / f"{name}-null.pcap"
    _to_null_link(FIX / f"{name}.pcapng", out)
    a, _ = pcapfast.read_packets(FIX / f"{name}.pcapng")
    b, _ = pcapfast.read_packets(out)
    _same(a, b)
    c, _ = pcap_pyshark.read_packets(out)
    _same(b, c)


def _resegment(src: Path, dst: Path, mode: str) -> int:
    """SYNTHETIC re-segmentation of the real TCP capture (Linux cooked v1, IPv4), written as a
    classic pcap: ``split`` cuts every data segment in two (a SIP message across segments),
    ``merge`` joins every two consecutive data segments of a flow into one (two SIP messages
    in one segment; pure ACKs are dropped then).  IP checksums are zeroed (tshark does not verify them by default).
    Returns the number of data segments changed."""
    def build(l2, ip, tcp, seq, payload):
        ip = bytearray(ip)
        ip[2:4] = struct.pack(">H", len(ip) + len(tcp) + len(payload))
        ip[10:12] = b"\0\0"
        tcp = bytearray(tcp)
        tcp[4:8] = struct.pack(">I", seq & 0xFFFFFFFF)
        return bytes(l2) + bytes(ip) + bytes(tcp) + payload

    out_pkts: list[tuple[int, bytes]] = []
    pending: dict[bytes, tuple] = {}
    changed = 0
    for ts, link, data in pcapfast.iter_records(src):
        assert link == 113
        ihl = (data[16] & 15) * 4
        tot = struct.unpack(">H", data[18:20])[0]
        t0 = 16 + ihl
        thl = (data[t0 + 12] >> 4) * 4
        l2, ip, tcp = data[:16], data[16:t0], data[t0:t0 + thl]
        payload = data[t0 + thl:16 + tot]
        seq = struct.unpack(">I", tcp[4:8])[0]
        if not payload:
            if mode == "split":  # merged data would be ACKed before it is seen: drop ACKs
                out_pkts.append((ts, data))
            continue
        if mode == "split":
            k = len(payload) // 2
            out_pkts.append((ts, build(l2, ip, tcp, seq, payload[:k])))
            out_pkts.append((ts + 1, build(l2, ip, tcp, seq + k, payload[k:])))
            changed += 1
        else:
            flow = ip[12:20] + tcp[:4]
            if flow in pending:
                pts, pl2, pip, ptcp, pseq, ppay = pending.pop(flow)
                out_pkts.append((ts, build(pl2, pip, ptcp, pseq, ppay + payload)))
                changed += 1
            else:
                pending[flow] = (ts, l2, ip, tcp, seq, payload)
    for pts, pl2, pip, ptcp, pseq, ppay in pending.values():
        out_pkts.append((pts, build(pl2, pip, ptcp, pseq, ppay)))
    with open(dst, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 113))
        for ts, pkt in out_pkts:
            out.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(pkt), len(pkt)))
            out.write(pkt)
    return changed


@needs_tshark
@pytest.mark.parametrize("mode", ["split", "merge"])
def test_tcp_resegmented(tmp_path, mode):
    out = tmp_path / f"tcp4-{mode}.pcap"
    assert _resegment(FIX / "tcp4.pcapng", out, mode) > 50
    a, ra = pcapfast.read_packets(out)
    # tshark's SIP heuristic cannot ask TCP for reassembly: name the ports (see read_packets)
    b, _ = pcap_pyshark.read_packets(out, decode_as={"tcp.port==15062": "sip",
                                                      "tcp.port==15082": "sip"})
    _same(a, b)
    ref, _ = pcapfast.read_packets(FIX / "tcp4.pcapng")
    assert len(a) == len(ref)  # every SIP message still found once
    cols = ["call_id", "cseq", "method", "status", "size"]
    key = lambda d: sorted(map(tuple, d[cols].astype("string").fillna("").to_numpy().tolist()))
    assert key(a) == key(ref)
    if mode == "merge":
        assert a["frame"].duplicated().sum() > 50  # two messages in one segment


def test_odd_fixture_exercises_the_header_rules():
    """odd.pcapng (real Kamailio + SIPp traffic, hand-written requests) holds what the header
    rules are about; the expected values are the ones odd_uac.py and kam_odd.cfg write."""
    raw = b"".join(d for _, _, d in pcapfast.iter_records(FIX / "odd.pcapng"))
    for piece in (b"\r\n  (folded", b"\r\n\tfolded", b"\r\ni: ", b"\r\nf: ", b"\r\nv: ", b"\r\nm: ",
                  b"\r\nVIA : ", b"\r\nmax-forwards:\r\n 70", b"\xc3\x89lodie", b"Ren\xe9"):
        assert piece in raw, piece
    a, rep = pcapfast.read_packets(FIX / "odd.pcapng")
    assert rep.parsed == rep.read
    assert set(a.loc[a["status"] == 503, "retry_after"]) == {120}
    assert (a["ua"] == "odd-uac/1.0 (folded; RFC 3261 7.3.1)").any()
    corr = set(a["corr_id"].dropna())
    assert any(c.startswith("leg-a-odd-") for c in corr) and any(c.startswith("hep-odd-") for c in corr)
    assert any(c.startswith("a-leg-odd-") for c in corr) and any(";remote=0000" in c for c in corr)
    assert (a["via_count"] == 3).any()  # two values in the UAC's Via + Kamailio's
    assert a["from_tag"].str.match(r"(oddtag|opt)\d+$").all()  # folded From included
    assert a["from_uri"].notna().all()


def _fragments(p, pieces: int, ident: int) -> list[bytes]:
    """SYNTHETIC: the IPv4 datagram of decoded packet ``p`` (capgen.Pkt) cut into ``pieces``
    fragments (8-byte multiples; MF on all but the last), each with ``p``'s link header."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    import capgen as G
    l4 = (G.udp_layer(p.sport, p.dport, p.payload) if p.proto == 17 else
          G.tcp_layer(p.sport, p.dport, p.seq, p.ack, p.flags, p.payload))
    step = max(8, (len(l4) // pieces + 7) // 8 * 8)
    out = []
    for off in range(0, len(l4), step):
        part = l4[off:off + step]
        ff = (off // 8) | (0x2000 if off + step < len(l4) else 0)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(part), ident & 0xFFFF, ff, 64, p.proto, 0,
                         p.src, p.dst)
        out.append(G.l2_for(p.link, p.l2, 4) + ip + part)
    return out


def _fragmented(src: Path, dst: Path, order) -> int:
    """Every IPv4 packet with a payload of ``src`` sent as 3 fragments, in the order ``order``
    gives (a list of the fragments -> the list written), each at the packet's own time; the
    rest unchanged.  Returns (packets fragmented, records written)."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    import capgen as G
    out, n = [], 0
    for i, (ts, link, d) in enumerate(G.records(src)):
        p = G.decode(ts, link, d, i)
        if p is None or p.ver != 4 or not p.payload or len(p.payload) < 64:
            out.append((ts, link, d))
            continue
        n += 1
        out += [(ts, link, f) for f in order(_fragments(p, 3, 1000 + i))]
    G.write_records(dst, out)
    return n, len(out)


@pytest.mark.parametrize("name", ["udp4", "tcp4"])
@pytest.mark.parametrize("order", ["in-order", "reversed-with-duplicate"])
def test_ip_fragments_in_any_order_give_the_plain_answer(tmp_path, name, order):
    """DERIVED from the real fixtures: every SIP packet cut into three IPv4 fragments, sent in
    order, or last first with the middle one sent twice (later data at the same offset replaces
    earlier).  UDP datagrams and TCP segments reassembled this way give the plain capture's rows
    (only the frame numbers move: there are more packets); a TCP segment that arrives in a
    reassembled datagram takes the TCP path from the reassembly buffer."""
    arrange = {"in-order": lambda fs: fs,
               "reversed-with-duplicate": lambda fs: fs[::-1][:2] + fs[1:2] + fs[::-1][2:]}[order]
    out = tmp_path / f"{name}-frag.pcapng"
    n, written = _fragmented(FIX / f"{name}.pcapng", out, arrange)
    assert n >= 50
    a, ra = pcapfast.read_packets(FIX / f"{name}.pcapng")
    b, rb = pcapfast.read_packets(out)
    ra.check(), rb.check()
    assert rb.read == written >= ra.read + 2 * n
    assert len(a) == len(b) > 0
    pd.testing.assert_frame_equal(a.drop(columns="frame").reset_index(drop=True),
                                  b.drop(columns="frame").reset_index(drop=True))


def test_packet_walk_returns_a_value_on_every_path():
    """The packet walk and the parser run without reference counting and return a status on
    every path: a bare ``return`` (or falling off the end) makes Numba type the result Optional,
    and every packet that takes that path then raises a TypeError (IP fragments did, once).
    Checked on the source, since the compiled code is loaded from the cache as part of scan."""
    import ast
    import inspect
    from sipperf.ingest.capture.scan import ipfrag, packet, sip
    for mod, name in ((packet, "_packet"), (sip, "parse_sip"), (ipfrag, "_frag")):
        tree = ast.parse(inspect.getsource(mod))
        fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
        bare = [r.lineno for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is None]
        assert not bare, f"{mod.__name__}.{name}: bare return at lines {bare}"
        assert isinstance(fn.body[-1], ast.Return), f"{mod.__name__}.{name} can fall off its end"
