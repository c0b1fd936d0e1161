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
             retransmissions on, without a guard and with Kamailio's ``ratelimit`` or ``pike``
             answering 503 + Retry-After above ``guard_fraction`` x knee.  Counters only (no
             capture, no tracer: at these rates they would be the bottleneck): goodput,
             retransmissions, 503s, socket drops, per second from SIPp's statistics.

The 1-worker knee (``knees.csv``) sets the rates of ``sched`` and ``overload``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from sipperf.lab import knobs
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
    timeline_calls: int = 1500
    timeline_fractions: tuple[float, ...] = (0.25, 0.95, 1.2)   #: 1-worker points keeping a window
    hogs: int = 2


PLANS = {
    "full": PlanParams("full"),
    "pilot": PlanParams("pilot", min_calls=2000, round_calls=1000, max_calls=4000, max_load_s=20.0,
                        probe_s=3.0, refine_steps=1, fractions=(0.3, 0.8, 1.1), workers=(1, 4),
                        light_rates_cps=(100.0,),
                        sched_min_calls=2000, sched_round_calls=1000, sched_max_calls=3000, overload_factors=(1.5,),
                        overload_seconds=8.0, timeline_calls=300, timeline_fractions=(0.3,)),
}

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
    """The configuration shared by the recorded points (Poisson arrivals, tracer map, -nr)."""
    d = dict(arrivals="poisson", tracer="map", retransmissions=False, max_seconds=900.0)
    d.update(kw)
    return LabConfig(**d)


def round_rate(r: float) -> float:
    """Rates on a readable grid: 10 cps steps below 1000, 50 above."""
    step = 10.0 if r < 1000 else 50.0
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
    return out


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
    return out


def overload_points(params: PlanParams, knee1: float) -> list[PointSpec]:
    out = []
    guard_cps = round_rate(params.guard_fraction * knee1)
    for g in ("none", "ratelimit", "pike"):
        for i, f in enumerate(params.overload_factors):
            rate = round_rate(f * knee1)
            calls = int(rate * params.overload_seconds)
            cfg = base_config(params, workers=1, rate_cps=rate, seed=30000 + i + 1,
                              retransmissions=True, tracer="none", capture=False,
                              guard=g, guard_cps=guard_cps if g != "none" else 0.0,
                              absorb_early=True)
            out.append(PointSpec(
                run_id=f"overload-{g}-x{f:.1f}", series="overload", cfg=cfg, min_calls=calls,
                round_calls=calls, max_calls=calls, max_load_s=params.overload_seconds * 2,
                ci_target=params.ci_target,
                label={"knee_cps": knee1, "fraction_of_knee": f, "offered_seconds": params.overload_seconds}))
    return out


# ---- the duration estimate ---------------------------------------------------------------------

def round_seconds(calls: int, rate: float, ingest: bool = True) -> float:
    return calls / rate + 1.0 + OVERHEAD_S + (INGEST_S_PER_1000_CALLS * calls / 1000.0 if ingest else 0.0)


def point_seconds(p: PointSpec, worst: bool = False) -> float:
    r = p.cfg.rate_cps
    if not p.cfg.capture:       # counters-only overload runs: offered load + retransmission drain
        return p.min_calls / r + 20.0 + OVERHEAD_S
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


def estimate(params: PlanParams, series: list[str], knees: dict[int, float],
             treatments: list[str]) -> dict:
    """Expected and worst-case seconds per series (knees: known or assumed)."""
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
