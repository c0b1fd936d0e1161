"""SIP over TLS with its key log (issue 39, item 4): decrypted, the same messages and sojourns
as Wireshark's own decryption; without keys, refused by name, with the legs that were read.

The capture (``tests/fixtures/tls/``, made by ``sipperf.lab.tls``): Kamailio 5.6's tls module
relaying 30 calls between two TLS user agents whose secrets are the two key logs; ``sent.csv`` is
what each agent wrote and read, with its time (the ground truth of what crossed the proxy).
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.ingest import IngestError, load, sniff
from sipperf.ingest.capture import tls
from sipperf.ingest.capture.pyshark_engine import read_packets as tshark_packets
from sipperf.ingest.pairing.proxy import pair_at_proxy

FIX = Path(__file__).parent / "fixtures" / "tls"
CAP, UAC, UAS = FIX / "capture.pcapng", FIX / "keys_uac.txt", FIX / "keys_uas.txt"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
KEYS = ("frame", "ts_ns", "src", "sport", "dst", "dport", "call_id", "cseq", "method", "status", "via_branch")


def _sent() -> pd.DataFrame:
    with open(FIX / "sent.csv") as fh:
        return pd.DataFrame(list(csv.DictReader(fh)))


def test_a_key_log_is_sniffed_and_other_text_is_not(tmp_path):
    assert sniff(UAC) == "tls_keylog"
    assert tls.sniff_keylog(b"# comment\n\nCLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n")
    assert not tls.sniff_keylog(b"call_id,kind,t\n1,2,3\n")
    assert not tls.sniff_keylog(b"CLIENT_RANDOM abc\n")          # not three fields
    assert not tls.sniff_keylog(b"CLIENT_RANDOM " + b"ab" * 32 + b" cd\nsomething else\n")
    assert not tls.sniff_keylog(b"")


@needs_tshark
def test_without_keys_the_capture_is_refused_naming_the_ports_and_the_remedy():
    with pytest.raises(IngestError) as e:
        load([CAP])
    msg = str(e.value)
    assert "TLS on ports 5561, 5581" in msg and "key log (SSLKEYLOGFILE)" in msg


@pytest.fixture(scope="module")
def decrypted():
    return load([CAP, UAC, UAS])


@needs_tshark
def test_with_both_key_logs_every_message_through_the_proxy_is_read(decrypted):
    tl, rep = decrypted
    sent = _sent()
    wrote = sent[sent.direction == "out"]        # every message an agent wrote crossed the proxy
    calls = sent.call_id.nunique()
    assert calls == 30
    relayed = tl[tl.disposition == "relayed"]
    assert len(relayed) == len(wrote) == 6 * calls
    assert set(relayed.call_id) == set(sent.call_id)
    assert (tl.transport == "tls").all()
    t = rep.details["transports"]["tls"]
    assert t["connections"] == t["connections_decrypted"] == 2
    # each TLS segment the scanner refused is accounted for: parsed, or skipped with what it held
    assert not any(k.startswith("TLS on") for k in rep.skipped)
    assert rep.read == rep.parsed + sum(rep.skipped.values())
    # the first INVITE waited while the proxy opened its TLS connection to the callee
    inv = relayed[relayed.method == "INVITE"].sort_values("t_arr")
    wait = (inv.t_dep - inv.t_arr).to_numpy(float)
    assert wait[0] > 3 * np.median(wait[1:])


@needs_tshark
def test_the_packet_table_is_wiresharks_own_decryption(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_bytes(UAC.read_bytes() + UAS.read_bytes())
    ours, rep = tls.read_packets(CAP, [UAC, UAS])
    ref, _ = tshark_packets(CAP, tls_keys=[keys], decode_as={"tcp.port==5561": "tls", "tcp.port==5581": "tls",
                                                          "tls.port==5561": "sip", "tls.port==5581": "sip"})
    assert len(ours) == len(ref) == 390
    a = ours[list(KEYS)].sort_values(["frame", "via_branch", "status"]).reset_index(drop=True)
    b = ref[list(KEYS)].sort_values(["frame", "via_branch", "status"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a.astype(str), b.astype(str))
    assert set(ref.transport) == {"tls"} and set(ours.transport) == {"tls"}
    # so the per-message sojourns are the same, message by message
    ta, _ = pair_at_proxy(ours, "127.0.0.1:5561")
    tb, _ = pair_at_proxy(ref, "127.0.0.1:5561")
    key = ["call_id", "via_branch", "status", "t_arr"]
    sa = ta.sort_values(key).reset_index(drop=True)
    sb = tb.sort_values(key).reset_index(drop=True)
    assert len(sa) == len(sb) == 210
    da, db = (sa.t_dep - sa.t_arr).to_numpy(float), (sb.t_dep - sb.t_arr).to_numpy(float)
    assert np.array_equal(da, db, equal_nan=True) and np.isfinite(da).sum() == 180


@needs_tshark
def test_a_message_lies_between_its_sender_writing_it_and_its_receiver_reading_it(decrypted):
    tl, _ = decrypted
    sent = _sent()
    sent["t_ns"] = sent.t_ns.astype(np.int64)
    sent["code"] = sent.first_line.str.extract(r"^SIP/2.0 (\d+)")[0]
    sent["meth"] = sent.first_line.str.extract(r"^([A-Z]+) ")[0]
    checked = 0
    for (cid, code, meth), g in sent.groupby(["call_id", "code", "meth"], dropna=False):
        outs, ins = g[g.direction == "out"], g[g.direction == "in"]
        if len(outs) != 1 or len(ins) != 1 or (isinstance(code, str) and code == "200"):
            continue  # two 200s per call (INVITE, BYE): matched by CSeq elsewhere
        rows = tl[(tl.call_id == cid) & ((tl.method == meth) if isinstance(meth, str) else (tl.status == int(code)))]
        if len(rows) != 1:
            continue
        r = rows.iloc[0]
        assert outs.t_ns.iloc[0] <= r.t_arr <= r.t_dep <= ins.t_ns.iloc[0]
        checked += 1
    assert checked >= 60  # INVITE, 180, ACK, BYE of 30 calls, less any the agents logged twice


@needs_tshark
def test_secrets_inside_the_pcapng_decrypt_it_alone(tmp_path, decrypted):
    keys = tmp_path / "keys.txt"
    keys.write_bytes(UAC.read_bytes() + UAS.read_bytes())
    dsb = tmp_path / "with_secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{keys}", str(CAP), str(dsb)], check=True)
    assert tls.has_dsb(dsb) and not tls.has_dsb(CAP)
    tl, rep = load([dsb])
    assert len(tl) == len(decrypted[0])
    assert rep.details["transports"]["tls"]["secrets_from"] == ["the capture's decryption secrets block"]


@needs_tshark
def test_with_one_leg_keyed_that_leg_is_read_and_the_other_named():
    pk, rep = tls.read_packets(CAP, [UAC])
    legs = rep.details["transports"]["tls"]["legs"]
    assert len(legs) == 2
    read = [g for g in legs if g["segments_decrypted"]]
    unread = [g for g in legs if not g["segments_decrypted"]]
    assert [g["server"] for g in read] == ["127.0.0.1:5561"]
    assert [g["server"] for g in unread] == ["127.0.0.1:5581"] and unread[0]["segments_without_secrets"] > 0
    assert tls.NO_KEY in rep.skipped
    assert "not decrypted, no secrets for them in the key log: " in rep.notes[-1]
    assert unread[0]["client"] in rep.notes[-1]
    assert set(pk.sport.tolist() + pk.dport.tolist()) >= {5561} and 5581 not in set(pk.sport) | set(pk.dport)


@needs_tshark
def test_the_command_reads_a_run_folder_with_its_key_logs(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    for f in (CAP, UAC, UAS):
        shutil.copy(f, run / f.name)
    out = subprocess.run([str(Path(sys.executable).with_name("sipperf")), "analyze", str(run), "--out",
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "relayed 180, originated 30" in out.stdout
    from sipperf.report.runs import group_inputs
    groups, _ = group_inputs([run])
    assert len(groups) == 1 and sorted(Path(p).name for p in groups[0].paths) == \
        ["capture.pcapng", "keys_uac.txt", "keys_uas.txt"]
    bad = subprocess.run([str(Path(sys.executable).with_name("sipperf")), "analyze", str(CAP), "--out",
                          str(tmp_path / "out2")], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "SSLKEYLOGFILE" in bad.stderr


@needs_tshark
def test_a_connection_opened_before_the_capture_is_named_so_not_as_missing_secrets(tmp_path):
    """A trunk's TLS connection that was open when the capture started has no handshake in it, and
    the key log's secrets are matched by the handshake's client random: no key log opens it.  The
    report must say that (and what to do), not that the secrets are missing."""
    hellos = subprocess.run(["tshark", "-n", "-r", str(CAP), "-d", "tcp.port==5561,tls", "-d", "tcp.port==5581,tls",
                             "-Y", "tls.handshake.type == 1", "-T", "fields", "-e", "frame.number"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert len(hellos) >= 2                                  # the caller's and the proxy's connection
    late = tmp_path / "late.pcapng"
    subprocess.run(["editcap", str(CAP), str(late), f"1-{max(map(int, hellos))}"], check=True)
    pk, rep = tls.read_packets(late, [UAC, UAS])
    legs = rep.details["transports"]["tls"]["legs"]
    assert legs and not any(g["handshake_in_capture"] or g["segments_decrypted"] for g in legs)
    assert tls.NO_HELLO in rep.skipped and tls.NO_KEY not in rep.skipped
    assert "opened before the capture began" in rep.notes[-1] and "no secrets for them" not in rep.notes[-1]
    # the full capture, same keys: every connection's handshake is there and all is read
    _, full = tls.read_packets(CAP, [UAC, UAS])
    assert all(g["handshake_in_capture"] for g in full.details["transports"]["tls"]["legs"])
    assert tls.NO_HELLO not in full.skipped


@needs_tshark
def test_the_report_refuses_a_capture_begun_after_its_handshakes_by_that_reason(tmp_path):
    """The same late capture given to ``sipperf report`` with both key logs: nothing can be read,
    and the refusal says why (exit 2, no traceback), not that the secrets are missing."""
    hellos = subprocess.run(["tshark", "-n", "-r", str(CAP), "-d", "tcp.port==5561,tls", "-d", "tcp.port==5581,tls",
                             "-Y", "tls.handshake.type == 1", "-T", "fields", "-e", "frame.number"],
                            capture_output=True, text=True, check=True).stdout.split()
    late = tmp_path / "late.pcapng"
    subprocess.run(["editcap", str(CAP), str(late), f"1-{max(map(int, hellos))}"], check=True)
    p = subprocess.run([str(Path(sys.executable).with_name("sipperf")), "report", str(late), str(UAC), str(UAS),
                        "--out", str(tmp_path / "rep")], capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "late.pcapng" in p.stderr and "opened before the capture began" in p.stderr
    assert "without its secrets in the key log" not in p.stderr


RESUME = Path(__file__).parent / "fixtures" / "tls_resume"


def _tshark_certificates(cap: Path, keys: Path) -> tuple[int, int]:
    """(connections with a ServerHello, connections in which a Certificate message was sent), as
    tshark decrypts them: the independent count of full handshakes."""
    out = subprocess.run(["tshark", "-n", "-r", str(cap), "-o", f"tls.keylog_file:{keys}", "-d", "tcp.port==5960,tls",
                          "-d", "tcp.port==5980,tls", "-Y", "tls.handshake.type", "-T", "fields", "-e", "tcp.stream",
                          "-e", "tls.handshake.type", "-E", "occurrence=a", "-E", "aggregator=,"],
                         capture_output=True, text=True, check=True).stdout
    hello, cert = set(), set()
    for line in out.splitlines():
        stream, kinds = line.split("\t")
        kinds = kinds.split(",")
        hello |= {stream} if "2" in kinds else set()
        cert |= {stream} if "11" in kinds else set()
    return len(hello), len(cert)


@needs_tshark
@pytest.mark.parametrize("version", ["tls13", "tls12"])
def test_full_and_resumed_handshakes_are_told_apart_as_tshark_sees_them(version):
    cap, keys = RESUME / f"{version}.pcapng", RESUME / f"{version}_keys.txt"
    tl, rep = load([cap, keys])
    t = rep.details["transports"]["tls"]
    hellos, certs = _tshark_certificates(cap, keys)
    assert t["connections"] == t["connections_decrypted"] == hellos == 21
    # the caller's first connection and the proxy's one to the callee are full; every other call
    # resumed the caller's last session
    assert t["handshakes_full"] == certs == 2
    assert t["handshakes_resumed"] == hellos - certs == 19
    assert tl.call_id.nunique() == 20
    assert any("2 full" in n and "19 resumed" in n for n in rep.notes)


@needs_tshark
def test_a_full_handshake_capture_counts_no_resumption(decrypted):
    t = decrypted[1].details["transports"]["tls"]
    assert (t["handshakes_full"], t["handshakes_resumed"]) == (2, 0)


def _tshark_hello_waits(cap: Path) -> list[float]:
    """ClientHello to ServerHello per connection to the proxy's port (ms), as tshark reads them."""
    out = subprocess.run(["tshark", "-n", "-r", str(cap), "-d", "tcp.port==5960,tls", "-Y",
                          "tcp.port == 5960 && (tls.handshake.type == 1 || tls.handshake.type == 2)", "-T", "fields",
                          "-e", "tcp.stream", "-e", "frame.time_epoch", "-e", "tls.handshake.type",
                          "-E", "occurrence=a", "-E", "aggregator=,"], capture_output=True, text=True, check=True).stdout
    hello, reply = {}, {}
    for line in out.splitlines():
        stream, t, kinds = line.split("\t")
        (hello if "1" in kinds.split(",") else reply).setdefault(stream, float(t))
    return sorted(round(1e3 * (reply[s] - hello[s]), 1) for s in hello if s in reply)


