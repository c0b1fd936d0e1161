"""``sipperf collect`` (issue 37, item 2) on real processes and a real socket: a child burns a known
amount of CPU and floods a UDP socket that nobody reads; the collector's row gives that CPU (to a
few clock ticks) and the socket's own drop count (as /proc/net/udp gives it, read apart), and
``sipperf report --cpu`` carries both into runs.csv with a warning naming the kernel's drops."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from sipperf.lab.collect import COLUMNS, collect
from sipperf.lab.cpuacct import CLK_TCK
from sipperf.lab.netutil import udp_socket_info

FIX = Path(__file__).parent / "fixtures"
SIPPERF = str(Path(sys.executable).with_name("sipperf"))

CHILD = r"""
import socket, sys, time
port, burn = int(sys.argv[1]), float(sys.argv[2])
sys.stdin.readline()                                   # go
t0 = time.process_time()
while time.process_time() - t0 < burn:
    pass
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3000):
    s.sendto(b"x" * 200, ("127.0.0.1", port))
print(time.process_time() - t0, flush=True)
time.sleep(30)
"""


@pytest.fixture
def sink():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind(("127.0.0.1", 0))
    yield s
    s.close()


def test_the_row_is_the_cpu_burned_and_the_sockets_own_drops(sink, tmp_path):
    port = sink.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(port), "0.5"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        before = udp_socket_info("127.0.0.1", port)["drops"]
        out = tmp_path / "cpu.csv"
        res = {}
        t = threading.Thread(target=lambda: res.update(collect(pids=[child.pid], port=port, seconds=2.0, interval_s=0.5,
                                                               out=out, run="udp4", samples=tmp_path / "s.csv")))
        t.start()
        time.sleep(0.3)
        child.stdin.write("go\n")
        child.stdin.flush()
        burned = float(child.stdout.readline())
        t.join(timeout=30)
        after = udp_socket_info("127.0.0.1", port)["drops"]
    finally:
        child.terminate()
        child.wait(timeout=10)
    assert after - before > 1000                              # the flood overflowed the small buffer
    assert res["socket_drops"] == after - before
    assert abs(res["cpu_s"] - burned) <= 3 / CLK_TCK + 0.02, (res["cpu_s"], burned)
    assert 1.9 <= res["window_s"] <= 2.5
    rows = pd.read_csv(out)
    assert list(rows.columns[:7]) == ["run", "rate_cps", "threads", "cpu_s", "window_s", "cpu_share", "processes"]
    assert set(COLUMNS) <= set(rows.columns) and len(rows) == 1
    per = pd.read_csv(tmp_path / "s.csv")
    assert len(per) >= 3 and per["socket_drops"].sum() == after - before    # the intervals add up to the run
    # the report reads the file: CPU and the kernel's drops beside the capture's
    p = subprocess.run([SIPPERF, "report", str(FIX / "udp4.pcapng"), "--out", str(tmp_path / "rep"), "--cpu", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv").set_index("run")
    assert runs.loc["udp4", "kernel_socket_drops"] == after - before
    assert runs.loc["udp4", "warnings"] >= 1
    assert f"the kernel dropped {after - before:,d} datagrams at the proxy socket" in \
        (tmp_path / "rep" / "report.json").read_text()


def test_bad_options_exit_2_naming_what(tmp_path):
    for args, says in ((["--pid", "999999999"], "no such process"), (["--comm", "no-such-proxy-name"], "no such process")):
        p = subprocess.run([SIPPERF, "collect", *args, "--seconds", "1", "--out", str(tmp_path / "c.csv")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    p = subprocess.run([SIPPERF, "collect", "--pid", str(__import__("os").getpid()), "--seconds", "0.2",
                        "--interval", "0.1", "--out", str(tmp_path / "other.csv")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "other.csv" in p.stderr and "not the collector's" in p.stderr


def test_a_stop_between_samples_is_counted_up_to_the_stop(sink, tmp_path):
    """SIGTERM half-way through an interval: the row covers the run up to the stop, drops sent in
    that last part included (the first version kept only the full intervals before the stop and
    lost the tail of every run: 0.4-0.7 s and most of the drops of the lab's short runs)."""
    import os
    import signal

    port = sink.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(port), "0.0"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    out = tmp_path / "cpu.csv"
    try:
        smp = tmp_path / "samples.csv"
        coll = subprocess.Popen([SIPPERF, "collect", "--pid", str(child.pid), "--port", str(port), "--seconds", "60",
                                 "--interval", "1", "--run", "r", "--out", str(out), "--samples", str(smp)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not smp.exists() and time.monotonic() < deadline:   # the first interval's row: 1 s after the start
            time.sleep(0.01)
        t_first = time.monotonic()
        time.sleep(0.3)
        d0 = udp_socket_info("127.0.0.1", port)["drops"]
        child.stdin.write("go\n")
        child.stdin.flush()
        child.stdout.readline()                            # the flood is sent, inside the unfinished interval
        d1 = udp_socket_info("127.0.0.1", port)["drops"]
        time.sleep(max(0.0, t_first + 0.6 - time.monotonic()))  # stop inside the second interval
        t_stop = time.monotonic()
        os.kill(coll.pid, signal.SIGTERM)
        assert coll.wait(timeout=10) == 0, coll.stderr.read()
        assert time.monotonic() - t_stop < 0.5             # stops at once
    finally:
        child.kill()
        child.wait()
    row = pd.read_csv(out).iloc[0]
    assert d1 - d0 > 1000
    assert row["socket_drops"] >= d1 - d0                 # the flood after the last full interval is counted
    assert row["window_s"] > 1.0 + (t_stop - t_first) - 0.2    # up to the stop, not to the last whole second
    assert len(pd.read_csv(smp)) == 2                          # the whole interval, then the part up to the stop
