"""`sipperf analyze` end to end, bad input, and the notebook under papermill."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sipperf.cli import main
from sipperf.ingest.thesis_log import synthetic_timeline, write_thesis_log


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
                        "-p", "OUT_DIR", str(tmp_path / "res"), "--cwd", str(tmp_path), "-k", "python3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    comp = pd.read_csv(tmp_path / "res" / "components.csv")
    assert comp.set_index("msg_type").loc["ALL", "count"] == 60
