"""Thesis-format log reader/writer, tidy format, and the ingest dispatcher (issue 3 items 2a, 2b, 7)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from sipperf.ingest import load, sniff
from sipperf.ingest.thesis_logs.read import read_thesis_log, synthetic_timeline, write_thesis_log
from sipperf.ingest.tidy import read_tidy, write_tidy
from sipperf.timeline import INSTANTS, IngestError

PFX = "Mar 13 07:06:40 sps opensips[4242]: ERROR:core:receive_msg: ramekris"
SFX = "Mar 13 07:06:40 sps opensips[4242]: ERROR:tm:t_forward_nonack: ramekris"


@pytest.fixture
def fx(root):
    return root / "tests" / "fixtures"


def test_hand_computed_line(tmp_path):
    # values chosen by hand: t_sip_c = now; t_sip_in = now - parse; t_arr = t_sip_in - wait;
    # t_stack = t_arr + stack; t_sockq = t_stack + sock_recvtime; t_dep = now_send + ip_out
    p = tmp_path / "one.log"
    p.write_text(
        f"{PFX} src_ip 16777226 parse_time=12.000000 wait_time=35.000000 stack_time=2.000000 "
        f"sock_recvtime=25.000000 now=1300000000000100 request 1 callid=abc@h cseq=7 method_id=1\n"
        f"{SFX} now=1300000000000130 ip_out=6 request 1 callid=abc@h cseq=7 INVITE\n")
    tl, rep = read_thesis_log(p)
    assert (rep.read, rep.parsed, rep.n_skipped, rep.messages) == (2, 2, 0, 1)
    r = tl.iloc[0]
    base = 1_300_000_000_000_000_000
    assert [int(r[c]) - base for c in INSTANTS] == [53_000, 55_000, 80_000, 88_000, 100_000, 130_000, 136_000]
    assert (r.call_id, int(r.cseq), r.kind, r.method, r.msg_type, r.src) == ("abc@h", 7, "request", "INVITE",
                                                                            "INVITE", "10.0.0.1")


def test_response_status_and_types(tmp_path):
    p = tmp_path / "r.log"
    p.write_text(
        f"{PFX} src_ip 50331658 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
        f"sock_recvtime=1.000000 now=1300000000000100 request 200 callid=x cseq=2 method_id=8\n"
        f"{SFX} now=1300000000000110 ip_out=4 request 200 callid=x cseq=2 BYE\n")
    tl, _ = read_thesis_log(p)
    r = tl.iloc[0]
    assert (r.kind, int(r.status), r.cseq_method, r.msg_type, r.src) == ("response", 200, "BYE", "200-BYE", "10.0.0.3")


def test_roundtrip_synthetic(tmp_path):
    tl0 = synthetic_timeline(300, seed=5)
    p = tmp_path / "s.log"
    n = write_thesis_log(tl0, p, label="SYNTHETIC test")
    tl, rep = read_thesis_log(p)
    assert rep.read == n == 1 + 2 * len(tl0)
    assert rep.skipped == {"not an instrumentation line": 1}
    a = tl0.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
    b = tl.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
    for c in INSTANTS:  # the format has µs resolution
        np.testing.assert_array_equal((a[c].to_numpy("int64") // 1000) * 1000, b[c].to_numpy("int64"))
    for c in ("call_id", "msg_type", "kind", "src", "cseq_method"):
        assert a[c].astype(str).tolist() == b[c].astype(str).tolist()


def test_small_fixture(fx):
    tl, rep = read_thesis_log(fx / "thesis_small.log")
    assert rep.messages == 60 and rep.parsed == 120 and rep.balanced
    assert tl.msg_type.value_counts().to_dict() == {t: 10 for t in
                                                   ("INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE")}
    assert not tl.dropped.any()


def test_garbage_lines_counted(fx):
    tl, rep = read_thesis_log(fx / "thesis_garbage.log")
    assert rep.messages == 2 and rep.parsed == 4
    assert rep.skipped == {"not an instrumentation line": 3, "reply-forwarded line (no timestamps)": 1,
                           "empty line": 1}


def test_negative_interval_skip_and_strict(fx):
    tl, rep = read_thesis_log(fx / "thesis_negative.log")
    assert rep.skipped["negative interval"] == 2
    # n1's send line and n2's receive line survive: egress-only n1 row, dropped n2 row
    assert rep.parsed == 2 and rep.balanced
    assert set(tl.call_id) == {"n1@h", "n2@h"}
    with pytest.raises(IngestError, match=r"thesis_negative.log: line 2: negative interval"):
        read_thesis_log(fx / "thesis_negative.log", strict=True)


def test_missing_fields(fx):
    tl, rep = read_thesis_log(fx / "thesis_missing.log")
    assert rep.skipped["missing field"] == 2
    assert rep.balanced
    m3 = tl[tl.call_id == "m3@h"].iloc[0]
    assert not m3.dropped and pd.notna(m3.t_dep)
    # m1's send line has no receive line: an egress-only row
    m1 = tl[tl.call_id == "m1@h"].iloc[0]
    assert pd.isna(m1.t_arr) and pd.notna(m1.t_dep)


def test_enoent_stamp_is_null(fx):
    tl, rep = read_thesis_log(fx / "thesis_enoent.log")
    r = tl.iloc[0]
    base = 1_300_000_000_000_000_000
    assert pd.isna(r.t_stack)
    assert int(r.t_arr) - base == 53_000 and int(r.t_sockq) - base == 80_000
    assert any("t_stack missing" in n for n in rep.notes)


def test_not_forwarded_is_dropped(tmp_path):
    p = tmp_path / "d.log"
    p.write_text(f"{PFX} src_ip 1 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
                 f"sock_recvtime=1.000000 now=1300000000000100 request 4 callid=y cseq=1 method_id=4\n")
    tl, rep = read_thesis_log(p)
    assert bool(tl.dropped.iloc[0]) and tl.drop_reason.iloc[0] == "not forwarded"
    assert tl.msg_type.iloc[0] == "ACK"


def test_interleaved_processes_fifo(tmp_path):
    # two workers interleave: receive A, receive B, send B, send A
    p = tmp_path / "i.log"
    rl = lambda cid, now: (f"{PFX} src_ip 1 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "  # noqa: E731
                           f"sock_recvtime=1.000000 now={now} request 1 callid={cid} cseq=1 method_id=1\n")
    sl = lambda cid, now: f"{SFX} now={now} ip_out=2 request 1 callid={cid} cseq=1 INVITE\n"  # noqa: E731
    p.write_text(rl("A", 1300000000000100) + rl("B", 1300000000000105) + sl("B", 1300000000000120)
                 + sl("A", 1300000000000130))
    tl, _ = read_thesis_log(p)
    got = {r.call_id: int(r.t_sip_out) for r in tl.itertuples()}
    assert got == {"A": 1300000000000130000, "B": 1300000000000120000}


def test_small_blocks_same_result(fx, tmp_path):
    tl0 = synthetic_timeline(100, seed=9)
    p = tmp_path / "b.log"
    write_thesis_log(tl0, p)
    a, _ = read_thesis_log(p)
    b, rep = read_thesis_log(p, block_bytes=4096)
    assert rep.balanced and len(a) == len(b) == 600
    pd.testing.assert_frame_equal(a.sort_values("line").reset_index(drop=True),
                                  b.sort_values("line").reset_index(drop=True), check_dtype=False)


def test_empty_and_foreign_file(tmp_path):
    e = tmp_path / "e.log"
    e.write_text("")
    with pytest.raises(IngestError, match="empty"):
        read_thesis_log(e)
    f = tmp_path / "f.log"
    f.write_text("hello\nworld\n")
    with pytest.raises(IngestError, match="f.log"):
        read_thesis_log(f)


# ------------------------------------------------------------------ tidy
def test_tidy_roundtrip_csv_parquet(tmp_path):
    tl0 = synthetic_timeline(20, seed=2)
    for name in ("t.csv", "t.parquet"):
        p = write_tidy(tl0, tmp_path / name)
        tl, rep = read_tidy(p)
        assert rep.read == rep.parsed == 120
        for c in INSTANTS:
            np.testing.assert_array_equal(tl[c].to_numpy("int64"), tl0[c].to_numpy("int64"))


def test_tidy_us_floats_and_bad_rows(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("call_id,kind,method,t_arr_us,t_dep_us\n"
                 "a,request,INVITE,1300000000000000.5,1300000000000010.25\n"
                 ",request,INVITE,1,2\n"
                 "c,sideways,INVITE,1,2\n"
                 "d,request,BYE,1300000000000020,1300000000000010\n")
    tl, rep = read_tidy(p)
    assert rep.read == 4 and rep.parsed == 1
    assert rep.skipped == {"missing field": 1, "bad kind": 1, "negative interval": 1}
    assert int(tl.t_arr.iloc[0]) == 1300000000000000500 and int(tl.t_dep.iloc[0]) == 1300000000000010250
    assert tl.msg_type.iloc[0] == "INVITE"
    with pytest.raises(IngestError, match=r"u.csv: row 2: missing call_id"):
        read_tidy(p, strict=True)


def test_tidy_missing_required_column(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("call_id,t_arr\na,1\n")
    with pytest.raises(IngestError, match="kind"):
        read_tidy(p)


# ------------------------------------------------------------------ dispatcher
def test_load_mixed_directory(fx, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(fx / "thesis_small.log", d / "a.txt")  # names do not matter: content sniffing
    write_tidy(synthetic_timeline(5, seed=3), d / "b.dat")
    (d / "junk.bin").write_bytes(b"\x01\x02 not a log\n")
    sim = d / "simrun"
    sim.mkdir()
    write_tidy(synthetic_timeline(4, seed=4), sim / "timeline.parquet")
    (sim / "meta.json").write_text(json.dumps({"source": "sim", "run_id": "sim-x"}))
    tl, rep = load([d])
    assert len(tl) == 60 + 30 + 24
    assert rep.skipped["unknown format"] == 1
    assert {f.source for f in rep.files} == {"thesis_log", "tidy", "sim", "unknown"}
    assert "sim-x" in set(tl.run_id)
    assert sniff(sim) == "sim" and sniff(d / "a.txt") == "thesis_log"
    with pytest.raises(IngestError, match="junk.bin"):
        load([d], strict=True)


def test_load_pcap_dispatch(fx):
    tl, rep = load([fx / "udp4.pcapng", fx / "thesis_small.log"])
    assert len(rep.files) == 2 and rep.balanced
    assert tl.t_dep.notna().all() or len(tl) > 60


def test_load_nothing_usable(tmp_path):
    (tmp_path / "junk").write_text("nothing here\n")
    with pytest.raises(IngestError, match="no usable messages"):
        load([tmp_path])
    with pytest.raises(IngestError, match="no such file"):
        load([tmp_path / "missing"])


def test_vectorised_number_parsing_matches_python_int():
    from sipperf.ingest.thesis_logs.read import PAD
    from sipperf.ingest.thesis_logs.scan import _parse_int, _parse_lf_ns  # the compiled tokenizer's readers

    rng = np.random.default_rng(0)
    toks = [str(int(v)) for v in rng.integers(-10**15, 10**15, 300)] + ["0", "7", "-1", "1234567890123456",
                                                                        "12a", "", "-", "1.5", "99999999"]
    buf = b" " * PAD + " ".join(toks).encode() + b" " * PAD
    b = np.frombuffer(buf, np.uint8)
    starts, pos = [], PAD
    for t in toks:
        starts.append(pos)
        pos += len(t) + 1
    st = np.array(starts)
    en = st + np.array([len(t) for t in toks])
    val, ok = zip(*[_parse_int(b, s, e) for s, e in zip(st.tolist(), en.tolist())])
    for t, v, o in zip(toks, val, ok):
        try:
            ref = int(t)
        except ValueError:
            assert not o, t
            continue
        assert o and v == ref, t
    lf = ["12.000000", "-1300000000000053.000000", "0.123456", "5"]
    buf = b" " * PAD + " ".join(lf).encode() + b" " * PAD
    st = np.array([PAD + sum(len(x) + 1 for x in lf[:i]) for i in range(len(lf))])
    b = np.frombuffer(buf, np.uint8)
    ns, ok = zip(*[_parse_lf_ns(b, s, s + len(x)) for s, x in zip(st.tolist(), lf)])
    assert all(ok) and list(ns) == [12000, -1300000000000053000, 123, 5000]


def test_pairing_independent_of_call_id_lengths_and_blocks(tmp_path):
    # call-ids of very different lengths; small blocks put a receive line and its send line in
    # different blocks next to call-ids of other lengths: every message must still pair
    tl0 = synthetic_timeline(150, seed=11)
    rng = np.random.default_rng(11)
    pad = {c: "x" * int(k) for c, k in zip(tl0.call_id.unique(), rng.integers(0, 60, 150))}
    tl0["call_id"] = pd.array([c + pad[c] for c in tl0.call_id], dtype="string")
    p = tmp_path / "lens.log"
    write_thesis_log(tl0, p)
    ref = tl0.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
    for block in (300, 1024, 4096, 1 << 24):
        tl, rep = read_thesis_log(p, block_bytes=block)
        assert rep.balanced and rep.n_skipped == 0 and rep.messages == len(tl0), block
        assert not tl.dropped.any() and tl.t_arr.notna().all() and tl.t_dep.notna().all(), block
        got = tl.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
        for c in INSTANTS:
            np.testing.assert_array_equal((ref[c].to_numpy("int64") // 1000) * 1000, got[c].to_numpy("int64"))


def test_strict_error_with_small_blocks(fx):
    # the error is raised from the block that holds the bad line, the reader thread stops
    with pytest.raises(IngestError, match=r"thesis_negative.log: line 2: negative interval"):
        read_thesis_log(fx / "thesis_negative.log", strict=True, block_bytes=128)


def test_file_ending_on_a_block_boundary_keeps_carried_lines(tmp_path):
    # the last read returns 0 bytes: a receive line still waiting for its send line must become
    # a dropped row (and the account must balance)
    p = tmp_path / "edge.log"
    p.write_text(f"{PFX} src_ip 1 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
                 f"sock_recvtime=1.000000 now=1300000000000100 request 4 callid=y cseq=1 method_id=4\n")
    tl, rep = read_thesis_log(p, block_bytes=p.stat().st_size)
    assert rep.balanced and (rep.read, rep.parsed, rep.messages) == (1, 1, 1)
    assert bool(tl.dropped.iloc[0]) and tl.call_id.iloc[0] == "y"


def test_columns_grow_when_the_file_gets_denser(tmp_path):
    # the first block holds one long comment line only, so the row estimate made from it is far
    # too small: the columns must grow and the result equal that of one big block
    tl0 = synthetic_timeline(400, seed=12)
    p = tmp_path / "dense.log"
    write_thesis_log(tl0, p, label="SYNTHETIC " + "x" * 5000)
    a, ra = read_thesis_log(p)
    b, rb = read_thesis_log(p, block_bytes=5100)
    assert ra.balanced and rb.balanced and len(a) == len(b) == 2400
    pd.testing.assert_frame_equal(a, b, check_exact=True)


# ------------------------------------------------------------------ issue 13 item 4: no silent loss
def test_cr_only_line_ends_read_like_lf(fx, tmp_path):
    ref, rep0 = read_thesis_log(fx / "thesis_small.log")
    data = (fx / "thesis_small.log").read_bytes()
    for name, blob in (("cr.log", data.replace(b"\n", b"\r")), ("crlf.log", data.replace(b"\n", b"\r\n"))):
        p = tmp_path / name
        p.write_bytes(blob)
        assert sniff(p) == "thesis_log"
        for bb in (1 << 20, 200):  # also with blocks that cut lines (and CRs) anywhere
            tl, rep = read_thesis_log(p, block_bytes=bb)
            assert (rep.read, rep.parsed, dict(rep.skipped)) == (rep0.read, rep0.parsed, dict(rep0.skipped))
            for c in INSTANTS:
                np.testing.assert_array_equal(tl[c].to_numpy("int64"), ref[c].to_numpy("int64"))


def test_format_found_beyond_first_64k(fx, tmp_path):
    junk = b"".join(b"Mar 13 07:06:%02d sps cron[77]: (root) CMD (run-parts /etc/cron.hourly) %06d\n" % (i % 60, i)
                    for i in range(2000))
    assert len(junk) > 64 * 1024
    p = tmp_path / "syslog"
    p.write_bytes(junk + (fx / "thesis_small.log").read_bytes())
    assert sniff(p) == "thesis_log"
    tl, rep = load([p])
    assert len(tl) == 60 and rep.skipped["not an instrumentation line"] == 2000 + 1


def test_gzip_log_is_read(fx, tmp_path):
    import gzip
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress((fx / "thesis_small.log").read_bytes()))
    assert sniff(p) == "thesis_log"
    tl, _ = load([p])
    assert len(tl) == 60
    p.write_bytes(p.read_bytes()[:-30])  # truncated gzip stream
    with pytest.raises(IngestError, match="x.log.gz"):
        load([p])


def test_send_line_before_receive_line_is_repaired_and_warned(fx, tmp_path):
    lines = (fx / "thesis_small.log").read_text().splitlines(keepends=True)
    ref, _ = read_thesis_log(fx / "thesis_small.log")
    # swap every receive line with the send line right after it (same message)
    sw = lines[:]
    i = 1
    while i + 1 < len(sw):
        if "receive_msg" in sw[i] and "receive_msg" not in sw[i + 1]:
            sw[i], sw[i + 1] = sw[i + 1], sw[i]
            i += 2
        else:
            i += 1
    p = tmp_path / "swapped.log"
    p.write_text("".join(sw))
    tl, rep = read_thesis_log(p)
    assert len(tl) == 60 and not tl["dropped"].any()
    assert rep.details["log_order"]["send_lines_repaired"] > 0
    a = ref.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
    b = tl.sort_values(["call_id", "msg_type"]).reset_index(drop=True)
    for c in INSTANTS:
        np.testing.assert_array_equal(a[c].to_numpy("int64"), b[c].to_numpy("int64"))
    # shuffled: lines out of time order -> a warning, and analyze reports no PDR
    rng = np.random.default_rng(3)
    body = lines[1:]
    rng.shuffle(body)
    p2 = tmp_path / "shuffled.log"
    p2.write_text(lines[0] + "".join(body))
    tl2, rep2 = read_thesis_log(p2)
    assert rep2.details["log_order"]["lines_out_of_time_order"] > 0
    assert any(n.startswith("WARNING") for n in rep2.notes)
    from sipperf.analysis import analyze
    res = analyze([p2])
    res.write(tmp_path / "o")
    pdr = res.calls.set_index("metric").loc["PDR"]
    assert np.isnan(pdr["value"]) and "out of time order" in pdr["definition"]


def test_unforwarded_hop_by_hop_lines_are_not_drops(tmp_path):
    # a 100 Trying received from the callee and never sent on (RFC 3261 §16.7): absorbed
    p = tmp_path / "t.log"
    p.write_text(
        f"{PFX} src_ip 16777226 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
        f"sock_recvtime=1.000000 now=1300000000000100 request 1 callid=x cseq=1 method_id=1\n"
        f"{SFX} now=1300000000000110 ip_out=4 request 1 callid=x cseq=1 INVITE\n"
        f"{PFX} src_ip 50331658 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
        f"sock_recvtime=1.000000 now=1300000000000300 request 100 callid=x cseq=1 method_id=1\n"
        f"{PFX} src_ip 16777226 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
        f"sock_recvtime=1.000000 now=1300000000000500 request 1 callid=y cseq=1 method_id=1\n"
        f"{SFX} now=1300000000000510 ip_out=4 request 1 callid=y cseq=1 INVITE\n"
        f"{PFX} src_ip 16777226 parse_time=1.000000 wait_time=3.000000 stack_time=1.000000 "
        f"sock_recvtime=1.000000 now=1300000000900000 request 8 callid=z cseq=2 method_id=8\n"
        f"{SFX} now=1300000000900010 ip_out=4 request 8 callid=z cseq=2 BYE\n")
    tl, rep = read_thesis_log(p)
    d = tl.set_index("call_id")
    assert d.loc["x"].query("status == 100")["disposition"].iloc[0] == "absorbed: 100 Trying"
    assert not tl["dropped"].any()
    from sipperf import calls
    assert calls.pdr(tl) == 0.0


def test_strict_fails_on_any_skip(fx, tmp_path):
    with pytest.raises(IngestError, match=r"thesis_garbage.log: line \d+: --strict"):
        read_thesis_log(fx / "thesis_garbage.log", strict=True)
    # our own SYNTHETIC label line is metadata, not a skipped record
    read_thesis_log(fx / "thesis_small.log", strict=True)


@pytest.mark.parametrize("body,what", [
    ("call_id,kind,t_arr\na,request,12abc\n", "bad number"),
    ("call_id,kind,t_arr\na,request,inf\n", "bad number"),
    ("call_id,kind,t_arr\na,request,1.5\n", "bad number"),          # fractional ns
    ("call_id,kind,cseq\na,request,x7\n", "bad number"),
])
def test_tidy_text_or_inf_in_numeric_column_is_counted(tmp_path, body, what):
    p = tmp_path / "t.csv"
    p.write_text(body + "b,request,\n")
    tl, rep = read_tidy(p)
    assert rep.skipped == {what: 1} and rep.parsed == 1 and list(tl["call_id"]) == ["b"]
    with pytest.raises(IngestError, match=r"t.csv: row 1: bad number in column"):
        read_tidy(p, strict=True)


def test_tidy_duplicate_header_and_units(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("call_id,kind,t_arr,t_arr\na,request,1,2\n")
    with pytest.raises(IngestError, match=r"duplicate column.*t_arr"):
        read_tidy(p)
    p.write_text("call_id,kind,t_arr,t_dep,t_dep_ms\na,request,1,2,3\n")
    with pytest.raises(IngestError, match=r"t_dep given 2 times"):
        read_tidy(p)
    p.write_text("call_id,kind,t_arr,t_dep_ms\na,request,1700000000123456789,1700000000123.5\n")
    tl, _ = read_tidy(p)
    assert int(tl["t_dep"].iloc[0]) == 1_700_000_000_123_500_000
    for unit, v in (("seconds", "1700000000"), ("milliseconds", "1700000000123"),
                    ("microseconds", "1700000000123456")):
        p.write_text(f"call_id,kind,t_arr\na,request,{v}\n")
        with pytest.raises(IngestError, match=f"look like {unit}.*t_arr_"):
            read_tidy(p)
    p.write_text("call_id,kind,t_arr_s,t_dep_s\na,request,1700000000.000001,1700000000.5\n")
    tl, _ = read_tidy(p)
    assert int(tl["t_arr"].iloc[0]) == 1_700_000_000_000_001_000 and int(tl["t_dep"].iloc[0]) == 1_700_000_000_500_000_000
    # relative ns (a simulation from epoch 0) stay ns
    p.write_text("call_id,kind,t_arr,t_dep\na,request,0,1500\n")
    tl, _ = read_tidy(p)
    assert int(tl["t_dep"].iloc[0]) == 1500
