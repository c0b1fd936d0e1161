"""The recording protocol behind every lab number (``docs/lab.md``, "The recording protocol").

1. **Placement.**  The proxy and the load generator run on disjoint CPUs at equal priority:
   every Kamailio process on :data:`PROXY_CPUS`; the SIPp UAC and UAS, dumpcap and bpftrace
   on :data:`GENERATOR_CPUS` (``taskset``), all at nice 0 (``LabConfig.load_nice``).  Each
   run reads back, from ``/proc``, where every process was allowed to run and at which nice
   value (``meta.json`` ``placement``), and :func:`check_placement` says whether that was the
   protocol's placement.
2. **The generator is watched.**  Per run: its own CPU seconds (UAC + UAS, ``generator_cpu``;
   dumpcap and bpftrace, ``observer_cpu``), the busy share of its CPUs, the drops at its own sockets, SIPp's failed calls, dead-call
   messages, retransmissions and its "late" counter (the watchdog: a trip whenever SIPp's main
   loop ran more than :data:`LATE_MS` ms late), and, where a capture exists, how late the
   INVITEs left against the Poisson plan.  :func:`generator_verdict` flags a run whose
   generator was the bottleneck (``generator_bound``), and a flagged run is never used for a
   knee (:mod:`sipperf.lab.knees`).
3. **Observer effect in every series**: each series has a point recorded twice, tracer on
   (``map``) and off (``none``), with the same seeds (:mod:`sipperf.lab.plan`).
4. **Stopping rule**: each point runs until the batch-means 95 % CI half-width of its mean
   sojourn is within :data:`CI_TARGET` of the mean, or a recorded cap
   (:mod:`sipperf.lab.longrun`, ``ci_reached`` in ``runs.csv``).
5. **Knees are replicated**: every knee comes from at least :data:`KNEE_REPLICATES`
   independent searches (:func:`sipperf.lab.longrun.find_knee_replicated`), combined with an
   interval that includes the spread between them and the interpolation between probe rates
   (:func:`sipperf.lab.knees.knee_estimate`).
"""
from __future__ import annotations

import numpy as np

PROXY_CPUS = (0,)                 #: the proxy's CPU(s)
GENERATOR_CPUS = (1,)             #: SIPp UAC + UAS, dumpcap, bpftrace
GENERATOR_NICE = 0                #: equal priority with the proxy (nice 0)
CI_TARGET = 0.05                  #: batch-means 95 % CI half-width / mean of the sojourn
KNEE_REPLICATES = 3               #: independent knee searches per knee

#: SIPp's watchdog is set to fire every WATCHDOG_INTERVAL_MS; a *late* trip is counted when it
#: ran more than LATE_MS later than that (its main loop, which sends every message, was stalled)
WATCHDOG_INTERVAL_MS = 10
LATE_MS = 20
#: a late trip of more than this (ms) is a "major" one
LATE_MAJOR_MS = 200

# ---- when is the generator the bottleneck? -----------------------------------------------------
#: the generator's side (SIPp UAC + UAS, dumpcap, bpftrace: their own /proc CPU seconds) used
#: more than this share of the generator's CPUs while the calls were offered
GEN_CPU_BUSY_MAX = 0.90
#: one SIPp process (single-threaded) used more than this share of a CPU
GEN_PROCESS_MAX = 0.90
#: the generator's sockets dropped more than this fraction of the datagrams the proxy read
GEN_DROP_FRACTION_MAX = 1e-3
#: SIPp's main loop was late (> LATE_MS) more often than this many times per second of load:
#: flagged when the count of late trips is too large for this rate (one-sided Poisson test at
#: GEN_LATE_ALPHA), so one trip in a short run is not a verdict
GEN_LATE_PER_S_MAX = 0.1
GEN_LATE_ALPHA = 0.05
#: INVITE lateness against the Poisson plan (captured runs) is split in two: a smooth *trend* (the
#: median lateness in windows of TREND_WINDOW_MS of planned time, interpolated between them) and
#: the *burst* around it.  SIPp 3.6 lets its calls' planned pauses drift late slowly and smoothly
#: (a few ms per second of load, growing with the rate, on an idle generator too: the baseline in
#: datasets/lab/protocol/lateness_baseline.csv) -- a slightly slower but still Poisson stream; a
#: stalled generator instead sends what it owed in a burst.  Flagged: the burst's 99th
#: percentile above GEN_BURST_P99_MS_MAX, or the trend's rise over the run a shortfall of the
#: offered rate of more than GEN_RATE_SHORTFALL_MAX
TREND_WINDOW_MS = 500.0
GEN_BURST_P99_MS_MAX = 20.0
GEN_RATE_SHORTFALL_MAX = 0.02


