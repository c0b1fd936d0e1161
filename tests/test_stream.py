"""The streaming engine (:mod:`sipperf.analysis.stream`) gives the in-memory path's numbers.

Every test capture is analysed both ways and every table ``sipperf analyze`` writes is compared
exactly (no tolerance: the means are computed in the same order or order-independently, the
medians and percentiles are exact order statistics).  The streaming side is run with tiny
chunks, batches and horizons, so that transactions are closed and processed batch by batch
while the capture is still being read -- the situation of a large capture.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.analysis import Analysis, analyze as _analyze
from sipperf.ingest import capture_sets
from sipperf.ingest.capture import compact
from sipperf.analysis import stream
from sipperf.ingest.capture.read import capture_stem
from sipperf.ingest.capture.fast import read_packets
from sipperf.ingest.pairing.vantage import classify
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
CAPTURES = sorted(p.name for p in FIX.glob("*.pcapng"))
TABLES = ("components.csv", "calls.csv", "transactions.csv", "counts.csv")


def _same_frame(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    assert list(a.columns) == list(b.columns), what
    assert a.shape == b.shape, what
    for c in a.columns:
        x, y = a[c].to_numpy(dtype=object), b[c].to_numpy(dtype=object)
        for i, (u, v) in enumerate(zip(x, y)):
            both_nan = pd.isna(u) and pd.isna(v) if not isinstance(u, (list, dict)) else False
            assert both_nan or u == v, f"{what}: column {c} row {i}: {u!r} != {v!r}"


def analyze(paths, out: Path, **kw) -> Analysis:
    """:func:`sipperf.analysis.analyze` with its tables written into ``out`` (what the command does)."""
    res = _analyze(paths, **kw)
    res.write(out)
    return res


def _in_memory(path: Path, tmp: Path) -> Analysis:
    return analyze([path], tmp / "mem", stream=False)


@pytest.mark.parametrize("name", CAPTURES)
def test_streaming_equals_in_memory(name, tmp_path):
    path = FIX / name
    ref = _in_memory(path, tmp_path)
    packets, _ = read_packets(path)
    packets = packets[packets["call_id"].notna()].reset_index(drop=True)
    v, _ = classify(packets)
    if v.kind == "b2bua":
        with pytest.raises(stream.NotStreamable):
            stream.stream_capture([path], run_id=capture_stem(path), label=str(path), figures=False)
        res = analyze([path], tmp_path / "s", stream=True)  # falls back, says so
        assert res.engine == "in memory"
        return
    # tiny chunks and batches, and a horizon just longer than the longest silence inside a
    # transaction of this capture: groups close while the capture is being read, none too early
    g = packets.assign(q=packets["cseq"].fillna(-1)).sort_values("ts_ns").groupby(["call_id", "q"])["ts_ns"]
    gap_ns = int(g.diff().max()) if len(packets) > 1 else 0
    span_ns = int(packets["ts_ns"].max() - packets["ts_ns"].min())
    horizon = (gap_ns + 1_000_000) / 1e9
    out = stream.stream_capture([path], run_id=capture_stem(path), label=str(path), figures=False,
                                chunk_rows=7, batch_rows=11, horizon_s=horizon, vantage=v)
    st = out.report.details["streaming"]
    assert st["late_rows"] == 0 and st["closed_early_rows"] == 0
    if name in ("udp4.pcapng", "udp6.pcapng", "prack.pcapng", "hops2.pcapng"):
        assert st["batches"] > 2, "the test exercises the closing of groups batch by batch"
    _same_frame(ref.components, out.components, "components")
    _same_frame(ref.calls, out.calls, "calls")
    _same_frame(ref.transactions, out.transactions, "transactions")
    _same_frame(ref.counts, out.counts, "counts")
    if ref.components_by_hop is not None:
        _same_frame(ref.components_by_hop, out.components_by_hop, "components_by_hop")
    r = ref.report.files[0]
    for k in ("vantage", "messages_account"):
        assert json.dumps(r.details[k], sort_keys=True, default=str) == \
            json.dumps(out.report.details[k], sort_keys=True, default=str), k
    assert r.notes == out.report.notes
    assert (r.read, r.parsed, dict(r.skipped), r.messages) == \
        (out.report.read, out.report.parsed, dict(out.report.skipped), out.report.messages)


@pytest.mark.parametrize("name", ["udp4.pcapng", "retrans.pcapng", "hops2.pcapng", "endpoint.pcapng"])
def test_streamed_command_writes_the_same_files(name, tmp_path):
    """``analyze(stream=True)`` with its defaults: the CSV files are byte for byte the in-memory ones,
    and report.json differs only by the streaming engine's own section."""
    path = FIX / name
    _in_memory(path, tmp_path)
    res = analyze([path], tmp_path / "str", stream=True)
    assert res.timeline is None and res.engine.startswith("streaming")
    for t in TABLES:
        assert (tmp_path / "mem" / t).read_bytes() == (tmp_path / "str" / t).read_bytes(), t
    a = json.loads((tmp_path / "mem" / "report.json").read_text())
    b = json.loads((tmp_path / "str" / "report.json").read_text())
    b.pop("streaming")
    for f in b["files"]:
        f.pop("streaming", None)
    for f in b["summary"]["files"]:
        f.pop("engine", None)
    assert a == b


