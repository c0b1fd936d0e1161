"""Captures that lie (issue 36): duplicates, bad clocks, repeated inputs, several messages in one
datagram, tunnels and compressors -- each class built from the REAL fixtures' own packets
(``tests/capgen.py``; the fixtures are real Kamailio + SIPp captures, tests/fixtures/README.md)
and checked two ways: the answer is the twin's (the capture without the defect), or the named
note; and the account balances (parsed + skipped = read), in memory and streamed alike."""
from __future__ import annotations

import bz2
import lzma
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capgen as G
from sipperf.analysis import analyze
from sipperf.ingest.capture import fast
from sipperf.ingest.capture.read import read_capture
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
TABLES = ("components", "calls", "transactions", "counts")


def recs(name: str):
    return G.records(FIX / f"{name}.pcapng")


def write(tmp_path, name, records) -> Path:
    return G.write_records(tmp_path / f"{name}.pcapng", records)


def tables(res) -> dict:
    return {t: getattr(res, t).reset_index(drop=True).astype("string").fillna("<NA>") for t in TABLES}


def same_answer(a, b) -> None:
    ta, tb = tables(a), tables(b)
    for t in TABLES:
        pd.testing.assert_frame_equal(ta[t], tb[t], obj=t)


def balanced(res) -> None:
    r = res.report
    assert r.parsed + r.n_skipped == r.read and r.balanced


def files(res):
    return res.report.files or [res.report]


def details(res) -> dict:
    return files(res)[0].details


# ------------------------------------------------------------------------------ duplicates
def span_copy(records, gap_ns: int = 3_000, ident=None):
    """Every packet twice, the copy ``gap_ns`` later (a SPAN port); ``ident``: a new IPv4 id
    for the copy (then it is another datagram, not a copy)."""
    out = []
    for k, (ts, link, d) in enumerate(records):
        out.append((ts, link, d))
        c = d
        if ident is not None and (p := G.decode(ts, link, d)) is not None and p.ver == 4 and p.proto == 17:
            l2 = G.LINK_L2[link]
            c = bytearray(d)
            c[l2 + 4:l2 + 6] = struct.pack(">H", ident(k))
            c = bytes(c)
        out.append((ts + gap_ns, link, c))
    return out


@pytest.mark.parametrize("fixture", ["udp4", "udp6", "tcp4", "retrans"])
@pytest.mark.parametrize("stream", [False, True])
def test_span_duplicates_give_the_twins_answer(fixture, stream, tmp_path):
    twin = FIX / f"{fixture}.pcapng"
    cap = write(tmp_path, "span", span_copy(recs(fixture)))
    a, b = analyze([cap], stream=stream), analyze([twin], stream=stream)
    same_answer(a, b)
    balanced(a)
    d = details(a)["duplicates"]
    n_pkts = len(recs(fixture))
    assert a.report.read == 2 * n_pkts
    if fixture == "tcp4":  # the data segments are copies; the empty ones stay "TCP without payload"
        assert d["tcp_segments"] == b.report.parsed
    else:
        assert d["messages"] == n_pkts and d["max_gap_us"] == pytest.approx(3.0)
        assert a.report.skipped[fast.ps.REASONS[fast.ps.R_DUPLICATE]] == n_pkts
    assert any("duplicate" in c for c in a.summary["files"][0]["checks"])


def test_hep_copies_beside_the_packets_give_the_twins_answer(tmp_path):
    """A proxy host tracing to Homer, captured on the host: every packet and its HEP copy."""
    r = recs("udp4")
    hep, _ = G.to_hep(r, G.HepOpt(delay_ns={101: 150_000}))
    cap = write(tmp_path, "hep-plain", sorted(r + hep, key=lambda x: x[0]))
    for stream in (False, True):
        a = analyze([cap], stream=stream)
        same_answer(a, analyze([FIX / "udp4.pcapng"], stream=stream))
        balanced(a)
        assert details(a)["duplicates"]["hep_copies"] == len(r)


