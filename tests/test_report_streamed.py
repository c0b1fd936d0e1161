"""``sipperf report`` and ``sipperf fit`` read every capture ``analyze`` reads -- streamed or in
memory, one file or a ring buffer -- and print the same numbers either way.

A streamed capture holds no timeline; the report measures the streaming engine's caller-side
rows instead (:meth:`sipperf.analysis.Analysis.measure_frame`).  Every file the report writes
(runs.csv, components_ci.csv, the tables, fit.json) is compared byte for byte between the two
engines: on the real test captures (streaming forced), on a capture above the streaming
threshold through the command line (default against ``--in-memory``), split by a ``gap:`` rule,
and cut into ring-buffer files.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capgen import records, write_records
from sipperf.analysis import analyze
from sipperf.analysis.stream import STREAM_MIN_BYTES
from sipperf.report import build_report

FIX = Path(__file__).parent / "fixtures"
LAB = FIX / "overload_pairing" / "capture.pcapng.gz"
FILES = ("runs.csv", "components_ci.csv", "components.csv", "calls.csv", "transactions.csv", "counts.csv",
         "fit.json")


def _same_files(a: Path, b: Path, files=FILES) -> None:
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def _both(paths, tmp: Path, **kw) -> tuple:
    mem = build_report(paths, tmp / "mem", stream=False, n_boot=20, **kw)
    st = build_report(paths, tmp / "str", stream=True, n_boot=20, **kw)
    return mem, st


@pytest.mark.parametrize("cap", ["udp4.pcapng", "retrans.pcapng", "hops2.pcapng", "endpoint.pcapng",
                                 "overload_pairing/capture.pcapng.gz"])
def test_streamed_report_equals_in_memory(cap, tmp_path):
    mem, st = _both([FIX / cap], tmp_path, html=True)
    assert all(r.measure is not None and not r.error for r in mem.runs + st.runs)
    _same_files(tmp_path / "mem", tmp_path / "str")
    html = (tmp_path / "str" / "index.html").read_text()
    assert "No ladder diagrams" in html and "slowest calls" not in html
    assert "No ladder diagrams" not in (tmp_path / "mem" / "index.html").read_text()
    rows, tl = st.runs[0].timeline, mem.runs[0].timeline
    caller = tl[(tl["hop"] == 1).to_numpy()] if "hop" in tl.columns else tl
    assert "src" not in rows.columns and len(rows) == len(caller)


def test_streamed_rows_are_the_caller_side_timeline():
    """The rows a streamed analysis keeps are the in-memory timeline's caller side, row for row."""
    for cap in ("hops2.pcapng", "overload_pairing/capture.pcapng.gz", "endpoint.pcapng"):
        mem = analyze([FIX / cap], stream=False).timeline
        if "hop" in mem.columns:
            mem = mem[(mem["hop"] == 1).to_numpy()].reset_index(drop=True)
        st = analyze([FIX / cap], stream=True, measure_rows=True)
        assert st.timeline is None and analyze([FIX / cap], stream=True).rows is None
        rows = st.measure_frame()
        for c in ("t_arr", "t_dep", "cseq", "status"):
            assert rows[c].astype("Int64").equals(mem[c].astype("Int64")), (cap, c)
        for c in ("msg_type", "disposition", "kind", "method", "cseq_method"):
            assert (rows[c].astype("string").fillna("") == mem[c].astype("string").fillna("")).all(), (cap, c)
        assert rows["dropped"].astype(bool).tolist() == mem["dropped"].fillna(False).astype(bool).tolist()
        # one hash per Call-ID: the same partition of the rows into calls
        a = mem["call_id"].astype("string").factorize()[0]
        b = rows["call_id"].factorize()[0]
        assert (a == b).all(), cap


def test_gap_split_of_a_streamed_capture(tmp_path):
    mem, st = _both([FIX / "udp4.pcapng"], tmp_path, html=False, group_by="gap:0.08")
    assert len(mem.runs) == len(st.runs) > 5
    _same_files(tmp_path / "mem", tmp_path / "str")


