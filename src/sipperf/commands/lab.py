"""``sipperf lab run``: one bounded loopback experiment (Kamailio + SIPp + dumpcap + bpftrace).

``sipperf lab run --rate R --calls N --workers C [--arrivals poisson|deterministic]
[--sched default|fifo|pinned] [--tracer map|print|hist|none] --out DIR`` writes a run directory
that ``sipperf.ingest.lab_run.read_run`` (and ``sipperf analyze DIR``) turns into a timeline.
``sipperf lab join DIR`` writes that timeline next to the run (``timeline.parquet``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    from sipperf.lab.procs import exit_on_sigterm
    from sipperf.lab.run import LabConfig, run_lab

    exit_on_sigterm()

    cfg = LabConfig(
        rate_cps=args.rate, calls=args.calls, workers=args.workers, arrivals=args.arrivals,
        sched=args.sched, tracer=args.tracer, tracer_cpu=args.tracer_cpu, hold_ms=args.hold_ms,
        seed=args.seed, proxy_port=args.proxy_port, uas_port=args.uas_port,
        uac_port=args.uac_port, max_seconds=args.max_seconds,
    )
    out = run_lab(cfg, Path(args.out))
    meta = json.loads((out / "meta.json").read_text())
    st = meta.get("sipp_stats", {})
    print(json.dumps({
        "run_dir": str(out),
        "successful_calls": st.get("SuccessfulCall(C)"),
        "failed_calls": st.get("FailedCall(C)"),
        "rcvbuf_errors": meta["udp_snmp_delta"].get("RcvbufErrors"),
        "skipped": meta["skipped"],
    }, indent=2))
    if args.join:
        return _join_dir(out)
    return 0


def _join_dir(run_dir: Path) -> int:
    from sipperf.ingest.lab_run import read_run

    tl, report = read_run(run_dir)
    tl.to_parquet(Path(run_dir) / "timeline.parquet", index=False)
    (Path(run_dir) / "ingest_report.json").write_text(report.to_json())
    print(report)
    return 0


def _join(args: argparse.Namespace) -> int:
    rc = 0
    for d in args.run_dirs:
        rc |= _join_dir(Path(d))
    return rc


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
    r.add_argument("--join", action="store_true", help="also write timeline.parquet")
    r.add_argument("--out", required=True, help="run directory (created; must be empty)")
    r.set_defaults(func=_run)
    j = lsub.add_parser("join", help="join a run directory into timeline.parquet + ingest_report.json")
    j.add_argument("run_dirs", nargs="+")
    j.set_defaults(func=_join)
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])
