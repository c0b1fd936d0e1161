"""Vantage classes and the drop rule on real captures (tests/fixtures/README.md, lab/vantage.sh),
checked against facts the code never looks at: the sockets we started each element on, what
SIPp reported, and tshark's own dissection (frame times, Call-IDs, its SIP resend analysis)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf import calls
from sipperf.ingest import load
from sipperf.ingest.capture.read import read_capture
from sipperf.ingest.pairing.hop import classify
from sipperf.ingest.pairing.vantage import parse_socket
from sipperf.timeline import IngestError, make_timeline

FIX = Path(__file__).parent / "fixtures"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def tshark(cap: Path, *fields: str) -> dict[int, list[str]]:
    out = subprocess.run(
        ["tshark", "-n", "-r", str(cap), "--disable-protocol", "sdp", "-Y", "sip", "-T", "fields",
         "-E", "occurrence=f", "-e", "frame.number", "-e", "frame.time_epoch",
         *[x for f in fields for x in ("-e", f)]],
        capture_output=True, text=True, check=True).stdout
    return {int(r.split("\t")[0]): r.split("\t")[1:] for r in out.splitlines() if r}


def _epoch_ns(s: str) -> int:
    sec, _, frac = s.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


# ------------------------------------------------------------------ proxy, drop rule
@needs_tshark
def test_one_call_through_a_proxy_has_no_drop():
    """The callee's 100 Trying ends at the stateful proxy (RFC 3261 §16.7 step 5): absorbed, PDR 0."""
    cap = FIX / "trying1.pcapng"
    tl, rep = read_capture(cap)
    v = rep.details["vantage"]
    assert v["kind"] == "proxy" and v["hops"][0]["socket"] == "127.0.0.1:15100"
    st = tshark(cap, "udp.srcport", "sip.Status-Code")
    uas_100 = [f for f, x in st.items() if x[1] == "15101" and x[2] == "100"]
    assert len(uas_100) == 1
    row = tl[tl["frame_in"] == uas_100[0]].iloc[0]
    assert row["disposition"] == "absorbed: 100 Trying" and not row["dropped"]
    assert calls.pdr(tl) == 0.0
    m = calls.metrics(tl).set_index("metric")
    assert m.loc["PDR", "value"] == 0.0 and m.loc["SER", "value"] == 100.0


@needs_tshark
@pytest.mark.parametrize("name,proxy_port,uac_port,final", [("cancel", 15103, 15105, "487"),
                                                            ("busy", 15106, 15108, "486")])
def test_hop_by_hop_cancel_and_non2xx_ack_are_not_drops(name, proxy_port, uac_port, final):
    cap = FIX / f"{name}.pcapng"
    tl, rep = read_capture(cap)
    assert rep.details["vantage"]["kind"] == "proxy"
    assert rep.details["vantage"]["hops"][0]["socket"] == f"127.0.0.1:{proxy_port}"
    st = tshark(cap, "udp.srcport", "udp.dstport", "sip.Method", "sip.Status-Code", "sip.CSeq.method")
    acks_in = {f for f, x in st.items() if x[1] == str(uac_port) and x[3] == "ACK"}
    assert len(acks_in) == 3  # SIPp: three calls, each ACKed its final response
    d = tl.set_index(tl["frame_in"].astype("Int64"))
    assert all(d.loc[f, "disposition"] == "absorbed: ACK of non-2xx" for f in acks_in)
    if name == "cancel":
        ok_cancel = {f for f, x in st.items() if x[2] == str(proxy_port) and x[4] == "200" and x[5] == "CANCEL"}
        assert len(ok_cancel) == 3 and all(d.loc[f, "disposition"] == "absorbed: CANCEL response" for f in ok_cancel)
        # the proxy answered every CANCEL itself: originated 200s towards the caller
        own = tl[(tl["disposition"] == "originated") & (tl["cseq_method"] == "CANCEL")]
        assert len(own) == 3
    assert not tl["dropped"].any() and calls.pdr(tl) == 0.0
    m = calls.metrics(tl).set_index("metric")
    # RFC 6076 §4.7: 486 is an effective answer, 487 is not; neither is a 200 (§4.6)
    assert m.loc["SER", "value"] == 0.0
    assert m.loc["SEER", "value"] == (100.0 if final == "486" else 0.0)