def _ring(src: Path, n: int, where: Path) -> Path:
    """``src`` cut by Wireshark's ``editcap -c`` into ``n`` files named as ``dumpcap -b`` names them."""
    if shutil.which("editcap") is None:
        pytest.skip("editcap (Wireshark) is not installed")
    where.mkdir()
    total = len(records(src))
    subprocess.run(["editcap", "-c", str(-(-total // n)), str(src), str(where / "ring.pcapng")], check=True,
                   capture_output=True)
    assert len(list(where.glob("ring_*.pcapng"))) == n
    return where


def test_ring_buffer_is_one_run(tmp_path):
    """The files of a ring buffer form one run (not one run per file), streamed or in memory, with
    the numbers of the uncut capture."""
    ring = _ring(FIX / "udp4.pcapng", 3, tmp_path / "ring")
    mem, st = _both([ring], tmp_path, html=False)
    assert [r.label for r in mem.runs] == [r.label for r in st.runs] == ["ring"]
    assert st.runs[0].account.details["streaming"]["files"] == 3
    _same_files(tmp_path / "mem", tmp_path / "str")
    whole = build_report([FIX / "udp4.pcapng"], tmp_path / "whole", stream=False, n_boot=20, html=False)
    a, b = whole.runs[0].measure, st.runs[0].measure
    for k in ("n_messages", "calls", "lam_pps", "lam_cps", "pdr", "steady_n", "warmup_n"):
        assert getattr(a, k) == getattr(b, k), k
    assert a.fit_input.q_mean_us == b.fit_input.q_mean_us


# ------------------------------------------------------------------ above the streaming threshold
def replicate(src: Path, dst: Path, min_bytes: int) -> tuple[Path, int]:
    """A capture of at least ``min_bytes``: the real lab capture ``src`` (SIPp Call-IDs
    ``N-8309@...``) repeated one copy after the other, each shifted by the capture's span plus
    one second, its Call-IDs renamed ``N-cKKK@...`` (same length, so every packet keeps its size).
    A DERIVATION of a real capture, written by the test and deleted with its directory.  Returns
    the file and the number of copies."""
    if src.suffix == ".gz":
        plain = dst.with_name("source.pcapng")
        plain.write_bytes(gzip.decompress(src.read_bytes()))
        src = plain
    recs = records(src)
    t0, t1 = recs[0][0], max(r[0] for r in recs)
    step = t1 - t0 + 1_000_000_000
    size = sum(len(d) for _, _, d in recs)
    copies = -(-min_bytes // size) + 1
    out = []
    for k in range(copies):
        tag = b"-c%03d@" % k
        out += [(ts + k * step, link, re.sub(rb"-8309@", tag, d)) for ts, link, d in recs]
    return write_records(dst, out), copies


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    return replicate(LAB, d / "lab_copies.pcapng", STREAM_MIN_BYTES)


def _cli(*args) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("sipperf")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_report_and_fit_above_the_threshold(big, tmp_path):
    big, copies = big
    """``sipperf report`` / ``sipperf fit`` on a capture of 64 MB or more: streamed by default (the
    crash of issue 21: "'NoneType' object has no attribute 'columns'"), the same files and JSON as
    ``--in-memory``."""
    assert big.stat().st_size >= STREAM_MIN_BYTES
    a = _cli("report", big, "--out", tmp_path / "default", "--bootstrap", 20)
    assert a.returncode == 0, a.stderr
    b = _cli("report", big, "--out", tmp_path / "mem", "--bootstrap", 20, "--in-memory")
    assert b.returncode == 0, b.stderr
    rep = json.loads((tmp_path / "default" / "report.json").read_text())
    assert rep["runs"][0]["account"]["streaming"]["engine"].startswith("streaming")
    assert "streaming" not in json.loads((tmp_path / "mem" / "report.json").read_text())["runs"][0]["account"]
    _same_files(tmp_path / "default", tmp_path / "mem")
    runs = (tmp_path / "default" / "runs.csv").read_text()
    assert "lab_copies" in runs
    f1 = _cli("fit", big, "--bootstrap", 20)
    f2 = _cli("fit", big, "--bootstrap", 20, "--in-memory")
    assert f1.returncode == 0 and f2.returncode == 0, f1.stderr + f2.stderr
    assert json.loads(f1.stdout) == json.loads(f2.stdout)
    # the pairing at scale: each copy of the real run is paired as the run alone (the copies'
    # first copies dropped by the kernel are drops, their retransmissions relayed)
    import pandas as pd

    one = build_report([LAB], tmp_path / "one", stream=False, n_boot=0, html=False).runs[0].measure
    many = pd.read_csv(tmp_path / "default" / "runs.csv")
    assert one.dropped > 300 and int(many["dropped"].iloc[0]) == copies * one.dropped


@pytest.mark.slow
def test_ring_buffer_above_the_threshold(big, tmp_path):
    big, _ = big
    """The big capture cut into four ring-buffer files: one run, streamed, the numbers of the
    uncut capture in memory."""
    ring = _ring(big, 4, tmp_path / "ring")
    a = _cli("report", ring, "--out", tmp_path / "ring_out", "--bootstrap", 20)
    assert a.returncode == 0, a.stderr
    b = _cli("report", big, "--out", tmp_path / "mem", "--bootstrap", 20, "--in-memory")
    assert b.returncode == 0, b.stderr
    import pandas as pd

    x = pd.read_csv(tmp_path / "ring_out" / "runs.csv")
    y = pd.read_csv(tmp_path / "mem" / "runs.csv")
    assert len(x) == len(y) == 1
    cols = [c for c in y.columns if c not in ("run", "inputs")]
    pd.testing.assert_frame_equal(x[cols], y[cols])
