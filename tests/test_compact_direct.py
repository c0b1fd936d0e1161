"""The reader's direct compact path (issue 23 item 6) equals the DataFrame path it replaces:
:func:`sipperf.ingest.capture.fast.iter_compact` (compact chunks cut from the reader's column
pieces) against :func:`~sipperf.ingest.capture.compact.compact_frame` of every ``chunk_rows``
slice of :func:`~sipperf.ingest.capture.fast.iter_packets`' DataFrames (what
:func:`sipperf.ingest.capture.chunks.produce` did before): the same keys, dtypes, values and
code lists in the same order, the same rows dropped, the same account.

Captures: the shipped lab captures (REAL), the REAL test fixtures, and DERIVATIONS of them
written here by ``tests/capgen.py`` (TCP out of order, WebSocket, HEP, VLAN tags, refused
traffic, a cut file) plus a SYNTHETIC corpus of edge-case and mutated messages (non-ASCII
Call-IDs, responses without method, CSeq without method ...).  The reader never emits a row
without Call-ID (it skips the message), so the dropping is checked on the reader's own pieces
with Call-IDs blanked and nulled in place."""
from __future__ import annotations

import dataclasses
import gc
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import capgen as G
from sipperf.ingest.capture import chunks, fast
from sipperf.ingest.capture.compact import compact_frame
from sipperf.timeline import IngestError, IngestReport

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"
LAB = sorted((ROOT / "datasets" / "lab" / "raw").glob("*/capture.pcapng.gz"))


def _recs(name: str):
    return G.records(FIX / f"{name}.pcapng")


def _lost(recs):
    out = G.tcp_reframe(recs, random.Random(2), pieces=(2, 2), shuffle=True)
    data = [i for i, r in enumerate(out) if (p := G.decode(*r)) is not None and p.payload]
    del out[data[40]]
    return out


def _corpus():
    """SYNTHETIC: the edge-case messages of test_pcap_sipmsg and mutations of them, one UDP
    datagram each (many are skipped as malformed: the rest are odd rows)."""
    from test_pcap_sipmsg import EDGE, _mutate

    rng = random.Random(23)
    msgs = list(EDGE) + [_mutate(rng, m) for m in EDGE for _ in range(40)]
    return [G.eth(G.ipv4_udp(m, ident=i, sport=5060 + i % 7)) for i, m in enumerate(msgs)]


