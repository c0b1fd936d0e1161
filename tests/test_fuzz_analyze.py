"""Fuzz ``sipperf analyze`` with mutations of the real fixtures (issue 13 item 8).

A seeded generator mutates the real captures (truncate, bit-flip, reorder and drop packets,
duplicate them, re-encode with editcap, gzip, merge link types into one multi-section pcapng,
zero the IPv4 total length, break SIP start lines and CSeq), their re-framings by
``tests/capgen.py`` (issue 23: TCP segments cut, shuffled, overlapping, duplicated or partly
lost; SIP over WebSocket with fragmented frames, pings, lost or bit-flipped segments; HEP
packets cut or corrupted), the thesis-format logs (CR line
ends, shuffled and cut lines, binary garbage, non-UTF-8 Call-IDs, huge numbers, gzip) and a
tidy CSV (text, inf and unit mistakes in time columns, duplicate headers, cut rows).  Every case
runs through :func:`sipperf.analysis.analyze` in-process (its tables written), a sample also through the
real ``sipperf`` command in a subprocess, and must

* end in success or in an :class:`~sipperf.timeline.IngestError` (exit code 0 or 2), never in
  another exception (a traceback);
* give a true account: read = parsed + skipped for every file, the SIP messages of a capture
  are either in the timeline or counted by reason, and, for a sample of captures, the number of
  packets read (less the cut-off or corrupt record where reading stopped) equals tshark's frame
  count of the same file.

Failures inside the packet parser are listed apart (:func:`test_fuzz_packet_parser_findings`,
which once only reported them to the parser's owner and now fails on them: a scanner change
that turned every IP-fragment case into a TypeError was caught by nothing else).
"""
from __future__ import annotations

import gzip
import os
import random
import shutil
import struct
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from sipperf.analysis import analyze
from sipperf.ingest.thesis_logs.read import synthetic_timeline
from sipperf.ingest.tidy import write_tidy
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
CAPTURES = ("udp4", "udp6", "tcp4", "retrans", "frag4", "prack", "trying1", "cancel", "busy", "hops2",
            "endpoint", "b2bua")
PARSER_FILES = ("fast.py", "pcap.py", "pyshark_engine.py", "sipmsg.py", "records.py", "packet.py", "ipfrag.py", "tcp.py",
                "sip.py", "values.py", "rows.py", "tables.py", "primitives.py", "reorder.py", "ws.py", "hep.py",
                "messages.py")
N_CASES = 304
TSHARK_EVERY = 20     # independent packet count for every 20th capture case
CLI_SAMPLE = 3        # cases also run through the real command


@dataclass
class Case:
    name: str
    data: bytes
    suffix: str
    kind: str  # capture | log | csv


