"""CI smoke test of the real lab: Kamailio + SIPp + dumpcap + bpftrace on loopback, 20 cps for 10 s,
joined into one timeline.  Skips, saying why, only where the machine cannot run it."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from sipperf.timeline import CALL_FLOW, INSTANTS

pytestmark = [pytest.mark.lab, pytest.mark.slow]

# ports apart from the recording defaults (5060/5080/5061) and from other test captures
PORTS = dict(proxy_port=5070, uas_port=5090, uac_port=5071)


def _missing_tools() -> list[str]:
    return [t for t in ("kamailio", "sipp", "dumpcap") if not shutil.which(t)]


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    missing = _missing_tools()
    if missing:
        pytest.skip(f"lab tools not installed: {', '.join(missing)} (apt-get install kamailio sip-tester tshark)")
    from sipperf.lab.netutil import port_in_use
    from sipperf.lab.run import LabConfig, run_lab
    from sipperf.lab.tracer import can_trace

    ok, why = can_trace()
    if not ok:
        pytest.skip(f"cannot run the kernel tracer here: {why} (needs root, bpftrace, tracefs)")
    busy = [p for p in PORTS.values() if port_in_use("127.0.0.1", p)]
    if busy:
        pytest.skip(f"udp ports {busy} already in use on 127.0.0.1")
    out = tmp_path_factory.mktemp("lab") / "run"
    cfg = LabConfig(rate_cps=20, calls=200, workers=1, arrivals="deterministic", tracer="map",
                    max_seconds=60, **PORTS)
    run_lab(cfg, out, log=lambda s: None)
    from sipperf.ingest.lab_runs.run import read_run

    tl, rep = read_run(out)
    return out, tl, rep


@pytest.mark.root
def test_lab_run_directory_and_meta(lab_run):
    out, tl, rep = lab_run
    for name in ("meta.json", "capture.pcapng", "proxy.log", "trace.log", "kamailio.cfg", "tracer.bt"):
        assert (out / name).exists(), name
    meta = json.loads((out / "meta.json").read_text())
    assert meta["source"] == "lab" and meta["skipped"] == {}
    assert meta["versions"]["kamailio"].startswith("version: kamailio")
    assert meta["sched"]["policy"] == "default" and "proc_sys" in meta["sched"]["knobs"]
    assert meta["sipp_stats"]["SuccessfulCall(C)"] == 200
    # every started process was stopped
    for name, info in meta["stopped"].items():
        assert not os.path.exists(f"/proc/{info['pid']}/status") or name == "none"


@pytest.mark.root
def test_lab_timeline_is_joined(lab_run):
    out, tl, rep = lab_run
    assert rep.balanced
    rel = tl[tl["origin"] == "relayed"]
    # the thesis's call flow: six messages per call cross the proxy, none dropped
    assert len(rel) == 200 * 6
    assert not rel["dropped"].any()
    assert (rel.groupby("call_id")["msg_type"].apply(lambda s: tuple(sorted(s)))
            == tuple(sorted(CALL_FLOW))).all()
    full = rel[list(INSTANTS)].notna().all(axis=1).mean()
    assert full >= 0.99, f"only {full:.3f} of messages have all seven instants"
    # the proxy's own 100 Trying: egress only, one per INVITE
    own = tl[tl["origin"] == "proxy"]
    assert (own["status"] == 100).sum() == 200
    # independent cross-checks between sources: kernel instants sit between the wire instants
    d_in = (rel["t_arr"] - rel["t_wire_in"]).dropna().astype("int64")
    d_out = (rel["t_dep"] - rel["t_wire_out"]).dropna().astype("int64")
    assert (d_in >= 0).all() and (d_out >= 0).all()
    assert np.median(d_in) < 200_000 and np.median(d_out) < 200_000
    # recvfrom returned exactly the captured message (lengths)
    assert (rel["k_copy_max_ns"].dropna() >= 0).all()


@pytest.mark.root
def test_lab_without_tracer_still_records(tmp_path):
    missing = _missing_tools()
    if missing:
        pytest.skip(f"lab tools not installed: {', '.join(missing)}")
    from sipperf.ingest.lab_runs.run import read_run
    from sipperf.lab.netutil import port_in_use
    from sipperf.lab.run import LabConfig, run_lab

    if any(port_in_use("127.0.0.1", p) for p in PORTS.values()):
        pytest.skip("lab ports in use")
    out = tmp_path / "run"
    run_lab(LabConfig(rate_cps=20, calls=40, tracer="none", max_seconds=30, **PORTS), out,
            log=lambda s: None)
    meta = json.loads((out / "meta.json").read_text())
    assert "tracer" in meta["skipped"] and not (out / "trace.log").exists()
    tl, rep = read_run(out)
    rel = tl[tl["origin"] == "relayed"]
    assert len(rel) == 40 * 6
    assert rel[["t_arr", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"]].notna().all(axis=None)
    assert rel[["t_stack", "t_sockq"]].isna().all(axis=None)
    assert any("no tracer log" in n for n in rep.notes)


@pytest.mark.root
def test_lab_guard_and_tuning_are_applied_and_restored(tmp_path):
    """One short run with Kamailio's ratelimit guard (503 + Retry-After over 10 INVITEs/s) and a
    scheduler tuning (EEVDF slice, cgroup weight, a /proc/sys knob): the 503s SIPp received are
    the ones the proxy sent, the tuning stuck on every Kamailio thread, and afterwards the knob
    holds its old value and the cgroup is gone."""
    missing = _missing_tools()
    if missing or os.geteuid() != 0:
        pytest.skip(f"needs root and {', '.join(missing) or 'the lab tools'}")
    from pathlib import Path

    from sipperf.lab import sipp
    from sipperf.lab.netutil import port_in_use
    from sipperf.lab.run import LabConfig, run_lab

    if any(port_in_use("127.0.0.1", p) for p in PORTS.values()):
        pytest.skip("lab ports in use")
    rr = Path("/proc/sys/kernel/sched_rr_timeslice_ms")
    old = rr.read_text()
    new = "20" if old.strip() != "20" else "30"
    out = tmp_path / "run"
    cfg = LabConfig(rate_cps=40, calls=80, tracer="none", guard="ratelimit", guard_cps=10,
                    absorb_early=True, idle_check_s=0.5, max_seconds=60,
                    tuning={"name": "smoke", "slice_us": 200, "cgroup_weight": 300,
                            "files": {str(rr): new}}, **PORTS)
    run_lab(cfg, out, log=lambda s: None)
    meta = json.loads((out / "meta.json").read_text())
    # the guard: every 503 SIPp received was one the proxy sent statelessly (Kamailio's sl
    # counters, read over its ctl socket), and every rejected INVITE was counted as dropped there
    got = sipp.count_of(meta["sipp_counts"]["uac"], "503", "Recv")
    st = meta["proxy_stats"]
    assert got > 0 and got == st["sl:5xx_replies"] == st["sl:received_ACKs"]
    assert st["core:rcv_requests_invite"] == cfg.calls
    admitted = meta["sipp_stats"]["SuccessfulCall(C)"] - got
    assert 0 < admitted <= 10 * (meta["load_seconds"] + 2)
    # the tuning: applied to every thread of every Kamailio process, then restored
    t = meta["tuning"]
    assert t["files"][0]["applied"] and rr.read_text() == old
    assert all(p["attr"]["runtime_ns"] == 200_000 for p in t["processes"])
    assert t["cgroup"]["pids_inside"] and not Path(t["cgroup"]["path"]).exists()
    assert all(r["restored"] for r in t["restored"])
    # the machine and its load were recorded
    assert meta["idle_check"]["samples"]["n"] >= 1 and meta["load_samples"]["n"] >= 1
