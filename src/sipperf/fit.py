"""Fit the book's model constants to your own runs: service demand, α(λ), β(λ, c) and C_{1,1}.

The thesis (seed 000) measured one machine and printed its constants; this module estimates the
same constants from *your* runs, each with its uncertainty and the runs it came from.  It works
on per-run summaries (:class:`RunInput`), so it serves a capture, a thesis-format log, a lab run
or a stored summary alike; :mod:`sipperf.report.runs` builds them from timelines.

**The measured quantity Q.**  With tracepoints (all seven instants) Q is the mean socket-queue
time ``K_sockq = t_sockq - t_stack`` (eq. 3.1) and the rest of the service,
``R = K_copy + T_sip + K_snd = t_dep - t_sockq`` (eq. 4.1), is measured per message.  A capture
taken at the proxy gives only the sojourn ``t_dep - t_arr``: then Q is the mean sojourn and R = 0.
Either way one message's service time is (eq. 4.1, 4.4)

    X = R + α(λ)·B,        Q = W + α(λ)·B̄,        W = λE[X²] / (2(1 - λE[X]))   (P-K, eq. 4.2)

where ``B`` is K^{s,base}_sockq per message type with tracepoints, and the whole light-load service
time without them (then α is a *service-inflation* factor: the part due to the socket queue
cannot be told apart from the rest, and the report says so).

1. **Service demand** (:func:`solve_base`): at the lightest run, α = 1 by definition (the
   thesis's baseline at 1 cps) and ``Q̄ = W(B̄) + B̄`` is solved for B̄ (so the little queueing
   left at light load is taken out, not counted as service); per type B_t = Q_t − W.  E[X_t] =
   R_t + B_t is the service demand of each message type.
2. **α(λ)** (:func:`solve_alpha`): at each other one-worker run without drops, the α whose P-K
   prediction reproduces the measured Q (what the thesis did to obtain its Tables 4.4/4.5);
   then the curve α(λ) = 1 + s·(clip(λ, λ₀, λ_sat) − λ₀) (:func:`fit_alpha_curve`: linear,
   optionally flat beyond λ_sat as the thesis's §4.3.1 curve is), chosen by BIC.
3. **β** (:func:`solve_beta`): at each run with c > 1 workers and drops, the β for which the
   M/M/c/K drop probability (eq. 5.3/5.4) with E[X_c] = β·c·E[X_1] (eq. 5.5) equals the measured
   PDR; then β = a·c + b·λ + d (:func:`fit_beta_plane`, the form of eq. 5.6) by least squares
   on the terms the runs can identify.
4. **C_{1,1}** (:func:`fit_c11`): C_{p,m} = T_{p,m}·C_{1,1} (eq. 7.1) by least squares over the
   configurations whose 1 %-drop knee is known (measured, :func:`knee_measured`, or predicted,
   :func:`knee_model`).

Uncertainty: :func:`fit_all` repeats every step on ``n_boot`` parametric bootstrap replicates in
which each run's means are drawn from their batch-means sampling distributions (and its PDR from
its own), and reports the 2.5 and 97.5 percentiles.  Units: µs, packets/s (``_pps``), calls/s
(``_cps``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np
from scipy.optimize import brentq

from sipperf.models.capacity import threads_for_capacity
from sipperf.models.mg1 import mg1_wait
from sipperf.models.mmck import mmck

__all__ = [
    "RunInput", "Moments", "mg1_q_us", "solve_base", "solve_alpha", "AlphaCurve", "fit_alpha_curve",
    "solve_beta", "BetaPlane", "fit_beta_plane", "knee_measured", "knee_model", "fit_c11",
    "Fit", "fit_all", "TARGET_PDR", "DEFAULT_K", "KneeProbe", "knee_from_probes", "probes_of",
    "drop_model_check", "cpu_law", "MIN_PROBE_MSGS", "KNEE_MAX_REL_WIDTH",
]

#: the drop rate that defines the knee (thesis ch. 5: "drop-rate exceeding 1 %")
TARGET_PDR = 0.01
#: the thesis's socket queue capacity in packets (§5.3), used when the data do not show theirs
DEFAULT_K = 200
#: runs whose measured PDR is above this are overloaded for the M/G/1 fit (P-K needs ρ < 1)
MG1_MAX_PDR = 1e-3
#: a run whose proxy used this share of the CPUs it may run on (or more) had its CPUs full: it is
#: past the utilisation law's linear range and never one of the CPU line's light-load points
CPU_FULL = 0.9
#: a proxy that used at most this many CPU-seconds per second in every run of its best worker count
#: ran on one core's worth of CPU (C_{1,1} is then its knee, whatever its workers)
ONE_CPU_SHARE = 1.1
#: runs whose own utilisation is at least this are left out of the α fit: a finite run near
#: saturation has no stationary mean wait
MG1_MAX_RHO = 0.95


@dataclass
class RunInput:
    """What the fit needs from one run (µs, packets/s).

    ``q_kind`` says what Q is: ``"k_sockq"`` (tracepoints) or ``"sojourn"`` (black box).
    ``*_se_us`` are standard errors of the means (batch means); ``*_by_type`` map a message type
    to its mean; ``share_by_type`` the fraction of messages of each type.  ``q_var_us2`` is the
    per-message variance of Q (used as the service variance when only the sojourn is known).
    ``pdr`` is a fraction (not %); ``threads`` c, ``cores`` m, ``processors`` p (None: unknown);
    ``k_pkts`` the socket-queue capacity in packets (None: :data:`DEFAULT_K`).
    """

    run: str
    lam_pps: float
    lam_cps: float
    q_kind: str
    q_mean_us: float
    q_se_us: float = 0.0
    q_var_us2: float = 0.0
    q_by_type: dict[str, float] = field(default_factory=dict)
    q_se_by_type: dict[str, float] = field(default_factory=dict)
    r_mean_us: float = 0.0
    r_se_us: float = 0.0
    r_var_us2: float = 0.0
    r_by_type: dict[str, float] = field(default_factory=dict)
    r_se_by_type: dict[str, float] = field(default_factory=dict)
    share_by_type: dict[str, float] = field(default_factory=dict)
    pdr: float = float("nan")
    pdr_se: float = 0.0
    threads: int | None = None
    cores: int | None = None
    processors: int | None = None
    k_pkts: float | None = None
    #: False when the run never reached a steady state (MSER-5 cut half of it): not used for α
    steady: bool = True
    #: the messages the drop rate ``pdr`` rests on (None: unknown)
    pdr_n: float | None = None
    #: replications of the drop measurement (e.g. a stored point's rounds), :class:`KneeProbe`;
    #: empty: the run itself is one probe
    probes: list = field(default_factory=list)
    #: CPU-seconds per second used by all the proxy's processes over the load (None: not recorded)
    cpu_share: float | None = None
    cpu_source: str = ""
    #: the CPUs the workers may run on (None: unknown): with fewer CPUs than workers, the
    #: utilisation is per CPU they share, not per worker
    cpus: int | None = None
    #: the run's own sign of overload: its sojourn grew through the run (None: not known)
    queue_growing: bool | None = None
    #: over TCP, the proxy advertised a zero window (its receive buffer full): overloaded
    pushed_back: bool = False

    @property
    def c(self) -> int:
        return int(self.threads or 1)

    @property
    def has_q(self) -> bool:
        return math.isfinite(self.q_mean_us) and math.isfinite(self.lam_pps) and self.lam_pps >= 0


@dataclass(frozen=True)
class Moments:
    """Service-time moments of X = R + α·B as functions of α (µs, µs²)."""

    r_mean_us: float
    r_var_us2: float
    b_mean_us: float
    b_var_us2: float
    rb_cov_us2: float = 0.0

    def mean(self, a: float) -> float:
        return self.r_mean_us + a * self.b_mean_us

    def var(self, a: float) -> float:
        return max(self.r_var_us2 + a * a * self.b_var_us2 + 2 * a * self.rb_cov_us2, 0.0)

    def scv(self, a: float) -> float:
        m = self.mean(a)
        return self.var(a) / (m * m) if m > 0 else float("nan")


def mg1_q_us(lam_pps: float, m: Moments, a: float) -> float:
    """The quantity Q the data measure, as M/G/1 predicts it: W (eq. 4.2) + α·B̄ (µs; inf if ρ ≥ 1)."""
    ex = m.mean(a)
    if ex <= 0:
        return a * m.b_mean_us
    ex2 = m.var(a) + ex * ex
    w = float(mg1_wait(lam_pps, ex * 1e-6, ex2 * 1e-12).W_s) * 1e6
    return w + a * m.b_mean_us


def _weighted(d: dict[str, float], w: dict[str, float]) -> tuple[float, float]:
    """(mean, variance) of the per-type values ``d`` weighted by the type shares ``w``."""
    keys = [k for k in d if k in w and math.isfinite(d[k]) and w[k] > 0]
    if not keys:
        return float("nan"), 0.0
    x = np.array([d[k] for k in keys])
    p = np.array([w[k] for k in keys])
    p = p / p.sum()
    mu = float(p @ x)
    return mu, float(p @ (x - mu) ** 2)


def _cov(a: dict[str, float], b: dict[str, float], w: dict[str, float]) -> float:
    keys = [k for k in a if k in b and k in w and math.isfinite(a[k]) and math.isfinite(b[k])]
    if not keys:
        return 0.0
    p = np.array([w[k] for k in keys])
    p = p / p.sum()
    x, y = np.array([a[k] for k in keys]), np.array([b[k] for k in keys])
    return float(p @ ((x - p @ x) * (y - p @ y)))


@dataclass(frozen=True)
class Base:
    """The light-load baseline: B̄ and B per type (µs), the wait W at that run, and its moments."""

    run: str
    lam_pps: float
    b_mean_us: float
    b_by_type: dict[str, float]
    b_var_us2: float
    w_us: float
    kind: str
    note: str = ""


def solve_base(run: RunInput) -> Base:
    """B̄ from the lightest run: the root of ``W(λ, R̄ + B̄) + B̄ = Q̄`` (α = 1 there by definition).

    With tracepoints the per-type spread of B is that of the per-type Q_t (W is common to all
    types, so B_t = Q_t − W); with the sojourn only, B is the whole service time and its
    variance the per-message variance of the sojourn at light load.  With c > 1 workers the wait
    is that of one worker carrying 1/c of the messages (an upper bound on the wait of c workers
    sharing one queue, far closer to it than one worker carrying them all).
    """
    if not run.has_q:
        raise ValueError(f"run {run.run}: no measured Q (sojourn or K_sockq) to take the service demand from")
    if run.q_kind == "k_sockq":
        _, b_var = _weighted(run.q_by_type, run.share_by_type) if run.q_by_type else (0.0, 0.0)
        cov = _cov(run.q_by_type, run.r_by_type, run.share_by_type) if run.q_by_type else 0.0
        r_mean, r_var = run.r_mean_us, run.r_var_us2
    else:
        b_var, cov, r_mean, r_var = run.q_var_us2, 0.0, 0.0, 0.0
    q = run.q_mean_us
    note = ""
    lam = run.lam_pps / run.c       # the messages one worker carries

    def g(b: float) -> float:
        m = Moments(r_mean, r_var, b, b_var if b > 0 else 0.0, cov if b > 0 else 0.0)
        return mg1_q_us(lam, m, 1.0) - q

    if run.lam_pps <= 0:
        b = max(q - r_mean * 0.0, 0.0) if run.q_kind != "k_sockq" else max(q, 0.0)
        note = "no arrival rate: B is the measured Q, without a queueing correction"
    elif g(0.0) >= 0:
        b = 0.0
        note = "the measured Q is below the M/G/1 wait of the rest of the service alone: B set to 0"
    elif run.q_kind != "k_sockq" and g(1e-6 * q) >= 0:
        # the sojourn's own variance stands in for the service's: when it alone makes an M/G/1 wait
        # above the mean sojourn (a heavy tail: a TLS handshake, a stall), the root is B -> 0, which
        # is no reading of the service time at all
        b = 0.0
        note = ("the light-load sojourn's spread alone gives an M/G/1 wait above its mean: the sojourn "
                "cannot be split into service and waiting, B set to 0")
    else:
        hi = q
        # ρ < 1 bound: R + B < 1/λ
        hi = min(hi, (1e6 / lam - r_mean) * (1 - 1e-9))
        if hi <= 0:
            raise ValueError(f"run {run.run}: the lightest run is overloaded (ρ ≥ 1): no service demand")
        if g(hi) < 0:
            b = hi
            note = "no root below ρ = 1: B at its bound"
        else:
            b = float(brentq(g, 0.0, hi, xtol=1e-9, rtol=1e-12))
    m = Moments(r_mean, r_var, b, b_var, cov)
    w = mg1_q_us(lam, m, 1.0) - b if run.lam_pps > 0 else 0.0
    if run.q_kind == "k_sockq" and run.q_by_type:
        b_by = {k: max(v - w, 0.0) for k, v in run.q_by_type.items()}
    else:
        b_by = {k: max(v - w, 0.0) for k, v in run.q_by_type.items()} if run.q_by_type else {}
    return Base(run.run, run.lam_pps, b, b_by, b_var, w, run.q_kind, note)


def moments_at(run: RunInput, base: Base) -> Moments:
    """The moments of X = R + α·B at ``run`` (its own R, the baseline's B)."""
    if base.kind == "k_sockq":
        cov = _cov(base.b_by_type, run.r_by_type, run.share_by_type) if base.b_by_type else 0.0
        return Moments(run.r_mean_us, run.r_var_us2, base.b_mean_us, base.b_var_us2, cov)
    return Moments(0.0, 0.0, base.b_mean_us, base.b_var_us2, 0.0)


def solve_alpha(q_us: float, lam_pps: float, m: Moments) -> float:
    """The α ≥ 0 for which M/G/1 reproduces the measured Q at λ (NaN when none exists: Q below
    the model's value at α = 0, or no B to scale)."""
    if not (math.isfinite(q_us) and lam_pps > 0 and m.b_mean_us > 0):
        return float("nan")

    def f(a: float) -> float:
        return mg1_q_us(lam_pps, m, a) - q_us

    if f(0.0) > 0:
        return float("nan")
    a_max = (1e6 / lam_pps - m.r_mean_us) / m.b_mean_us
    if a_max <= 0:
        return float("nan")
    hi = a_max * (1 - 1e-9)
    if f(hi) < 0:
        return float("nan")
    return float(brentq(f, 0.0, hi, xtol=1e-10, rtol=1e-12))


@dataclass(frozen=True)
class AlphaCurve:
    """α(λ) as a piecewise-linear curve through ``knots_pps`` / ``values`` (λ in packets/s), 1 at
    and below the baseline rate λ₀ = ``knots_pps[0]``, held at its last value beyond the last knot
    (the highest rate it was fitted on: no extrapolation of a slope).  ``family`` says which
    shape was chosen: ``none`` (α = 1), ``linear``, ``plateau`` (linear, then flat: the thesis's
    §4.3.1 shape) or ``two-slope`` (linear, then another slope)."""

    knots_pps: tuple[float, ...]
    values: tuple[float, ...]
    family: str = "none"

    def __call__(self, lam_pps) -> np.ndarray:
        return np.interp(np.asarray(lam_pps, dtype=float), self.knots_pps, self.values)

    @property
    def lam0_pps(self) -> float:
        return float(self.knots_pps[0])

    def breakpoints(self) -> tuple[list[float], list[float]]:
        """(λ, α) knots from λ = 0 (for :func:`sipperf.models.mg1.alpha`'s ``breakpoints``)."""
        xs = [0.0] + [float(x) for x in self.knots_pps if x > 0]
        ys = [1.0] + [float(y) for x, y in zip(self.knots_pps, self.values) if x > 0]
        return xs, ys


def fit_alpha_curve(lam_pps: Sequence[float], alphas: Sequence[float], lam0_pps: float) -> AlphaCurve:
    """Least-squares α(λ) through the per-run α, with α(λ₀) = 1 fixed (λ₀ the baseline run).

    Three shapes are tried: linear (1 parameter), linear then flat from λ_b (the thesis's shape,
    2 parameters) and linear then another slope from λ_b (3 parameters), λ_b at every fitted
    run's rate; the Bayesian information criterion picks one.  A shape needs two points more
    than its parameters.  Beyond the highest fitted rate α stays at its last value."""
    lam = np.asarray(lam_pps, dtype=float)
    a = np.asarray(alphas, dtype=float)
    ok = np.isfinite(lam) & np.isfinite(a) & (lam > lam0_pps)
    lam, a = lam[ok], a[ok]
    n = lam.size
    if n == 0:
        return AlphaCurve((lam0_pps, lam0_pps + 1.0), (1.0, 1.0), "none")
    y = a - 1.0
    lmax = float(lam.max())
    best = None

    def consider(k: int, x: np.ndarray, family: str, lb: float) -> None:
        nonlocal best
        if n < k + 2 and k > 1:
            return
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        sse = float(((y - x @ coef) ** 2).sum())
        bic = n * math.log(max(sse / n, 1e-12)) + k * math.log(max(n, 2))
        if best is None or bic < best[0] - 1e-9:
            best = (bic, family, lb, coef)

    consider(1, (lam - lam0_pps)[:, None], "linear", lmax)
    for lb in sorted(set(lam.tolist())):
        if lb >= lmax:
            continue
        x1 = np.minimum(lam, lb) - lam0_pps
        x2 = np.maximum(lam - lb, 0.0)
        consider(2, x1[:, None], "plateau", lb)
        consider(3, np.column_stack([x1, x2]), "two-slope", lb)
    _, family, lb, coef = best
    s1 = float(coef[0])
    s2 = float(coef[1]) if family == "two-slope" else 0.0
    v_b = 1.0 + s1 * (lb - lam0_pps)
    if family == "linear":
        return AlphaCurve((lam0_pps, lmax), (1.0, v_b), family)
    return AlphaCurve((lam0_pps, lb, lmax), (1.0, v_b, v_b + s2 * (lmax - lb)), family)


def cpu_utilisation(cpu_share: float | None, threads: int, cpus: int | None) -> tuple[float, str]:
    """A run's measured utilisation from the proxy's CPU accounting: its CPU-seconds per second
    over the CPUs its ``threads`` workers could keep busy (``min(threads, cpus)``; ``threads``
    when the CPUs are not known), and what that is per ("worker" or "CPU").  NaN without a
    positive CPU share."""
    if cpu_share is None or not math.isfinite(cpu_share) or cpu_share <= 0:
        return float("nan"), ""
    c = threads or 1
    servers = min(c, cpus) if cpus else c
    return cpu_share / servers, ("worker" if servers == c else "CPU")


def drop_probability(lam_pps: float, ex1_us: float, c: int, k_pkts: float, beta: float = 1.0) -> float:
    """M/M/c/K drop probability (eq. 5.3/5.4) with E[X_c] = β·c·E[X_1] (eq. 5.5)."""
    exc = beta * c * ex1_us
    if not (math.isfinite(exc) and exc > 0):
        raise ValueError(f"drop_probability needs a positive service time, got beta*c*E[X_1] = {exc:g} µs")
    k = max(float(k_pkts), float(c))
    return float(mmck(lam_pps, 1e6 / exc, c, k).p_block)


def solve_beta(pdr: float, lam_pps: float, ex1_us: float, c: int, k_pkts: float) -> float:
    """The β for which M/M/c/K with E[X_c] = β·c·E[X_1] drops the measured fraction ``pdr``
    (thesis eq. 5.3–5.5).  NaN for pdr ≤ 0 or ≥ 1 (no information: a bound only)."""
    if not (0 < pdr < 1) or not (ex1_us > 0) or lam_pps <= 0:
        return float("nan")

    def f(b: float) -> float:
        return drop_probability(lam_pps, ex1_us, c, k_pkts, b) - pdr

    lo, hi = 1e-3, 1e3
    if f(lo) > 0 or f(hi) < 0:
        return float("nan")
    return float(brentq(f, lo, hi, xtol=1e-10, rtol=1e-10))


@dataclass(frozen=True)
class BetaPlane:
    """β(λ, c) = c_coef·c + lam_coef·λ + const (eq. 5.6 form; λ in packets/s).  Terms the runs
    could not identify are 0 and named in ``fixed``."""

    c_coef: float
    lam_coef: float
    const: float
    fixed: tuple[str, ...] = ()

    def __call__(self, lam_pps, c) -> np.ndarray:
        return self.c_coef * np.asarray(c, float) + self.lam_coef * np.asarray(lam_pps, float) + self.const


def fit_beta_plane(c: Sequence[float], lam_pps: Sequence[float], betas: Sequence[float]) -> BetaPlane | None:
    """Least squares of β = a·c + b·λ + d on the terms the points identify: all three when they
    span ≥ 2 thread counts, ≥ 2 rates and the design has rank 3; else β = b·λ + d (one thread
    count), β = a·c + d (one rate), or the mean β.  None without any finite β."""
    c_, l_, b_ = (np.asarray(v, dtype=float) for v in (c, lam_pps, betas))
    ok = np.isfinite(c_) & np.isfinite(l_) & np.isfinite(b_)
    c_, l_, b_ = c_[ok], l_[ok], b_[ok]
    if b_.size == 0:
        return None
    cols = {"c": c_, "lam": l_, "const": np.ones_like(b_)}
    for terms in (("c", "lam", "const"), ("lam", "const"), ("c", "const"), ("const",)):
        a = np.column_stack([cols[t] for t in terms])
        if np.linalg.matrix_rank(a) == len(terms) and b_.size >= len(terms):
            coef, *_ = np.linalg.lstsq(a, b_, rcond=None)
            d = dict(zip(terms, coef.tolist()))
            return BetaPlane(d.get("c", 0.0), d.get("lam", 0.0), d.get("const", 0.0),
                             tuple(t for t in ("c", "lam") if t not in terms))
    return BetaPlane(0.0, 0.0, float(b_.mean()), ("c", "lam"))


def knee_measured(rates: Sequence[float], pdr: Sequence[float], target: float = TARGET_PDR) -> dict:
    """The rate where the measured drop rate first reaches ``target``, interpolated linearly in
    the drop rate between the last run below and the first at or above it (as the lab's
    ``knees.csv``).  ``{"knee", "censored"}``: censored ``"above"`` (no run reached it: the knee
    is above the highest rate), ``"below"`` (the lowest run already drops that much) or ``""``."""
    r = np.asarray(rates, dtype=float)
    p = np.asarray(pdr, dtype=float)
    ok = np.isfinite(r) & np.isfinite(p)
    r, p = r[ok], p[ok]
    if r.size == 0:
        return {"knee": float("nan"), "censored": "no runs"}
    o = np.argsort(r, kind="stable")
    r, p = r[o], p[o]
    hit = np.flatnonzero(p >= target)
    if hit.size == 0:
        return {"knee": float(r[-1]), "censored": "above"}
    i = int(hit[0])
    if i == 0:
        return {"knee": float(r[0]), "censored": "below"}
    r0, r1, p0, p1 = r[i - 1], r[i], p[i - 1], p[i]
    k = r0 + (target - p0) * (r1 - r0) / (p1 - p0) if p1 > p0 else r1
    return {"knee": float(k), "censored": ""}


def knee_model(ex1_us_of_pps, c: int, k_pkts: float, beta_of=None, *, msgs_per_call: float = 6.0,
               target: float = TARGET_PDR, hi_cps: float | None = None, n_grid: int = 200) -> float:
    """The lowest call rate at which the predicted M/M/c/K drop probability reaches ``target``
    (the knee), found on a grid of ``n_grid`` rates and refined by bisection: E[X_1](λ) may fall
    with the load (measured service times do), so the drop probability need not rise
    monotonically and the *first* crossing is the knee.

    ``ex1_us_of_pps(λ)`` is the one-worker service time at packet rate λ; ``beta_of(λ)`` β at
    that rate (None: 1).  Returns ``hi_cps`` (default 4 × the light-load capacity) when no rate
    up to it reaches the target, NaN when the service time is not positive."""
    def p(lam_cps: float) -> float:
        lam = lam_cps * msgs_per_call
        ex1 = float(ex1_us_of_pps(lam))
        b = 1.0 if beta_of is None else float(beta_of(lam))
        if not (ex1 > 0 and b > 0):
            return 1.0
        return drop_probability(lam, ex1, c, k_pkts, b)

    ex0 = float(ex1_us_of_pps(0.0))
    if not ex0 > 0:
        return float("nan")
    hi = hi_cps or 4.0 * 1e6 / ex0 / msgs_per_call * max(c, 1)
    grid = np.linspace(hi / n_grid, hi, n_grid)
    try:  # the whole grid at once when the callables take arrays (mmck is vectorised)
        lam = grid * msgs_per_call
        ex = np.broadcast_to(np.asarray(ex1_us_of_pps(lam), dtype=float), lam.shape)
        bt = np.ones_like(lam) if beta_of is None else np.broadcast_to(np.asarray(beta_of(lam), dtype=float),
                                                                        lam.shape)
        ok = (ex > 0) & (bt > 0)
        pg = np.ones_like(lam)
        exc = np.where(ok, bt * c * ex, 1.0)
        pg[ok] = mmck(lam[ok], 1e6 / exc[ok], c, max(float(k_pkts), float(c))).p_block
        above = list(np.flatnonzero(pg > target))
    except (TypeError, ValueError):
        above = [i for i, x in enumerate(grid) if p(float(x)) > target]
    if not above:
        return float(hi)
    i = above[0]
    lo_, hi_ = (0.0 if i == 0 else float(grid[i - 1])), float(grid[i])
    for _ in range(60):
        mid = 0.5 * (lo_ + hi_)
        if p(mid) <= target:
            lo_ = mid
        else:
            hi_ = mid
        if hi_ - lo_ <= 1e-7 * hi_:
            break
    return float(lo_)


def fit_c11(knees_cps: Sequence[float], processors: Sequence[int], cores: Sequence[int]) -> float:
    """Least-squares C_{1,1} of C_{p,m} = T_{p,m}·C_{1,1} (thesis eq. 7.1): Σ T·C / Σ T²."""
    t = np.array([threads_for_capacity(int(p), int(m)) for p, m in zip(processors, cores)], dtype=float)
    k = np.asarray(knees_cps, dtype=float)
    ok = np.isfinite(k)
    if not ok.any():
        return float("nan")
    return float((t[ok] * k[ok]).sum() / (t[ok] ** 2).sum())


# ---- the measured knee from replicated probes ----------------------------------------------------

#: the messages a rate needs before its drop fraction can be placed on one side of 1 % by itself:
#: at 1 % that is 200 expected drops, a binomial relative standard error of 7 % before the bursts in
#: which real drops come widen it
MIN_PROBE_MSGS = 20_000
#: a knee is *located* when its 95 % interval is at most this wide relative to the knee (±5 %)
KNEE_MAX_REL_WIDTH = 0.10
#: rates closer than this (relative to the lower) are replications of one rate
RATE_REL_TOL = 0.01
#: bootstrap replicates of a measured knee (cheap: a few dozen rates)
KNEE_BOOT = 1000
#: a CPU regression needs its rates to span at least this factor (else: through the origin)
MIN_RATE_SPREAD = 1.5


@dataclass
class KneeProbe:
    """One measurement of the drop fraction at a call rate: a run, one round of a stored point, or a
    probe of a knee search.  ``pdr`` of ``messages`` (the messages the proxy should have forwarded;
    NaN: unknown), ``deff`` the design effect, the variance of the drop fraction over the binomial
    one (drops come in bursts; None: unknown, the median of the others is used), ``steady`` False
    for a run that never reached a steady state."""

    run: str
    rate_cps: float
    pdr: float
    messages: float
    threads: int = 1
    steady: bool = True
    deff: float | None = None
    source: str = ""


def probes_of(run: RunInput) -> list[KneeProbe]:
    """The drop measurements a run adds to its worker count's knee: its replications
    (``run.probes``), or the run itself (``pdr`` over ``pdr_n`` messages, the design effect from
    its batch-means standard error ``pdr_se``)."""
    if run.probes:
        return list(run.probes)
    if not (math.isfinite(run.pdr) and math.isfinite(run.lam_cps) and run.lam_cps > 0):
        return []
    n = float(run.pdr_n) if run.pdr_n else float("nan")
    deff = None
    if math.isfinite(n) and 0 < run.pdr < 1 and run.pdr_se > 0:
        deff = max(1.0, run.pdr_se ** 2 / (run.pdr * (1 - run.pdr) / n))
    return [KneeProbe(run.run, float(run.lam_cps), float(run.pdr), n, run.c, bool(run.steady), deff, "run")]


def _first_at(pfit: np.ndarray, target: float) -> int | None:
    hit = np.flatnonzero(pfit >= target)
    return int(hit[0]) if hit.size else None


def _envelope(rates: np.ndarray, p_raw: np.ndarray, p_fit: np.ndarray, target: float) -> tuple[float, float]:
    """(A, B): the lowest rate below and the highest rate above any crossing of ``target`` -- the
    monotone fit's and every crossing of the raw drop fractions (a rate below the target next to a
    higher one at or above it).  When the measurements are not monotone (another session, a busy
    machine), every reading they allow stays inside.  A = 0 when even the lowest rate is at or
    above the target, B = inf when no rate reaches it."""
    i = _first_at(p_fit, target)
    a = rates[-1] if i is None else (0.0 if i == 0 else rates[i - 1])
    b = float("inf") if i is None else rates[i]
    up = np.flatnonzero((p_raw[:-1] < target) & (p_raw[1:] >= target))
    if up.size:
        a, b = min(a, float(rates[up.min()])), max(b, float(rates[up.max() + 1]))
    return float(a), float(b)


def _round_rate(x: float) -> float:
    if not math.isfinite(x):
        return x
    step = 10.0 if x >= 200 else 5.0 if x >= 50 else 1.0
    return float(max(step, round(x / step) * step))


def _rate_groups(rate: np.ndarray) -> np.ndarray:
    """Group ids of sorted rates: a rate within :data:`RATE_REL_TOL` of its group's first rate is a
    replication of it."""
    gid = np.zeros(len(rate), int)
    if not len(rate):
        return gid
    first = rate[0]
    for i in range(1, len(rate)):
        if rate[i] > first * (1 + RATE_REL_TOL):
            gid[i] = gid[i - 1] + 1
            first = rate[i]
        else:
            gid[i] = gid[i - 1]
    return gid


def growth_bounds(runs: Iterable[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(confirmed, suspected): what runs whose queue grew through the run (``(rate_cps, grew)``
    per run, drops below 1 %) say about the knee.  A rate whose runs all grew, at least two of
    them, confirms overload: the knee is at most the lowest such rate.  A rate where one run grew
    but was not replicated, or its twins did not grow, only suspects it (a CPU stall late in a
    short run looks the same): the knee *may* lie at or below the lowest such rate.  None where
    there is no such rate."""
    pts = sorted((float(r), bool(g)) for r, g in runs if r is not None and math.isfinite(r) and r > 0)
    by_rate: dict[int, tuple[float, list[bool]]] = {}   # group -> (its first rate, grew per run)
    for (r, g), k in zip(pts, _rate_groups(np.array([r for r, _ in pts]))):
        by_rate.setdefault(int(k), (r, []))[1].append(g)
    confirmed = [r for r, gs in by_rate.values() if len(gs) >= 2 and all(gs)]
    suspected = [r for r, gs in by_rate.values() if any(gs) and not (len(gs) >= 2 and all(gs))]
    return (min(confirmed) if confirmed else None, min(suspected) if suspected else None)


def knee_from_probes(probes: Iterable[KneeProbe], target: float = TARGET_PDR, *, n_boot: int = KNEE_BOOT,
                     seed: int = 0, growing_cps: float | None = None,
                     growing_maybe_cps: float | None = None) -> dict[str, Any]:
    """The 1 %-drop knee from replicated drop measurements, with an interval an engineer can trust.

    1. Probes at rates within :data:`RATE_REL_TOL` of each other are replications of one rate;
       each rate's drop fraction is the pooled one (drops / messages).
    2. A monotone (isotonic, weighted by messages over the design effect) fit of the drop fraction
       against the rate: more load never means fewer drops, so rates that disagree are pooled
       instead of producing two knees.
    3. The knee brackets: the highest rate fitted below ``target`` (A) and the next one (B); the
       point estimate interpolates linearly between them, as the lab's ``knees.csv`` does.
    4. The interval: ``n_boot`` bootstrap replicates resample each rate's replications and draw
       each probe's drop fraction from its sampling law (Jeffreys' beta on the messages divided by
       the design effect); the 95 % interval runs from the 2.5 % point of A to the 97.5 % point
       of B over the replicates, and never inside [A, B]: nothing between two rates run was
       measured, so the interpolation's own uncertainty is the whole gap.

    ``located`` is True only when the interval is at most :data:`KNEE_MAX_REL_WIDTH` of the knee
    and the rates it spans are steady, hold at least :data:`MIN_PROBE_MSGS` messages each and
    were replicated; otherwise ``why`` says what is missing and ``next`` what to run next.
    ``growing_cps`` is the lowest rate at which the queue grew in every replication (overload
    without 1 % drops yet): the knee is then at most that rate.  ``growing_maybe_cps`` is the
    lowest rate at which a run's queue grew unconfirmed (see :func:`growth_bounds`): the interval
    then reaches down to the rate below it, and the rate is to be repeated.  Returns a dict (``knee``, ``censored`` "" /
    "above" / "below" / "no runs", ``lo``, ``hi``, ``bracket``, ``located``, ``why``, ``next``,
    ``next_rates``, ``rates``: one row per rate)."""
    ps = sorted((p for p in probes if math.isfinite(p.rate_cps) and p.rate_cps > 0 and math.isfinite(p.pdr)),
                key=lambda p: p.rate_cps)
    nan = float("nan")
    out: dict[str, Any] = {"knee": nan, "censored": "no runs", "lo": nan, "hi": nan, "bracket": [nan, nan],
                           "located": False, "why": [], "next": "", "next_rates": [], "rates": [],
                           "n_probes": len(ps)}
    if not ps:
        out["why"] = ["no run measured a drop rate"]
        return out
    rate = np.array([p.rate_cps for p in ps])
    pdr = np.clip(np.array([p.pdr for p in ps]), 0.0, 1.0)
    n = np.array([p.messages if p.messages and p.messages > 0 else nan for p in ps], dtype=float)
    known = np.isfinite(n)
    d_known = [p.deff for p in ps if p.deff is not None and math.isfinite(p.deff)]
    d_fill = float(np.median(d_known)) if d_known else 1.0
    # bursts widen a drop fraction's sampling law only where there are drops: a run without any
    # keeps its binomial (Jeffreys) law on all its messages
    deff = np.array([1.0 if p.pdr <= 0 else max(1.0, p.deff) if p.deff is not None and math.isfinite(p.deff)
                     else max(1.0, d_fill) for p in ps])
    gid = _rate_groups(rate)
    ng = int(gid.max()) + 1
    members = [np.flatnonzero(gid == g) for g in range(ng)]
    wn = np.where(known, n, 1.0)      # weights within a rate (unknown counts weigh 1)

    def pooled(p_probe: np.ndarray, idx: np.ndarray) -> float:
        return float((p_probe[idx] * wn[idx]).sum() / wn[idx].sum())

    g_rate = np.array([float((rate[m] * wn[m]).sum() / wn[m].sum()) for m in members])
    g_p = np.array([pooled(pdr, m) for m in members])
    g_n = np.array([float(n[m].sum()) if known[m].all() else nan for m in members])
    g_eff = np.array([float((n[m] / deff[m]).sum()) if known[m].all() else nan for m in members])
    w = np.where(np.isfinite(g_eff), g_eff, np.nanmedian(g_eff) if np.isfinite(g_eff).any() else 1.0)
    from scipy.optimize import isotonic_regression

    def mono(y: np.ndarray) -> np.ndarray:
        return np.asarray(isotonic_regression(y, weights=w, increasing=True).x) if y.size > 1 else y

    g_fit = mono(g_p)
    out["rates"] = [{"rate_cps": float(g_rate[g]), "pdr": float(g_p[g]), "pdr_fit": float(g_fit[g]),
                     "messages": float(g_n[g]), "probes": int(members[g].size),
                     "steady": bool(all(ps[i].steady for i in members[g])),
                     "runs": [ps[i].run for i in members[g]]} for g in range(ng)]
    i = _first_at(g_fit, target)
    if i is None:
        knee, cen, a, b = float(g_rate[-1]), "above", float(g_rate[-1]), float("inf")
    elif i == 0:
        knee, cen, a, b = float(g_rate[0]), "below", 0.0, float(g_rate[0])
    else:
        a, b = float(g_rate[i - 1]), float(g_rate[i])
        p0, p1 = g_fit[i - 1], g_fit[i]
        knee = a + (target - p0) * (b - a) / (p1 - p0) if p1 > p0 else b
        cen = ""
    # measurements that disagree (a higher rate with fewer drops across 1 %) widen the interval
    lo, hi = _envelope(g_rate, g_p, g_fit, target)
    lo, hi = min(lo, a), max(hi, b)
    cross = np.flatnonzero((g_p[:-1] < target) & (g_p[1:] >= target))
    disagree = cross.size > 1 or (cen == "" and cross.size == 1 and g_rate[cross[0]] != a)
    # bootstrap: resample each rate's replications, draw each probe's fraction from its sampling law
    rng = np.random.default_rng(seed)
    if n_boot > 0:
        neff = np.where(known, n / deff, nan)
        draws = np.empty((n_boot, len(ps)))
        for j in range(len(ps)):
            if known[j]:
                dj = pdr[j] * neff[j]
                draws[:, j] = rng.beta(dj + 0.5, neff[j] - dj + 0.5, n_boot)
            else:
                draws[:, j] = pdr[j]
        gb = np.empty((n_boot, ng))
        for g, m in enumerate(members):
            if m.size > 1:
                pick = m[rng.integers(0, m.size, (n_boot, m.size))]
                gb[:, g] = (np.take_along_axis(draws, pick, axis=1) * wn[pick]).sum(1) / wn[pick].sum(1)
            else:
                gb[:, g] = draws[:, m[0]]
        ab = np.empty(n_boot)
        bb = np.empty(n_boot)
        for k in range(n_boot):
            ab[k], bb[k] = _envelope(g_rate, gb[k], mono(gb[k]), target)
        lo = min(lo, float(np.percentile(ab, 2.5)))
        hi = max(hi, float(np.percentile(bb, 97.5, method="higher")))
    why: list[str] = []
    nxt: list[float] = []
    verb = "run"
    if disagree:
        dn = [g for g in range(ng - 1) if g_p[g] >= target and (g_p[g + 1:] < target).any()]
        g0 = dn[0] if dn else int(cross[0])
        g1 = g0 + 1 + int(np.argmin(g_p[g0 + 1:])) if g0 + 1 < ng else g0
        why.append(f"the drop rates are not monotone in the rate ({g_rate[g0]:,.0f} calls/s dropped "
                   f"{100 * g_p[g0]:.2g} %, {g_rate[g1]:,.0f} calls/s {100 * g_p[g1]:.2g} %): conditions changed "
                   "between runs (another session, other work on the machine); every reading is inside the "
                   "interval, and the rates between should be run again in one session")
    if growing_cps is not None and math.isfinite(growing_cps) and growing_cps < hi:
        hi = float(growing_cps)
        below = g_rate[g_rate < growing_cps]
        lo = min(lo, float(below.max()) if below.size else 0.0)
        knee = min(knee, hi)
        why.append(f"the runs at {growing_cps:,.0f} calls/s lost less than {100 * target:g} % but the queue "
                   "grew through every one of them: under a longer load they would drop more, so the knee is at "
                   "most that")
    if (growing_maybe_cps is not None and math.isfinite(growing_maybe_cps)
            and growing_maybe_cps < hi and not (growing_cps is not None and growing_cps <= growing_maybe_cps)):
        below = g_rate[g_rate < growing_maybe_cps * (1 - RATE_REL_TOL)]
        lo = min(lo, float(below.max()) if below.size else 0.0)
        why.append(f"a run at {growing_maybe_cps:,.0f} calls/s lost less than {100 * target:g} % but its queue "
                   "grew through the run, and no replication confirms it (a stall late in a short run looks the "
                   "same): the knee may lie at or below that rate, so the interval reaches down to the rate "
                   "below it")
        again = [_round_rate(growing_maybe_cps)]
    else:
        again = []
    top = float(g_rate[-1])
    if cen == "above" or not math.isfinite(hi):
        why.append(f"no rate run is clearly past {100 * target:g} % lost (the highest, {top:,.0f} calls/s, "
                   f"lost {100 * g_p[-1]:.2g} %): the knee is above {lo:,.0f} calls/s")
        nxt = [_round_rate(top * f) for f in (1.15, 1.3, 1.5)]
    elif cen == "below" or lo <= 0:
        why.append(f"even the lowest rate run, {g_rate[0]:,.0f} calls/s, lost {100 * g_p[0]:.2g} %: the knee "
                   f"is below {hi:,.0f} calls/s")
        nxt = [_round_rate(g_rate[0] * f) for f in (0.5, 0.7, 0.85)]
    else:
        if hi - lo > KNEE_MAX_REL_WIDTH * knee:
            why.append(f"the interval's ends are {100 * (hi / lo - 1):.0f} % apart (a located knee needs "
                       f"{100 * KNEE_MAX_REL_WIDTH:.0f} % or less)")
            nxt = [_round_rate(lo + (hi - lo) * f) for f in (0.25, 0.5, 0.75)]
        span = [g for g in range(ng) if lo <= g_rate[g] <= hi]
        short = [g for g in span if not (g_n[g] >= MIN_PROBE_MSGS)]
        if short:
            why.append("the rates around it rest on too few messages ("
                       + ", ".join(f"{g_rate[g]:,.0f} calls/s: " + (f"{g_n[g]:,.0f}" if math.isfinite(g_n[g])
                                                                   else "count unknown") for g in short)
                       + f"; at least {MIN_PROBE_MSGS:,} each)")
        unsteady = [g for g in span if not out["rates"][g]["steady"]]
        if unsteady:
            why.append("runs around it never reached a steady state ("
                       + ", ".join(f"{g_rate[g]:,.0f} calls/s" for g in unsteady) + ")")
        ends = [g for g in range(ng) if g_rate[g] in (lo, hi)]
        single = [g for g in ends if members[g].size < 2]
        if single:
            why.append("the rates that bracket it were run once each (" + ", ".join(f"{g_rate[g]:,.0f}"
                                                                                 for g in single)
                       + " calls/s): replications measure how much a drop rate varies from run to run")
        if (short or unsteady or single) and not nxt:
            nxt = [_round_rate(x) for x in sorted({lo, hi})]
            verb = "repeat"
    if again:
        verb = verb if nxt else "repeat"
        nxt = sorted(set(nxt) | set(again))
    located = not why and cen == "" and lo > 0 and math.isfinite(hi)
    calls = MIN_PROBE_MSGS / 6
    if nxt:
        out["next"] = (f"{verb} " + ", ".join(f"{x:,.0f}" for x in nxt) + " calls/s, each at least three times with "
                       f"{MIN_PROBE_MSGS:,} messages (about {round(calls, -2):,.0f} calls) or more, and read the knee again "
                       "(the same set-up and records: steps 3-9 of the load-test plan, docs/load_test_plan.md)")
    out.update({"knee": float(knee), "censored": cen, "lo": float(lo), "hi": float(hi), "bracket": [a, b],
                "located": bool(located), "why": why, "next_rates": nxt})
    return out


def drop_model_check(rows: Sequence[dict], *, abs_miss: float = 0.005, factor: float = 3.0) -> dict[str, Any]:
    """Does the model's drop curve agree with the runs?  ``rows``: per run ``run``, ``lam_cps``,
    ``pdr_meas``, ``pdr_ci95`` (half-width), ``pdr_n`` (messages; None unknown) and ``pdr_pred``.

    A run refutes the model when the prediction lies outside the run's 95 % interval (for a run
    without drops: up to 3/n, the rule of three) and misses it by at least ``abs_miss`` (half a
    percentage point: half the knee's own definition) or by a factor of ``factor`` or more (where
    the prediction or the measurement is at least 0.1 %).  Returns ``refuted``, the number of runs
    checked and the worst miss (``run``, ``lam_cps``, ``pred``, ``meas``, ``lo``, ``hi``)."""
    worst, checked, bad = None, 0, []
    for d in rows:
        p, pr = d.get("pdr_meas", float("nan")), d.get("pdr_pred", float("nan"))
        if not (p is not None and pr is not None and math.isfinite(p) and math.isfinite(pr)):
            continue
        hw = d.get("pdr_ci95") or 0.0
        hw = hw if math.isfinite(hw) else 0.0
        nn = d.get("pdr_n")
        r3 = 3.0 / nn if nn and math.isfinite(nn) and nn > 0 else 0.0
        if hw <= 0 and r3 <= 0:
            continue        # no interval: the run cannot check anything
        lo, hi = max(p - hw, 0.0), p + max(hw, r3 if p == 0 else 0.0)
        checked += 1
        over = pr > hi and (pr - hi >= abs_miss or (pr >= factor * hi and pr >= 1e-3))
        under = pr < lo and (lo - pr >= abs_miss or (pr * factor <= lo and lo >= 1e-3))
        if over or under:
            miss = {"run": d.get("run"), "lam_cps": d.get("lam_cps"), "pred": pr, "meas": p, "lo": lo, "hi": hi}
            bad.append(miss)
            if worst is None or abs(pr - p) > abs(worst["pred"] - worst["meas"]):
                worst = miss
    return {"refuted": bool(bad), "checked": checked, "worst": worst, "misses": bad}


def cpu_law(rate_cps: Sequence[float], cpu_share: Sequence[float], cpus: float, *,
            level: float = 0.95) -> dict[str, Any]:
    """Service demand and capacity from CPU accounting, by the utilisation law U = U₀ + D·λ (the
    operational law U = X·D of Denning and Buzen, with the CPU the proxy burns at no load, U₀).

    ``rate_cps`` the call rates of light-load runs, ``cpu_share`` the CPU-seconds per second all
    the proxy's processes used at each; ``cpus`` how many CPUs the proxy can keep busy (its
    workers, at most the cores).  Least squares gives D (CPU-seconds per call; its t interval) and
    U₀ (CPU the proxy uses at no load); the capacity is the rate at which U reaches ``cpus``,
    λ_max = (cpus − U₀)/D, and its interval the inverse prediction (calibration) interval: the
    rates at which the line's 95 % confidence band reaches ``cpus``.  With two rates the line
    has no interval; with one, U₀ = 0 is assumed (D = U/λ).  Rates in calls/s."""
    from scipy import stats as st

    x = np.asarray(rate_cps, dtype=float)
    y = np.asarray(cpu_share, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y >= 0)
    x, y = x[ok], y[ok]
    nan = float("nan")
    out: dict[str, Any] = {"n": int(x.size), "cpus": float(cpus), "demand_s": nan, "demand_ci95_s": [nan, nan],
                           "idle_share": nan, "capacity_cps": nan, "capacity_ci95_cps": [nan, nan], "how": ""}
    if x.size == 0:
        return out
    if x.size == 1 or x.max() < MIN_RATE_SPREAD * x.min():
        # one rate (or rates too close to tell a slope from noise): through the origin
        d = float(y.sum() / x.sum())
        out.update({"demand_s": d, "idle_share": 0.0, "capacity_cps": cpus / d if d > 0 else nan,
                    "how": (f"{'one rate' if x.size == 1 else 'rates within ' + format(MIN_RATE_SPREAD, 'g') + '× of each other'}: "
                            "D = U/λ, the CPU used at no load taken as 0 (so D is high and the capacity low: "
                            "add a run at a clearly different light rate)")})
        return out
    n = x.size
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    b = float(((x - xm) * (y - ym)).sum() / sxx)
    a = float(ym - b * xm)
    out.update({"demand_s": b, "idle_share": a, "capacity_cps": (cpus - a) / b if b > 0 else float("inf"),
                "how": f"least squares of CPU-seconds per second on calls/s over {n} light-load rates"})
    if n < 3:
        out["how"] += " (two rates: no interval)"
        return out
    s = math.sqrt(float(((y - a - b * x) ** 2).sum()) / (n - 2))
    t = float(st.t.ppf(0.5 + level / 2, n - 2))
    se_b = s / math.sqrt(sxx)
    out["demand_ci95_s"] = [b - t * se_b, b + t * se_b]
    # what the confidence band of the line needs: a ± t·s·sqrt(1/n + (λ − x̄)²/Sxx) around a + bλ
    out["band"] = {"n": int(n), "x_mean": float(xm), "sxx": sxx, "s": s, "t": t}
    out["idle_ci95_share"] = [a - t * s * math.sqrt(1 / n + xm ** 2 / sxx), a + t * s * math.sqrt(1 / n + xm ** 2 / sxx)]

    def band(lam: float, sign: float) -> float:
        return a + b * lam + sign * t * s * math.sqrt(1 / n + (lam - xm) ** 2 / sxx) - cpus

    # inverse prediction: where the upper band reaches `cpus` (lowest capacity) and the lower band
    # (highest); the lower band need not reach it when the slope is not clearly positive
    big = 1e3 * max(float(x.max()), 1.0) * max(cpus, 1.0) / max(float(y.max()), 1e-9)
    lo_c = hi_c = float("nan")
    if band(0.0, +1) >= 0:
        lo_c = 0.0
    elif band(big, +1) > 0:
        lo_c = float(brentq(lambda v: band(v, +1), 0.0, big))
    if b - t * se_b <= 0:
        hi_c = float("inf")
    elif band(0.0, -1) >= 0:
        hi_c = 0.0
    else:
        top = big
        while band(top, -1) < 0 and top < 1e12:
            top *= 10
        hi_c = float(brentq(lambda v: band(v, -1), 0.0, top)) if band(top, -1) >= 0 else float("inf")
    out["capacity_ci95_cps"] = [lo_c, hi_c]
    return out


# ---- everything at once, with a bootstrap ------------------------------------------------------

@dataclass
class Fit:
    """The fitted constants, their 95 % intervals, the runs each came from, and per-run results."""

    constants: dict[str, dict[str, Any]]
    service: list[dict[str, Any]]
    per_run: list[dict[str, Any]]
    knees: list[dict[str, Any]]
    capacity: list[dict[str, Any]]
    notes: list[str]
    alpha_curve: AlphaCurve | None = None
    beta_plane: BetaPlane | None = None
    base: Base | None = None
    ex1: Any = None  # callable λ_pps -> E[X_1] µs
    #: per worker count, the utilisation law on CPU accounting (:func:`cpu_law` and the runs used)
    cpu: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        one = sorted((d for d in self.per_run if d.get("threads", 1) == 1 and "ex_us" in d),
                     key=lambda d: d["lam_pps"])
        ks = [d["k_pkts"] for d in self.per_run if d.get("k_pkts")]
        return {"constants": self.constants, "service_demand": self.service, "runs": self.per_run,
                "knees": self.knees, "capacity": self.capacity, "notes": self.notes, "cpu": self.cpu,
                # E[X_1](λ) and the SCV of X at each one-worker run (interpolate; flat beyond the ends)
                "ex1_curve": {"lam_pps": [d["lam_pps"] for d in one], "ex_us": [d["ex_us"] for d in one],
                              "scv": [d["scv"] for d in one]},
                "k_pkts": float(np.median(ks)) if ks else DEFAULT_K}


class FitFile:
    """A ``fit.json`` written by ``sipperf fit`` / ``sipperf report``, for ``sipperf model --fit``.

    ``ex1_us(λ)`` the one-worker service time, ``scv(λ)`` its SCV, ``beta(λ, c)`` (1 for one
    worker; None when β was not fitted), ``service_us_c(λ, c)`` the service time of c workers,
    ``k_pkts``, ``c11_cps`` (``c11()``: the same, or a ValueError when it was not fitted)."""

    def __init__(self, path) -> None:
        import json
        from pathlib import Path

        self.path = path
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--fit {path}: cannot read a fit JSON ({e})") from None
        if not isinstance(d, dict) or d.get("format") != "sipperf-fit-v1":
            raise ValueError(f"--fit {path}: not a sipperf fit.json (format sipperf-fit-v1)")
        self.d = d
        cur = d.get("ex1_curve") or {}
        self.lam = np.asarray([x for x in cur.get("lam_pps", []) if x is not None], dtype=float)
        self.ex = np.asarray([x for x in cur.get("ex_us", []) if x is not None], dtype=float)
        self.sc = np.asarray([x if x is not None else 0.0 for x in cur.get("scv", [])], dtype=float)
        if not self.lam.size or self.lam.size != self.ex.size:
            raise ValueError(f"--fit {path}: it holds no service time (no run with a proxy was fitted)")
        self.k_pkts = float(d.get("k_pkts") or DEFAULT_K)
        c11 = (d.get("constants") or {}).get("c11_cps") or {}
        self.c11_cps = c11.get("value")
        self.beta_d = (d.get("constants") or {}).get("beta")

    def ex1_us(self, lam_pps):
        return np.interp(np.asarray(lam_pps, dtype=float), self.lam, self.ex)

    def scv(self, lam_pps):
        return np.interp(np.asarray(lam_pps, dtype=float), self.lam, self.sc[: self.lam.size])

    def beta(self, lam_pps, c):
        c = np.asarray(c, dtype=float)
        if self.beta_d is None:
            if np.any(c > 1):
                return None
            return np.ones_like(np.asarray(lam_pps, dtype=float))
        b = self.beta_d
        val = b["c_coef"] * c + b["lam_coef"] * np.asarray(lam_pps, dtype=float) + b["const"]
        return np.where(c == 1, 1.0, val)

    def service_us_c(self, lam_pps, c: int) -> np.ndarray:
        """E[X_c] = β(λ, c)·c·E[X_1](λ) (thesis eq. 5.5), µs, at each λ; a ValueError when β was
        not fitted and c > 1."""
        lam = np.asarray(lam_pps, dtype=float)
        b = self.beta(lam, c)
        if b is None:
            raise ValueError(f"--fit {self.path} has no fitted beta: it cannot give the service time of {c} threads")
        return np.asarray(b * c * self.ex1_us(lam), dtype=float)

    def c11(self) -> float:
        """The fitted C_{1,1} (calls/s); a ValueError when no run set had a knee."""
        if self.c11_cps is None:
            raise ValueError(f"--fit {self.path} has no fitted C_1,1 (no run set with a knee)")
        return float(self.c11_cps)


def _point(runs: list[RunInput], msgs_per_call: float, default_k: float) -> dict[str, Any]:
    """One pass of the fit on ``runs`` (no bootstrap): returns plain numbers and callables."""
    out: dict[str, Any] = {"notes": []}
    usable = [r for r in runs if r.has_q]
    if not usable:
        return out
    rated = [r for r in usable if r.lam_pps > 0]
    light = min(rated or usable, key=lambda r: r.lam_pps)
    base = solve_base(light)
    out["base"] = base
    out["light"] = light
    one = sorted([r for r in usable if r.c == 1], key=lambda r: r.lam_pps)
    alphas = {}
    for r in one:
        if r is light:
            alphas[r.run] = 1.0
            continue
        if (math.isfinite(r.pdr) and r.pdr > MG1_MAX_PDR) or not r.steady:
            continue
        m = moments_at(r, base)
        alphas[r.run] = solve_alpha(r.q_mean_us, r.lam_pps, m)
    out["alpha_runs"] = alphas
    # the curve leaves out runs at (or, for their length, near) saturation: no stationary mean wait
    near_sat = {r.run for r in one if r.run in alphas and math.isfinite(alphas[r.run])
                and r.lam_pps * moments_at(r, base).mean(alphas[r.run]) * 1e-6 >= MG1_MAX_RHO}
    out["alpha_excluded"] = near_sat
    fit_pts = [(r.lam_pps, alphas[r.run]) for r in one
               if r.run in alphas and math.isfinite(alphas[r.run]) and r.run not in near_sat]
    curve = (fit_alpha_curve([p[0] for p in fit_pts], [p[1] for p in fit_pts], light.lam_pps)
             if fit_pts else AlphaCurve((light.lam_pps, light.lam_pps + 1.0), (1.0, 1.0), "none"))
    out["alpha_curve"] = curve
    src = one if one else usable
    lam_r = np.array([r.lam_pps for r in src])
    r_r = np.array([r.r_mean_us for r in src])
    o = np.argsort(lam_r)
    lam_r, r_r = lam_r[o], r_r[o]
    b = base.b_mean_us

    def ex1(lam_pps):
        """E[X_1](λ) in µs: a float for a number, an array for an array."""
        lam = np.asarray(lam_pps, dtype=float)
        rr = np.interp(lam, lam_r, r_r) if base.kind == "k_sockq" else np.zeros_like(lam)
        v = rr + curve(lam) * b
        return float(v) if v.ndim == 0 else v

    out["ex1"] = ex1
    betas = {}
    for r in usable:
        if r.c > 1:
            betas[r.run] = solve_beta(r.pdr, r.lam_pps, ex1(r.lam_pps), r.c, r.k_pkts or default_k)
    out["beta_runs"] = betas
    pts = [(r.c, r.lam_pps, betas[r.run]) for r in usable if r.run in betas and math.isfinite(betas[r.run])]
    plane = fit_beta_plane(*zip(*pts)) if pts else None
    out["beta_plane"] = plane
    # knees per thread count
    knees = {}
    fitted_c = {p[0] for p in pts}
    for c in sorted({r.c for r in runs}):
        rs = [r for r in runs if r.c == c and math.isfinite(r.pdr)]
        meas = knee_measured([r.lam_cps for r in rs], [r.pdr for r in rs])
        kp = float(np.median([r.k_pkts or default_k for r in rs])) if rs else default_k
        if c == 1:
            model = knee_model(ex1, 1, kp, None, msgs_per_call=msgs_per_call)
        elif plane is not None and ("c" not in plane.fixed or c in fitted_c):
            model = knee_model(ex1, c, kp, lambda lam, c=c: np.maximum(plane(lam, c), 1e-3),
                               msgs_per_call=msgs_per_call)
        else:
            model = float("nan")
        knees[c] = {"measured": meas, "model": model, "k_pkts": kp}
    out["knees"] = knees
    return out


def fit_all(runs: Iterable[RunInput], *, msgs_per_call: float = 6.0, default_k: float = DEFAULT_K,
            n_boot: int = 200, seed: int = 0, processors: int | None = None,
            cores: int | None = None, probes: Iterable[KneeProbe] = (),
            cpu_points: Sequence[dict] = ()) -> Fit:
    """Fit service demand, α(λ), β(λ, c) and C_{1,1} to ``runs``; 95 % intervals from a parametric
    bootstrap (``n_boot`` replicates, ``seed``).  ``processors``/``cores`` (p, m) override what the
    runs say about the machine (None and unknown: p = 1, and m = the thread count of the best
    configuration, i.e. the capacity rule's C_{1,1} is the single-worker knee).

    The measured knee of each worker count comes from :func:`knee_from_probes` over the runs'
    drop measurements (:func:`probes_of`) and ``probes`` (drop-only probes, e.g. a knee search);
    the model's knee is checked against every run by :func:`drop_model_check` and not used when
    refuted.  ``cpu_points`` (``rate_cps``, ``cpu_share``; optional ``threads``, ``run``) add CPU
    accounting to the runs' own (``RunInput.cpu_share``) for :func:`cpu_law`."""
    runs = [r for r in runs]
    extra_probes = list(probes)
    notes: list[str] = []
    usable = [r for r in runs if r.has_q]
    if not usable:
        notes.append("no run has a sojourn or socket-queue time (no proxy in the data): service demand, "
                     "α, β, the knee and C_{1,1} cannot be estimated")
        return Fit({}, [], [], [], [], notes)
    known_k = [r.k_pkts for r in runs if r.k_pkts]
    if known_k and any(not r.k_pkts for r in runs):
        default_k = float(np.median(known_k))
        notes.append(f"socket-queue capacity K = {default_k:.0f} packets (what the runs with drops show) is used "
                     "for the runs that do not show theirs")
    elif not known_k:
        notes.append(f"socket-queue capacity K = {default_k:.0f} packets assumed (the thesis's; the data do not show "
                     "it: no drops with tracepoints): give --buffer-pkts for yours")
    pt = _point(runs, msgs_per_call, default_k)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        rr = [_perturb(r, rng) for r in runs]
        try:
            boots.append(_point(rr, msgs_per_call, default_k))
        except (ValueError, ZeroDivisionError, FloatingPointError):
            continue
    base: Base = pt["base"]
    if base.note:
        notes.append(f"baseline run {base.run}: {base.note}")
    light = next(r for r in runs if r.run == base.run)
    rho_light = base.lam_pps * pt["ex1"](base.lam_pps) * 1e-6
    if rho_light > 0.3:
        notes.append(f"the lightest run ({base.run}) already has ρ ≈ {rho_light:.2f}: the service demand "
                     "leans on the M/G/1 correction of its queueing; add a run at light load (ρ < 0.1)")

    def ci(vals: list[float]) -> list[float]:
        v = np.asarray([x for x in vals if x is not None and math.isfinite(x)])
        if v.size < max(10, n_boot // 4):
            return [float("nan"), float("nan")]
        return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]

    consts: dict[str, dict[str, Any]] = {}
    # service demand per type
    service = []
    types = list(light.share_by_type) or list(base.b_by_type)
    for t in types + ["ALL"]:
        if t == "ALL":
            x = pt["ex1"](base.lam_pps)
            bx = [b["ex1"](b["base"].lam_pps) for b in boots if "ex1" in b]
            bb = base.b_mean_us
            bbx = [b["base"].b_mean_us for b in boots if "base" in b]
            r_ = light.r_mean_us if base.kind == "k_sockq" else 0.0
        else:
            bb = base.b_by_type.get(t, float("nan"))
            r_ = light.r_by_type.get(t, 0.0) if base.kind == "k_sockq" else 0.0
            x = bb + r_
            bbx = [b["base"].b_by_type.get(t, float("nan")) for b in boots if "base" in b]
            bx = []
            for b in boots:
                if "base" not in b:
                    continue
                rb = b["light"].r_by_type.get(t, 0.0) if base.kind == "k_sockq" else 0.0
                bx.append(b["base"].b_by_type.get(t, float("nan")) + rb)
        service.append({"msg_type": t, "share": light.share_by_type.get(t, 1.0 if t == "ALL" else float("nan")),
                        "ex_us": x, "ex_ci95_us": ci(bx), "b_us": bb, "b_ci95_us": ci(bbx), "r_us": r_,
                        "source": ("tracepoints: K^{s,base}_sockq + K_copy + T_sip + K_snd (eq. 4.1)"
                                   if base.kind == "k_sockq" else "light-load sojourn minus its M/G/1 wait"),
                        "run": base.run})
    consts["service_demand_us"] = {
        "value": pt["ex1"](base.lam_pps), "ci95": ci([b["ex1"](b["base"].lam_pps) for b in boots if "ex1" in b]),
        "runs": [base.run], "unit": "µs per message",
        "how": "E[X] = R + B at the lightest run; B from W(λ, R + B) + B = Q (M/G/1)"
               + ("; read off the sojourn, an UPPER BOUND on the work per message (the sojourn also holds any "
                  "wait for a CPU)" if base.kind == "sojourn" else ""),
        "upper_bound": base.kind == "sojourn"}
    kb = "K^{s,base}_sockq" if base.kind == "k_sockq" else "light-load service time (no tracepoints)"
    consts["b_us"] = {"value": base.b_mean_us, "ci95": ci([b["base"].b_mean_us for b in boots if "base" in b]),
                      "runs": [base.run], "unit": "µs", "what": kb}
    curve: AlphaCurve = pt["alpha_curve"]
    alpha_runs = {k: v for k, v in pt["alpha_runs"].items()}
    fitted_on = [k for k, v in alpha_runs.items() if math.isfinite(v) and k != base.run
                 and k not in pt.get("alpha_excluded", set())]
    if pt.get("alpha_excluded"):
        notes.append("left out of the α(λ) fit as (nearly) saturated, ρ ≥ 0.95 with their own service time: "
                     + ", ".join(sorted(pt["alpha_excluded"])))
    kn = list(curve.knots_pps)
    consts["alpha"] = {
        "family": curve.family, "knots_pps": kn, "values": list(curve.values),
        "values_ci95": [ci([float(bt["alpha_curve"](x)) for bt in boots if "alpha_curve" in bt]) for x in kn],
        "runs": [base.run] + fitted_on, "unit": "dimensionless; λ in packets/s",
        "how": ("per-run α from M/G/1 (eq. 4.2, 4.4) = measured Q; then α(λ) piecewise linear through "
                "them with α(λ₀) = 1 (linear / linear then flat / two slopes, chosen by BIC); held at its "
                "last value beyond the highest fitted rate"),
        "identified": len(fitted_on) >= 1,
        "scope": ("α scales K^{s,base}_sockq (thesis eq. 4.4)" if base.kind == "k_sockq" else
                  "no tracepoints: α scales the whole service time (service inflation), not only K^s_sockq")}
    if not fitted_on:
        notes.append("α(λ) is not fitted: it needs one-worker runs without drops at two rates or more "
                     "(α = 1 is assumed: the service time does not change with load)")
    plane: BetaPlane | None = pt["beta_plane"]
    beta_src = [k for k, v in pt["beta_runs"].items() if math.isfinite(v)]
    if plane is not None:
        consts["beta"] = {
            "c_coef": plane.c_coef, "lam_coef": plane.lam_coef, "const": plane.const, "fixed": list(plane.fixed),
            "c_coef_ci95": ci([b["beta_plane"].c_coef for b in boots if b.get("beta_plane")]),
            "lam_coef_ci95": ci([b["beta_plane"].lam_coef for b in boots if b.get("beta_plane")]),
            "const_ci95": ci([b["beta_plane"].const for b in boots if b.get("beta_plane")]),
            "runs": beta_src, "how": "β from M/M/c/K p_K = measured PDR at each multi-worker run with drops "
                                      "(eq. 5.3-5.5), then β = a·c + b·λ + d (eq. 5.6 form)"}
    else:
        multi = [r.run for r in runs if r.c > 1]
        notes.append("β is not fitted: it needs runs with several workers that drop packets (0 < PDR < 100 %)"
                     + (f"; the multi-worker runs ({', '.join(multi)}) dropped none" if multi else
                        "; every run has one worker (or the worker count is unknown)"))
    # per run
    per_run = []
    ex1 = pt["ex1"]
    for r in sorted(runs, key=lambda r: (r.c, r.lam_pps)):
        d: dict[str, Any] = {"run": r.run, "threads": r.c, "lam_pps": r.lam_pps, "lam_cps": r.lam_cps,
                             "q_kind": r.q_kind, "q_meas_us": r.q_mean_us, "q_ci95_us": 1.96 * r.q_se_us,
                             "pdr_meas": r.pdr, "pdr_ci95": 1.96 * r.pdr_se, "pdr_n": r.pdr_n,
                             "cpu_share": r.cpu_share if r.cpu_share is not None else float("nan")}
        if r.has_q:
            a_fit = float(curve(r.lam_pps))
            m = moments_at(r, base)
            ex = ex1(r.lam_pps)
            kp = r.k_pkts or default_k
            if r.c == 1:
                bt = 1.0
            elif plane is not None and ("c" not in plane.fixed or any(q.c == r.c for q in runs if q.run in beta_src)):
                bt = float(plane(r.lam_pps, r.c))
            else:
                bt = float("nan")
            if r.c == light.c:
                # the service demand was measured at this worker count: E[X_c], shared by c workers
                rho, how = r.lam_pps * ex * 1e-6 / r.c, "service demand"
            else:
                # server utilisation of the M/M/c/K model: λ·E[X_c]/c = λ·β·E[X_1] (β = 1 if unknown)
                rho = r.lam_pps * ex * 1e-6 * (bt if math.isfinite(bt) else 1.0)
                how = "fitted β (M/M/c/K)" if math.isfinite(bt) else "β = 1 assumed"
            d.update({"alpha_run": alpha_runs.get(r.run, float("nan")), "alpha_fit": a_fit,
                      "ex_us": ex, "scv": m.scv(a_fit), "rho": rho if r.lam_pps > 0 else float("nan"),
                      "rho_how": how})
            a_run = alpha_runs.get(r.run, float("nan"))
            # the run's own utilisation: its measured R and the α that reproduces its own Q
            d["rho_run"] = (r.lam_pps * m.mean(a_run) * 1e-6 if r.c == 1 and math.isfinite(a_run)
                            and r.lam_pps > 0 else float("nan"))
            # the traced path's busy time per second: what the measured service times account for
            x_run = m.mean(a_run) if math.isfinite(a_run) else ex
            d["traced_share"] = r.lam_pps * x_run * 1e-6 if r.lam_pps > 0 else float("nan")
            rho_cpu, per = cpu_utilisation(r.cpu_share, r.c, r.cpus)
            if math.isfinite(rho_cpu):
                d["rho_cpu"], d["rho_per"] = rho_cpu, per
                d["cpus"] = r.cpus
                d["outside_traced"] = 1.0 - d["traced_share"] / r.cpu_share
            if r.c == 1:
                q_pred = mg1_q_us(r.lam_pps, m, a_fit)
                w_pred = q_pred - a_fit * base.b_mean_us
                w_meas = r.q_mean_us - a_fit * base.b_mean_us
                d.update({"q_pred_us": q_pred, "w_meas_us": w_meas, "w_pred_us": w_pred,
                          "w_err_pct": 100 * (w_pred - w_meas) / w_meas if w_meas > 0 and math.isfinite(w_pred)
                          else float("nan"),
                          "q_err_pct": 100 * (q_pred - r.q_mean_us) / r.q_mean_us if math.isfinite(q_pred)
                          else float("nan")})
            d["beta_run"] = pt["beta_runs"].get(r.run, float("nan"))
            d["beta_fit"] = bt
            d["k_pkts"] = kp
            # no service time (a light-load sojourn the M/G/1 reading puts all down to waiting): no
            # drop prediction either; the verdict names why
            d["pdr_pred"] = (drop_probability(r.lam_pps, ex, r.c, kp, bt)
                             if math.isfinite(bt) and bt > 0 and math.isfinite(ex) and ex > 0 else float("nan"))
        per_run.append(d)
    # knees: measured from the replicated probes around 1 % drops, the model's checked against every run
    knees = []
    for c, k in pt["knees"].items():
        rs = [r for r in runs if r.c == c]
        pc = [q for r in rs for q in probes_of(r)] + [q for q in extra_probes if int(q.threads or 1) == c]
        grow, grow_maybe = growth_bounds((r.lam_cps, bool(r.queue_growing)) for r in rs
                                         if r.queue_growing is not None)
        meas = knee_from_probes(pc, seed=seed, growing_cps=grow, growing_maybe_cps=grow_maybe)
        bm = [b["knees"][c]["model"] for b in boots if "knees" in b and c in b["knees"]]
        hi = max([r.lam_cps for r in rs if math.isfinite(r.lam_cps)] + [q.rate_cps for q in pc], default=float("nan"))
        model = k["model"]
        chk = drop_model_check([d for d in per_run if d["threads"] == c])
        over = [g["rate_cps"] for g in meas["rates"] if g["pdr_fit"] >= TARGET_PDR]
        if grow is not None:
            over.append(grow)
        if math.isfinite(model) and over and model > min(over):
            chk["refuted"] = True
            chk["knee_above_overload_cps"] = min(over)
        rates = {round(r.lam_cps) for r in rs if r.has_q and math.isfinite(r.lam_cps) and r.lam_pps > 0}
        knees.append({"threads": c, "measured_cps": meas["knee"], "measured_censored": meas["censored"],
                      "measured_ci95_cps": [meas["lo"], meas["hi"]] if meas["censored"] != "no runs"
                      else [float("nan")] * 2,
                      "measured_located": meas["located"], "measured_bracket_cps": meas["bracket"],
                      "measured_why": meas["why"], "measured_next": meas["next"],
                      "measured_next_rates": meas["next_rates"], "measured_rates": meas["rates"],
                      "measured_probes": meas["n_probes"],
                      "model_cps": model, "model_ci95_cps": ci(bm), "k_pkts": k["k_pkts"],
                      "model_refuted": chk["refuted"], "model_check": chk,
                      # a model knee is a prediction that needs at least two rates to rest on
                      "model_usable": bool(math.isfinite(model) and not chk["refuted"] and len(rates) >= 2),
                      "model_rates": len(rates),
                      "highest_rate_cps": hi,
                      "headroom": model / hi if hi and math.isfinite(model) else float("nan"),
                      "runs": [r.run for r in rs]})
    # utilisation law on CPU accounting, per worker count
    cpu = _cpu_fits(runs, cpu_points, cores)
    # C_{1,1}
    capacity = []
    c11, c11_ci, c11_how, c11_runs, c11_src = _c11(runs, knees, processors, cores)
    if math.isfinite(c11):
        consts["c11_cps"] = {"value": c11, "ci95": c11_ci, "runs": c11_runs, "unit": "calls/s", "how": c11_how,
                             "source": "model" if c11_src == "model" else "measured",
                             "located": c11_src == "measured"}
        for p, m in ((1, 2), (1, 4), (1, 6), (2, 4), (2, 6), (2, 8)):
            t = threads_for_capacity(p, m)
            capacity.append({"processors": p, "cores": m, "threads": t, "capacity_cps": t * c11,
                             "ci95_cps": [t * x for x in c11_ci], "what": "model prediction (eq. 7.1)"})
    elif c11_src.startswith("the best knee"):
        notes.append("C_{1,1} cannot be fitted: " + c11_src)
    else:
        refuted = [k["threads"] for k in knees if k["model_refuted"]]
        notes.append("C_{1,1} cannot be fitted: no configuration has a measured 1 %-drop knee"
                     + (f", and the model's knee is refuted by the runs ({', '.join(map(str, refuted))} "
                        "worker(s))" if refuted else " or a model knee resting on runs at two rates or more"))
    return Fit(consts, service, per_run, knees, capacity, notes, curve, plane, base, ex1, cpu)


def _cpu_fits(runs: list[RunInput], cpu_points: Sequence[dict], cores: int | None) -> list[dict[str, Any]]:
    """Per worker count, :func:`cpu_law` over the runs with CPU accounting and without drops or a
    growing queue (light load), plus the user's extra points (``cpu_points``: ``rate_cps``,
    ``cpu_share``, optional ``threads`` and ``run``)."""
    m = cores or next((r.cores for r in runs if r.cores), None)
    allowed = next((r.cpus for r in runs if r.cpus), None)     # the CPUs the processes may run on
    if m is None and allowed:
        m = allowed
    cs = {r.c for r in runs}
    default_c = next(iter(cs)) if len(cs) == 1 else 1
    out = []
    for c in sorted(cs | {int(x.get("threads") or default_c) for x in cpu_points}):
        ncpu = min(c, m) if m else c
        acct = [r for r in runs if r.c == c and r.cpu_share is not None and math.isfinite(r.cpu_share)
                and math.isfinite(r.lam_cps)]

        def past(r) -> bool:  # the run's own data, or its CPUs, say it was past the linear range
            return bool((math.isfinite(r.pdr) and r.pdr > MG1_MAX_PDR) or r.queue_growing or r.pushed_back
                        or r.cpu_share >= CPU_FULL * ncpu)

        pts = [(r.lam_cps, r.cpu_share, r.run) for r in acct if not past(r)]
        left_out = [r.run for r in acct if past(r)]
        full = sorted((r.lam_cps, r.cpu_share, r.run) for r in acct if r.cpu_share >= CPU_FULL * ncpu)
        pts += [(float(x["rate_cps"]), float(x["cpu_share"]), str(x.get("run") or "--cpu file")) for x in cpu_points
                if int(x.get("threads") or default_c) == c and float(x["cpu_share"]) < CPU_FULL * ncpu]
        if not pts and not full:
            continue
        law = cpu_law([p[0] for p in pts], [p[1] for p in pts], ncpu)
        # the CPUs measured full: the lowest rate at which they were, and the CPU per call there
        law["full"] = [{"run": lab, "rate_cps": x, "cpu_share": y, "cpu_per_call_ms": 1e3 * y / x if x > 0 else float("nan")}
                       for x, y, lab in full]
        law["full_from_cps"] = full[0][0] if full else float("nan")
        law.update({"threads": c, "runs": [p[2] for p in pts], "left_out": left_out,
                    "points": [{"run": p[2], "rate_cps": p[0], "cpu_share": p[1]} for p in pts],
                    "cpus_how": (f"{ncpu:g} CPU{'s' if ncpu != 1 else ''} ({c} worker{'s' if c > 1 else ''}"
                                 + (f" on {m} core{'s' if m > 1 else ''})" if m and not (allowed and m == allowed and not cores)
                                    else f" on the {m} CPU{'s' if m > 1 else ''} they may run on)" if m
                                    else ", cores unknown: give --cores)"))})
        out.append(law)
    return out


def _c11(runs, knees, processors, cores):
    """C_{1,1} from the best knee per machine (p, m): measured where the runs bracket 1 % drops (its
    interval the knee's), else the model's where it is usable (not refuted, two rates or more)."""
    p = processors or next((r.processors for r in runs if r.processors), None) or 1
    m = cores or next((r.cores for r in runs if r.cores), None)
    best = None
    for k in knees:
        if not k["measured_censored"]:
            v, ci_, src = k["measured_cps"], k["measured_ci95_cps"], ("measured" if k["measured_located"]
                                                                     else "measured, not located")
        elif k["model_usable"]:
            v, ci_, src = k["model_cps"], k["model_ci95_cps"], "model"
        else:
            continue
        if math.isfinite(v) and (best is None or v > best[1]):
            best = (k["threads"], v, src, ci_)
    if best is None:
        return float("nan"), [float("nan")] * 2, "", [], ""
    c, v, src, ci_ = best
    at_c = [r for r in runs if r.c == c]
    if m is None and c > 1:
        # the cores are not given: what the c-worker runs show of them, else no C_{1,1}
        pinned = {r.cpus for r in at_c if r.cpus}
        shares = [r.cpu_share for r in at_c if r.cpu_share is not None and math.isfinite(r.cpu_share)]
        if len(pinned) == 1:
            m, seen = pinned.pop(), "the CPUs the workers were allowed"
        elif shares and max(shares) <= ONE_CPU_SHARE:
            m, seen = 1, f"the proxy never used more than {max(shares):.2f} CPU-seconds per second"
        else:
            return (float("nan"), [float("nan")] * 2, "", [],
                    f"the best knee is of {c} workers and the cores they ran on are not known (give --cores, "
                    "or the proxy's CPU with --cpu): C_{1,1} is one core's capacity, and dividing by the "
                    "workers would assume one core each")
    else:
        seen = "given"
    if c == 1 or m is None or m == 1:
        # C_{1,1} is one worker on one core: a one-worker knee is its measurement, and so is a knee
        # measured on one core, whatever the workers
        t = 1
        how = (f"{src} 1 %-drop knee of the {c}-worker runs"
               + (" (C_{1,1} = one worker on one core; the extra cores of your machine, if any, carry the "
                  "kernel's work)" if c == 1 or m is None else f" on one core ({seen})"))
    else:
        t = threads_for_capacity(p, m)
        how = (f"{src} 1 %-drop knee of the best configuration ({c} workers) / T_{{{p},{m}}} = {t} (eq. 7.1; "
               f"{m} cores: {seen})")
    return v / t, [x / t for x in ci_], how, [r.run for r in at_c], src


def _perturb(r: RunInput, rng: np.random.Generator) -> RunInput:
    """One parametric-bootstrap replicate of a run: its means drawn from their sampling laws."""
    def n(mu, se):
        return float(mu + se * rng.standard_normal()) if se and math.isfinite(se) and math.isfinite(mu) else mu

    q_by = {k: max(n(v, r.q_se_by_type.get(k, 0.0)), 0.0) for k, v in r.q_by_type.items()}
    r_by = {k: max(n(v, r.r_se_by_type.get(k, 0.0)), 0.0) for k, v in r.r_by_type.items()}
    pdr = min(max(n(r.pdr, r.pdr_se), 0.0), 1.0) if math.isfinite(r.pdr) else r.pdr
    return replace(r, q_mean_us=max(n(r.q_mean_us, r.q_se_us), 0.0), r_mean_us=max(n(r.r_mean_us, r.r_se_us), 0.0),
                   q_by_type=q_by, r_by_type=r_by, pdr=pdr)


def to_json_dict(fit: Fit) -> dict[str, Any]:
    """The fit as plain JSON-able data (NaN/inf as None)."""
    def clean(x):
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, (np.floating, float)):
            v = float(x)
            return v if math.isfinite(v) else None
        if isinstance(x, np.integer):
            return int(x)
        return x
    d = fit.to_dict()
    if fit.alpha_curve is not None:
        d["alpha_curve"] = asdict(fit.alpha_curve)
    return clean(d)
