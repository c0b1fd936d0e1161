"""Parameters of the simulated SIP proxy, as dataclasses, with the thesis as provenance.

Units are in the names (``_us`` microseconds, ``_cps`` calls/s, ``_pps`` packets/s).
Numbers transcribed from seed 000 (the thesis) are cited table/row next to them; numbers
that the thesis does not give are marked ``ASSUMPTION`` and are free parameters of the model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from sipperf.timeline import CALL_FLOW

#: message types in call order (INVITE, 180, 200-INVITE, ACK, BYE, 200-BYE)
TYPES: tuple[str, ...] = CALL_FLOW

# --- Table 4.3 "Measured Mean Values (in us) at 1 cps", rows INVITE .. 200 OK (BYE) -------------
#: packet size in bytes, Table 4.3 column "Packet Size (B)"
SIZE_B: tuple[int, ...] = (624, 375, 542, 466, 466, 367)
#: K_stack per type (us), Table 4.3 column K_stack (overall mean 2.4)
K_STACK_US: tuple[float, ...] = (2.6, 2.2, 2.5, 2.2, 2.5, 2.2)
#: K^{s,base}_sockq per type (us), Table 4.3 column K^{s,base}_sockq (overall mean 7.9)
KS_BASE_US: tuple[float, ...] = (8.3, 7.6, 8.5, 7.4, 8.1, 7.5)
#: K_snd per type (us), Table 4.3 column K_snd (overall mean 5.6)
K_SND_US: tuple[float, ...] = (6.15, 5.2, 5.5, 5.6, 5.9, 5.2)
#: K_copy (us): "constant at around 2 us", §4.2.1 text (not per type)
K_COPY_US: float = 2.0
#: T_sip at low load (us), all types: derived from Table 4.4 row E[X] at 100 cps:
#: 133.4 - alpha(600)=3.0 * 7.9 - 5.6 - 2.0 = 102.1.  Per-type T_sip is only in Figs 4.6/4.7
#: (no table), so every type gets the overall mean (ASSUMPTION).
T_SIP_US_CH4: float = 102.1
#: growth of T_sip with live calls, fitted to the same derivation at 800 cps (Table 4.4 E[X]=181.185,
#: alpha=8: T_sip = 181.185 - 63.2 - 7.6 = 110.4) with ~ 800 * 0.2506 s ~ 200 live calls:
#: (110.4/102.1 - 1) / 200 = 4.1e-4 per live call.
T_SIP_GROWTH_PER_CALL_CH4: float = 4.1e-4

# --- alpha(lambda): interrupt overhead, eq. (4.4), §4.3.1 text ---------------------------------
#: piecewise-linear knots (lambda_pps, alpha), exponential inter-arrivals (§4.3.1)
ALPHA_KNOTS_POISSON: tuple[tuple[float, float], ...] = ((0, 1.0), (600, 3.0), (1200, 5.0), (2400, 8.0))
#: deterministic inter-arrivals (§4.3.1, after Table 4.5)
ALPHA_KNOTS_DETERMINISTIC: tuple[tuple[float, float], ...] = ((0, 1.0), (600, 1.5), (1200, 3.0), (2400, 6.0))
#: Xeon E5540 machine of ch. 5-7, Table 5.1 row alpha(lambda): 1200->1.3, 3600->2.0, 6000->2.5, 7200->3.2
ALPHA_KNOTS_CH5: tuple[tuple[float, float], ...] = ((0, 1.0), (1200, 1.3), (3600, 2.0), (6000, 2.5), (7200, 3.2))

ALPHA_PROFILES: dict[str, tuple[tuple[float, float], ...]] = {
    "poisson": ALPHA_KNOTS_POISSON,
    "deterministic": ALPHA_KNOTS_DETERMINISTIC,
    "ch5": ALPHA_KNOTS_CH5,
    "none": ((0, 1.0), (1, 1.0)),
}


def alpha(lam_pps: Any, profile: str = "poisson") -> np.ndarray:
    """Interrupt-overhead factor alpha(lambda), thesis eq. (4.4) and the piecewise-linear fit of §4.3.1.

    Linear between the knots, constant beyond the last one.  Vectorised over ``lam_pps``.
    """
    knots = ALPHA_PROFILES[profile]
    xs = np.array([k[0] for k in knots], dtype=float)
    ys = np.array([k[1] for k in knots], dtype=float)
    return np.interp(np.asarray(lam_pps, dtype=float), xs, ys)


def beta(lam_pps: Any, threads: Any) -> np.ndarray:
    """Server-thread overhead beta(lambda, c), thesis eq. (5.6): 0.174 c + 0.923e-4 lambda - 0.60.

    Clipped below at 1 (one thread has beta = 1, Table 5.1).
    """
    b = 0.174 * np.asarray(threads, float) + 0.923e-4 * np.asarray(lam_pps, float) - 0.60
    return np.maximum(b, 1.0)


# --- workload ------------------------------------------------------------------------------------
@dataclass
class WorkloadParams:
    """The SIPp call generator (UAC) and responder (UAS), thesis §4.1.2-4.1.3."""

    rate_cps: float = 500.0
    calls: int = 10_000
    #: "poisson", "deterministic" or "file:PATH" (one inter-arrival time per line, seconds)
    arrivals: str = "poisson"
    #: call holding time ACK -> BYE, §4.2 ("set to 250 ms")
    holding_us: float = 250_000.0
    #: one-way network delay via the router (us).  ASSUMPTION (router "no material delay", §4.1)
    net_us: float = 30.0
    #: mean UAS reaction time INVITE -> 180 and BYE -> 200 (us), exponential.  ASSUMPTION: of the
    #: order of SIPp's 1 ms timer granularity (§4.1.2); the thesis does not measure it
    uas_react_us: float = 1000.0
    #: gap between the UAS sending 180 and 200 (us), exponential. ASSUMPTION (as above)
    uas_gap_us: float = 1000.0
    #: mean UAC reaction time 200 -> ACK (us), exponential. ASSUMPTION (as above)
    uac_react_us: float = 1000.0
    #: mean UAS reaction time BYE -> 200 (us); None = ``uas_react_us``
    uas_bye_react_us: float | None = None
    #: distribution of the four reaction times: "exp" (exponential), "det" (constant) or
    #: "gamma" (mean as above, coefficient of variation ``react_cv``).  ASSUMPTION: the thesis
    #: reports neither the UA reaction times nor their spread
    react_dist: str = "exp"
    react_cv: float = 1.0
    #: SIPp timer tick (us): if > 0, every INVITE leaves the UAC at the next multiple of the tick
    #: after its planned instant (SIPp schedules new calls in whole milliseconds).  0 = off
    tick_us: float = 0.0
    #: "sip": the six-message call flow; "packets": plain Poisson packets of random type (validation)
    mode: str = "sip"
    #: only for mode="packets": packet rate
    packet_rate_pps: float = 0.0


#: UA reaction times fitted to the mean waiting times of Table 4.4 (Poisson calls) and tested on
#: Table 4.5 by ``python -m sipperf.sim.calibration.fit_waits`` (grid search, lowest RMS ln(sim/measured W);
#: the grid, the scores and the out-of-sample result are in
#: datasets/precomputed/sim_calibration.reaction_fit.csv and its .provenance.md).  FITTED, not
#: from the thesis.  Used by the calibration (``make_params(workload_over=REACT_FIT)``); the
#: WorkloadParams defaults stay as before.
#: Result (2026-11-21): mean reaction 2500 us, 180->200 gap 500 us, no spread (react_cv = 0).
#: Table 4.4 does not pin these down sharply (the 8 refined grid points score 0.18-0.20), and the
#: values do not transfer to Table 4.5 (deterministic calls): see the provenance note.
REACT_FIT: dict[str, Any] = {"react_dist": "det", "react_cv": 0.0, "uas_react_us": 2500.0,
                             "uac_react_us": 2500.0, "uas_bye_react_us": 2500.0, "uas_gap_us": 500.0}


@dataclass
class ServiceParams:
    """Per-message service components, thesis eq. (4.1): X = K^s_sockq + K_copy + T_sip + K_snd."""

    k_stack_us: tuple[float, ...] = K_STACK_US
    ks_base_us: tuple[float, ...] = KS_BASE_US
    k_copy_us: float = K_COPY_US
    t_sip_us: tuple[float, ...] = (T_SIP_US_CH4,) * 6
    #: share of T_sip done before t_sip_c (T^1_sip / T_sip).  ASSUMPTION (Figs only)
    t_sip1_share: float = 0.6
    k_snd_us: tuple[float, ...] = K_SND_US
    size_b: tuple[int, ...] = SIZE_B
    #: relative growth of T_sip per live call (§4.2.2: "increase almost linearly with the call rate")
    t_sip_growth_per_call: float = T_SIP_GROWTH_PER_CALL_CH4
    #: "gamma" (with ``cv``), "exp", or "det": distribution of the unit-mean multiplier of X
    dist: str = "gamma"
    #: coefficient of variation of the service multiplier.  ASSUMPTION: Table 4.4's own
    #: E[X^2] (from W, rho, lambda at 800 cps) gives CV^2 ~ 0.02 -> CV ~ 0.14
    cv: float = 0.14
    #: alpha profile (see ALPHA_PROFILES); alpha is evaluated at the offered packet rate
    alpha_profile: str = "poisson"
    #: fixed alpha overriding the profile (e.g. 1.0 for validation)
    alpha_fixed: float | None = None
    #: work of the worker after t_dep and before its next recvfrom (us per message; the lab's
    #: Kamailio loop outside the traced interval, ``lab_cycle_gap_*`` in sim_lab_fit.csv).
    #: PROPOSED, NOT YET READ by either engine: the thread would stay busy this long after each
    #: departure before taking the next message (t_dep itself unchanged)
    post_dep_us: float = 0.0


@dataclass
class KernelParams:
    """The socket receive queue (SO_RCVBUF) and the worker threads."""

    #: capacity in packets (the thesis's K = 200, §5.3); None = unlimited
    rcvbuf_pkts: int | None = 200
    #: capacity in bytes like SK_RMEM (checked against size + skb overhead); None = off
    rcvbuf_bytes: int | None = None
    #: per-skb accounting overhead (truesize - payload), bytes.  ASSUMPTION
    skb_overhead_b: int = 256
    threads: int = 1
    cores: int = 1
    #: cores per physical processor (E5540: 4, §7.2, Fig. 7.1)
    cores_per_socket: int = 4
    #: per-message T_sip overhead per *other* thread sharing the core (us): i-/d-cache pollution by
    #: the threads' working sets (§5.3.2, §6.4.1).  FITTED, not from the thesis: grid search
    #: (2.0 .. 5.2 us) on the five 1-core enhanced-mode knees of Table 6.2, lowest RMS
    #: ln(sim/measured) knee (`python -m sipperf.sim.calibration.calibrate --fit-thread-overhead`,
    #: datasets/precomputed/sim_calibration.theta_fit.csv); Table 6.1 and Tables 7.x are out of sample
    thread_overhead_us: float = 4.0
    #: shared-state contention: X is multiplied by (1 + contention * other busy cores) (lock
    #: contention on the transaction tables, §6.4.1; multi-core scaling bottlenecks, §7.1).
    #: ASSUMPTION, fitted by hand to the best knees of Tables 7.2/7.5/7.8 (1.7x, 2.1x, 2.6x of 1 core)
    #: with overhead_scope="core"; the calibration's "socket" value is ``calibrate.CONTENTION_SOCKET``
    contention: float = 0.28
    #: whose threads pollute a thread's cache: "core" (the threads sharing its core; the default,
    #: and what ``contention`` above was fitted with) or "socket" (all threads on its processor:
    #: the cores of one E5540 share its 8 MB cache, thesis §5.2, Fig. 7.1, §7.5.1).  With "socket",
    #: ``thread_overhead_us`` is charged per other thread on the same ``Core.socket`` (a count the
    #: engine updates on cross-processor migration).  The calibration of the multi-core tables
    #: uses "socket" with its own contention (``sipperf.sim.calibration.calibrate.MULTICORE_KERNEL``)
    overhead_scope: str = "core"


@dataclass
class SchedParams:
    """A CFS-like scheduler (thesis §6.3, §7.4).  All in microseconds."""

    mode: str = "baseline"
    latency_us: float = 1000.0
    min_granularity_us: float = 100.0
    wakeup_granularity_us: float = 25.0
    migration_cost_us: float = 5000.0
    #: direct cost of a context switch (registers, pipeline, scheduler).  ASSUMPTION (the knob-
    #: dependent part of the thread overhead; see KernelParams.thread_overhead_us for the rest)
    cs_us: float = 3.0
    #: cache refill after a switch, per *other* thread on the core (working sets). ASSUMPTION
    cache_us_per_thread: float = 0.5
    #: cache penalty of migrating a thread within a processor / across processors. ASSUMPTION
    migrate_us: float = 5.0
    migrate_cross_us: float = 30.0
    #: "cfs" (the scheduler model) or "ideal" (threads never compete: one core per thread, no costs)
    model: str = "cfs"


def sched_preset(mode: str, threads: int, cores: int) -> SchedParams:
    """Scheduler knobs of the thesis: "default" (desktop), "baseline" and "enhanced" server modes.

    Baseline: §6.3.1 (latency 1 ms, min_gran 100 us, wakeup 25 us) + §7.4.1 (migration 5 ms,
    logarithmic scaling 1 + log2(ncpus)).  Enhanced: §6.3.2 (1 core) and §7.4.2 (multicore).
    Default desktop values for the 2-core box: §6.3 (10 ms, 2 ms, 2 ms), migration 0.5 ms (§7.4.1).
    """
    if mode == "default":
        return SchedParams(mode=mode, latency_us=10_000, min_granularity_us=2000,
                           wakeup_granularity_us=2000, migration_cost_us=500)
    if mode == "baseline":
        scale = 1.0 + np.log2(cores) if cores > 1 else 1.0
        return SchedParams(mode=mode, latency_us=1000 * scale, min_granularity_us=100 * scale,
                           wakeup_granularity_us=25 * scale, migration_cost_us=5000)
    if mode == "enhanced":
        if cores == 1:
            mg = {2: 100, 4: 150, 6: 200, 8: 250, 16: 400}.get(threads, 100 + 20 * max(threads - 2, 0))
            return SchedParams(mode=mode, latency_us=800, min_granularity_us=mg,
                               wakeup_granularity_us=0, migration_cost_us=0)
        if cores == 2:
            mg = 200 if threads >= 16 else 150 if threads >= 8 else 100
        else:
            mg = 200 if threads >= 16 else 100
        return SchedParams(mode=mode, latency_us=800 * cores, min_granularity_us=mg,
                           wakeup_granularity_us=0, migration_cost_us=0 if cores <= 4 else 500)
    raise ValueError(f"unknown scheduler mode {mode!r} (default, baseline, enhanced)")


@dataclass
class SimParams:
    """Everything one simulation run needs."""

    workload: WorkloadParams = field(default_factory=WorkloadParams)
    service: ServiceParams = field(default_factory=ServiceParams)
    kernel: KernelParams = field(default_factory=KernelParams)
    sched: SchedParams = field(default_factory=SchedParams)
    run_id: str = "sim"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SimParams":
        def tup(x: dict) -> dict:
            return {k: tuple(v) if isinstance(v, list) else v for k, v in x.items()}
        return cls(workload=WorkloadParams(**d["workload"]), service=ServiceParams(**tup(d["service"])),
                   kernel=KernelParams(**d["kernel"]), sched=SchedParams(**d["sched"]),
                   run_id=d.get("run_id", "sim"))

    def offered_pps(self) -> float:
        w = self.workload
        return w.packet_rate_pps if w.mode == "packets" else 6.0 * w.rate_cps


#: T_sip (us) of the ch. 5-7 machine (Xeon E5540): Table 5.1 row E[X] is 61.65-69.84 us for one
#: thread; E[X] = 65.16 at 2000 cps with alpha = 3.2 gives T_sip = 65.16 - 3.2*7.9 - 5.6 - 2.0 = 32.3
T_SIP_US_CH5: float = 32.3


def machine_service(machine: str, arrivals: str = "poisson") -> ServiceParams:
    """Service parameters of the two testbeds: "ch4" (i3-530, ch. 4) or "ch5" (Xeon E5540, ch. 5-7)."""
    if machine == "ch4":
        return ServiceParams(alpha_profile="deterministic" if arrivals == "deterministic" else "poisson")
    if machine == "ch5":
        # Table 5.1's E[X] is flat in the rate, so no T_sip growth on this machine
        return ServiceParams(t_sip_us=(T_SIP_US_CH5,) * 6, t_sip_growth_per_call=0.0, alpha_profile="ch5")
    raise ValueError(f"unknown machine {machine!r} (ch4, ch5)")


def beta_thread_overhead_us(rate_cps: float, threads: int, service: ServiceParams | None = None) -> float:
    """Per-message thread overhead (us) that turns the one-thread service time E[X_1] into
    beta(lambda, c) * E[X_1], thesis eq. 5.5/5.6, when spread over the ``threads - 1`` other
    threads of one core (``KernelParams.thread_overhead_us`` is charged per other thread).

    Used for the "default" (desktop) scheduler of chapter 5, whose overhead the thesis measured
    and regressed as eq. 5.6 (0.174 c + 0.923e-4 lambda - 0.60) on the same experiments; the
    server-mode presets keep the hand-fitted constant.  ``service`` defaults to the ch. 5 machine.
    """
    if threads <= 1:
        return 0.0
    s = service or machine_service("ch5")
    lam = 6.0 * float(rate_cps)
    a = float(alpha(lam, s.alpha_profile)) if s.alpha_fixed is None else float(s.alpha_fixed)
    ex1 = float(np.mean([a * s.ks_base_us[i] + s.k_copy_us + s.t_sip_us[i] + s.k_snd_us[i] for i in range(6)]))
    return float((beta(lam, threads) - 1.0) * ex1 / (threads - 1))


def make_params(rate_cps: float = 500.0, calls: int = 10_000, threads: int = 1, cores: int = 1,
                sched_mode: str = "baseline", arrivals: str = "poisson", machine: str | None = None,
                workload_over: dict[str, Any] | None = None, kernel_over: dict[str, Any] | None = None,
                **over: Any) -> SimParams:
    """Convenience constructor; ``over`` may hold dataclass overrides ``service=..., kernel=...``.

    ``machine`` defaults to "ch4" for one thread on one core, else "ch5" (the multi-thread testbed).
    ``workload_over`` / ``kernel_over`` override single fields of :class:`WorkloadParams` /
    :class:`KernelParams` (plain dicts, so sweep points stay picklable and printable), e.g.
    ``workload_over=REACT_FIT`` for the reaction times fitted to Table 4.4.
    """
    if machine is None:
        machine = "ch4" if threads == 1 and cores == 1 else "ch5"
    p = SimParams(workload=WorkloadParams(rate_cps=rate_cps, calls=calls, arrivals=arrivals,
                                          **(workload_over or {})),
                  service=machine_service(machine, arrivals),
                  kernel=KernelParams(threads=threads, cores=cores, **(kernel_over or {})),
                  sched=sched_preset(sched_mode, threads, cores))
    return replace(p, **over) if over else p
