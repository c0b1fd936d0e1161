"""The recording plan of ``datasets/lab/long``: what is run, in which order, and how long it takes.

Series (one configuration each is a *point*, recorded by :func:`sipperf.lab.longrun.record_point`):

``workers``  1, 2, 4, 8 Kamailio workers (``children``), each swept across call rates up to and
             past its 1 %-drop knee.  The knee is found first with short probes (coarse:
             rates x1.5 until the drop rate reaches 1 %; then bisection), then points are
             recorded at fixed fractions of it.  SIPp retransmissions off (``-nr``) and tm's
             retransmission timer beyond its final-response timer, as in seed 000: a dropped
             message is lost, not resent, so the drop rate is the queue's.  The 1-worker sweep
             is the rate sweep (>= 20,000 calls per point).  If no point of a sweep reaches
             the knee's 1 % (long runs can put the knee above the probes' estimate), up to
             ``past_knee_max`` extra points further out are recorded until one does.
``sched``    one worker at ``sched_fraction`` of its knee under each scheduler tuning
             (:data:`TREATMENTS`), without and with two busy loops competing for the CPUs.
             Treatments whose knob this machine refuses (the probe in ``knobs.json``) are
             skipped and listed.
``overload`` one worker past its knee (``overload_factors`` x knee) with SIPp's
             retransmissions on, without a guard and with Kamailio's ``ratelimit`` (initial
             INVITEs), ``ratelimit-all`` (every request) or ``pike`` answering 503 +
             Retry-After above ``guard_fraction`` x knee (``overload_guards``).  Counters only (no
             capture, no tracer: at these rates they would be the bottleneck): goodput,
             retransmissions, 503s, socket drops, per second from SIPp's statistics.

The 1-worker knee (``knees.csv``) sets the rates of ``sched`` and ``overload``.

**The protocol plan** (``PLANS["protocol"]``, ``record.py --plan protocol`` into
``datasets/lab/protocol/``) records the same series under the recording protocol
(:mod:`sipperf.lab.protocol`): the proxy on CPU 0, SIPp, dumpcap and the tracer on CPU 1 at
equal priority; every knee from ``knee_replicates`` independent searches; one tracer on/off
pair per series; and two more series,

``setup``    the 1-worker knee under each set-up of :data:`SETUPS` (the protocol, with and
             without its observers, unpinned, the first recordings' SIPp at nice -10, 1-s
             probes, network namespaces), each from ``knee_replicates`` searches: the data that
             explain how far the first recordings' knees were from the protocol's;
``netns``    loopback against three network namespaces, ``netns_pairs`` paired points at
             ``netns_fraction`` x the knee (same seed within a pair, order alternating);
``chain``    two proxies in a chain (:mod:`sipperf.lab.chain`): a light run gives each hop's CPU
             per call, the bottleneck law the chain's predicted capacity, then the open sweep
             around it, a run whose capture is kept, closed populations (``chain_users``).

Its ``overload`` series (issue 25) compares no guard, the INVITE-only limit (``ratelimit``) and
the all-request limit (``ratelimit-all``) at ``overload_factors`` from 0.5 to 3 x the knee,
``overload_replicates`` = 3 runs each, pike at ``pike_factors``.

Knee probes run counters-only (no tracer, no capture; the proxy's own xlog lines stay): the
knee is the proxy's, with its observer effect measured by the ``protocol-observed`` set-up.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from sipperf.lab import knobs, protocol
from sipperf.lab.longrun import PointSpec
from sipperf.lab.run import LabConfig

KNEE_PDR = 0.01                       #: the knee: the rate where 1 % of datagrams are dropped
#: knees assumed by the duration estimate before any probe has run (calls/s, guesses)
DEFAULT_KNEES = {1: 1200.0, 2: 1500.0, 4: 1500.0, 8: 1400.0}
OVERHEAD_S = 14.0                     #: per round: idle check, start, tracer attach/dump, stop
INGEST_S_PER_1000_CALLS = 0.9         #: read_run + reduction, measured (~0.7-0.9 s per 1000 calls)


@dataclass(frozen=True)
class PlanParams:
    """The sizes of a plan (``full`` for the dataset, ``pilot`` for a short try-out)."""

    name: str
    min_calls: int = 20000
    round_calls: int = 10000
    max_calls: int = 80000
    max_load_s: float = 300.0
    ci_target: float = 0.05
    probe_s: float = 8.0
    probe_start_cps: float = 200.0
    probe_factor: float = 1.5
    refine_steps: int = 3
    max_rate_cps: float = 12000.0
    fractions: tuple[float, ...] = (0.25, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2)
    #: absolute light-load rates added to the 1-worker sweep (service demand needs points where
    #: almost no packet waits; the knee fractions start far above them)
    light_rates_cps: tuple[float, ...] = (50.0, 100.0)
    workers: tuple[int, ...] = (1, 2, 4, 8)
    #: when no point of a sweep reached the knee's drop rate, extra points at
    #: fractions[-1] x past_knee_step**k of the knee, k = 1 .. past_knee_max, until one does
    past_knee_step: float = 1.15
    past_knee_max: int = 3
    sched_fraction: float = 0.7
    sched_min_calls: int = 10000
    sched_round_calls: int = 5000
    sched_max_calls: int = 40000
    overload_factors: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0)
    overload_seconds: float = 30.0
    guard_fraction: float = 0.8
    #: the overload series' guards (sipperf.lab.kamailio.GUARDS), replications of each (guard,
    #: load) point (fresh proxy and seed each; the seeds shared across guards), and pike's loads
    #: (None: overload_factors)
    overload_guards: tuple[str, ...] = ("none", "ratelimit", "pike")
    overload_replicates: int = 1
    pike_factors: tuple[float, ...] | None = None
    timeline_calls: int = 1500
    timeline_fractions: tuple[float, ...] = (0.25, 0.95, 1.2)   #: 1-worker points keeping a window
    hogs: int = 2
    # ---- the protocol (plans "protocol" and "protocol-pilot"; the older plans keep the first
    # recordings' set-up: nothing pinned, SIPp at nice -10, probes with tracer and capture)
    protocol: bool = False
    knee_replicates: int = 1             #: independent knee searches per knee (protocol: 3)
    pair_fraction: float = 0.7           #: the tracer on/off pair of each series, x knee
    setups: tuple[str, ...] = ()         #: the knee set-ups of the "setup" series (SETUPS)
    netns_fraction: float = 0.5
    netns_pairs: int = 3
    netns_calls: int = 10000
    #: SIPp's -buff_size (0: its default, 64 KB).  The protocol plans give it
    #: :data:`PROTOCOL_SIPP_BUFFER`: with the default, SIPp's sockets drop datagrams in bursts
    #: while its CPU is a third busy, and every knee search stopped there (docs/lab.md)
    sipp_buffer_bytes: int = 0
    #: the chain of proxies (series "chain", sipperf.lab.chain): the open sweep's rates as
    #: fractions of the chain's capacity predicted from the 1-worker knee, offered seconds per
    #: point, and the closed runs' populations (SIPp -users) and seconds
    chain_fractions: tuple[float, ...] = ()
    chain_seconds: float = 20.0
    chain_users: tuple[int, ...] = ()
    chain_closed_seconds: float = 30.0      #: >= 20 per-second counts after the warm-up: an interval
    chain_keep_capture_calls: int = 300


#: the chain's open sweep, as fractions of its predicted capacity (sipperf.lab.chain.predicted_knee):
#: light load, the knee's neighbourhood, and past it
CHAIN_FRACTIONS = (0.1, 0.25, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2, 1.4)
#: the closed runs' populations (SIPp -users N: N calls at all times, each a new call as one ends)
CHAIN_USERS = (1, 2, 5, 10, 25, 50, 100, 200, 400, 800)

#: SIPp's socket buffers under the protocol (bytes; the kernel caps them at net.core.rmem_max and
#: wmem_max, which meta.json records): datasets/lab/protocol/buffer_ab.csv, recorded by
#: datasets/lab/buffer_ab.py, has the default drop datagrams at every rate and this none
PROTOCOL_SIPP_BUFFER = 4 << 20

PLANS = {
    "full": PlanParams("full"),
    "pilot": PlanParams("pilot", min_calls=2000, round_calls=1000, max_calls=4000, max_load_s=20.0,
                        probe_s=3.0, refine_steps=1, fractions=(0.3, 0.8, 1.1), workers=(1, 4),
                        light_rates_cps=(100.0,),
                        sched_min_calls=2000, sched_round_calls=1000, sched_max_calls=3000, overload_factors=(1.5,),
                        overload_seconds=8.0, timeline_calls=300, timeline_fractions=(0.3,)),
    # the re-recording under the protocol (datasets/lab/protocol): every series, replicated knees
    "protocol": PlanParams("protocol", protocol=True, knee_replicates=3, sipp_buffer_bytes=PROTOCOL_SIPP_BUFFER,
                           fractions=(0.25, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2),
                           light_rates_cps=(25.0, 50.0, 100.0, 200.0),
                           timeline_fractions=(0.25, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2),
                           setups=("protocol", "protocol-observed", "shared", "shared-nice-10-observed",
                                   "protocol-1s", "netns"),
                           # issue 25: no guard, the INVITE-only and the all-request limit from
                           # half to three times the knee, three replications each; pike as before
                           overload_factors=(0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0),
                           overload_guards=("none", "ratelimit", "ratelimit-all", "pike"),
                           overload_replicates=3, pike_factors=(1.0, 1.5, 2.0, 3.0),
                           chain_fractions=CHAIN_FRACTIONS, chain_users=CHAIN_USERS),
    # its pilot: one worker count, fewer rates, small points (tests the tooling; not a dataset)
    "protocol-pilot": PlanParams("protocol-pilot", protocol=True, knee_replicates=3, min_calls=3000,
                                 sipp_buffer_bytes=PROTOCOL_SIPP_BUFFER,
                                 round_calls=2000, max_calls=7000, max_load_s=30.0, probe_s=4.0,
                                 refine_steps=2, fractions=(0.5, 0.85, 1.0, 1.15), workers=(1,),
                                 light_rates_cps=(100.0,), timeline_calls=300, timeline_fractions=(0.85,),
                                 setups=("protocol", "protocol-observed"),
                                 sched_min_calls=2000, sched_round_calls=1000, sched_max_calls=3000,
                                 overload_factors=(0.75, 1.5), overload_seconds=6.0,
                                 overload_guards=("none", "ratelimit", "ratelimit-all", "pike"),
                                 overload_replicates=2, pike_factors=(1.5,),
                                 netns_pairs=2, netns_calls=3000,
                                 chain_fractions=(0.3, 0.7, 1.0, 1.3), chain_seconds=6.0,
                                 chain_users=(20, 200), chain_closed_seconds=6.0,
                                 chain_keep_capture_calls=100),
}


@dataclass(frozen=True)
class KneeSetup:
    """A set-up under which the 1-worker knee is searched (series ``setup``)."""

    name: str
    overrides: dict                  #: LabConfig fields over the protocol's counters-only probe
    what: str
    probe_s: float | None = None     #: None: the plan's probe length


#: the set-ups whose knees explain the gap between the first recordings and the protocol
SETUPS: dict[str, KneeSetup] = {s.name: s for s in (
    KneeSetup("protocol", {}, "the protocol: proxy on CPU 0, SIPp on CPU 1, both at nice 0; "
                              "counters only (no tracer, no capture)"),
    KneeSetup("protocol-observed", {"tracer": "map", "capture": True},
              "the protocol with the tracer (map mode) and dumpcap running, on the generator's CPU"),
    KneeSetup("shared", {"placement": "shared"}, "nothing pinned (proxy and SIPp share both CPUs), "
                                                 "SIPp at nice 0; counters only"),
    KneeSetup("shared-nice-10-observed", {"placement": "shared", "load_nice": -10, "tracer": "map",
                                          "capture": True},
              "the first recordings' set-up: nothing pinned, SIPp at nice -10, tracer and capture on"),
    KneeSetup("protocol-1s", {}, "the protocol with 1-s probes (the short series' overload runs "
                                 "offered their calls in about a second)", probe_s=1.0),
    KneeSetup("netns", {"netns": True}, "the protocol with UAC, proxy and UAS in three network "
                                        "namespaces joined by veth pairs"),
)}

_RT = str(knobs.PROC_SCHED / "sched_rt_runtime_us")
_RR = str(knobs.PROC_SCHED / "sched_rr_timeslice_ms")
_AG = str(knobs.PROC_SCHED / "sched_autogroup_enabled")
_DBG = knobs.DEBUGFS_SCHED

#: name -> (LabConfig overrides, what it is).  ``tuning`` is a sipperf.lab.knobs.Tuning dict.
TREATMENTS: dict[str, tuple[dict, str]] = {
    "default": ({}, "SCHED_OTHER, nice 0, EEVDF default slice; no knob changed"),
    "nice-10": ({"tuning": {"name": "nice-10", "nice": -10}}, "proxy at nice -10 (weight x9.3)"),
    "batch": ({"tuning": {"name": "batch", "policy": "batch"}}, "SCHED_BATCH (no wakeup preemption)"),
    "slice-0.1ms": ({"tuning": {"name": "slice-0.1ms", "slice_us": 100}},
                    "EEVDF slice request 0.1 ms (sched_attr.sched_runtime; the thesis's "
                    "sched_min_granularity_ns = 100,000)"),
    "slice-10ms": ({"tuning": {"name": "slice-10ms", "slice_us": 10000}}, "EEVDF slice request 10 ms"),
    "fifo": ({"tuning": {"name": "fifo", "policy": "fifo", "priority": 50}},
             "SCHED_FIFO 50 (RT throttling at the default 95 %)"),
    "fifo-unthrottled": ({"tuning": {"name": "fifo-unthrottled", "policy": "fifo", "priority": 50,
                                     "files": {_RT: "-1"}}},
                         "SCHED_FIFO 50 and sched_rt_runtime_us = -1 (no RT throttling)"),
    "rr-10ms": ({"tuning": {"name": "rr-10ms", "policy": "rr", "priority": 50, "files": {_RR: "10"}}},
                "SCHED_RR 50 and sched_rr_timeslice_ms = 10"),
    "autogroup-off": ({"tuning": {"name": "autogroup-off", "files": {_AG: "0"}}},
                      "sched_autogroup_enabled = 0 (fairness per task, not per session)"),
    "cgroup-weight-1000": ({"tuning": {"name": "cgroup-weight-1000", "cgroup_weight": 1000}},
                           "proxy in a child cgroup of weight 1000 (v2 cpu.weight; v1 cpu.shares 10240)"),
    "pinned": ({"sched": "pinned"}, "taskset: proxy on CPU 0; SIPp, dumpcap, tracer on CPU 1"),
    # the thesis's knobs, where this kernel lets them be written (debugfs; refused under lockdown)
    "base-slice-0.1ms": ({"tuning": {"name": "base-slice-0.1ms",
                                     "files": {str(_DBG / "base_slice_ns"): "100000"}}},
                         "debugfs base_slice_ns = 100,000 (the thesis's min_granularity)"),
    "migration-cost-0": ({"tuning": {"name": "migration-cost-0",
                                     "files": {str(_DBG / "migration_cost_ns"): "0"}}},
                         "debugfs migration_cost_ns = 0 (thesis ch. 7, 2 cores)"),
    "thesis-enhanced": ({"tuning": {"name": "thesis-enhanced",
                                    "files": {str(_DBG / "base_slice_ns"): "100000",
                                              str(_DBG / "migration_cost_ns"): "0",
                                              str(_DBG / "tunable_scaling"): "0"}}},
                        "the thesis's enhanced multi-core server mode, as far as EEVDF keeps it"),
}


def treatment_files(name: str) -> dict[str, str]:
    ov = TREATMENTS[name][0]
    return dict((ov.get("tuning") or {}).get("files", {}))


def available_treatments(table: dict | None) -> tuple[list[str], dict[str, str]]:
    """(treatments whose every knob file the probe found writable, {skipped: why})."""
    ok, skipped = [], {}
    for name in TREATMENTS:
        files = treatment_files(name)
        bad = [f for f, v in files.items() if table is None or not knobs.writable(table, f, v)]
        if bad:
            skipped[name] = "not writable here: " + ", ".join(bad)
        else:
            ok.append(name)
    return ok, skipped


def base_config(params: PlanParams, **kw) -> LabConfig:
    """The configuration shared by the recorded points (Poisson arrivals, tracer map, -nr).
    The protocol plans take the protocol's placement (LabConfig's defaults); the older plans
    keep the first recordings' set-up (nothing pinned, SIPp at nice -10)."""
    d = dict(arrivals="poisson", tracer="map", retransmissions=False, max_seconds=900.0)
    if params.protocol:
        d.update(placement="split", load_nice=protocol.GENERATOR_NICE,
                 sipp_buffer_bytes=params.sipp_buffer_bytes)
    else:
        d.update(placement="shared", load_nice=-10)
    d.update(kw)
    return LabConfig(**d)