def _with_refused(recs):
    refused, _ = G.refused_traffic(recs[len(recs) // 2][0], random.Random(5))
    return sorted(recs + refused, key=lambda r: r[0])


def _addresses_by_port(recs):
    """Every UDP/TCP packet's addresses replaced by one per port (10.1.x.y, or fd00::port for
    IPv6): a loopback capture becomes one whose elements have addresses of their own, first
    seen in an order other than that of their ids."""
    import ipaddress

    def addr(ver, port):
        return (ipaddress.ip_address(f"10.1.{port >> 8}.{port & 255}") if ver == 4
                else ipaddress.ip_address(f"fd00::{port:x}")).packed

    out = []
    for ts, link, d in recs:
        p = G.decode(ts, link, d)
        out.append((ts, link, d) if p is None else
                   (ts, link, G.rebuild(p, src=addr(p.ver, p.sport), dst=addr(p.ver, p.dport))))
    return out


vlan = lambda link, d: d[:12] + b"\x81\x00\x00\x2a" + d[12:]  # noqa: E731
qinq = lambda link, d: d[:12] + b"\x88\xa8\x00\x07\x81\x00\x00\x2a" + d[12:]  # noqa: E731

#: derived captures: name -> records
DERIVED = {
    "tcp-shuffled": lambda: G.tcp_reframe(_recs("tcp4"), random.Random(3), duplicate=0.2, overlap=0.2),
    "tcp-swapped": lambda: G.tcp_reframe(_recs("tcp4"), random.Random(4), pieces=(1, 2), shuffle=False, cross=0.5),
    "tcp-segment-lost": lambda: _lost(_recs("tcp4")),
    "ws-gateway": lambda: G.to_websocket(_recs("udp4"), ("127.0.0.1", 15070), ("127.0.0.1", 15060),
                                         G.WsLeg(fragment=0.4, split=0.3, reorder=True, ping_every=4))[0],
    "ws-ipv6": lambda: G.to_websocket(_recs("udp6"), ("::1", 15074), ("::1", 15064), G.WsLeg(bundle=0.3))[0],
    "hep3-two-agents": lambda: G.to_hep(_recs("udp4"), G.HepOpt(agents={1: "10.0.0.1", 2: "10.0.0.2"},
                                                                pick=lambda p: 1 + p.index % 2))[0],
    "hep3-tcp-ipv6": lambda: G.to_hep(_recs("udp6"), G.HepOpt(over_tcp=True, coalesce=3))[0],
    "hep2-ipv6": lambda: G.to_hep(_recs("udp6"), G.HepOpt(version=2))[0],
    "udp4-addresses": lambda: _addresses_by_port(_recs("udp4")),
    "udp6-addresses": lambda: _addresses_by_port(_recs("udp6")),
    "tcp4-addresses": lambda: _addresses_by_port(_recs("tcp4")),
    "hep3-addresses": lambda: G.to_hep(_addresses_by_port(_recs("hops2")))[0],
    "vlan": lambda: [(ts, link, vlan(link, d)) for ts, link, d in _recs("udp4")],
    "qinq-frag": lambda: [(ts, link, qinq(link, d)) for ts, link, d in _recs("frag4")],
    "refused-mixed": lambda: _with_refused(_recs("udp4")),
    "no-sip": lambda: G.refused_traffic(1_700_000_000_000_000_000, random.Random(6))[0],
}

CAPTURES = ([f"lab:{p.parent.name}" for p in LAB] + ["lab_drops_cut"]
            + sorted(p.stem for p in FIX.glob("*.pcapng")) + list(DERIVED) + ["corpus", "truncated"])


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("compact-direct")
    out: dict[str, Path] = {f"lab:{p.parent.name}": p for p in LAB}
    out["lab_drops_cut"] = FIX / "lab_drops_cut" / "capture.pcapng.gz"
    out.update({p.stem: p for p in FIX.glob("*.pcapng")})
    for name, build in DERIVED.items():
        out[name] = G.write_records(d / f"{name}.pcapng", build())
    out["corpus"] = G.write_pcap(d / "corpus.pcap", _corpus())
    src = (FIX / "udp4.pcapng").read_bytes()
    (d / "truncated.pcapng").write_bytes(src[: len(src) * 2 // 3])  # cut inside a packet block
    out["truncated"] = d / "truncated.pcapng"
    return out


def via_frames(path, chunk_rows: int, on_truncated: str = "skip") -> tuple[list, IngestReport]:
    """The reference: compact_frame of every chunk_rows slice of iter_packets' DataFrames."""
    rep = IngestReport(source="pcap-bulk", path=str(path))
    out = []
    for df in fast.iter_packets(path, rep, chunk_rows=chunk_rows, on_truncated=on_truncated, progress=False):
        for a in range(0, len(df), chunk_rows):
            out.append(compact_frame(df.iloc[a:a + chunk_rows]))
    return out, rep


def direct(path, chunk_rows: int, on_truncated: str = "skip") -> tuple[list, IngestReport]:
    rep = IngestReport(source="pcap-bulk", path=str(path))
    return list(fast.iter_compact(path, rep, chunk_rows=chunk_rows, on_truncated=on_truncated,
                                  progress=False)), rep


def assert_same_chunk(got: dict, want: dict, where: str) -> None:
    assert list(got) == list(want), where
    for k, w in want.items():
        g = got[k]
        assert type(g) is type(w), (where, k, type(g), type(w))
        if isinstance(w, np.ndarray):
            assert g.dtype == w.dtype, (where, k, g.dtype, w.dtype)
            assert g.shape == w.shape and np.array_equal(g, w), (where, k)
        else:
            assert g == w, (where, k)


def assert_same(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), (what, len(got), len(want))
    for i, ((g, gd), (w, wd)) in enumerate(zip(got, want)):
        assert gd == wd, (what, i, "dropped")
        assert_same_chunk(g, w, f"{what} chunk {i}")


def account(rep: IngestReport) -> dict:
    return dataclasses.asdict(rep)


@pytest.mark.parametrize("chunk_rows", [7, 1000, chunks.CHUNK_ROWS])
@pytest.mark.parametrize("name", CAPTURES)
def test_direct_compact_equals_compact_frame(captures, name, chunk_rows):
    path = captures[name]
    want, rep_want = via_frames(path, chunk_rows)
    got, rep_got = direct(path, chunk_rows)
    assert_same(got, want, f"{name} chunk_rows={chunk_rows}")
    assert all(c["n"] + d <= chunk_rows for c, d in got)
    assert account(rep_got) == account(rep_want)
    if name == "no-sip":
        assert got == [] and rep_got.read > 0
    elif name != "truncated":
        assert sum(c["n"] for c, _ in got) > 0


def test_the_captures_cover_what_they_should(captures):
    """The variety the comparison relies on is really there."""
    seen = {"transports": set(), "ipv6": False, "responses": False, "no_cm": False}
    for name in CAPTURES:
        for c, _ in direct(captures[name], 1 << 20)[0]:
            seen["transports"].update(c["transports"])
            seen["ipv6"] |= any(e.startswith("[") for e in c["endpoints"])
            seen["responses"] |= bool((c["method"] < 0).any())
            addrs = [e.rsplit(":", 1)[0] for e in c["endpoints"]]
            seen["addresses"] = max(seen.get("addresses", 0), len(set(addrs)))
            seen["no_cm"] |= "" in c["strings"]
    assert seen["transports"] == {"udp", "tcp", "ws"}
    assert seen["ipv6"] and seen["responses"] and seen["no_cm"] and seen["addresses"] >= 3
    df = next(fast.iter_packets(captures["corpus"], chunk_rows=1 << 20, progress=False))
    assert df["call_id"].str.contains("\ufffd", regex=False).any()  # invalid UTF-8 replaced
    assert len(LAB) >= 1


def with_clock_check(path, want: list, rep: IngestReport) -> tuple[list, IngestReport]:
    """The reference chunks with the clock check of the in-memory path applied to all their rows
    at once (produce applies it chunk by chunk, one chunk behind: the same stamps)."""
    from sipperf.ingest.clock import ClockCheck, file_time_ns

    clock = ClockCheck(file_time_ns(path))
    rows = [c for c, _ in want if c["n"]]
    if rows:
        ts = clock.apply(np.concatenate([c["ts"] for c in rows]), np.concatenate([c["iface"] for c in rows]),
                         np.concatenate([c["frame"] for c in rows]))
        a = 0
        for c in rows:
            c["ts"] = ts[a:a + c["n"]]
            a += c["n"]
    clock.account(path, rep)
    return want, rep


@pytest.mark.parametrize("chunk_rows", [7, 1000, chunks.CHUNK_ROWS])
def test_produce_gives_the_old_messages(captures, chunk_rows):
    """chunks.produce (what the reader process, the inline engine and Dask workers run), with the
    clock check the in-memory path makes."""
    for name in ("lab_drops_cut", "tcp-swapped", "hep3-tcp-ipv6", "no-sip"):
        path = captures[name]
        msgs = list(chunks.produce(path, chunk_rows=chunk_rows))
        want, rep = with_clock_check(path, *via_frames(path, chunk_rows))
        assert [m[0] for m in msgs] == ["chunk"] * len(want) + ["end"]
        assert_same([(m[1], m[2]) for m in msgs[:-1]], want, name)
        assert account(msgs[-1][1]) == account(rep)


def test_truncated_raise_is_the_same_error(captures):
    errors = []
    for read in (via_frames, direct):
        with pytest.raises(IngestError) as e:
            read(captures["truncated"], 7, on_truncated="raise")
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "packet" in errors[0]


def _builder(path) -> tuple:
    """The reader's builder (every column kept) and state after the whole capture."""
    rep = IngestReport(source="x")
    (b, state), = fast._read(path, rep, chunk_rows=1 << 40, on_truncated="skip", progress=False,
                             strings=tuple(fast._STR_COLS), cut=lambda b, s: (b, s))
    return b, state


@pytest.mark.parametrize("name", ["udp4", "tcp4", "corpus", "hep3-two-agents"])
def test_rows_without_call_id_are_dropped_and_counted(captures, name):
    """Call-IDs nulled and blanked, CSeq numbers nulled in the reader's own pieces (it never
    emits such rows: it skips the message): compact() drops and counts the rows without
    Call-ID, and writes the absent CSeq, as compact_frame does, for any row range."""
    b, state = _builder(captures[name])
    rng = random.Random(11)
    for v in b.ints["cseq"]:
        v[::3] = fast.ps.NULL  # every third row: CSeq number absent
    pieces = []
    for p in b.strs["call_id"]:
        vals = p.to_pylist()
        for i in range(len(vals)):
            r = rng.random()
            vals[i] = None if r < 0.1 else "" if r < 0.2 else vals[i]
        pieces.append(pa.array(vals, pa.large_string()))
    b.strs["call_id"] = pieces
    df = b.frame(state)
    total = 0
    for start, stop in [(0, None), (0, 7), (3, 40), (b.rows - 5, b.rows), (b.rows // 2, b.rows + 100)]:
        got = b.compact(state, start, stop)
        want = compact_frame(df.iloc[start:stop])
        assert got[1] == want[1]
        assert_same_chunk(got[0], want[0], f"{name} rows {start}:{stop}")
        total += got[1]
    assert total > 0
    # every row without Call-ID: an empty chunk, all rows counted
    b.strs["call_id"] = [pa.array([None if i % 2 else "" for i in range(len(p))], pa.large_string())
                         for p in b.strs["call_id"]]
    b._joined = None
    got, want = b.compact(state, 0, 50), compact_frame(b.frame(state).iloc[0:50])
    assert got[1] == want[1] == 50
    assert_same_chunk(got[0], want[0], f"{name}: no Call-ID at all")


def test_empty_builder_is_compact_frame_of_the_empty_table():
    got, want = fast._Builder().compact(fast._State()), compact_frame(fast.empty_packets())
    assert got[1] == want[1] == 0
    assert_same_chunk(got[0], want[0], "empty")


def test_consumer_runs_with_the_collector_on(captures):
    """The reader switches the cyclic collector off only while it reads."""
    assert gc.isenabled()
    states = [gc.isenabled() for _ in fast.iter_compact(captures["udp4"], chunk_rows=7, progress=False)]
    assert states and all(states) and gc.isenabled()