@pytest.mark.parametrize("fixture", ["retrans", "udp4"])
def test_real_retransmissions_are_not_duplicates(fixture, tmp_path, monkeypatch):
    """retrans.pcapng: Kamailio really retransmits INVITEs and BYEs to a dead UAS (T1 apart):
    nothing is a duplicate, and the table is the one read with no duplicate window at all."""
    ref, rep = fast.read_packets(FIX / f"{fixture}.pcapng")
    assert "duplicates" not in rep.details
    monkeypatch.setattr(fast, "DUP_WINDOW_NS", 0)
    off, _ = fast.read_packets(FIX / f"{fixture}.pcapng")
    pd.testing.assert_frame_equal(ref, off)
    if fixture == "retrans":  # the capture does hold retransmissions: the same bytes again, later
        cols = ["src", "sport", "dst", "dport", "call_id", "cseq", "method", "status", "via_branch"]
        key = ref[cols].astype("string").fillna("").agg("|".join, axis=1)
        again = key.duplicated(keep=False)
        assert again.sum() >= 8
        gaps = ref.loc[again].assign(k=key[again]).groupby("k")["ts_ns"].diff().dropna()
        assert gaps.min() > 50_000_000  # T1-spaced, far outside the duplicate window


def test_a_copy_with_another_ip_id_is_another_datagram(tmp_path):
    """The same bytes 3 µs later but with a new IPv4 identification: a new datagram from the
    sender (a retransmission at SIP level), never folded: every message counts twice."""
    cap = write(tmp_path, "new-id", span_copy(recs("udp4"), ident=lambda k: 40000 + k))
    df, rep = fast.read_packets(cap)
    assert len(df) == 2 * len(recs("udp4")) and "duplicates" not in rep.details


# ------------------------------------------------------------------------------ clocks
def _stamped(records, change: dict):
    out = list(records)
    for i, ts in change.items():
        _, link, d = out[i]
        out[i] = (ts(out[i][0]), link, d)
    return out


def _no_absurd_sojourn(res, twin) -> None:
    """Every sojourn inside [0, the twin's longest], the same messages and dispositions, no drop."""
    tl, tw = res.timeline, twin.timeline
    soj = (tl["t_dep"] - tl["t_arr"]).dropna().astype("int64")
    assert (soj >= 0).all() and soj.max() <= (tw["t_dep"] - tw["t_arr"]).dropna().max()
    assert tl["disposition"].value_counts().to_dict() == tw["disposition"].value_counts().to_dict()
    assert not tl["dropped"].fillna(False).any()
    srd = res.calls.set_index("metric").loc["SRD_successful"]
    assert 0 <= srd["p99"] <= twin.calls.set_index("metric").loc["SRD_successful", "p99"] * 1.05


STRAYS = {
    "zero-and-far-future": ({20: lambda t: 0, 57: lambda t: 0, 140: lambda t: 0xFFFFFFFF * 10**9},
                            {"stamp of zero or before 1990": 2, "stamp after the file was written": 1}),
    "days-off-in-a-run": ({30: lambda t: t - 2 * 86_400 * 10**9, 31: lambda t: t - 2 * 86_400 * 10**9,
                           150: lambda t: t + 3_600 * 10**9},
                          {"stamp far out of place among the packets around it": 3}),
    # a packet 1.5 s ahead of the others: the way back from it is not a clock step
    "one-ahead-by-1.5-s": ({100: lambda t: t + 1_500_000_000},
                           {"stamp far out of place among the packets around it": 1}),
}


@pytest.mark.parametrize("case", list(STRAYS))
def test_impossible_stamps_are_named_and_never_averaged_in(case, tmp_path):
    change, reasons = STRAYS[case]
    cap = write(tmp_path, case, _stamped(recs("udp4"), change))
    twin = analyze([FIX / "udp4.pcapng"], stream=False)
    a = analyze([cap], stream=False)
    _no_absurd_sojourn(a, twin)
    balanced(a)
    assert details(a)["clock"]["checks"]["0"]["stray_stamps"] == reasons
    s = analyze([cap], stream=True)
    same_answer(s, a)
    assert "impossible timestamps" in " ".join(s.summary["files"][0]["checks"])


