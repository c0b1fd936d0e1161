"""``sipperf report`` on SIP over WebSocket captured at load (issue 39).

The second lab's Kamailio (``tests/lab2``) with the websocket module on its TCP listener; SIPp's
TCP carried over WebSocket by ``tests/lab2/wsbridge.py`` (SIPp 3.6 has no WebSocket), the
callee reached over TCP.  One run with the caller's calls spread over 20 WebSocket connections
that stay open, one with a WebSocket (HTTP upgrade included) per call.  The report must

* read every call through the WebSocket frames (masked, as a browser sends them) and count no
  more failed calls than SIPp failed, the knee resting on failed calls;
* see the WebSocket connections the bridge opened, each with its HTTP upgrade;
* run on a proxy that did not fail itself (no CRITICAL or ALERT line but the TCP main process's
  "queue full");
* show a WebSocket per call in the proxy's CPU accounting: an upgrade and a TCP connection per call
  cost more than frames on connections that stay open (only the sign is checked here).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab2.driver import Lab2Config, SecondLab, missing_tools, port_free  # noqa: E402

from sipperf.lab.sipp import read_stats  # noqa: E402

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PORTS = dict(proxy_port=5760, uas_port=5780, uac_port=5761)
RATE = 300
CLIENTS = 20
SIPPERF = str(Path(sys.executable).with_name("sipperf"))


@pytest.fixture(scope="module")
def ws_lab(tmp_path_factory):
    missing = missing_tools(ws=True)
    if missing:
        pytest.skip(f"lab tools not installed: {', '.join(missing)}")
    out = tmp_path_factory.mktemp("lab_ws")
    found = {}
    for transport in ("ws", "ws-tn"):
        cfg = Lab2Config(transport=transport, seconds=4.0, timeout_s=30.0, ws_clients=CLIENTS, **PORTS)
        ports = (cfg.proxy_port, cfg.uas_port, cfg.uac_port, cfg.sipp_uas_port, cfg.sipp_target_port)
        busy = [p for p in ports if not port_free(p)]
        if busy:
            pytest.skip(f"ports {busy} already in use on 127.0.0.1")
        d = out / transport
        with SecondLab(cfg, d) as lab:
            r = lab.run(f"{transport}-r{RATE}", RATE)
        assert r.proxy_faults == 0, (transport, r.proxy_faults, r.fault)
        found[transport] = (r, read_stats(d, f"{r.label}_uac_stats.csv"), d / "wsbridge.log")
    caps = [str(r.capture) for r, _, _ in found.values()]
    p = subprocess.run([SIPPERF, "report", *caps, "--threads", "2", "--out", str(out / "report")],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    import pandas as pd

    table = pd.read_csv(out / "report" / "runs.csv").set_index("run")
    rep = json.loads((out / "report" / "report.json").read_text())
    return {"found": found, "table": table, "rep": rep, "out": out}


def test_every_call_sipp_started_is_read_through_the_websocket_frames(ws_lab):
    t = ws_lab["table"]
    for transport, (r, st, _) in ws_lab["found"].items():
        row = t.loc[r.label]
        started, failed = int(st["OutgoingCall(C)"]), int(st["FailedCall(C)"])
        assert started == RATE * 4
        assert row["transport"] in ("ws", "tcp") and row["loss_kind"] == "failed calls", transport
        assert started - failed - 2 <= row["calls"] <= started, (transport, row["calls"], started, failed)
        assert row["calls_failed"] <= failed + 0.01 * started, (transport, row["calls_failed"], failed)


def test_the_caller_leg_is_read_as_websocket_with_one_upgrade_per_connection(ws_lab):
    from sipperf.ingest import load

    for transport, (r, st, log) in ws_lab["found"].items():
        tl, rep = load([r.capture])
        caller = tl[tl["transport"] == "ws"]        # what arrived over WebSocket: the caller's requests
        assert caller["call_id"].nunique() == int(st["OutgoingCall(C)"]), transport
        opened = int(re.search(r"websocket connections opened (\d+)", log.read_text()).group(1))
        assert opened == (CLIENTS if transport == "ws" else int(st["OutgoingCall(C)"])), (transport, opened)
        # each upgrade is two segments, the client's GET and the proxy's 101, skipped by name
        assert rep.skipped.get("WebSocket handshake (HTTP Upgrade)") == 2 * opened, (transport, rep.skipped)
        ws = rep.details["transports"]["websocket"]
        assert ws["server_ports"] == [PORTS["proxy_port"]] and ws["fragmented"] == 0
        # a call answered 200 is 7 messages on the caller's leg (INVITE, 100, 180, 200, ACK, BYE, 200),
        # one answered 486 is 4 (INVITE, 100, 486, ACK)
        started = int(st["OutgoingCall(C)"])
        assert 4 * started < ws["messages"] <= 7 * started, (transport, ws)


def test_a_websocket_per_call_costs_the_proxy_cpu(ws_lab):
    (kept, st1, _), (per_call, st2, _) = ws_lab["found"]["ws"], ws_lab["found"]["ws-tn"]
    ms_kept = 1e3 * kept.cpu_s / int(st1["OutgoingCall(C)"])
    ms_per_call = 1e3 * per_call.cpu_s / int(st2["OutgoingCall(C)"])
    print(f"proxy CPU per call: {ms_kept:.2f} ms over {CLIENTS} kept WebSockets, {ms_per_call:.2f} ms over one per call")
    assert ms_per_call > ms_kept