@needs_tshark
def test_each_new_connection_s_wait_for_the_server_hello_is_tsharks():
    cap, keys = RESUME / "tls13.pcapng", RESUME / "tls13_keys.txt"
    _tl, rep = load([cap, keys])
    w = rep.details["transports"]["tls"]["hello_waits"]["127.0.0.1:5960"]
    assert sorted(w["waits_ms"]) == pytest.approx(_tshark_hello_waits(cap), abs=0.11)
    assert len(w["waits_ms"]) == 20 and w["unanswered_ms"] == []


def test_handshakes_past_the_deadline_count_late_or_unanswered():
    from sipperf.report.runs import _connection_losses, tls_hello_outcomes

    o = tls_hello_outcomes({"waits_ms": [5.0, 1500.0, 2000.0, 2000.1, 3100.0], "unanswered_ms": [1999.0, 2000.0, 4000.0]},
                           deadline_s=2.0)
    assert (o["tls_late"], o["tls_unanswered"]) == (2, 2)
    assert o["tls_hello_p50_ms"] == 2000.0 and 3000 < o["tls_hello_p99_ms"] < 3100
    # an unanswered connection may also be one the proxy reset: the larger count, not the sum
    assert _connection_losses({"reset_connections": 3, "tls_unanswered": 2, "tls_late": 2}) == (3, 2)
    assert _connection_losses({"reset_connections": 1, "tls_unanswered": 4}) == (4, 0)
    empty = tls_hello_outcomes({"waits_ms": [], "unanswered_ms": []}, 2.0)
    assert empty["tls_late"] == empty["tls_unanswered"] == 0 and empty["tls_hello_p99_ms"] != empty["tls_hello_p99_ms"]