def probe_config(params: PlanParams, workers: int, setup: str = "protocol") -> LabConfig:
    """The configuration of a knee probe: counters only under the protocol (the set-up's
    overrides on top), the recorded points' configuration in the older plans."""
    if not params.protocol:
        return base_config(params, workers=workers)
    return base_config(params, **{"workers": workers, "tracer": "none", "capture": False,
                                  **SETUPS[setup].overrides})


def setup_probe_s(params: PlanParams, setup: str) -> float:
    s = SETUPS.get(setup)
    return s.probe_s if s is not None and s.probe_s is not None else params.probe_s


def round_rate(r: float) -> float:
    """Rates on a readable grid: 5 cps steps below 100, 10 below 1000, 50 above."""
    step = 5.0 if r < 100 else 10.0 if r < 1000 else 50.0
    return max(step, round(r / step) * step)


def worker_points(params: PlanParams, workers: int, knee: float) -> list[PointSpec]:
    out = []
    fractions = list(params.fractions)
    if workers == 1:   # light-load points first, as fractions of the knee (kept only below it)
        fractions = [r / knee for r in params.light_rates_cps if r < fractions[0] * knee] + fractions
    for i, f in enumerate(fractions):
        rate = round_rate(f * knee)
        light = f < params.fractions[0]
        keep = params.timeline_calls if (workers == 1 and (light or f in params.timeline_fractions)) else 0
        out.append(PointSpec(
            run_id=f"workers-c{workers}-r{int(rate):05d}", series="workers",
            cfg=base_config(params, workers=workers, rate_cps=rate, seed=10000 * workers + i + 1),
            min_calls=params.min_calls, round_calls=params.round_calls, max_calls=params.max_calls,
            max_load_s=params.max_load_s, ci_target=params.ci_target, keep_timeline_calls=keep,
            label={"knee_cps": knee, "fraction_of_knee": f}))
    if params.protocol:
        out = _pair(out, params.pair_fraction, f"workers-c{workers}", "none")
    return out