def test_late_rows_are_counted_not_lost(tmp_path):
    """A horizon shorter than a transaction: its later rows form a new group; the report counts
    them, every message is still accounted for, nothing crashes."""
    path = FIX / "retrans.pcapng"
    ref = _in_memory(path, tmp_path)
    out = stream.stream_capture([path], run_id="r", label=str(path), figures=False, chunk_rows=5,
                                batch_rows=5, horizon_s=1e-4, prefix_rows=10)
    st = out.report.details["streaming"]
    assert st["late_rows"] > 0
    assert any("silent for more than" in n for n in out.report.notes)
    acc = out.report.details["messages_account"]
    assert acc["in_timeline"] + sum(acc["not_in_timeline"].values()) == acc["sip_messages"]
    assert out.report.balanced
    # the same messages, whatever their pairing
    assert out.counts["messages"].sum() == ref.counts["messages"].sum()


def test_open_rows_are_bounded(tmp_path):
    path = FIX / "udp4.pcapng"
    out = stream.stream_capture([path], run_id="r", label=str(path), figures=False, chunk_rows=4,
                                batch_rows=4, max_open_rows=10, prefix_rows=8)
    assert out.report.details["streaming"]["closed_early_rows"] > 0
    assert out.report.balanced


def test_a_capture_cut_shorter_while_read_is_a_clear_error(tmp_path, monkeypatch):
    """The reader process maps a large file: one cut shorter under it (overwritten in place) ends
    that process (SIGBUS), and the analysis says so as an IngestError naming the file, not as a
    crash.  A DERIVED capture: the fixture udp4.pcapng repeated to 200 MB, shifted in time; with
    one chunk read ahead the reader waits after about 4 x 65,536 packets (130 MB), then the file
    is cut to 1 MB."""
    import os

    import capgen
    from sipperf.ingest.capture import chunks

    recs = capgen.records(FIX / "udp4.pcapng")
    span = recs[-1][0] - recs[0][0] + 1_000_000
    copies = (200 << 20) // (FIX / "udp4.pcapng").stat().st_size + 1
    path = capgen.write_records(tmp_path / "big.pcapng",
                                [(ts + k * span, link, data) for k in range(copies) for ts, link, data in recs])
    monkeypatch.setattr(chunks, "READ_AHEAD", 1)
    it = chunks.produce_in_helper(str(path))
    assert next(it)[0] == "chunk"
    os.truncate(path, 1 << 20)
    with pytest.raises(IngestError, match="cut shorter while it was being read") as e:
        for _ in it:
            pass
    assert str(path) in str(e.value)


def _fnv_fmix(b: bytes) -> int:
    """Independent reference of compact.hash_strings (FNV-1a 64, murmur3 fmix64), in Python."""
    if not b:
        return 0
    m = (1 << 64) - 1
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & m
    for k in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        h ^= h >> 33
        h = (h * k) & m
    h ^= h >> 33
    return h or 1


def test_hash_strings_reference():
    vals = ["1-14759@127.0.0.1", "", None, "ünïcode-Call-ID", "z9hG4bK" * 40]
    got = compact.hash_strings(pd.Series(vals, dtype="string"))
    want = [0 if v is None else _fnv_fmix(v.encode()) for v in vals]
    assert got.tolist() == want
    # a non-Arrow (Python object) column gives the same
    assert compact.hash_strings(pd.Series(vals, dtype=object)).tolist() == want