def watchdog_args() -> list[str]:
    """SIPp options that make its watchdog a lateness counter (trips never end the test)."""
    return ["-watchdog_interval", str(WATCHDOG_INTERVAL_MS),
            "-watchdog_minor_threshold", str(WATCHDOG_INTERVAL_MS + LATE_MS),
            "-watchdog_major_threshold", str(WATCHDOG_INTERVAL_MS + LATE_MAJOR_MS),
            "-watchdog_minor_maxtriggers", "100000000", "-watchdog_major_maxtriggers", "100000000"]


def _cpu_list(s: str | None) -> set[int]:
    """``"0-2,5"`` -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def check_placement(processes: list[dict], proxy_cpus=PROXY_CPUS, generator_cpus=GENERATOR_CPUS,
                    nice: int = GENERATOR_NICE) -> dict:
    """Whether the processes ran where the protocol puts them: every ``proxy`` process only on
    ``proxy_cpus``, every other lab process (``uac``, ``uas``, ``capture``, ``tracer``) only on
    ``generator_cpus``, the proxy and the SIPp processes at nice ``nice``.  Returns
    ``{"ok": bool, "problems": [...]}``."""
    problems = []
    pc, gc = set(proxy_cpus), set(generator_cpus)
    if pc & gc:
        problems.append(f"proxy CPUs {sorted(pc)} and generator CPUs {sorted(gc)} overlap")
    for p in processes:
        role = p.get("role", "")
        if p.get("error"):
            continue
        cpus = _cpu_list(p.get("cpus_allowed"))
        if role.startswith("proxy"):
            if not cpus or not cpus <= pc:
                problems.append(f"{role} {p.get('pid')} may run on CPUs {p.get('cpus_allowed')}")
        elif role in ("uac", "uas", "capture", "tracer"):
            if not cpus or not cpus <= gc:
                problems.append(f"{role} {p.get('pid')} may run on CPUs {p.get('cpus_allowed')}")
        if (role.startswith("proxy") or role in ("uac", "uas")) and p.get("nice") is not None \
                and p.get("nice") != nice and p.get("policy") in (None, "SCHED_OTHER"):
            problems.append(f"{role} {p.get('pid')} at nice {p.get('nice')}, not {nice}")
    if not any(p.get("role", "").startswith("proxy") for p in processes):
        problems.append("no proxy process recorded")
    return {"ok": not problems, "problems": problems}


def invite_lateness_ms(t_wire_ns: np.ndarray, plan_ms: np.ndarray,
                       window_ms: float = TREND_WINDOW_MS) -> dict:
    """How late the INVITEs reached the wire against their planned offsets.

    ``t_wire_ns``: wire instants of the first copy of each call's INVITE; ``plan_ms``: the planned
    offsets of the same calls.  The run's own start is unknown to the ns, so lateness is
    measured from the least late INVITE (``late - min(late)``).  Returns the median, p99, max
    (ms) and the share of INVITEs more than :data:`LATE_MS` late, and the lateness split in two
    (module docstring): ``trend_rise_ms`` (the trend's rise from the first window to the last),
    ``rate_shortfall`` (that rise over the planned span between them: the share by which the
    offered rate fell short of the plan) and ``burst_p99_ms`` / ``burst_max_ms`` (lateness around
    the trend)."""
    t = np.asarray(t_wire_ns, dtype="float64") / 1e6
    plan = np.asarray(plan_ms, dtype="float64")
    ok = np.isfinite(t) & np.isfinite(plan)
    if ok.sum() < 2:
        return {"n": int(ok.sum())}
    late = t[ok] - plan[ok]
    late = late - late.min()
    plan = plan[ok]
    out = {"n": int(ok.sum()), "median_ms": round(float(np.median(late)), 3),
           "p99_ms": round(float(np.percentile(late, 99)), 3), "max_ms": round(float(late.max()), 3),
           "late_share": round(float((late > LATE_MS).mean()), 5), "late_ms": LATE_MS}
    knots = lateness_trend_knots(plan, late, window_ms)
    if knots is not None:
        xs, ys = knots
        burst = late - np.interp(plan, xs, ys)
        span, rise = float(xs[-1] - xs[0]), float(ys[-1] - ys[0])
        out.update({"trend_window_ms": window_ms, "trend_windows": int(len(xs)),
                    "trend_rise_ms": round(rise, 3),
                    "rate_shortfall": round(rise / (span + rise), 5) if span + rise > 0 else None,
                    "burst_p99_ms": round(float(np.percentile(burst, 99)), 3),
                    "burst_max_ms": round(float(burst.max()), 3)})
    return out


def lateness_trend_knots(plan_ms: np.ndarray, late_ms: np.ndarray,
                         window_ms: float = TREND_WINDOW_MS) -> tuple[np.ndarray, np.ndarray] | None:
    """The smooth part of the lateness, as knots ``(x, y)`` (ms): in each window of ``window_ms``
    of planned time, the median planned instant and the median lateness; between knots the trend
    is linear, beyond the first and last flat (``np.interp``).  ``None`` with fewer than two
    windows."""
    plan = np.asarray(plan_ms, dtype="float64")
    late = np.asarray(late_ms, dtype="float64")
    w = np.floor((plan - plan.min()) / window_ms).astype(np.int64)
    keys = np.unique(w)
    if len(keys) < 2:
        return None
    xs = np.array([np.median(plan[w == k]) for k in keys])
    ys = np.array([np.median(late[w == k]) for k in keys])
    return xs, ys


def late_trips_p_value(trips: int, seconds: float, rate_per_s: float = GEN_LATE_PER_S_MAX) -> float:
    """P(N >= trips) for N ~ Poisson(rate_per_s * seconds): how likely so many watchdog trips
    are from a main loop late at most ``rate_per_s`` times a second (1.0 for no trips)."""
    from scipy.stats import poisson
    if trips <= 0:
        return 1.0
    return float(poisson.sf(trips - 1, rate_per_s * max(seconds, 0.0)))


def generator_verdict(meta: dict) -> dict:
    """Was this run's load generator the bottleneck?  Reads what :func:`sipperf.lab.run.run_lab`
    records (``generator_cpu``, ``cpu_busy_during_load``, ``generator_sockets``, ``sipp_stats``,
    ``placement``, optionally ``invite_lateness``) and returns ``{"bound": bool, "why": [...],
    ...the numbers it used}``.  A criterion whose data are missing is listed in ``unknown``."""
    why, unknown = [], []
    out: dict = {}
    gcpu = meta.get("generator_cpu") or {}
    window = gcpu.get("window_s") or meta.get("load_seconds")
    gen_cpus = (meta.get("placement") or {}).get("generator_cpus")
    ow = meta.get("offered_window") or {}
    busy = ow.get("cpu_busy") or meta.get("cpu_busy_during_load") or {}
    if gen_cpus:          # how busy its CPUs were, by anything (information: a busy machine is
        vals = [busy.get(f"cpu{c}") for c in gen_cpus]     # machine_busy's concern)
        if all(v is not None for v in vals):
            out["generator_cpus_busy"] = round(float(np.mean(vals)), 4)
    # the generator side's own demand on its CPUs while the calls were offered
    n_cpus = len(gen_cpus) if gen_cpus else (meta.get("cpu") or {}).get("count") or 1
    if ow.get("seconds") and ow.get("generator_cpu_s") is not None:
        own_s, span = ow["generator_cpu_s"] + (ow.get("observer_cpu_s") or 0.0), ow["seconds"]
    elif gcpu.get("cpu_s") is not None and window:
        own_s, span = gcpu["cpu_s"] + ((meta.get("observer_cpu") or {}).get("cpu_s") or 0.0), window
    else:
        own_s = span = None
    if own_s is not None and span:
        out["generator_side_share"] = round(own_s / span / n_cpus, 4)
        if out["generator_side_share"] > GEN_CPU_BUSY_MAX:
            why.append(f"SIPp, dumpcap and the tracer used {100 * out['generator_side_share']:.0f} % of "
                       f"the generator's CPU{'s' if n_cpus > 1 else ''} (limit {100 * GEN_CPU_BUSY_MAX:.0f} %)")
    else:
        unknown.append("the generator side's CPU share")
    per = gcpu.get("per_process") or []
    if per and window:
        top = max((r["user_s"] + r["system_s"]) / window for r in per)
        out["generator_process_max"] = round(top, 4)
        if top > GEN_PROCESS_MAX:
            why.append(f"one SIPp process used {100 * top:.0f} % of a CPU (limit {100 * GEN_PROCESS_MAX:.0f} %)")
    elif not gcpu:
        unknown.append("generator CPU seconds")
    socks = meta.get("generator_sockets") or {}
    read = meta.get("proxy_xlog_in") or 0
    drops = sum(int(v.get("drops") or 0) for v in socks.values() if isinstance(v, dict))
    if socks:
        out["generator_socket_drops"] = drops
        frac = drops / read if read else (float("inf") if drops else 0.0)
        if frac > GEN_DROP_FRACTION_MAX:
            why.append(f"its sockets dropped {drops} datagrams ({100 * frac:.2g} % of what the proxy read; "
                       f"limit {100 * GEN_DROP_FRACTION_MAX:.2g} %)")
    else:
        unknown.append("generator socket drops")
    st = meta.get("sipp_stats") or {}
    wd = meta.get("sipp_watchdog") or {}
    if wd.get("late_ms") and st:
        trips = int(st.get("WatchdogMinor(C)") or 0) + int(st.get("WatchdogMajor(C)") or 0)
        uas = meta.get("sipp_uas_stats") or {}
        trips_uas = int(uas.get("WatchdogMinor(C)") or 0) + int(uas.get("WatchdogMajor(C)") or 0)
        out["late_trips_uac"], out["late_trips_uas"] = trips, trips_uas
        if window:
            n = max(trips, trips_uas)
            out["late_trips_per_s"] = round(n / window, 4)
            p = late_trips_p_value(n, window)
            out["late_trips_p"] = round(p, 6)
            if p < GEN_LATE_ALPHA:
                why.append(f"SIPp's main loop ran > {wd['late_ms']} ms late {n} times in {window:.0f} s "
                           f"({n / window:.2f} a second; a rate of {GEN_LATE_PER_S_MAX:g} a second "
                           f"gives so many with probability {p:.2g})")
    else:
        unknown.append("SIPp lateness counter")
    lat = meta.get("invite_lateness") or {}
    if lat.get("p99_ms") is not None:
        out["invite_late_p99_ms"] = lat["p99_ms"]          # information: the trend is in it
    if lat.get("burst_p99_ms") is not None:
        out["invite_burst_p99_ms"] = lat["burst_p99_ms"]
        out["rate_shortfall"] = lat.get("rate_shortfall")
        if lat["burst_p99_ms"] > GEN_BURST_P99_MS_MAX:
            why.append(f"INVITEs left in bursts up to {lat['burst_p99_ms']:.0f} ms (p99) later than the "
                       f"run's smooth lateness (limit {GEN_BURST_P99_MS_MAX:g} ms)")
        if (lat.get("rate_shortfall") or 0.0) > GEN_RATE_SHORTFALL_MAX:
            why.append(f"INVITEs fell behind the plan steadily: the offered rate was "
                       f"{100 * lat['rate_shortfall']:.1f} % below it (limit {100 * GEN_RATE_SHORTFALL_MAX:g} %)")
    elif lat.get("p99_ms") is not None:
        unknown.append("INVITE lateness around its trend (recorded before the trend was kept)")
    out["failed_calls"] = st.get("FailedCall(C)")
    out["dead_call_msgs"] = st.get("DeadCallMsgs(C)")
    out["retransmissions"] = st.get("Retransmissions(C)")
    return {"bound": bool(why), "why": why, "unknown": unknown, **out,
            "limits": {"generator_side_share": GEN_CPU_BUSY_MAX, "process": GEN_PROCESS_MAX,
                       "socket_drop_fraction": GEN_DROP_FRACTION_MAX, "late_per_s": GEN_LATE_PER_S_MAX,
                       "late_alpha": GEN_LATE_ALPHA, "invite_burst_p99_ms": GEN_BURST_P99_MS_MAX,
                       "rate_shortfall": GEN_RATE_SHORTFALL_MAX}}