def _pair(points: list[PointSpec], fraction: float, pair: str, tracer: str) -> list[PointSpec]:
    """Add the tracer on/off twin of the point nearest ``fraction`` x knee: same configuration and
    seed, ``tracer`` instead; both carry ``tracer_pair`` in their label."""
    if not points:
        return points
    i = int(np.argmin([abs(p.label.get("fraction_of_knee", 0) - fraction) for p in points]))
    p = points[i]
    p.label["tracer_pair"] = pair
    twin = dataclasses.replace(
        p, run_id=f"{p.run_id}-tracer-{'off' if tracer == 'none' else tracer}",
        cfg=dataclasses.replace(p.cfg, tracer=tracer), keep_timeline_calls=0,
        label={**p.label, "tracer_pair": pair})
    return points[:i + 1] + [twin] + points[i + 1:]


def past_knee_point(params: PlanParams, workers: int, knee: float, k: int) -> PointSpec:
    """The ``k``-th extra point (k = 1, 2, ...) beyond the last knee fraction, at
    ``fractions[-1] x past_knee_step**k`` of the knee.  Recorded when no point of the sweep
    reached the knee's drop rate: short probes can place the knee below where long runs put it,
    and a sweep that never crosses 1 % would leave the knee censored."""
    f = params.fractions[-1] * params.past_knee_step ** k
    rate = round_rate(f * knee)
    return PointSpec(
        run_id=f"workers-c{workers}-r{int(rate):05d}", series="workers",
        cfg=base_config(params, workers=workers, rate_cps=rate, seed=10000 * workers + 100 + k),
        min_calls=params.min_calls, round_calls=params.round_calls, max_calls=params.max_calls,
        max_load_s=params.max_load_s, ci_target=params.ci_target, keep_timeline_calls=0,
        label={"knee_cps": knee, "fraction_of_knee": f, "past_knee": k})


