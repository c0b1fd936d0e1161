"""The engineer's worked example (datasets/engineer, issue 37): the files agree with each other and
the report on the shipped plain captures agrees with the lab's own counts, made without sipperf."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sipperf.thesis import datasets_dir

ENG = datasets_dir() / "engineer"


@pytest.fixture(scope="module")
def files():
    return (pd.read_csv(ENG / "runs.csv").set_index("label"), pd.read_csv(ENG / "cpu.csv").set_index("run"),
            pd.read_csv(ENG / "samples.csv"), json.loads((ENG / "machine.json").read_text()))


def test_the_collected_file_covers_every_run_and_its_whole_window(files):
    runs, cpu, samples, _ = files
    assert set(cpu.index) == set(runs.index)
    # sipperf collect ran from before the driver's first reading to after its last one (the same
    # /proc/net/udp counter): it cannot have seen fewer drops or a shorter window
    assert (cpu["socket_drops"] >= runs.loc[cpu.index, "socket_drops"]).all()
    assert (cpu["window_s"] >= runs.loc[cpu.index, "window_s"]).all()
    # the per-second rows add up to the run's row
    per = samples.groupby("run")[["socket_drops", "cpu_s"]].sum()
    assert np.allclose(per.loc[cpu.index, "socket_drops"], cpu["socket_drops"])
    assert np.allclose(per.loc[cpu.index, "cpu_s"], cpu["cpu_s"], atol=0.02)


def test_the_bisection_brackets_one_percent(files):
    runs, _, _, m = files
    lo, hi = m["bisection_bracket_cps"]
    assert lo < m["bisection_knee_cps"] < hi
    rate = runs.groupby("nominal_cps")["kernel_pdr"].mean()
    below, above = rate[rate.index <= lo + 1], rate[rate.index >= hi - 1]
    assert below.iloc[-1] < 0.01 <= above.iloc[0]


def test_the_report_on_the_plain_captures_matches_the_labs_counts(files, tmp_path):
    from sipperf.report import build_report

    runs, cpu, _, _ = files
    shipped = runs[runs["capture"].notna()]
    assert len(shipped) >= 3
    rep = build_report([ENG / c for c in shipped["capture"]], tmp_path / "r", threads=2, cpu=ENG / "cpu.csv",
                       n_boot=0, n_slowest=0, html=False)
    got = pd.read_csv(tmp_path / "r" / "runs.csv").set_index("run")
    assert not got["tracepoints"].any() and (got["vantage"] == "proxy").all()
    for label, r in shipped.iterrows():
        g = got.loc[label]
        assert g["rate_cps"] == pytest.approx(r["rate_cps"], rel=0.01)           # dpkt's INVITE rate
        assert g["cpu_share"] == pytest.approx(cpu.loc[label, "cpu_share"])       # the collected row, carried
        assert g["kernel_socket_drops"] == cpu.loc[label, "socket_drops"]
        assert (g["pdr_percent"] > 1) == (r["kernel_pdr"] > 0.01)                 # the same side of 1 %
    warn = [w for w in rep.verdict["warnings"] if "name runs not given here" in w]
    assert len(warn) == 1 and str(len(cpu) - len(shipped)) in warn[0]