@pytest.mark.parametrize("seed", range(6))
def test_sorting_only_the_disordered_groups_equals_the_full_sort(seed):
    """A close (and the set-aside groups at the end) sort rows by group and re-sort only the groups
    holding an out-of-order pair: the same order as sorting every row by (group, ts, frame, seq),
    on rows where a few groups are disordered in time, ties in ts, several messages per frame,
    and (odd seeds) rows of one frame out of seq order."""
    rng = np.random.default_rng(seed)
    n = 5000
    grp = rng.integers(0, 400, n)
    gh = grp.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    seq = np.arange(n, dtype=np.int64)
    ts = np.sort(rng.integers(0, 3000, n)).astype(np.int64)
    frame = np.arange(n, dtype=np.int64) // rng.integers(1, 3)
    for g in rng.choice(400, 5 * seed, replace=False):   # seed 0: in order, no group to sort
        rows = np.flatnonzero(grp == g)
        ts[rows] = ts[rows][::-1]
    if seed % 2:
        ts[:] = 7
        frame[:] = 3
        seq = rng.permutation(n).astype(np.int64)
    o = {"ts": ts, "frame": frame, "seq": seq}
    stable = np.argsort(gh, kind="stable")
    same = gh[stable][1:] == gh[stable][:-1]
    bad = stream._out_of_order(stable, same, o)
    assert bool(bad.any()) == (seed > 0)
    want = np.lexsort((seq, frame, ts, gh))
    assert np.array_equal(stream._sort_groups(stable, same, bad, o), want)
    assert np.array_equal(stable, np.argsort(gh, kind="stable"))  # the caller's order untouched
    got, got_same = stream._group_order(gh, o)
    assert np.array_equal(got, want) and np.array_equal(got_same, same)


@pytest.mark.parametrize("seed", range(8))
def test_sorting_inside_groups_equals_lexsort(seed):
    """The call records' order: a stable sort by group, then each group sorted in place by
    (first, frame, egress-only, seq) -- small groups by insertion, large ones key by key -- is
    ``np.lexsort((seq, eo, frame, first, group))``, ties included."""
    from sipperf.analysis import stream_kernels as K

    rng = np.random.default_rng(seed)
    n = 3000
    n_groups = 20 if seed < 4 else 400    # groups of ~150 rows (sorted key by key), or of ~8
    grp = rng.integers(0, n_groups, n)
    if seed % 2:
        grp = np.sort(grp)
    first = rng.integers(0, 5, n).astype(np.int64)
    frame = rng.integers(0, 3, n).astype(np.int64)
    eo = rng.integers(0, 2, n).astype(bool)
    seq = rng.permutation(n).astype(np.int64)
    if seed % 4 == 0:
        first[:] = 1
        frame[:] = 1
    order = np.argsort(grp, kind="stable")
    g = grp[order]
    gstart = np.append(np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]])), n).astype(np.int64)
    assert (np.diff(gstart).min() > K.SMALL_GROUP) == (seed < 4)
    K.sort_within_groups(order, gstart, first, frame, eo.view(np.int8), seq)
    assert np.array_equal(order, np.lexsort((seq, eo, frame, first, grp)))


@pytest.mark.parametrize("seed", range(4))
def test_one_hop_batch_means_order_is_the_row_order(seed):
    """With one hop the engine takes the timeline's row order (instant, seq) for the batch means
    instead of sorting again by the instant as float64 first: the same order, float ties (ns
    instants near 1.7e18 share a float64 every 256 ns) included."""
    rng = np.random.default_rng(seed)
    n = 20_000
    t = 1_700_000_000_000_000_000 + rng.integers(0, 5_000, n).astype(np.int64)   # many float ties
    seq = rng.permutation(n).astype(np.int64)
    hop_i = np.zeros(n, np.int8)
    assert len(np.unique(t.astype(np.float64))) < len(np.unique(t))
    assert np.array_equal(stream._ci_order(t, hop_i, seq), np.lexsort((seq, t, hop_i)))


def test_capture_sets_groups_ring_buffer_names(tmp_path):
    names = ["x_00002_20261123190100.pcapng", "x_00001_20261123190000.pcapng", "x_00010_20261123190900.pcapng",
             "y_00001_20261123190000.pcapng", "plain.pcapng", "x_00003_20261123190200.pcap"]
    items = [(tmp_path / n, "pcap") for n in names] + [(tmp_path / "log.txt", "thesis_log")]
    out = capture_sets(items)
    sets = [i for i in out if i[1] == "pcap-set"]
    assert len(sets) == 1
    assert [p.name for p in sets[0][0]] == ["x_00001_20261123190000.pcapng", "x_00002_20261123190100.pcapng",
                                           "x_00010_20261123190900.pcapng"]
    singles = sorted(p.name for p, k in out if k != "pcap-set")
    assert singles == ["log.txt", "plain.pcapng", "x_00003_20261123190200.pcap", "y_00001_20261123190000.pcapng"]