def sched_points(params: PlanParams, knee1: float, names: list[str]) -> list[PointSpec]:
    rate = round_rate(params.sched_fraction * knee1)
    out = []
    for hogs in (0, params.hogs):
        for i, name in enumerate(names):
            ov, what = TREATMENTS[name]
            cfg = base_config(params, workers=1, rate_cps=rate, seed=20000 + i + 1,
                              background_hogs=hogs, **ov)
            out.append(PointSpec(
                run_id=f"sched-{name}-{'load' if hogs else 'quiet'}", series="sched", cfg=cfg,
                min_calls=params.sched_min_calls, round_calls=params.sched_round_calls,
                max_calls=params.sched_max_calls, max_load_s=params.max_load_s,
                ci_target=params.ci_target,
                label={"knee_cps": knee1, "fraction_of_knee": params.sched_fraction,
                       "treatment": name, "treatment_what": what}))
    if params.protocol and out:
        first = [p for p in out if p.label["treatment"] == names[0] and not p.cfg.background_hogs][:1]
        if first:
            out = _pair(first, params.sched_fraction, "sched", "none") + [p for p in out if p is not first[0]]
    return out


def overload_run_id(params: PlanParams, guard: str, f: float, rep: int) -> str:
    """``overload-<guard>-x<load>`` (the long recording), with two decimals and ``-rep<k>`` when
    points are replicated (the protocol)."""
    if params.overload_replicates > 1:
        return f"overload-{guard}-x{f:.2f}-rep{rep}"
    return f"overload-{guard}-x{f:.1f}"


