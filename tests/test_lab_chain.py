"""The chain of proxies (sipperf.lab.chain, docs/lab.md "A chain of proxies"): its Kamailio
configurations (checked by ``kamailio -c``), the bottleneck-law prediction, the plan, and, with
root and the lab tools, a real chain run in network namespaces whose capture ``sipperf analyze``
splits into both hops -- checked against what the code never computes: Kamailio's own counters
per hop, the namespaces' UDP counters and the packets dumpcap wrote (capinfos)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sipperf.lab import chain as C, netns, plan as P


def _kamailio_check(text: str, tmp_path: Path, name: str) -> None:
    if not shutil.which("kamailio"):
        pytest.skip("kamailio not installed")
    p = tmp_path / f"{name}.cfg"
    p.write_text(text)
    r = subprocess.run(["kamailio", "-c", "-f", str(p)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr[-800:]


def test_hop_configs_differ_and_kamailio_accepts_them(tmp_path):
    cfg = C.ChainConfig(core_work=25, edge_work=0)
    edge, core = (C.render_hop(cfg, h, tmp_path) for h in C.HOPS)
    # the edge relays every initial request to the core's socket; the core looks the callee up
    assert f'$du = "sip:{netns.CHAIN_ADDRS["core"]}:{cfg.port}";' in edge and "lookup(" not in edge
    assert 'lookup("location")' in core and '"registrar.so"' in core and '$du = "sip:' not in core
    # the core's script work: 25 chained MD5 rounds per message; the edge returns at once
    assert "$var(i) < 25" in core and "s.md5" in core and "s.md5" not in edge
    assert f"listen=udp:{netns.CHAIN_ADDRS['edge']}:{cfg.port}" in edge
    _kamailio_check(edge, tmp_path, "edge")
    _kamailio_check(core, tmp_path, "core")


def test_chain_config_refuses_what_it_cannot_run():
    for bad in (dict(users=-1), dict(rate_cps=0), dict(calls=0), dict(core_work=-5),
                dict(edge_workers=0), dict(proxy_cpu=1, load_cpu=1), dict(uas_port=5060)):
        with pytest.raises(ValueError):
            C.ChainConfig(**bad).validate()
    C.ChainConfig(users=10, rate_cps=0).validate()      # a closed run needs no rate
    with pytest.raises(ValueError):
        C.ChainConfig().hop("registrar")


def test_bottleneck_law_prediction():
    """U_i = X D_i <= 1 for each single-worker hop, and sum_i U_i <= 1 on the shared CPU."""
    hops = [{"name": "edge", "cpu_us_per_call": 400.0}, {"name": "core", "cpu_us_per_call": 800.0}]
    p = C.predicted_knee(hops)
    assert p["bottleneck_hop"] == "core" and p["binding"] == "shared CPU"
    assert p["bound_hop_cps"] == pytest.approx(1250.0) and p["knee_cps"] == pytest.approx(1e6 / 1200.0)
    # at the prediction the shared CPU is exactly full, the core's own share below one
    x = p["knee_cps"]
    assert x * (400e-6 + 800e-6) == pytest.approx(1.0) and x * 800e-6 < 1.0
    assert C.predicted_knee([{"name": "edge", "cpu_us_per_call": float("nan")}])["knee_cps"] is None


def test_chain_plan_brackets_the_prediction_and_has_closed_runs():
    pp = P.PLANS["protocol"]
    light = P.chain_light_point(pp, 1500.0)
    assert light.cfg.rate_cps == P.round_rate(P.CHAIN_LIGHT_FRACTION * 1500.0)
    pts = P.chain_points(pp, 1500.0, 600.0)
    sweep = [p for p in pts if p.label["role"] == "sweep"]
    rates = [p.cfg.rate_cps for p in sweep]
    assert rates == sorted(rates) and min(rates) < 0.3 * 600 and max(rates) > 1.2 * 600
    closed = [p for p in pts if p.cfg.closed]
    assert [p.cfg.users for p in closed] == list(pp.chain_users) and max(pp.chain_users) >= 2 * 600 * 0.26
    assert sum(p.keep_raw for p in pts) == 1
    ids = [p.run_id for p in [light, *pts]]
    assert len(ids) == len(set(ids)) and len({p.cfg.seed for p in [light, *pts]}) == len(ids)
    assert all((p.cfg.proxy_cpu, p.cfg.load_cpu, p.cfg.load_nice) == (0, 1, 0) for p in pts)
    extra = P.chain_past_knee_point(pp, 1500.0, 600.0, 1)
    assert extra.cfg.rate_cps > max(rates) and extra.run_id not in ids
    e = P.estimate(pp, ["chain"], {1: 1500.0}, [])
    assert e["chain"][1] >= e["chain"][0] > sum(p.cfg.calls / p.cfg.rate_cps for p in sweep)


# ---- real runs (root, kamailio, sipp, dumpcap) ------------------------------------------------

def _chain_or_skip():
    missing = [t for t in ("kamailio", "kamcmd", "sipp", "dumpcap", "ip") if not shutil.which(t)]
    if missing or os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip(f"needs root, two CPUs and {', '.join(missing) or 'the lab tools'}")
    tag = f"t{os.getpid() % 100000}"
    if any(n.startswith(f"sipperf-{tag}-") for n in netns.list_namespaces()):
        pytest.skip("namespaces of this tag exist")
    return tag


@pytest.mark.root
def test_chain_topology_is_made_and_always_deleted(tmp_path):
    tag = _chain_or_skip()
    from sipperf.lab import knobs

    log = knobs.RestoreLog(tmp_path / "restore.jsonl")
    topo = netns.ChainTopology(tag=tag, log=log)
    with topo:
        names = set(netns.list_namespaces())
        assert {topo.switch_ns, *(topo.ns(h) for h in topo.hosts)} <= names
        # the kernel's own routing: the UAC reaches the core directly on the bridge's subnet
        r = subprocess.run(["ip", "-n", topo.ns("uac"), "route", "get", netns.CHAIN_ADDRS["core"]],
                           capture_output=True, text=True)
        assert "dev eth0" in r.stdout and f"src {netns.CHAIN_ADDRS['uac']}" in r.stdout
        br = subprocess.run(["ip", "-n", topo.switch_ns, "-o", "link", "show", "master", netns.BRIDGE],
                            capture_output=True, text=True).stdout
        assert all(f"sw-{h}" in br for h in topo.hosts)
        assert len(log.pending()) == 1 + len(topo.hosts)        # recorded before they were made
    assert not any(n.startswith(f"sipperf-{tag}-") for n in netns.list_namespaces())
    assert log.pending() == []


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
def test_a_chain_run_is_split_into_its_two_hops(tmp_path):
    tag = _chain_or_skip()
    calls = 60
    out = tmp_path / "run"
    C.run_chain(C.ChainConfig(rate_cps=30, calls=calls, tag=tag, idle_check_s=0.5, max_seconds=60, core_work=20),
                out, log=lambda s: None)
    m = json.loads((out / "meta.json").read_text())
    assert all(d["restored"] for d in m["netns"]["deleted"])
    assert not any(n.startswith(f"sipperf-{tag}-") for n in netns.list_namespaces())
    assert m["placement"]["check"]["ok"], m["placement"]["check"]
    assert {p["cpus_allowed"] for p in m["placement"]["processes"] if p["role"].startswith("proxy")} == {"0"}
    assert m["sipp_stats"]["SuccessfulCall(C)"] == calls
    edge, core = m["hops"]
    # the namespaces' own UDP counters: 7 datagrams a call reach the edge (3 requests from the UAC,
    # 100/180/200/200 from the core), 6 the core (3 requests, 180/200/200 from the UAS)
    assert edge["udp_snmp_delta"]["InDatagrams"] == 7 * calls
    assert core["udp_snmp_delta"]["InDatagrams"] == 6 * calls
    for h in (edge, core):
        assert 0 < h["cpu"]["cpu_s"] <= h["cpu"]["window_s"] + 2 * h["cpu"]["resolution_s"]
    # the capture on the bridge: every datagram once per link (capinfos counts what dumpcap wrote)
    if shutil.which("capinfos"):
        n = subprocess.run(["capinfos", "-Mc", str(out / "capture.pcapng")], capture_output=True,
                           text=True).stdout
        assert int(n.split("Number of packets:")[-1].split()[0]) == 20 * calls
    r = C.reduce_run(out, "chain-test")
    run, hops = r["run"], {h["name"]: h for h in r["hops"]}
    assert run["vantage"] == "multi-hop" and run["hops_found_ok"], run["hops_found"]
    # per hop, the messages the capture saw reaching it = what Kamailio counted receiving
    for name, h in hops.items():
        st = next(x for x in m["hops"] if x["name"] == name)["stats"]
        d = json.loads(h["dispositions"])
        assert h["relayed"] == 6 * calls and h["pdr_capture"] == 0.0
        assert sum(v for k, v in d.items() if k != "originated") == st["core:rcv_requests"] + st["core:rcv_replies"]
        assert h["sojourn_n"] == 6 * calls and 0 < h["sojourn_p50_us"] < 1e5
    assert run["throughput_cps"] == pytest.approx(30.0, rel=0.01)
    assert np.isfinite(hops["core"]["cpu_us_per_call"]) and r["components"]
