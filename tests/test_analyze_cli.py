"""`sipperf analyze` end to end, bad input, and the notebook under papermill."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sipperf.cli import main
from sipperf.ingest import load
from sipperf.ingest.thesis_logs.read import synthetic_timeline, write_thesis_log


def test_analyze_thesis_log_and_pcap(root, tmp_path):
    fx = root / "tests" / "fixtures"
    out = tmp_path / "out"
    rc = main(["analyze", str(fx / "thesis_small.log"), str(fx / "udp4.pcapng"), "--out", str(out)])
    assert rc == 0
    comp = pd.read_csv(out / "components.csv")
    assert comp.msg_type.iloc[-1] == "ALL"
    assert {"INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"} <= set(comp.msg_type)
    for c in ("k_stack", "k_sockq", "k_copy", "k_rcv", "t_sip1", "t_sip2", "t_sip", "k_snd", "sojourn"):
        assert {f"{c}_count", f"{c}_mean", f"{c}_median", f"{c}_p99"} <= set(comp.columns)
    # the thesis log alone fills K_stack for its 60 messages; the pcap adds sojourn-only rows
    allr = comp.set_index("msg_type").loc["ALL"]
    assert allr["k_stack_count"] == 60 and allr["sojourn_count"] > 60
    calls = pd.read_csv(out / "calls.csv")
    assert {"SRD_successful", "SRD_failed", "SDD_successful", "SDD_failed", "SDT_successful", "SER", "SEER",
            "ISA", "SCR", "RRD", "IRA", "PDR"} <= set(calls.metric)
    rep = json.loads((out / "report.json").read_text())
    assert rep["balanced"] and len(rep["files"]) == 2
    assert {f["source"] for f in rep["files"]} >= {"thesis_log"}
    assert (out / "components.png").stat().st_size > 1000


def test_analyze_means_match_direct_computation(tmp_path):
    tl = synthetic_timeline(50, seed=13)
    p = tmp_path / "x.log"
    write_thesis_log(tl, p)
    out = tmp_path / "o"
    assert main(["analyze", str(p), "--out", str(out), "--no-figures"]) == 0
    comp = pd.read_csv(out / "components.csv").set_index("msg_type")
    # reference: the synthetic timeline floored to µs (the log's resolution), computed directly
    us = {c: tl[c].to_numpy("int64") // 1000 for c in ("t_arr", "t_dep", "t_stack")}
    assert comp.loc["ALL", "sojourn_mean"] == pytest.approx(np.mean(us["t_dep"] - us["t_arr"]))
    inv = (tl.msg_type == "INVITE").to_numpy()
    assert comp.loc["INVITE", "k_stack_median"] == pytest.approx(np.median((us["t_stack"] - us["t_arr"])[inv]))


def test_analyze_unusable_input(tmp_path, capsys):
    junk = tmp_path / "junk.txt"
    junk.write_text("no sip here\n")
    rc = main(["analyze", str(junk), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc != 0 and "junk.txt" in err and "no usable messages" in err
    rc = main(["analyze", str(tmp_path / "nope.log"), "--out", str(tmp_path / "o")])
    assert rc != 0 and "no such file" in capsys.readouterr().err


def test_analyze_strict_names_line(root, tmp_path, capsys):
    rc = main(["analyze", str(root / "tests/fixtures/thesis_negative.log"), "--out", str(tmp_path / "o"), "--strict"])
    assert rc == 2 and "thesis_negative.log: line 2" in capsys.readouterr().err


@pytest.mark.slow
def test_notebook_papermill(root, tmp_path):
    pytest.importorskip("papermill")
    nb = tmp_path / "nb.ipynb"
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(nb),
                    str(root / "notebooks" / "analyze_your_logs.md")], check=True, capture_output=True)
    out_nb = tmp_path / "out.ipynb"
    log = root / "tests" / "fixtures" / "thesis_small.log"
    r = subprocess.run([sys.executable, "-m", "papermill", str(nb), str(out_nb), "-p", "LOG_PATH", str(log),
                        "-p", "OUT_DIR", str(tmp_path / "res"), "-y", "CPU_FILE: null\nTHREADS: null",
                        "--cwd", str(tmp_path), "-k", "python3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    comp = pd.read_csv(tmp_path / "res" / "components.csv")
    assert comp.set_index("msg_type").loc["ALL", "count"] == 60


# ------------------------------------------------------------------ issue 13: exit codes, never a traceback
def _cli(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "sipperf.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=300, cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r


def test_cli_exit_codes_for_unusable_inputs(root, tmp_path):
    fx = root / "tests" / "fixtures"
    out = tmp_path / "o"
    fifo = tmp_path / "capture.pcapng"
    os.mkfifo(fifo)
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = [
        ([fifo, "--out", out], "a FIFO"),                         # would block a read: refused at once
        ([fx / "udp4.pcapng", "--out", afile], "not a directory"),
        ([fx / "udp4.pcapng", "--out", "/sys/sipperf-analyze-test"], "cannot write"),  # EPERM even for root
        (["/proc/self/mem", "--out", out], "cannot read"),       # open() works, read() fails (EIO)
        ([fx / "udp4.pcapng", "--out", out, "--proxy", "10.0.0.1"], "no port"),
        ([fx / "udp4.pcapng", "--out", out, "--proxy", "10.0.0.1:5060"], "no SIP message in this capture"),
    ]
    for args, msg in cases:
        r = _cli("analyze", *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
        assert str(args[0]).split("/")[-1] in r.stderr or "--proxy" in r.stderr or "--out" in r.stderr


def test_non_utf8_file_name(root, tmp_path):
    name = os.fsdecode(b"caf\xe9 log.log")  # Latin-1 bytes: not UTF-8
    p = tmp_path / name
    shutil.copy(root / "tests" / "fixtures" / "thesis_small.log", p)
    r = _cli("analyze", p, "--out", tmp_path / "o", "--no-figures")
    assert r.returncode == 0 and "caf\\xe9 log.log" in r.stdout
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["files"][0]["path"].endswith("caf\\xe9 log.log")
    bad = tmp_path / os.fsdecode(b"x\xff.log")
    bad.write_text("nothing here\n")
    r = _cli("analyze", bad, "--out", tmp_path / "o2")
    assert r.returncode == 2 and "x\\xff.log" in r.stderr


def test_lab_run_corrupt_gzip_and_meta(root, tmp_path):
    src = root / "datasets" / "lab" / "raw" / "rate-0025"
    if not src.exists():
        pytest.skip("no raw lab run in datasets/lab/raw")
    run = tmp_path / "run"
    shutil.copytree(src, run)
    data = (run / "capture.pcapng.gz").read_bytes()
    (run / "capture.pcapng.gz").write_bytes(data[: len(data) // 2])  # cut: corrupt .gz
    r = _cli("analyze", run, "--out", tmp_path / "o")
    assert r.returncode == 2 and "capture.pcapng.gz" in r.stderr and "gzip" in r.stderr
    shutil.copy(src / "capture.pcapng.gz", run / "capture.pcapng.gz")
    pl = (run / "proxy.log.gz").read_bytes()
    (run / "proxy.log.gz").write_bytes(pl[:-40] + bytes(40))  # damaged tail: CRC/stream error
    r = _cli("analyze", run, "--out", tmp_path / "o")
    assert r.returncode == 2 and "proxy.log.gz" in r.stderr
    shutil.copy(src / "proxy.log.gz", run / "proxy.log.gz")
    meta = json.loads((run / "meta.json").read_text())
    for bad, msg in (("[1, 2]", "not a JSON object"), ('{"source": "lab"}', "proxy"),
                     (json.dumps({**meta, "proxy": {"addr": "127.0.0.1", "port": "x"}}), "not a port number"),
                     ("{not json", "not a JSON object")):
        (run / "meta.json").write_text(bad)
        r = _cli("analyze", run, "--out", tmp_path / "o")
        assert r.returncode == 2 and "meta.json" in r.stderr and msg in r.stderr, (bad, r.stderr)


def test_analyze_endpoint_capture_outputs(root, tmp_path):
    r = _cli("analyze", root / "tests" / "fixtures" / "endpoint.pcapng", "--out", tmp_path / "o", "--no-figures")
    assert r.returncode == 0, r.stderr
    assert "vantage endpoint" in r.stdout and "PDR: n/a" in r.stdout
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["vantage"]["kind"] == "endpoint" and rep["summary"]["pdr_percent"] is None
    tx = pd.read_csv(tmp_path / "o" / "transactions.csv")
    assert set(tx["method"]) >= {"INVITE", "BYE"}
    comp = pd.read_csv(tmp_path / "o" / "components.csv")
    assert comp.filter(like="sojourn_count").fillna(0).to_numpy().sum() == 0  # no proxy: no sojourn


def test_analyze_multi_hop_writes_per_hop_components(root, tmp_path):
    r = _cli("analyze", root / "tests" / "fixtures" / "hops2.pcapng", "--out", tmp_path / "o", "--no-figures")
    assert r.returncode == 0, r.stderr
    assert "hop 1 127.0.0.1:15110" in r.stdout and "hop 2 127.0.0.1:15111" in r.stdout
    by = pd.read_csv(tmp_path / "o" / "components_by_hop.csv")
    allr = by[by["msg_type"] == "ALL"].set_index("hop")
    tl, _ = load([root / "tests" / "fixtures" / "hops2.pcapng"])
    for h in (1, 2):
        g = tl[tl["hop"] == h]
        soj = ((g["t_dep"] - g["t_arr"]).dropna().to_numpy(dtype="float64")) / 1e3
        assert allr.loc[h, "sojourn_count"] == len(soj)
        assert allr.loc[h, "sojourn_median"] == pytest.approx(np.median(soj))