def overload_points(params: PlanParams, knee1: float) -> list[PointSpec]:
    """One worker past (and, in the protocol, below) its knee with SIPp's retransmissions on,
    under each guard of ``overload_guards`` admitting ``guard_fraction`` x knee calls/s:
    ``overload_replicates`` independent runs per (guard, load), each a fresh proxy; replicate k
    at load i has the same seed under every guard (common random numbers: the guards are
    compared on the same arrivals).  Replicates first, so an interrupted recording holds whole
    comparisons."""
    out = []
    guard_cps = round_rate(params.guard_fraction * knee1)
    for k in range(params.overload_replicates):
        for g in params.overload_guards:
            factors = params.pike_factors if (g == "pike" and params.pike_factors) else params.overload_factors
            for f in factors:
                i = params.overload_factors.index(f) if f in params.overload_factors else 50 + list(factors).index(f)
                rate = round_rate(f * knee1)
                calls = int(rate * params.overload_seconds)
                cfg = base_config(params, workers=1, rate_cps=rate, seed=30000 + 100 * k + i + 1,
                                  retransmissions=True, tracer="none", capture=False,
                                  guard=g, guard_cps=guard_cps if g != "none" else 0.0,
                                  absorb_early=True)
                label = {"knee_cps": knee1, "fraction_of_knee": f, "offered_seconds": params.overload_seconds}
                if params.overload_replicates > 1:
                    label["replicate"] = k
                out.append(PointSpec(
                    run_id=overload_run_id(params, g, f, k), series="overload", cfg=cfg, min_calls=calls,
                    round_calls=calls, max_calls=calls, max_load_s=params.overload_seconds * 2,
                    ci_target=params.ci_target, label=label))
    if params.protocol:      # the overload runs are counters-only, tracer off: the pair turns it on
        first = [p for p in out if p.cfg.guard == "none" and p.label.get("replicate", 0) == 0]
        paired = _pair(first, 1.5, "overload", "map")   # first, the twin after its partner
        twins = [p for p in paired if not any(p is q for q in first)]
        if twins:
            at = next(i for i, p in enumerate(out) if p.label.get("tracer_pair")) + 1
            out = out[:at] + twins + out[at:]
    return out