def test_a_clock_step_back_is_undone(tmp_path):
    """An NTP-like step of 0.5 s back in the middle: the step named and undone; every message and
    its disposition as in the twin; the one message inside the proxy across the step has no
    sojourn, every other sojourn is the twin's."""
    r = recs("udp4")
    cap = write(tmp_path, "step", [(ts - (500_000_000 if i >= len(r) // 2 else 0), link, d)
                                   for i, (ts, link, d) in enumerate(r)])
    twin = analyze([FIX / "udp4.pcapng"], stream=False)
    tw = twin.timeline
    a = analyze([cap], stream=False)
    step = details(a)["clock"]["checks"]["0"]["clock_steps_back"]
    assert step["count"] == 1 and 499 < step["largest_ms"] < 500
    tl = a.timeline
    assert tl["disposition"].value_counts().to_dict() == tw["disposition"].value_counts().to_dict()
    unknown = int((tl["clock"] == "stamp repaired or clock step between the copies").sum())
    assert unknown == details(a)["time_unknown"] == 1
    soj = sorted((tl["t_dep"] - tl["t_arr"]).dropna().tolist())
    full = sorted((tw["t_dep"] - tw["t_arr"]).dropna().tolist())
    assert len(soj) == len(full) - unknown and set(soj) <= set(full)
    s = analyze([cap], stream=True)
    same_answer(s, a)
    assert details(s)["time_unknown"] == 1


@pytest.mark.parametrize("late_ms", [150, 600])
def test_rows_written_late_are_not_a_clock_step(late_ms, tmp_path):
    """Three records stamped on time but written after the records of the next 150 or 600 ms (a
    capture queue, or one CPU's backlog stalled on a loaded host: the stamps are right, the file
    order is not).  The rows after them are back on the line at once, so this is no clock step:
    nothing is shifted, and the answer is the twin's."""
    r = recs("udp4")
    k = len(r) // 3
    late = r[k:k + 3]
    t_late = late[-1][0] + late_ms * 1_000_000
    rest = r[:k] + r[k + 3:]
    at = next(i for i, x in enumerate(rest) if x[0] > t_late)
    cap = write(tmp_path, "late", rest[:at] + late + rest[at:])
    for stream in (False, True):
        a = analyze([cap], stream=stream)
        c = details(a).get("clock", {}).get("checks", {}).get("0", {})
        assert "clock_steps_back" not in c and "stray_stamps" not in c, c
        same_answer(a, analyze([FIX / "udp4.pcapng"], stream=stream))


@pytest.mark.parametrize("order", ["halves-swapped", "shuffled"])
def test_records_out_of_time_order_are_read_in_time_order(order, tmp_path):
    r = recs("udp4")
    out = r[len(r) // 2:] + r[:len(r) // 2] if order == "halves-swapped" else random.Random(5).sample(r, len(r))
    cap = write(tmp_path, order, out)
    for stream in (False, True):
        a = analyze([cap], stream=stream)
        same_answer(a, analyze([FIX / "udp4.pcapng"], stream=stream))
        c = details(a)["clock"]["checks"]["0"]
        assert ("file_order_steps_back" if order == "halves-swapped" else "not_in_time_order") in c
        assert "clock_steps_back" not in c


def test_an_egress_copy_stamped_before_its_ingress_is_relayed_without_a_sojourn(tmp_path):
    r = recs("udp4")
    tl, _ = read_capture(FIX / "udp4.pcapng")
    moved = tl[tl["disposition"] == "relayed"].iloc[::10]
    change = {int(fo) - 1: (lambda t, tin=r[int(fi) - 1][0]: tin - 200_000)
              for fi, fo in zip(moved["frame_in"], moved["frame_out"])}
    cap = write(tmp_path, "early-egress", _stamped(r, change))
    twin = analyze([FIX / "udp4.pcapng"], stream=False)
    a = analyze([cap], stream=False)
    assert details(a)["egress_before_ingress"] == len(moved)
    assert a.timeline["clock"].notna().sum() == len(moved)
    _no_absurd_sojourn(a, twin)
    assert a.components.set_index("msg_type").loc["ALL", "sojourn_count"] == 120 - len(moved)
    s = analyze([cap], stream=True)
    same_answer(s, a)
    assert details(s)["egress_before_ingress"] == len(moved)


@pytest.mark.parametrize("step_ns,res_us", [(1_000_000, 1000.0), (1_000, 1.0)])
def test_the_clock_resolution_is_stated_beside_every_component(step_ns, res_us, tmp_path):
    """Stamps cut to the ms (a capture appliance, if_tsresol = 3) or the µs ("ns" files that
    carry µs): the resolution the stamps show is stated; at 1 ms the sojourn (~100 µs) is named
    below it and its percentiles are given to the ms only."""
    cap = write(tmp_path, "coarse", [(ts // step_ns * step_ns, link, d) for ts, link, d in recs("udp4")])
    for stream in (False, True):
        a = analyze([cap], stream=stream)
        assert details(a)["clock"]["resolution_ns"] == step_ns
        comp = a.components.set_index("msg_type")
        assert (comp["clock_resolution_us"] == res_us).all()
        coarse = comp["below_clock_resolution"].str.contains("sojourn")[comp["sojourn_median"].notna()]
        assert coarse.all() if step_ns == 1_000_000 else not coarse["ALL"]
        for c in ("sojourn_median", "sojourn_p99"):
            v = comp[c].dropna().to_numpy()
            assert np.allclose(v / res_us, np.round(v / res_us))
    if step_ns == 1_000_000:
        assert any("below the clock's resolution" in line for line in a.describe())


def test_a_pcapng_declaring_ms_stamps(tmp_path):
    """if_tsresol = 3: the file itself says ms."""
    r = recs("udp4")
    blob = G.shb() + G.idb(1, tsresol=3) + b"".join(G.epb(d, ts // 1_000_000) for ts, _, d in r)
    cap = tmp_path / "ms.pcapng"
    cap.write_bytes(blob)
    _, rep = fast.read_packets(cap)
    i = rep.details["clock"]["interfaces"][0]
    assert i["declared_resolution_ns"] == 1e6 and rep.details["clock"]["resolution_ns"] == 1e6


# --------------------------------------------------------------------- inputs, datagrams
def test_the_same_input_twice_is_read_once(tmp_path):
    copy = tmp_path / "copy.pcapng"
    shutil.copyfile(FIX / "udp4.pcapng", copy)
    one = analyze([FIX / "udp4.pcapng"], stream=False)
    for stream in (False, True):
        a = analyze([FIX / "udp4.pcapng", FIX / "." / "udp4.pcapng", copy], stream=stream)
        same_answer(a, one)
        why = sorted(x["why"] for x in a.report.details["repeated_inputs"])
        assert why == ["the same bytes (a copy)", "the same file"]
        assert a.report.read == one.report.read


def _packed(records):
    """Every third datagram with the next datagram of its direction appended (two SIP messages
    in one UDP datagram), and the twin: the same two messages in two datagrams at that time."""
    pk = G.packets(records)
    used, packed, twin = set(), [], []
    for i, p in enumerate(pk):
        if i in used:
            continue
        j = next((j for j in range(i + 1, len(pk)) if j not in used and pk[j].src_ep == p.src_ep
                  and pk[j].dst_ep == p.dst_ep), None)
        if j is not None and i % 3 == 0:
            used.add(j)
            packed.append((p.ts, p.link, G.rebuild(p, p.payload + pk[j].payload)))
            twin += [(p.ts, p.link, G.rebuild(p)), (p.ts, p.link, G.rebuild(pk[j]))]
        else:
            packed.append((p.ts, p.link, G.rebuild(p)))
            twin.append((p.ts, p.link, G.rebuild(p)))
    return packed, twin, len(twin) - len(packed)


@pytest.mark.parametrize("fixture", ["udp4", "udp6"])
def test_several_sip_messages_in_one_datagram_are_read_one_by_one(fixture, tmp_path):
    packed, twin, n = _packed(recs(fixture))
    cap, tw = write(tmp_path, "packed", packed), write(tmp_path, "twin", twin)
    assert n > 10
    for stream in (False, True):
        a = analyze([cap], stream=stream)
        same_answer(a, analyze([tw], stream=stream))
        balanced(a)
        m = details(a)["transports"]["udp_several_messages"]
        assert m["datagrams"] == n == m["further_messages"]
    df, _ = fast.read_packets(cap)
    dt, _ = fast.read_packets(tw)
    assert sorted(df["size"]) == sorted(dt["size"])  # each message's own length


def test_geneve_is_decoded(tmp_path):
    out = []
    for ts, link, d in recs("udp4"):
        gen = struct.pack(">BBHI", 1, 0, 0x6558, 0x000A0000) + b"\x01\x02\x03\x04"  # one 4-byte option
        out.append((ts, 1, G.eth(G.ipv4_udp(gen + d, src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02",
                                            sport=49152, dport=6081))))
    a = analyze([write(tmp_path, "geneve", out)], stream=False)
    same_answer(a, analyze([FIX / "udp4.pcapng"], stream=False))
    assert details(a)["transports"]["geneve_packets"] == len(out)


# ------------------------------------------------------------------------------ compressors
def _zstd(b: bytes) -> bytes:
    import zstandard
    return zstandard.ZstdCompressor().compress(b)


@pytest.mark.parametrize("name,compress", [("xz", lzma.compress), ("bz2", bz2.compress), ("zst", _zstd)])
def test_compressed_captures_are_read(name, compress, tmp_path):
    data = (FIX / "udp4.pcapng").read_bytes()
    cap = tmp_path / f"c.pcapng.{name}"
    cap.write_bytes(compress(data[:60000]) + compress(data[60000:]))  # two members/streams/frames
    a, b = fast.read_packets(cap), fast.read_packets(FIX / "udp4.pcapng")
    pd.testing.assert_frame_equal(a[0], b[0])
    assert read_capture(cap)[0]["run_id"].iloc[0] == "c"


def test_a_cut_compressed_capture_reads_to_the_cut(tmp_path):
    z = lzma.compress((FIX / "frag4.pcapng").read_bytes())
    cap = tmp_path / "cut.pcapng.xz"
    cap.write_bytes(z[: 2 * len(z) // 3])
    df, rep = fast.read_packets(cap)
    assert rep.skipped["truncated record"] == 1 and rep.balanced and 0 < len(df)
    assert any("cut short (truncated xz stream)" in n for n in rep.notes)
    with pytest.raises(IngestError, match="cut short"):
        fast.read_packets(cap, on_truncated="raise")


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sipperf.cli", *map(str, args)], capture_output=True, text=True)


def test_an_archive_and_a_negative_offered_count_are_refused_by_name(tmp_path):
    import zipfile
    z = tmp_path / "captures.zip"
    with zipfile.ZipFile(z, "w") as fh:
        fh.write(FIX / "udp4.pcapng", "udp4.pcapng")
    r = _cli("analyze", z, "--out", tmp_path / "o1", "--no-figures")
    assert r.returncode == 2 and "zip archive" in r.stderr and "Traceback" not in r.stderr
    r = _cli("analyze", FIX / "udp4.pcapng", "--offered", "-5", "--out", tmp_path / "o2", "--no-figures")
    assert r.returncode == 2 and "--offered" in r.stderr and "Traceback" not in r.stderr
