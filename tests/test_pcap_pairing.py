"""Pairing at the proxy, checked against facts the pairing never looks at:

* the proxy socket we started Kamailio on (tests/fixtures/README.md);
* tshark's full Via stacks: a stateful proxy pushes its own Via on a request (so the egress
  copy's Vias after the top one are the ingress copy's Vias) and pops it from a response;
* tshark's RSeq for the two reliable 180s of RFC 3262 that share one CSeq;
* RFC 3261 §17.2.1/§16.7: the ACK of a non-2xx final response is hop-by-hop, absorbed by
  the proxy that sent the response (one per 408 the proxy generated).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sipperf.ingest.capture.pcap import read_packets, read_pcap
from sipperf.ingest.pairing.proxy import find_proxy, pair_at_proxy
from sipperf.timeline import validate_timeline

FIX = Path(__file__).parent / "fixtures"
PROXY = {"udp4": "127.0.0.1:15060", "udp6": "[::1]:15064", "tcp4": "127.0.0.1:15062",
         "retrans": "127.0.0.1:15066", "frag4": "127.0.0.1:15068", "prack": "127.0.0.1:15069"}
CALLS = {"udp4": 20, "udp6": 15, "tcp4": 15, "frag4": 12, "prack": 10}
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def tshark_fields(cap: Path, *fields: str) -> dict[int, list[str]]:
    out = subprocess.run(
        ["tshark", "-n", "-r", str(cap), "--disable-protocol", "sdp", "-Y", "sip", "-T", "fields",
         "-E", "occurrence=a", "-E", "aggregator=|", "-e", "frame.number", *[x for f in fields for x in ("-e", f)]],
        capture_output=True, text=True, check=True).stdout
    return {int(r.split("\t")[0]): r.split("\t")[1:] for r in out.splitlines() if r}


@pytest.mark.parametrize("name", sorted(PROXY))
def test_proxy_found_from_traffic(name):
    packets, _ = read_packets(FIX / f"{name}.pcapng")
    proxy, socks = find_proxy(packets)
    assert proxy == PROXY[name]
    if name == "tcp4":  # Kamailio connects to the UAS from an ephemeral port
        assert len(socks) == 2


@pytest.mark.parametrize("name", sorted(PROXY))
def test_via_stacks_confirm_pairs(name):
    cap = FIX / f"{name}.pcapng"
    tl, rep = read_pcap(cap)
    validate_timeline(tl)
    rep.check()
    vias = {k: v[0].split("|") for k, v in tshark_fields(cap, "sip.Via.branch").items()}
    paired = tl[tl["t_arr"].notna() & tl["t_dep"].notna()]
    assert len(paired) > 0
    for r in paired.itertuples():
        vin, vout = vias[int(r.frame_in)], vias[int(r.frame_out)]
        if r.kind == "request":
            assert vout[1:] == vin, (r.call_id, r.method)
        else:
            assert vin[1:] == vout, (r.call_id, r.status)
        assert r.t_dep >= r.t_arr


@pytest.mark.parametrize("name", sorted(CALLS))
def test_clean_runs_count_the_call_flow(name):
    """SIPp reported every call successful: each of the six messages once per call, all paired,
    and exactly one proxy-originated 100 Trying per INVITE."""
    tl, _ = read_pcap(FIX / f"{name}.pcapng")
    n = CALLS[name]
    both = tl[tl["t_arr"].notna() & tl["t_dep"].notna()]
    counts = both["msg_type"].value_counts()
    for mt in ("INVITE", "200-INVITE", "ACK", "BYE", "200-BYE"):
        assert counts.get(mt, 0) == n, mt
    assert counts.get("180", 0) == (2 * n if name == "prack" else n)
    own = tl[tl["t_arr"].isna()]
    assert len(own) == n and (own["status"] == 100).all()
    assert not tl["dropped"].any()
    assert (tl.loc[tl.t_arr.notna(), "src"] != PROXY[name]).all()


def test_repeated_cseq_prack_pairs_in_rseq_order():
    cap = FIX / "prack.pcapng"
    tl, _ = read_pcap(cap)
    rseq = {k: v[0] for k, v in tshark_fields(cap, "sip.RSeq").items()}
    r180 = tl[(tl["msg_type"] == "180")]
    assert len(r180) == 20 and r180.groupby("call_id").size().eq(2).all()
    for r in r180.itertuples():
        assert rseq[int(r.frame_in)] == rseq[int(r.frame_out)] != ""
    prack = tl[tl["method"] == "PRACK"]
    assert sorted(prack["cseq"].unique().tolist()) == [2, 3]


def test_retransmissions_and_drops():
    cap = FIX / "retrans.pcapng"
    tl, rep = read_pcap(cap)
    st = tshark_fields(cap, "sip.Status-Code", "sip.CSeq.method", "udp.srcport", "sip.resend")
    n408 = sum(1 for v in st.values() if v[0] == "408" and v[1] == "INVITE" and v[2] == "15066")
    # RFC 3261 §17.1.1.3/§17.2.1: the ACK of each 408 the proxy sent is hop-by-hop: absorbed, not a drop
    acks = tl[(tl["method"] == "ACK") & (tl["disposition"] == "absorbed: ACK of non-2xx")]
    assert n408 > 0 and len(acks) == n408
    assert not tl["dropped"].any()
    # the UAC's BYE retransmissions (tshark: sip.resend, from the UAC towards the proxy) are
    # absorbed by the proxy's server transaction (§17.2.2)
    resent_in = {f for f, v in st.items() if v[3] == "1" and v[2] != "15066" and v[0] == ""}
    absorbed = tl[tl["disposition"] == "absorbed: retransmission"]
    assert len(absorbed) > 0 and set(absorbed["frame_in"].astype(int)) <= resent_in
    unfwd = tl[tl["t_arr"].notna() & tl["t_dep"].isna()]
    assert unfwd["dst"].isna().all() and set(unfwd["disposition"]) <= {
        "absorbed: ACK of non-2xx", "absorbed: retransmission"}
    # every copy is its own row: one per message copy seen arriving or leaving the proxy
    n_copies = len(read_packets(cap)[0])
    paired = int((tl.t_arr.notna() & tl.t_dep.notna()).sum())
    assert len(tl) == n_copies - paired
    # the proxy retransmitted INVITEs to the dead UAS: tshark flags them as resends, they are
    # egress-only rows
    resent_out = {f for f, v in st.items() if v[3] == "1" and v[2] == "15066"}
    own = tl[tl["t_arr"].isna() & (tl["kind"] == "request")]
    assert len(resent_out) > 0
    # tshark's own resend analysis: every request the proxy re-sent is egress-only, never paired
    req_out = set(tl.loc[tl.t_arr.notna() & tl.t_dep.notna() & (tl.kind == "request"), "frame_out"].astype(int))
    assert not (req_out & resent_out)
    assert {f for f in resent_out if st[f][1] in ("INVITE", "BYE") and st[f][0] == ""} <= set(own["frame_out"].astype(int))


def test_given_proxy_forms_agree():
    packets, _ = read_packets(FIX / "udp6.pcapng")
    a, _ = pair_at_proxy(packets)
    b, _ = pair_at_proxy(packets, ("::1", 15064))
    c, _ = pair_at_proxy(packets, "::1:15064")
    assert a.equals(b) and a.equals(c)


def test_pyshark_engine_same_timeline():
    a, _ = read_pcap(FIX / "frag4.pcapng")
    b, _ = read_pcap(FIX / "frag4.pcapng", engine="pyshark")
    assert a.equals(b)
    assert (a.loc[a.msg_type == "INVITE", "size"] > 1500).all()  # the reassembled big INVITEs
