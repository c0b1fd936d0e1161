"""``sipperf report`` over TCP (issue 39, item 1): a verdict that fits the transport.

The second lab's Kamailio (``tests/lab2``) with two TCP workers (``tcp_children``) behind a TCP
listener, SIPp over one connection each way (``-t t1``, as a trunk), and a caller that gives up on
a call with no answer within 2 s (SIPp counts it failed).  Two runs: a light one, and one offered
far more than this machine's generator and proxy can carry together.  Nothing is dropped on a
stream, so the report must

* read each run as TCP and rest its knee on failed calls, not on drops, and fit no M/M/c/K knee;
* count the calls SIPp started (its own counter), and count as failed no more than SIPp did: the
  capture sees a request only once it is on the wire, so its count is a lower bound;
* name a run whose load did not reach the proxy as offered, and only such a run;
* never state a negative "at least" headroom;
* give the utilisation per CPU the workers may run on (``sipperf collect`` records how many).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab2.driver import Lab2Config, SecondLab, missing_tools, port_free  # noqa: E402

from sipperf.lab.sipp import read_stats  # noqa: E402

pytestmark = [pytest.mark.lab, pytest.mark.slow]

CFG = Lab2Config(transport="tcp", proxy_port=5460, uas_port=5480, uac_port=5461, seconds=5.0, timeout_s=30.0)
RATES = (600, 8000)
SIPPERF = str(Path(sys.executable).with_name("sipperf"))


@pytest.fixture(scope="module")
def tcp_lab(tmp_path_factory):
    missing = missing_tools()
    if missing:
        pytest.skip(f"lab tools not installed: {', '.join(missing)}")
    busy = [p for p in (CFG.proxy_port, CFG.uas_port, CFG.uac_port) if not port_free(p)]
    if busy:
        pytest.skip(f"ports {busy} already in use on 127.0.0.1")
    out = tmp_path_factory.mktemp("lab_tcp")
    runs, sipp = [], {}
    with SecondLab(CFG, out / "lab") as lab:
        for rate in RATES:
            r = lab.run(f"t{rate:05d}", rate, collect_out=out / "cpu.csv")
            runs.append(r)
            sipp[r.label] = read_stats(out / "lab", f"{r.label}_uac_stats.csv")
        kam_cpus = len(os.sched_getaffinity(lab.proxy.pid))
    p = subprocess.run([SIPPERF, "report", *[str(r.capture) for r in runs], "--threads", str(CFG.workers),
                        "--cpu", str(out / "cpu.csv"), "--out", str(out / "report")],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    rep = json.loads((out / "report" / "report.json").read_text())
    import pandas as pd

    table = pd.read_csv(out / "report" / "runs.csv").set_index("run")
    return {"runs": runs, "sipp": sipp, "rep": rep, "table": table, "stdout": p.stdout, "cpus": kam_cpus}


def test_tcp_runs_rest_on_failed_calls(tcp_lab):
    t, num = tcp_lab["table"], tcp_lab["rep"]["verdict"]["numbers"]
    assert set(t["transport"]) == {"tcp"} and set(t["loss_kind"]) == {"failed calls"}
    assert num["loss_kind"] == "failed calls"
    assert t["pdr_percent"].isna().all()                   # no drop rate is claimed for a stream
    assert any(s.startswith("Over TCP the proxy drops nothing") for s in tcp_lab["rep"]["verdict"]["headline"])
    model = num.get("knee_model_cps")
    assert model is None or not math.isfinite(model)       # no M/M/c/K knee over TCP (NaN is null in JSON)
    assert all("M/M/" not in s or "refuted" in s for s in tcp_lab["rep"]["verdict"]["headline"])
    # nor C₁,₁ and the capacity rule, which rest on UDP drop knees (ch. 8)
    assert num.get("c11_not_applicable") and not any("C₁,₁" in s for s in tcp_lab["rep"]["verdict"]["headline"])


def test_calls_counted_as_sipp_started_them_and_failures_a_lower_bound(tcp_lab):
    t = tcp_lab["table"]
    for r in tcp_lab["runs"]:
        st = tcp_lab["sipp"][r.label]
        started, failed = int(st["OutgoingCall(C)"]), int(st["FailedCall(C)"])
        row = t.loc[r.label]
        # every INVITE on the wire is a call SIPp started; a call SIPp started but never sent is not
        assert row["calls"] <= started
        if failed == 0:
            assert row["calls"] == started and row["calls_failed"] == 0
        # the capture cannot see a backlog in the caller's buffer: it counts at most SIPp's failures
        assert row["calls_failed"] <= failed + 0.01 * started, (r.label, row["calls_failed"], failed)


def test_a_run_short_of_its_offered_load_is_named(tcp_lab):
    short = set(tcp_lab["rep"]["verdict"]["numbers"]["short_of_offered"])
    for r in tcp_lab["runs"]:
        st = tcp_lab["sipp"][r.label]
        sent = int(st["OutgoingCall(C)"]) - int(st["FailedCall(C)"])    # calls whose INVITE SIPp got out
        ratio = tcp_lab["table"].loc[r.label, "rate_cps"] / r.nominal_cps
        if ratio < 0.85:
            assert r.label in short, (r.label, ratio, sent)
        elif ratio > 0.95:
            assert r.label not in short, (r.label, ratio)


def test_headroom_is_never_a_negative_lower_bound(tcp_lab):
    num = tcp_lab["rep"]["verdict"]["numbers"]
    at_least = num.get("headroom_at_least")
    assert at_least is None or not (math.isfinite(at_least) and at_least < 0)
    assert "at least -" not in tcp_lab["stdout"]


def test_utilisation_is_per_cpu_the_workers_may_run_on(tcp_lab):
    t = tcp_lab["table"]
    assert (t["cpus"] == tcp_lab["cpus"]).all()
    servers = min(CFG.workers, tcp_lab["cpus"])
    for label, row in t.iterrows():
        assert row["utilisation"] == pytest.approx(row["cpu_share"] / servers, rel=1e-6)


def test_zero_windows_are_counted_from_the_capture_as_tshark_counts_them(tcp_lab):
    """TCP's overload signal read off the wire: the zero-window advertisements the report counts
    (the proxy's and its peers') are those tshark's expert analysis finds in the same capture.
    (The kernel's TCPToZeroWindowAdv is host-wide: other programs' connections move it too, so
    it bounds nothing here.)"""
    import shutil

    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    t = tcp_lab["table"]
    for r in tcp_lab["runs"]:
        p = subprocess.run(["tshark", "-n", "-r", str(r.capture), "-Y", "tcp.analysis.zero_window",
                            "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, timeout=900)
        n = len(p.stdout.split())
        row = t.loc[r.label]
        ours = sum(0 if pd_isna(row.get(c)) else int(row[c]) for c in ("tcp_zero_window_proxy", "tcp_zero_window_peers"))
        assert ours == n, (r.label, ours, n)
        if not pd_isna(row.get("tcp_zero_window_proxy")) and row["tcp_zero_window_proxy"] > 0:
            # the proxy told its callers to stop: the run is overloaded, whatever else it shows
            assert r.label in tcp_lab["rep"]["verdict"]["numbers"]["saturated_runs"]
        print(f"{r.label}: {n} zero windows ({row.get('tcp_zero_window_proxy')} from the proxy), "
              f"{row.get('tcp_retransmissions')} retransmitted segments, "
              f"kernel TCPToZeroWindowAdv {row.get('kernel_tcp_to_zero_window_adv')}")


def pd_isna(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