def test_drop_rule_hand_cases():
    """Each rule on a hand-built timeline (times in µs)."""
    def r(cid, kind, method=None, status=None, cm=None, t_in=None, t_out=None, cseq=1, src="a:1", dst=None, br="b1"):
        return {"call_id": cid, "kind": kind, "method": method, "status": status, "cseq_method": cm or method,
                "cseq": cseq, "src": src, "dst": dst, "via_branch": br, "t_in": t_in, "t_out": t_out}
    rows = [
        r("A", "request", "INVITE", t_in=0, t_out=1, dst="u:1"),
        r("A", "request", "INVITE", t_in=500, br="b1"),                         # retransmission
        r("A", "response", status=100, cm="INVITE", t_in=2, src="u:1"),         # 100 from callee
        r("A", "response", status=486, cm="INVITE", t_in=3, t_out=4, src="u:1", dst="a:1"),
        r("A", "request", "ACK", t_in=5),                                        # ACK of the 486
        r("B", "request", "INVITE", t_in=10),                                    # answered by the proxy
        r("B", "response", status=407, cm="INVITE", t_out=11, src="p:1", dst="a:1"),
        r("C", "request", "INVITE", t_in=20),                                    # a real drop
        r("D", "request", "INVITE", t_in=30, t_out=31, dst="u:1"),
        r("D", "response", status=180, cm="INVITE", t_in=32, src="u:1"),         # lost in the proxy ...
        r("D", "response", status=408, cm="INVITE", t_out=3000, src="p:1", dst="a:1"),  # ... then its own 408
        r("E", "request", "INVITE", t_in=40, t_out=41, dst="u:1"),
        r("E", "response", status=200, cm="INVITE", t_in=42, t_out=43, src="u:1", dst="a:1"),
        r("E", "response", status=200, cm="INVITE", t_in=600, src="u:1"),       # 2xx retransmission not forwarded
        r("F", "request", "INVITE", t_in=4000),                                  # in flight at the end
    ]
    df = pd.DataFrame(rows)
    tl = make_timeline(df.drop(columns=["t_in", "t_out"]))
    t_in = df["t_in"].astype("float64").to_numpy() * 1e3
    t_out = df["t_out"].astype("float64").to_numpy() * 1e3
    got = list(classify(tl, t_in, t_out, capture_end=4000.5e3))
    assert got == ["relayed", "absorbed: retransmission", "absorbed: 100 Trying", "relayed",
                   "absorbed: ACK of non-2xx", "answered by proxy", "originated", "dropped", "relayed",
                   "dropped", "originated", "relayed", "relayed", "dropped", "in flight at capture end"]


# ------------------------------------------------------------------ several hops
@needs_tshark
def test_two_chained_proxies_are_two_hops():
    cap = FIX / "hops2.pcapng"
    tl, rep = read_capture(cap)
    v = rep.details["vantage"]
    assert v["kind"] == "multi-hop"
    assert [h["socket"] for h in v["hops"]] == ["127.0.0.1:15110", "127.0.0.1:15111"]  # caller side first
    st = tshark(cap, "udp.srcport", "udp.dstport", "sip.Status-Code")
    for k, port in ((1, "15110"), (2, "15111")):
        h = tl[tl["hop"] == k]
        # every message reaching the hop but 100 Trying was forwarded (SIPp: 5/5 calls)
        into = {f for f, x in st.items() if x[2] == port and x[3] != "100"}
        rel = h[h["disposition"] == "relayed"]
        assert set(rel["frame_in"].astype(int)) == into
        # per-hop sojourn = tshark's frame times
        for row in rel.itertuples():
            assert row.t_dep - row.t_arr == _epoch_ns(st[row.frame_out][0]) - _epoch_ns(st[row.frame_in][0])
        per = next(x for x in v["per_hop"] if x["hop"] == k)
        assert per["messages"] == len(h) and per["dispositions"]["relayed"] == len(into)
    # the call-level view is the first hop's: 5 attempts, not 10
    m = calls.metrics(tl).set_index("metric")
    assert m.loc["SER", "count"] == 5 and m.loc["SER", "value"] == 100.0
    assert calls.pdr(tl) == 0.0


