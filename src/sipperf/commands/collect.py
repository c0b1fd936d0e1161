"""``sipperf collect``: during a load test, sample the proxy's CPU and the kernel's UDP/TCP counters
into the file ``sipperf report --cpu`` reads.

    sipperf collect --pid $(pidof -s kamailio) --port 5060 --seconds 60 --run r1500 --out cpu.csv

One row per run is appended to ``--out`` (start it before the load: it prints "sampling ...; start
the load" on stderr once its first sample is taken; one run per call, ``--run`` the
run's label as ``sipperf report`` names it: the capture's file stem): the proxy's CPU seconds
(``/proc/<pid>/stat``, the processes it forked included) over the window, and the change of the
kernel's counters -- the drops of the proxy's UDP socket (``/proc/net/udp``), the host's UDP
receive-buffer errors and TCP accept-queue overflows, backlog drops and zero windows.  Stops after
``--seconds`` or on Ctrl-C / SIGTERM (the row is written either way).  ``--samples FILE`` adds one
row per interval (the load's shape: when the CPU saturated, when drops began).

Exit codes: 0 written; 2 no such process, bad option or an --out of another layout.
"""
from __future__ import annotations

import argparse
import signal
import sys


def _run(a: argparse.Namespace) -> int:
    from sipperf.lab.collect import LOSS, collect

    stopped = []

    def _stop(signum, frame):
        stopped.append(signum)

    old = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        row = collect(pids=a.pid or (), comm=a.comm, port=a.port, seconds=a.seconds, interval_s=a.interval,
                      out=a.out, run=a.run, rate_cps=a.rate_cps, threads=a.threads, samples=a.samples,
                      stop=lambda: bool(stopped), on_start=lambda s0: print(
                          f"sipperf collect: sampling {s0.processes} process(es) every {a.interval:g} s; start the load",
                          file=sys.stderr, flush=True))
    except (ValueError, OSError) as e:
        print(f"sipperf collect: error: {e}", file=sys.stderr)
        return 2
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    lost = ", ".join(f"{k} {row[k]}" for k in LOSS if row.get(k))
    print(f"{a.run or 'run'}: {row['cpu_s']:.2f} CPU-s over {row['window_s']:.1f} s "
          f"({row['cpu_share']:.3f} CPUs, {row['processes']} processes); "
          f"{'kernel counters: ' + lost if lost else 'no drop or push-back counted by the kernel'} -> {a.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="sample the proxy's CPU and the kernel's UDP/TCP counters during a load test",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--pid", type=int, action="append", metavar="PID",
                     help="the proxy's main process (repeat for several; the processes they fork are counted)")
    who.add_argument("--comm", metavar="NAME", help="every process with this name (e.g. kamailio, opensips)")
    p.add_argument("--port", type=int, default=None, help="the proxy's SIP port (its UDP socket's own drop counter)")
    p.add_argument("--seconds", type=float, required=True, help="how long to sample (the load's length)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--run", default=None, help="the run's label in sipperf report (the capture's file stem)")
    p.add_argument("--rate-cps", type=float, default=None, help="the offered call rate (calls/s), if no --run")
    p.add_argument("--threads", type=int, default=None, help="the proxy's worker processes (children=)")
    p.add_argument("--out", required=True, help="the CSV to append the run's row to (sipperf report --cpu)")
    p.add_argument("--samples", default=None, help="also append one row per interval to this CSV")
    p.set_defaults(func=_run)