def netns_points(params: PlanParams, knee1: float) -> list[PointSpec]:
    """Loopback against three network namespaces: ``netns_pairs`` pairs of one-round points at
    ``netns_fraction`` x the knee, the same seed within a pair, the order alternating."""
    rate = round_rate(params.netns_fraction * knee1)
    out = []
    for i in range(params.netns_pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        for ns in order:
            cfg = base_config(params, workers=1, rate_cps=rate, seed=40000 + i, netns=ns)
            out.append(PointSpec(
                run_id=f"netns-pair{i}-{'ns' if ns else 'lo'}", series="netns", cfg=cfg,
                min_calls=params.netns_calls, round_calls=params.netns_calls,
                max_calls=params.netns_calls, max_load_s=params.max_load_s, ci_target=params.ci_target,
                label={"knee_cps": knee1, "fraction_of_knee": params.netns_fraction, "pair": i,
                       "network": "netns" if ns else "loopback"}))
    return out


# ---- the chain of proxies (sipperf.lab.chain) -------------------------------------------------

#: the light-load run that measures each hop's CPU per call (D_i), as a fraction of the 1-worker
#: knee; the sweep's rates are then fractions of the chain's capacity predicted from D_i
CHAIN_LIGHT_FRACTION = 0.1
#: the chain's capacity assumed by the estimate before any run, as a share of the 1-worker knee
#: (a guess: the core does about twice the edge's work and both share one CPU)
CHAIN_KNEE_GUESS_SHARE = 0.35
CHAIN_OVERHEAD_S = 12.0       #: per chain run: namespaces, two proxies, registrar, stop, idle check
CHAIN_INGEST_S_PER_1000_CALLS = 0.5   #: sipperf analyze of the bridge capture (20 packets a call)


def _chain_cfg(params: PlanParams, **kw):
    from sipperf.lab.chain import ChainConfig

    return ChainConfig(**{"load_nice": protocol.GENERATOR_NICE, "max_seconds": 900.0, **kw})


def chain_light_point(params: PlanParams, knee1: float):
    """The chain at light load (``CHAIN_LIGHT_FRACTION`` x the 1-worker knee): each hop's CPU
    per call, from which :func:`sipperf.lab.chain.predicted_knee` places the sweep."""
    from sipperf.lab.chain import ChainPoint

    rate = round_rate(CHAIN_LIGHT_FRACTION * knee1)
    calls = max(200, int(rate * params.chain_seconds))
    return ChainPoint(f"chain-light-r{int(rate):05d}", _chain_cfg(params, rate_cps=rate, calls=calls, seed=50000),
                      {"series": "chain", "role": "light", "knee1_cps": knee1})


def chain_points(params: PlanParams, knee1: float, predicted: float) -> list:
    """The chain series after its light run: the open sweep at ``chain_fractions`` x the
    predicted capacity, a short run whose raw capture is kept (``chain-sample``), and the closed
    runs, one per population of ``chain_users`` (about ``chain_closed_seconds`` of calls each:
    N / (hold + 10 ms) calls/s at most, the predicted capacity at most)."""
    from sipperf.lab.chain import ChainPoint

    out = []
    base = {"series": "chain", "knee1_cps": knee1, "predicted_knee_cps": predicted}
    for i, f in enumerate(params.chain_fractions):
        rate = round_rate(f * predicted)
        calls = max(200, int(rate * params.chain_seconds))
        out.append(ChainPoint(f"chain-open-r{int(rate):05d}",
                              _chain_cfg(params, rate_cps=rate, calls=calls, seed=50001 + i),
                              {**base, "role": "sweep", "fraction_of_predicted": f}))
    rate = round_rate(0.25 * predicted)
    out.append(ChainPoint("chain-sample", _chain_cfg(params, rate_cps=rate, calls=params.chain_keep_capture_calls,
                                                     seed=50100),
                          {**base, "role": "sample", "fraction_of_predicted": 0.25}, keep_raw=True))
    for j, n in enumerate(params.chain_users):
        hold_s = _chain_cfg(params).hold_ms / 1000.0
        x = min(n / (hold_s + 0.010), predicted)
        calls = max(30, int(x * params.chain_closed_seconds))
        out.append(ChainPoint(f"chain-closed-n{n:05d}",
                              _chain_cfg(params, users=n, calls=calls, seed=50200 + j,
                                         max_seconds=3 * params.chain_closed_seconds + 60.0),
                              {**base, "role": "closed"}))
    return out


def chain_past_knee_point(params: PlanParams, knee1: float, predicted: float, k: int):
    """The ``k``-th extra open point (k = 1, 2, 3) beyond the sweep when none of its points
    reached 1 % drops at any hop: ``chain_fractions[-1] x past_knee_step**k`` x the prediction
    (light-load CPU per call overstates the demand at high load, so the real knee can lie
    above the prediction)."""
    from sipperf.lab.chain import ChainPoint

    f = params.chain_fractions[-1] * (1.2 ** k)
    rate = round_rate(f * predicted)
    return ChainPoint(f"chain-open-r{int(rate):05d}",
                      _chain_cfg(params, rate_cps=rate, calls=max(200, int(rate * params.chain_seconds)),
                                 seed=50050 + k),
                      {"series": "chain", "knee1_cps": knee1, "predicted_knee_cps": predicted,
                       "role": "sweep", "fraction_of_predicted": f, "past_knee": k})


def chain_seconds(params: PlanParams, knee1: float, predicted: float | None = None) -> float:
    """Expected seconds of the chain series (the light run, the sweep, the sample, the closed
    runs), the capacity guessed as ``CHAIN_KNEE_GUESS_SHARE`` x the 1-worker knee when unknown."""
    pk = predicted or CHAIN_KNEE_GUESS_SHARE * knee1
    pts = [chain_light_point(params, knee1), *chain_points(params, knee1, pk)]
    s = 0.0
    for p in pts:
        c = p.cfg
        load = (c.calls / c.rate_cps if not c.closed else
                c.calls / min(c.users / (c.hold_ms / 1000.0 + 0.010), pk)) + c.hold_ms / 1000.0 + 1.0
        s += load + CHAIN_OVERHEAD_S + CHAIN_INGEST_S_PER_1000_CALLS * c.calls / 1000.0
    return s


# ---- the duration estimate ---------------------------------------------------------------------

def round_seconds(calls: int, rate: float, ingest: bool = True) -> float:
    return calls / rate + 1.0 + OVERHEAD_S + (INGEST_S_PER_1000_CALLS * calls / 1000.0 if ingest else 0.0)


#: seconds between two counters-only runs beyond their load (start, stop, the idle check):
#: 4.5-4.8 s between the overload points of datasets/lab/long (idle machine)
COUNTERS_OVERHEAD_S = 6.0


def overload_load_s(p: PointSpec, worst: bool = False) -> float:
    """The load phase of a counters-only run with retransmissions on: the offered seconds, then
    the calls still retransmitting, cut by the run's bound (1.5 x offered + 40 s, stopped 5 s
    after it).  Expected, from the overload points of datasets/lab/long: at or below the knee
    the calls end within seconds (31.1-34.4 s of load for 30 s offered), past it without a guard
    or with a limit of all requests the run lasts to its bound (90.9 s), the INVITE-only limit
    to 1.5 x the knee 42 s, pike 31-32 s."""
    offered = p.min_calls / p.cfg.rate_cps
    bound = min(p.cfg.max_seconds, 1.5 * offered + 40.0) + 5.0
    f = float(p.label.get("fraction_of_knee", 1.0))
    if worst or (f > 1.05 and p.cfg.guard in ("none", "ratelimit-all")) or (f >= 2.0 and p.cfg.guard == "ratelimit"):
        return bound
    if f > 1.05 and p.cfg.guard == "ratelimit":
        return min(bound, offered + 12.0)
    return min(bound, offered + 4.0)


def point_seconds(p: PointSpec, worst: bool = False) -> float:
    r = p.cfg.rate_cps
    if not p.cfg.capture:       # counters-only overload runs: offered load + retransmission drain
        return overload_load_s(p, worst) + COUNTERS_OVERHEAD_S
    t = round_seconds(p.min_calls, r)
    if worst:
        extra, offered, load = 0.0, p.min_calls, p.min_calls / r
        while offered < p.max_calls and load < p.max_load_s:
            n = min(p.round_calls, p.max_calls - offered)
            extra += round_seconds(n, r)
            offered += n
            load += n / r
        t += extra
    return t


def probe_count(params: PlanParams, knee: float, start: float) -> int:
    steps = max(0, math.ceil(math.log(max(knee, start) / start) / math.log(params.probe_factor)))
    return steps + 1 + params.refine_steps


#: a probe's seconds beyond its offered seconds: start, stop, the tracer's dump, the -nr receive
#: timeout (5 s) past the knee.  Measured: 7-15 s between the 8-s probes of long/probes.csv (idle
#: machine, tracer on); 5-10 s between the 4-s counters-only probes of the protocol pilot (busy)
PROBE_OVERHEAD_S = 12.0
#: knees assumed by the protocol plan's estimate before any probe (1 worker: the pilot's)
PROTOCOL_KNEES = {1: 1500.0, 2: 1700.0, 4: 1700.0, 8: 1600.0}


def protocol_probe_count(params: PlanParams, knee: float, start: float) -> int:
    """Probes of ``knee_replicates`` searches: the first climbs from ``start`` by the factor,
    the others from 0.8 x knee by its square root; each bisects ``refine_steps`` times."""
    first = probe_count(params, knee, start)
    f2 = math.sqrt(params.probe_factor)
    other = max(0, math.ceil(math.log(1 / 0.8) / math.log(f2))) + 1 + params.refine_steps
    return first + (params.knee_replicates - 1) * other


def estimate(params: PlanParams, series: list[str], knees: dict[int, float],
             treatments: list[str]) -> dict:
    """Expected and worst-case seconds per series (knees: known or assumed)."""
    if params.protocol:
        return estimate_protocol(params, series, knees, treatments)
    out: dict = {}
    k = {c: knees.get(c, DEFAULT_KNEES.get(c, 1500.0)) for c in {1, *params.workers}}
    if "workers" in series:
        exp = worst = 0.0
        for c in params.workers:
            start = params.probe_start_cps if c == 1 else 0.5 * k[1]
            probes = probe_count(params, k[c], start) * (params.probe_s + OVERHEAD_S)
            pts = worker_points(params, c, k[c])
            exp += probes + sum(point_seconds(p) for p in pts)
            worst += probes + sum(point_seconds(p, True) for p in pts)
        out["workers"] = (exp, worst)
    if "sched" in series:
        pts = sched_points(params, k[1], treatments)
        out["sched"] = (sum(point_seconds(p) for p in pts), sum(point_seconds(p, True) for p in pts))
    if "overload" in series:
        pts = overload_points(params, k[1])
        s = sum(point_seconds(p) for p in pts)
        out["overload"] = (s, s)
    out["total"] = (sum(v[0] for v in out.values()), sum(v[1] for v in out.values()))
    out["knees_assumed"] = {c: (round(knees[c]) if c in knees else f"{k[c]:g} (guess)")
                            for c in params.workers}
    return out


def estimate_protocol(params: PlanParams, series: list[str], knees: dict[int, float],
                      treatments: list[str]) -> dict:
    """The protocol plan's duration: expected and worst case (every point to its cap) per
    series; the knee searches at :data:`PROBE_OVERHEAD_S` beyond their offered seconds."""
    out: dict = {}
    k = {c: knees.get(c, PROTOCOL_KNEES.get(c, 1500.0)) for c in {1, *params.workers}}

    def search_s(knee: float, start: float, probe_s: float) -> float:
        return protocol_probe_count(params, knee, start) * (probe_s + PROBE_OVERHEAD_S)

    if 1 not in knees and "workers" not in series and set(series) - {"workers"}:
        # the series placed at fractions of the 1-worker knee need its search first
        s = search_s(k[1], params.probe_start_cps, params.probe_s)
        out["knee"] = (s, s)
    if "setup" in series:
        s = sum(search_s(k[1], params.probe_start_cps, setup_probe_s(params, n))
                for n in params.setups if n != "protocol")
        out["setup"] = (s, s)
    if "workers" in series:
        exp = worst = 0.0
        for c in params.workers:
            start = params.probe_start_cps if c == 1 else 0.5 * k[1]
            probes = search_s(k[c], start, params.probe_s)
            pts = worker_points(params, c, k[c])
            exp += probes + sum(point_seconds(p) for p in pts)
            worst += probes + sum(point_seconds(p, True) for p in pts)
        out["workers"] = (exp, worst)
    if "sched" in series:
        pts = sched_points(params, k[1], treatments)
        out["sched"] = (sum(point_seconds(p) for p in pts), sum(point_seconds(p, True) for p in pts))
    if "overload" in series:
        pts = overload_points(params, k[1])
        out["overload"] = (sum(point_seconds(p) for p in pts), sum(point_seconds(p, True) for p in pts))
    if "netns" in series:
        pts = netns_points(params, k[1])
        s = sum(point_seconds(p) for p in pts)
        out["netns"] = (s, s)
    if "chain" in series and params.chain_fractions:
        s = chain_seconds(params, k[1])
        # worst: three extra points past the knee, every closed run at its bound
        extra = sum(chain_past_knee_point(params, k[1], CHAIN_KNEE_GUESS_SHARE * k[1], j).cfg.calls
                    / chain_past_knee_point(params, k[1], CHAIN_KNEE_GUESS_SHARE * k[1], j).cfg.rate_cps
                    + CHAIN_OVERHEAD_S + 5.0 for j in range(1, 4))
        out["chain"] = (s, s + extra + len(params.chain_users) * params.chain_closed_seconds)
    out["total"] = (sum(v[0] for v in out.values()), sum(v[1] for v in out.values()))
    out["knees_assumed"] = {c: (round(knees[c]) if c in knees else f"{k[c]:g} (guess)")
                            for c in params.workers}
    return out