# ------------------------------------------------------------------ no proxy
@needs_tshark
def test_endpoint_view_and_retransmissions_match_tshark():
    cap = FIX / "endpoint.pcapng"
    tl, rep = read_capture(cap)
    assert rep.details["vantage"]["kind"] == "endpoint"
    st = tshark(cap, "sip.resend", "sip.Method", "sip.Call-ID", "sip.CSeq.method")
    assert len(tl) == len(st) and set(tl["frame"].astype(int)) == set(st)
    assert set(tl.loc[tl["retrans"], "frame"].astype(int)) == {f for f, x in st.items() if x[1] == "1"}
    assert tl[["t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"]].isna().all().all()
    m = calls.metrics(tl).set_index("metric")
    assert np.isnan(m.loc["PDR", "value"]) and "no proxy" in m.loc["PDR", "definition"]
    assert m.loc["SER", "count"] > 0
    tx = calls.transactions(tl).set_index("method")
    inv = [x for x in st.values() if x[2] == "INVITE"]
    assert tx.loc["INVITE", "transactions"] == len({x[3] for x in inv})
    assert tx.loc["INVITE", "request_copies"] == len(inv)
    assert tx.loc["INVITE", "retransmitted"] == len({x[3] for x in inv if x[1] == "1"})
    assert tx.loc["INVITE", "final_clean_count"] + tx.loc["INVITE", "final_retrans_count"] \
        == tx.loc["INVITE", "answered_final"]
    c = calls.message_counts(tl)
    assert c["messages"].sum() == len(st)
    assert c["retransmissions"].sum() == sum(1 for x in st.values() if x[1] == "1")


# ------------------------------------------------------------------ B2BUA
@needs_tshark
def test_b2bua_legs_correlated_and_its_delay_measured():
    cap = FIX / "b2bua.pcapng"
    tl, rep = read_capture(cap)
    v = rep.details["vantage"]
    assert v["kind"] == "b2bua" and v["hops"][0]["socket"] == "127.0.0.1:15130"
    assert v["b2bua"]["legs"] == 5  # SIPp: 5 calls
    st = tshark(cap, "udp.srcport", "udp.dstport", "sip.Call-ID", "sip.Method", "sip.Status-Code")
    inv = tl[(tl["method"] == "INVITE") & (tl["disposition"] == "relayed")]
    assert len(inv) == 5
    for row in inv.itertuples():
        a, b = st[row.frame_in], st[row.frame_out]
        assert a[1] == "15132" and a[2] == "15130" and b[1] == "15130" and b[2] == "15131"
        assert a[3] == row.call_id and b[3] == row.leg_call_id != row.call_id
        assert row.t_dep - row.t_arr == _epoch_ns(b[0]) - _epoch_ns(a[0])
    # responses from the callee's leg carry the caller leg's identity
    ok = tl[(tl["status"] == 200) & (tl["cseq_method"] == "INVITE") & (tl["disposition"] == "relayed")]
    assert len(ok) == 5 and (ok["leg"] == "B").all()
    assert all(st[int(f)][3] == cid for f, cid in zip(ok["frame_out"], ok["call_id"]))
    m = calls.metrics(tl).set_index("metric")
    assert m.loc["SER", "count"] == 5 and m.loc["SER", "value"] == 100.0


# ------------------------------------------------------------------ --proxy
def test_proxy_override_and_bad_values():
    tl, rep = read_capture(FIX / "hops2.pcapng", proxy="127.0.0.1:15111")
    assert rep.details["vantage"]["kind"] == "proxy" and set(tl["proxy"]) == {"127.0.0.1:15111"}
    tl, rep = read_capture(FIX / "hops2.pcapng", proxy="127.0.0.1:15110,127.0.0.1:15111")
    assert rep.details["vantage"]["kind"] == "multi-hop"
    for bad, why in (("nonsense", "no port"), ("10.0.0.1:0", "1 to 65535"), ("host:5060", "not an IP address"),
                     ("[::1:5060", "IPv6"), ("127.0.0.1:15999", "sends or receives no SIP message")):
        with pytest.raises(IngestError, match=why):
            load([FIX / "udp4.pcapng"], proxy=bad)
    assert parse_socket("::1:5060") == parse_socket("[::1]:5060") == parse_socket(("::1", 5060)) == "[::1]:5060"


def test_no_sip_capture_names_the_file(tmp_path):
    import struct
    eth = b"\x00" * 12 + b"\x08\x00"
    payload = b"hello, not SIP"
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0, bytes([127, 0, 0, 1]),
                     bytes([127, 0, 0, 1]))
    pkt = eth + ip + struct.pack(">HHHH", 1000, 2000, 8 + len(payload), 0) + payload
    p = tmp_path / "nosip.pcap"
    p.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
                  + struct.pack("<IIII", 1, 0, len(pkt), len(pkt)) + pkt)
    with pytest.raises(IngestError, match=r"nosip\.pcap.*no SIP message"):
        load([p])
