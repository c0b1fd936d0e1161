"""``sipperf lab run``: one bounded loopback experiment (Kamailio + SIPp + dumpcap + bpftrace).

``sipperf lab run --rate R --calls N --workers C [--arrivals poisson|deterministic]
[--sched default|fifo|pinned] [--tracer map|print|hist|none] --out DIR`` writes a run directory
that ``sipperf.ingest.lab_runs.run.read_run`` (and ``sipperf analyze DIR``) turns into a timeline.
``sipperf lab join DIR`` writes that timeline next to the run (``timeline.parquet``).
``sipperf lab knobs`` tests every scheduler knob this machine exposes (read, write, read back,
restore); ``sipperf lab machine`` describes the machine and how busy it is; ``sipperf lab
restore`` puts back any knob an interrupted run left changed.  The library behind it:
:mod:`sipperf.lab` (:mod:`sipperf.lab.summary`: what these commands print).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    from sipperf.lab.procs import exit_on_sigterm
    from sipperf.lab.run import LabConfig, run_lab
    from sipperf.lab.summary import join_run, run_summary, tuning_from_options

    exit_on_sigterm()
    try:
        tuning = tuning_from_options(policy=args.policy, priority=args.priority, nice=args.nice,
                                     slice_us=args.slice_us, cgroup_weight=args.cgroup_weight, knobs=args.knob,
                                     name=args.tuning_name)
        cfg = LabConfig(
            rate_cps=args.rate, calls=args.calls, workers=args.workers, arrivals=args.arrivals,
            sched=args.sched, tracer=args.tracer, tracer_cpu=args.tracer_cpu, hold_ms=args.hold_ms,
            seed=args.seed, proxy_port=args.proxy_port, uas_port=args.uas_port,
            uac_port=args.uac_port, max_seconds=args.max_seconds,
            retransmissions=not args.no_retransmissions, guard=args.guard, guard_cps=args.guard_cps,
            absorb_early=args.guard != "none", tuning=tuning, background_hogs=args.hogs,
            placement=args.placement, load_nice=args.load_nice, netns=args.netns,
        )
        cfg.validate()
    except ValueError as e:
        print(f"sipperf lab run: {e}")
        return 2
    out = run_lab(cfg, Path(args.out))
    print(json.dumps(run_summary(out), indent=2))
    if args.join:
        print(join_run(out))
    return 0


def _knobs(args: argparse.Namespace) -> int:
    import os

    from sipperf.lab import knobs
    from sipperf.lab.summary import knobs_lines

    if os.geteuid() != 0:
        print("sipperf lab knobs: needs root (it writes each knob and restores it)")
        return 2
    table = knobs.probe(kamailio=not args.no_kamailio)
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1, default=str))
    print("\n".join(knobs_lines(table)))
    return 0


def _machine(args: argparse.Namespace) -> int:
    from sipperf.lab import machine

    print(json.dumps({"machine": machine.describe(), "idle_check": machine.idle_check(args.seconds)}, indent=1,
                     default=str))
    return 0


def _restore(args: argparse.Namespace) -> int:
    from sipperf.lab import knobs
    from sipperf.lab.summary import restore_lines

    done = knobs.restore_pending()
    print("\n".join(restore_lines(done, knobs.RESTORE_LOG)))
    return 0 if all(r.get("restored") for r in done) else 1


def _join(args: argparse.Namespace) -> int:
    from sipperf.lab.summary import join_run

    for d in args.run_dirs:
        print(join_run(Path(d)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run the loopback SIP proxy lab (Kamailio, SIPp, dumpcap, bpftrace)")
    lsub = p.add_subparsers(dest="lab_command", metavar="LAB_COMMAND")
    r = lsub.add_parser("run", help="one bounded run into a run directory")
    r.add_argument("--rate", type=float, required=True, help="offered call rate (calls/s)")
    r.add_argument("--calls", type=int, required=True, help="number of calls (bounds the run)")
    r.add_argument("--workers", type=int, default=1, help="Kamailio UDP worker processes (children)")
    r.add_argument("--arrivals", choices=("deterministic", "poisson"), default="deterministic")
    r.add_argument("--sched", choices=("default", "fifo", "pinned"), default="default",
                   help="proxy scheduling: default (CFS/EEVDF), fifo (SCHED_FIFO via chrt), "
                        "pinned (taskset: proxy on one CPU, SIPp/dumpcap/tracer on another)")
    r.add_argument("--placement", choices=("split", "shared"), default="split",
                   help="split (the recording protocol, docs/lab.md): proxy on CPU 0, SIPp, dumpcap "
                        "and bpftrace on CPU 1; shared: nothing pinned")
    r.add_argument("--load-nice", type=int, default=0,
                   help="nice of the SIPp UAC and UAS (0: the proxy's priority; the first recordings: -10)")
    r.add_argument("--netns", action="store_true",
                   help="UAC, proxy and UAS in three network namespaces joined by veth pairs (root)")
    r.add_argument("--tracer", choices=("map", "print", "hist", "none"), default="map",
                   help="bpftrace output: map (records kept in BPF, written at the end; default), "
                        "print (a line per event), hist (aggregates only), none")
    r.add_argument("--tracer-cpu", type=int, default=None, help="pin bpftrace to this CPU")
    r.add_argument("--hold-ms", type=int, default=250, help="call holding time (ms)")
    r.add_argument("--seed", type=int, default=1, help="seed of the Poisson arrival offsets")
    r.add_argument("--proxy-port", type=int, default=5060)
    r.add_argument("--uas-port", type=int, default=5080)
    r.add_argument("--uac-port", type=int, default=5061)
    r.add_argument("--max-seconds", type=float, default=300.0, help="hard bound on the load phase")
    r.add_argument("--no-retransmissions", action="store_true",
                   help="SIPp -nr on UAC and UAS, tm retransmission timers beyond fr_timer (seed 000)")
    r.add_argument("--guard", choices=("none", "ratelimit", "ratelimit-all", "pike"), default="none",
                   help="overload guard, 503 + Retry-After: ratelimit = initial INVITEs over --guard-cps "
                        "(in-dialog requests pass); ratelimit-all = every request over 3 x --guard-cps "
                        "(an ACK over it dropped); pike = per source address")
    r.add_argument("--guard-cps", type=float, default=0.0, help="initial INVITEs per second the guard admits")
    r.add_argument("--policy", choices=("other", "batch", "idle", "fifo", "rr"), default=None,
                   help="scheduling policy of every Kamailio process (sched_setattr)")
    r.add_argument("--priority", type=int, default=50, help="fifo/rr priority")
    r.add_argument("--nice", type=int, default=None)
    r.add_argument("--slice-us", type=int, default=None,
                   help="EEVDF slice request (sched_attr.sched_runtime, Linux >= 6.12)")
    r.add_argument("--cgroup-weight", type=int, default=None,
                   help="put the proxy in a child cgroup of this cpu weight (v2; v1: shares x10.24)")
    r.add_argument("--knob", action="append", metavar="FILE=VALUE",
                   help="set a /proc/sys/kernel/sched_* or debugfs sched knob for the run (restored)")
    r.add_argument("--tuning-name", default=None)
    r.add_argument("--hogs", type=int, default=0, help="CPU-bound busy loops during the load")
    r.add_argument("--join", action="store_true", help="also write timeline.parquet")
    r.add_argument("--out", required=True, help="run directory (created; must be empty)")
    r.set_defaults(func=_run)
    j = lsub.add_parser("join", help="join a run directory into timeline.parquet + ingest_report.json")
    j.add_argument("run_dirs", nargs="+")
    j.set_defaults(func=_join)
    k = lsub.add_parser("knobs", help="test every scheduler knob (read, write, read back, restore)")
    k.add_argument("--json", default=None, help="also write the table here")
    k.add_argument("--no-kamailio", action="store_true", help="skip the Kamailio parameter checks")
    k.set_defaults(func=_knobs)
    mc = lsub.add_parser("machine", help="describe the machine (CPU, idle states, virtualisation, load)")
    mc.add_argument("--seconds", type=float, default=3.0, help="length of the idle check")
    mc.set_defaults(func=_machine)
    rs = lsub.add_parser("restore", help="restore knobs an interrupted run left changed")
    rs.set_defaults(func=_restore)
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])