def test_stream_falls_back_to_memory_for_several_captures(tmp_path):
    res = analyze([FIX / "udp4.pcapng", FIX / "udp6.pcapng"], tmp_path / "o", stream=True)
    assert res.engine == "in memory" and res.timeline is not None
    assert json.loads((tmp_path / "o" / "report.json").read_text())["summary"]["files"][0].get("engine") is None


def test_fuzzed_captures_stream_like_in_memory(tmp_path):
    """The fuzz corpus of tests/test_fuzz_analyze.py (mutated real captures): streamed, every case
    ends like the in-memory run -- the same IngestError message, or the same tables."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    import test_fuzz_analyze as F

    cases = [c for c in F.generate(editcap=False) if c.kind == "capture"]
    rng = random.Random(5)
    cases = rng.sample(cases, min(len(cases), 120))
    compared = errors = 0
    for i, c in enumerate(cases):
        p = tmp_path / f"c{i}{c.suffix}"
        p.write_bytes(c.data)
        try:
            ref = analyze([p], tmp_path / f"m{i}", stream=False)
        except IngestError as e:
            ref = e
        except Exception:  # noqa: BLE001 - an in-memory crash is the fuzz test's finding, not this one's
            continue
        try:
            got = analyze([p], tmp_path / f"s{i}", stream=True)
        except IngestError as e:
            got = e
        if isinstance(ref, IngestError) or isinstance(got, IngestError):
            assert type(ref) is type(got) and str(ref) == str(got), f"{c.name}: {ref!r} vs {got!r}"
            errors += 1
            continue
        ts = read_packets(p)[0]["ts_ns"].to_numpy()
        if len(ts) and (ts.min() < 0 or float(ts.max()) - float(ts.min()) > 2.0 ** 53):
            # a bit flip made a timestamp negative or 100+ days off: the in-memory path's float
            # instants (relative to the earliest, calls._instants) then round or wrap around;
            # the streaming path keeps int64 ns -- the two are not expected to agree
            continue
        for t in TABLES:
            assert (tmp_path / f"m{i}" / t).read_bytes() == (tmp_path / f"s{i}" / t).read_bytes(), f"{c.name}: {t}"
        compared += 1
    assert compared > 30 and errors > 5


# ------------------------------------------------------------------ ring buffers (many files)
def _ring(src: Path, n_files: int, where: Path) -> list[Path]:
    """``src`` cut into ``n_files`` ring-buffer files by Wireshark's own ``editcap -c`` (it names
    the files as ``dumpcap -b`` does: PREFIX_NNNNN_YYYYmmddHHMMSS.pcapng)."""
    import shutil
    import subprocess

    if shutil.which("editcap") is None:
        pytest.skip("editcap (Wireshark) is not installed")
    where.mkdir()
    per_file = -(-read_packets(src)[1].read // n_files)
    subprocess.run(["editcap", "-c", str(per_file), str(src), str(where / "ring.pcapng")], check=True,
                   capture_output=True)
    files = sorted(where.glob("ring_*.pcapng"))
    assert len(files) == n_files
    return files


@pytest.mark.parametrize("name,n_files,engines", [
    ("udp4.pcapng", 4, ("inline", "dask")),
    ("retrans.pcapng", 3, ("inline",)),
    ("hops2.pcapng", 3, ("inline", "dask")),
])
def test_ring_buffer_equals_the_merged_capture(name, n_files, engines, tmp_path):
    """A capture cut into ring-buffer files (calls spanning the cuts), analysed as a directory --
    streamed serially, and on Dask with one local worker -- writes the tables of the uncut
    capture read in memory, byte for byte; report.json accounts for every file."""
    src = FIX / name
    _in_memory(src, tmp_path)
    files = _ring(src, n_files, tmp_path / "ring")
    for eng in engines:
        kw = dict(stream=True, workers=0) if eng == "inline" else dict(workers=1, progress=False)
        res = analyze([tmp_path / "ring"], tmp_path / eng, **kw)
        assert res.engine == f"streaming ({eng})"
        for t in TABLES:
            assert (tmp_path / "mem" / t).read_bytes() == (tmp_path / eng / t).read_bytes(), f"{eng}: {t}"
        rep = json.loads((tmp_path / eng / "report.json").read_text())
        cs = rep["summary"]["files"][0]["capture_set"]
        assert [Path(f["path"]).name for f in cs["files"]] == [f.name for f in files]
        assert sum(f["read"] for f in cs["files"]) == read_packets(src)[1].read
        assert cs["pairing"]["transactions_across_files"] > 0, "the cuts fall inside transactions"