# ------------------------------------------------------------------ pcapng surgery
def blocks(data: bytes) -> list[bytes]:
    """The blocks of a (little-endian) pcapng file; stops at the first inconsistent length."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        ln = struct.unpack_from("<I", data, pos + 4)[0]
        if ln < 12 or pos + ln > len(data):
            break
        out.append(data[pos:pos + ln])
        pos += ln
    return out


def is_packet(b: bytes) -> bool:
    return struct.unpack_from("<I", b, 0)[0] in (2, 3, 6)


def zero_ip_total_length(b: bytes) -> bytes:
    """An Ethernet EPB with its IPv4 total length set to 0 (TSO/offload captures)."""
    if struct.unpack_from("<I", b, 0)[0] != 6 or len(b) < 28 + 18:
        return b
    data = bytearray(b)
    if data[28 + 12:28 + 14] == b"\x08\x00":
        data[28 + 16:28 + 18] = b"\x00\x00"
    return bytes(data)


def capture_mutations(rng: random.Random, name: str, data: bytes, other: bytes, editcap: bool) -> list[Case]:
    bl = blocks(data)
    head = [b for b in bl if not is_packet(b)]
    pk = [b for b in bl if is_packet(b)]
    cases = []

    def add(tag, blob, suffix=".pcapng"):
        cases.append(Case(f"{name}:{tag}", blob, suffix, "capture"))

    add("truncate", data[:rng.randrange(24, len(data))])
    add("truncate-header", data[:rng.randrange(1, 28)])
    for k in (1, 8, 64):
        b = bytearray(data)
        for _ in range(k):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        add(f"bitflip{k}", bytes(b))
    sh = pk[:]
    rng.shuffle(sh)
    add("reorder", b"".join(head + sh))
    keep = [b for b in pk if rng.random() > 0.3]
    add("drop30%", b"".join(head + keep))
    dup = pk + [pk[rng.randrange(len(pk))] for _ in range(5)]
    add("duplicate", b"".join(head + dup))
    add("gzip", gzip.compress(data), ".pcapng.gz")
    add("gzip-cut", gzip.compress(data)[: len(gzip.compress(data)) * 2 // 3], ".pcapng.gz")
    add("merge-linktypes", data + other)
    add("ip-total-length-0", b"".join(head + [zero_ip_total_length(b) for b in pk]))
    add("status-999", data.replace(b"SIP/2.0 200", b"SIP/2.0 999"))
    add("status-099", data.replace(b"SIP/2.0 180", b"SIP/2.0 099"))
    add("cseq-huge", data.replace(b"CSeq: 1 ", b"CSeq: 9"[:7] + b" ").replace(b"CSeq: 2 BYE", b"CSeq: x BYE"))
    add("compact-headers", data.replace(b"\r\nCall-ID: ", b"\r\ni:       ").replace(b"\r\nVia: ", b"\r\nv:   "))
    add("garbage-tail", data + bytes(rng.randrange(256) for _ in range(100)))
    add("no-packets", b"".join(head))
    if editcap:
        add("reencode-pcap", _editcap(data, "pcap"), ".pcap")
        add("reencode-nsecpcap", _editcap(data, "nsecpcap"), ".pcap")
    return cases


def framing_mutations(rng: random.Random) -> list[Case]:
    """Re-framings of the real udp4/tcp4 captures (capgen, issue 23), then broken: TCP pieces
    shuffled, overlapping, duplicated, a share of them lost, the connection's bytes bit-flipped;
    WebSocket legs with fragmented, split and reordered frames, some segments lost, bit flips;
    HEP packets cut short or with a flipped chunk length."""
    import capgen as G

    tcp = G.records(FIX / "tcp4.pcapng")
    udp = G.records(FIX / "udp4.pcapng")
    cases = []

    def add(tag, recs):
        cases.append(Case(f"framing:{tag}", G.pcapng_bytes(recs), ".pcapng", "capture"))

    def drop(recs, share):
        return [r for r in recs if not ((p := G.decode(*r)) is not None and p.payload and rng.random() < share)]

    def flip(recs, k):
        out = list(recs)
        for _ in range(k):
            i = rng.randrange(len(out))
            ts, link, d = out[i]
            b = bytearray(d)
            j = rng.randrange(len(b))
            b[j] ^= 1 << rng.randrange(8)
            out[i] = (ts, link, bytes(b))
        return out

    shuffled = G.tcp_reframe(tcp, rng, duplicate=0.3, overlap=0.3, retransmit=0.1)
    add("tcp-shuffled-overlapping", shuffled)
    add("tcp-swapped-across-segments", G.tcp_reframe(tcp, rng, pieces=(1, 2), shuffle=False, cross=0.5))
    add("tcp-pieces-lost", drop(shuffled, 0.08))
    add("tcp-shuffled-bitflip", flip(shuffled, 40))
    add("tcp-tiny-pieces-lost", drop(G.tcp_reframe(tcp, rng, pieces=(6, 9)), 0.02))
    ws, _ = G.to_websocket(udp, ("127.0.0.1", 15070), ("127.0.0.1", 15060),
                           G.WsLeg(fragment=0.5, split=0.5, reorder=True, ping_every=3, seed=rng.randrange(1000)))
    add("ws-fragmented", ws)
    add("ws-segments-lost", drop(ws, 0.1))
    add("ws-bitflip", flip(ws, 60))
    noup, _ = G.to_websocket(udp, ("127.0.0.1", 15070), ("127.0.0.1", 15060), G.WsLeg(upgrade=False, bundle=0.3))
    add("ws-no-upgrade-bundled-cut", noup[: len(noup) * 2 // 3])
    hep, _ = G.to_hep(udp, G.HepOpt(agents={1: "10.0.0.1", 2: "10.0.0.2"}, pick=lambda p: 1 + p.index % 2))
    add("hep-bitflip", flip(hep, 80))
    htcp, _ = G.to_hep(udp, G.HepOpt(over_tcp=True, coalesce=4))
    add("hep-tcp-cut", [(t, l, d[: rng.randrange(40, len(d) + 1)]) for t, l, d in htcp])
    add("hep-tcp-lost", drop(htcp, 0.1))
    return cases


def _editcap(data: bytes, fmt: str) -> bytes:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "in.pcapng", Path(d) / "out.pcap"
        a.write_bytes(data)
        r = subprocess.run(["editcap", "-F", fmt, str(a), str(b)], capture_output=True)
        return b.read_bytes() if r.returncode == 0 and b.exists() else data


# ------------------------------------------------------------------ text mutations
def log_mutations(rng: random.Random, name: str, data: bytes) -> list[Case]:
    lines = data.split(b"\n")
    cases = []

    def add(tag, blob, suffix=".log"):
        cases.append(Case(f"{name}:{tag}", blob, suffix, "log"))

    add("cr-only", data.replace(b"\n", b"\r"))
    add("crlf", data.replace(b"\n", b"\r\n"))
    sh = lines[:]
    rng.shuffle(sh)
    add("shuffled", b"\n".join(sh))
    add("cut-mid-line", data[: rng.randrange(len(data) // 2, len(data))])
    add("binary-lines", b"\n".join(l if rng.random() > 0.2 else bytes(rng.randrange(256) for _ in range(40))
                                   for l in lines))
    add("non-utf8-callid", data.replace(b"callid=", b"callid=\xff\xfe"))
    add("huge-now", data.replace(b"now=13", b"now=9999999999999999999999913"))
    add("negative", data.replace(b"wait_time=", b"wait_time=-"))
    add("gzip", gzip.compress(data), ".log.gz")
    add("gzip-cut", gzip.compress(data)[:-20], ".log.gz")
    b = bytearray(data)
    for _ in range(30):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    add("bitflip30", bytes(b))
    add("empty", b"")
    add("only-first-line", lines[0] + b"\n")
    add("late-start", b"".join(b"Jan  1 00:00:00 h other[1]: filler line %06d\n" % i for i in range(1500)) + data)
    add("nul-bytes", data.replace(b" request ", b" request\x00"))
    return cases


def csv_mutations(rng: random.Random, data: bytes) -> list[Case]:
    text = data.decode()
    rows = text.splitlines()
    head, body = rows[0], rows[1:]
    cols = head.split(",")
    ia = cols.index("t_arr")
    cases = []

    def add(tag, s, suffix=".csv"):
        cases.append(Case(f"tidy:{tag}", s if isinstance(s, bytes) else s.encode(), suffix, "csv"))

    def set_col(r, i, v):
        f = r.split(",")
        f[i] = v
        return ",".join(f)
    add("text-in-time", "\n".join([head] + [set_col(r, ia, "abc") if k % 7 == 0 else r for k, r in enumerate(body)]))
    add("inf-in-time", "\n".join([head] + [set_col(r, ia, "inf") if k % 5 == 0 else r for k, r in enumerate(body)]))
    add("duplicate-header", "\n".join([head + ",t_arr"] + [r + ",1" for r in body]))
    add("seconds", "\n".join([head] + [set_col(r, ia, str(int(r.split(',')[ia]) // 10**9)) if r.split(",")[ia] else r
                                       for r in body]))
    add("header-only", head + "\n")
    add("empty", "")
    add("cut", text[: len(text) * 2 // 3])
    sh = body[:]
    rng.shuffle(sh)
    add("shuffled-rows", "\n".join([head] + sh))
    add("crlf-bom", ("\ufeff" + "\r\n".join(rows)).encode())
    add("non-utf8", data.replace(b"synthetic", b"synth\xe9tic"))
    add("negative-interval", "\n".join([head] + [set_col(r, ia, "9" * 18) if k % 4 == 0 else r
                                                 for k, r in enumerate(body)]))
    add("gzip", gzip.compress(data), ".csv.gz")
    return cases


def generate(n: int = N_CASES, seed: int = 13, editcap: bool = True) -> list[Case]:
    rng = random.Random(seed)
    caps = {c: (FIX / f"{c}.pcapng").read_bytes() for c in CAPTURES}
    cases: list[Case] = []
    for c in CAPTURES:
        other = caps[rng.choice([x for x in ("udp6", "tcp4", "udp4") if x != c])]
        cases += capture_mutations(rng, c, caps[c], other, editcap and c in ("udp4", "tcp4", "hops2"))
    cases += framing_mutations(rng)
    for f in ("thesis_small.log", "thesis_garbage.log"):
        cases += log_mutations(rng, f, (FIX / f).read_bytes())
    import io
    buf = io.StringIO()
    synthetic_timeline(40, seed=4).to_csv(buf, index=False)
    cases += csv_mutations(rng, buf.getvalue().encode())
    k = 0
    while len(cases) < n:  # more random bit-flips and cuts of random captures
        c = CAPTURES[k % len(CAPTURES)]
        b = bytearray(caps[c])
        for _ in range(rng.randrange(1, 200)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        cases.append(Case(f"{c}:random{k}", bytes(b[: rng.randrange(len(b) // 3, len(b) + 1)]), ".pcapng",
                          "capture"))
        k += 1
    return cases


# ------------------------------------------------------------------ running and judging
def _origin(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    sipperf = [f for f in tb if "/sipperf/" in f.filename]
    return Path((sipperf or tb)[-1].filename).name if (sipperf or tb) else "?"


def _tshark_frames(path: Path) -> int | None:
    r = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                       capture_output=True, text=True, timeout=120)
    return len([x for x in r.stdout.splitlines() if x.strip()])


def run_case(case: Case, tmp: Path, tshark: bool) -> dict:
    p = tmp / f"case{case.suffix}"
    p.write_bytes(case.data)
    out = tmp / "out"
    try:
        res = analyze([p])
        res.write(out)
    except IngestError as e:
        return {"outcome": "error", "message": str(e)}
    except Exception as e:  # noqa: BLE001 - the point of the test: any other exception is a finding
        return {"outcome": "crash", "origin": _origin(e), "error": f"{type(e).__name__}: {e}",
                "tb": "".join(traceback.format_exception(e))[-3000:]}
    rep = res.report
    problems = []
    for f in rep.files or [rep]:
        if not f.balanced:
            problems.append(f"{f.path}: read {f.read} != parsed {f.parsed} + skipped {f.n_skipped}")
        acc = f.details.get("messages_account")
        if acc and acc["in_timeline"] + sum(acc["not_in_timeline"].values()) != acc["sip_messages"]:
            problems.append(f"message account does not add up: {acc}")
    count = None
    if tshark and case.kind == "capture" and not case.suffix.endswith(".gz"):
        n = _tshark_frames(p)
        f = (rep.files or [rep])[0]
        # the record where reading stopped (cut off, or a corrupt record header tshark also stops
        # at) is read and skipped by us, not a frame for tshark
        cut = sum(v for k, v in f.skipped.items() if "truncat" in k or "corrupt record" in k)
        count = (f.read - cut, n)
        if f.read - cut != n:
            problems.append(f"packets read {f.read} (less {cut} cut) != tshark's {n} frames")
    return {"outcome": "ok" if not problems else "untrue", "problems": problems, "count": count}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    have_tshark = shutil.which("tshark") is not None
    cases = generate(editcap=shutil.which("editcap") is not None)
    assert len(cases) >= 300
    out = []
    ncap = 0
    for i, c in enumerate(cases):
        d = tmp_path_factory.mktemp(f"c{i}")
        ts = False
        if c.kind == "capture":
            ncap += 1
            ts = have_tshark and ncap % TSHARK_EVERY == 0
        r = run_case(c, d, ts)
        r["case"] = c
        out.append(r)
        shutil.rmtree(d, ignore_errors=True)
    return out


def _summary(results) -> str:
    from collections import Counter
    return str(Counter(r["outcome"] for r in results))


def test_fuzz_no_traceback_and_true_account(results):
    mine = [r for r in results if r["outcome"] == "crash" and r["origin"] not in PARSER_FILES]
    untrue = [r for r in results if r["outcome"] == "untrue" and not _parser_count(r)]
    msg = "\n".join(f"{r['case'].name}: {r.get('error') or r.get('problems')}\n{r.get('tb', '')}"
                    for r in mine + untrue)
    assert not mine and not untrue, f"{_summary(results)}\n{msg}"
    # some of each outcome: the generator reaches both the readers' good and bad paths
    assert sum(r["outcome"] == "ok" for r in results) > 50
    assert sum(r["outcome"] == "error" for r in results) > 20
    assert sum(r.get("count") is not None for r in results) >= 10  # independent tshark counts were made


def _parser_count(r) -> bool:
    """A packet count that disagrees with tshark's is the packet parser's account."""
    return all("tshark" in p for p in r["problems"])


def test_fuzz_packet_parser_findings(results):
    """No crash inside the packet parser, and no packet count that disagrees with tshark's."""
    bad = [r for r in results if (r["outcome"] == "crash" and r["origin"] in PARSER_FILES)
           or (r["outcome"] == "untrue" and _parser_count(r))]
    msg = "\n".join(f"{r['case'].name}: {r.get('error') or r.get('problems')}\n{r.get('tb', '')}" for r in bad)
    assert not bad, f"{len(bad)} packet-parser findings:\n{msg}"


def test_fuzz_sample_through_the_command(results, tmp_path):
    """The real command: exit code 0 or 2, never a traceback, on a spread of cases."""
    pick = [r["case"] for r in results if r["outcome"] == "error"][:1] + \
           [r["case"] for r in results if r["outcome"] == "ok"][:CLI_SAMPLE - 1]
    for i, c in enumerate(pick):
        p = tmp_path / f"cli{i}{c.suffix}"
        p.write_bytes(c.data)
        r = subprocess.run([sys.executable, "-m", "sipperf.cli", "analyze", str(p), "--out", str(tmp_path / f"o{i}"),
                            "--no-figures"], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr, (c.name, r.stderr[-2000:])
        assert (r.returncode == 2) == any(x["case"] is c and x["outcome"] == "error" for x in results)
