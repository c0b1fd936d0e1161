"""M/G/1 model of a single-threaded SIP proxy (thesis ch. 4, §4.3; paper_ch4).

The packet service time is (eq. 4.1)

    X = K^s_sockq + K_copy + T_sip + K_snd

and its distribution has six modes, one per SIP message type of a call (INVITE, 180 Ringing,
200 OK (INVITE), ACK, BYE, 200 OK (BYE)); every call brings one message of each type, so the
service time is an equal-weight mixture.  The mean waiting time in the socket queue is
Pollaczek–Khinchine (eq. 4.2) ``W = λ E[X²] / (2 (1 - ρ))`` with ``ρ = λ E[X]`` and
``E[X²] = (1/6) Σ_i E[X_i²]`` (eq. 4.3), where ``E[X_i²] = Var[X_i] + E[X_i]²``.

Interrupt overhead (eq. 4.4): ``K^s_sockq(λ) = α(λ) · K^{s,base}_sockq`` with α piecewise linear
in the packet rate λ (packets/s), thesis §4.3.1 "Modeling the Interrupt Overhead":
Poisson arrivals α(0)=1, α(600)=3, α(1200)=5, α(λ≥2400)=8; deterministic arrivals
α(0)=1, α(600)=1.5, α(1200)=3, α(λ≥2400)=6.  (Tables 4.4/4.5 print exactly these α at
λ = 600, 1200 and ≥ 2400 pkt/s.)

What the thesis computed for Tables 4.4/4.5 (reverse-engineered, see :func:`thesis_implied_inputs`):
``E[X] = α(λ)·7.9 + 5.6 + 2 + T_sip(λ)`` with the Table 4.3 overall means (7.9 µs, 5.6 µs), K_copy
≈ 2 µs (§4.2.1) and the measured overall mean T_sip of Figures 4.6/4.7 (≈ 102–119 µs, not printed
in the text); the printed W imply ``E[X²]/E[X]² ≈ 1.02–1.04``, i.e. a squared coefficient of
variation of only 0.02–0.04 — the spread of the six per-type *means*.  That is what eq. 4.3 gives
when each E[X_i²] is taken as E[X_i]² (within-type variance ignored); any within-type variance
would raise W further.  :func:`thesis_mg1` lets you choose (``t_sip_sd_us``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite

__all__ = [
    "MESSAGE_TYPES", "TABLE_4_3", "ALPHA_BREAKPOINTS", "alpha", "ServiceMix", "mixture_moments",
    "MG1Result", "mg1_wait", "ThesisMG1Result", "thesis_mg1", "thesis_implied_inputs", "pps_from_cps",
]

_F = NDArray[np.float64]
Arrivals = Literal["poisson", "deterministic"]

#: The six SIP message types of one call (thesis Figure 2.2), in Table 4.3 order.
MESSAGE_TYPES: tuple[str, ...] = ("INVITE", "180 Ringing", "200 OK (INVITE)", "ACK", "BYE", "200 OK (BYE)")

#: Thesis Table 4.3 (measured at 1 cps, µs), per message type in MESSAGE_TYPES order.
TABLE_4_3: dict[str, tuple[float, ...]] = {
    "packet_size_B": (624, 375, 542, 466, 466, 367),
    "k_stack_us": (2.6, 2.2, 2.5, 2.2, 2.5, 2.2),
    "k_sockq_base_us": (8.3, 7.6, 8.5, 7.4, 8.1, 7.5),
    "k_snd_us": (6.15, 5.2, 5.5, 5.6, 5.9, 5.2),
}
#: K_copy ≈ 2 µs, constant across types and rates (thesis §4.2.1, §5.2.1).
K_COPY_US = 2.0

#: α(λ) breakpoints (λ in packets/s, α dimensionless), thesis §4.3.1; flat beyond the last one.
ALPHA_BREAKPOINTS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "poisson": ((0.0, 600.0, 1200.0, 2400.0), (1.0, 3.0, 5.0, 8.0)),
    "deterministic": ((0.0, 600.0, 1200.0, 2400.0), (1.0, 1.5, 3.0, 6.0)),
}


def alpha(lam_pps: ArrayLike, arrivals: Arrivals = "poisson",
          breakpoints: tuple[ArrayLike, ArrayLike] | None = None) -> _F:
    """Interrupt-overhead factor α(λ) of eq. 4.4 (thesis §4.3.1), piecewise linear in λ [pkt/s].

    ``arrivals`` selects the thesis's Poisson (1, 3, 5, 8 at 0, 600, 1200, ≥2400 pkt/s) or
    deterministic (1, 1.5, 3, 6) curve; ``breakpoints=(lam_pps_points, alpha_values)`` overrides
    it (ch. 5 Table 5.1 uses other α values on different hardware).  Constant beyond the last point.
    """
    lam = finite("packet rate lam_pps", lam_pps, ge=0)
    if breakpoints is None:
        if arrivals not in ALPHA_BREAKPOINTS:
            raise ValueError(f"arrivals must be one of {sorted(ALPHA_BREAKPOINTS)}, got {arrivals!r}")
        xp, fp = ALPHA_BREAKPOINTS[arrivals]
    else:
        xp = finite("alpha breakpoints (packet rates)", breakpoints[0], ge=0)
        fp = finite("alpha breakpoints (alpha values)", breakpoints[1], gt=0)
        if xp.ndim != 1 or xp.shape != fp.shape or xp.size == 0:
            raise ValueError("alpha breakpoints must be two 1-D arrays of the same non-zero length")
        if np.any(np.diff(xp) <= 0):
            raise ValueError("alpha breakpoints must be strictly increasing in lam")
    return np.interp(lam, xp, fp)


@dataclass(frozen=True)
class ServiceMix:
    """Service time as a mixture over message types, each a sum of independent components.

    ``means_s[i, j]`` and ``sds_s[i, j]`` are the mean and standard deviation (seconds) of
    component j (e.g. k_sockq, k_copy, t_sip, k_snd) for message type i; ``weights[i]`` the
    fraction of packets of type i (default equal: one of each type per call).  Components of a
    type are taken as independent, so Var[X_i] = Σ_j sd_ij².
    """

    means_s: _F
    sds_s: _F | None = None
    weights: _F | None = None
    types: tuple[str, ...] = MESSAGE_TYPES
    components: tuple[str, ...] = ("k_sockq", "k_copy", "t_sip", "k_snd")

    def __post_init__(self) -> None:
        m = np.atleast_2d(finite("service-time component means means_s", self.means_s, ge=0))
        if m.size == 0:
            raise ValueError("means_s must hold at least one message type")
        s = np.zeros_like(m) if self.sds_s is None else np.broadcast_to(
            finite("service-time component sds sds_s", self.sds_s, ge=0), m.shape)
        w = (np.full(m.shape[0], 1.0 / m.shape[0]) if self.weights is None
             else finite("type weights", self.weights, ge=0))
        if w.shape != (m.shape[0],) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError("weights must be one non-negative number per type, summing to 1")
        object.__setattr__(self, "means_s", m)
        object.__setattr__(self, "sds_s", np.array(s))
        object.__setattr__(self, "weights", w)

    @property
    def type_means_s(self) -> _F:
        """E[X_i] per message type (s)."""
        return self.means_s.sum(axis=1)

    @property
    def type_vars_s2(self) -> _F:
        """Var[X_i] per message type (s²)."""
        return (self.sds_s ** 2).sum(axis=1)


def mixture_moments(mix: ServiceMix | ArrayLike, sds_s: ArrayLike | None = None,
                    weights: ArrayLike | None = None) -> tuple[float, float]:
    """E[X] and E[X²] of the service-time mixture (thesis eq. 4.3).

    ``E[X] = Σ w_i E[X_i]`` and ``E[X²] = Σ w_i (Var[X_i] + E[X_i]²)`` — the second moment of
    each type includes its mean squared, not only its variance.  Accepts a :class:`ServiceMix`,
    or per-type means (1-D, seconds) with optional per-type sds and weights.
    """
    if not isinstance(mix, ServiceMix):
        means = np.asarray(mix, dtype=float).reshape(-1, 1)
        sds = None if sds_s is None else np.asarray(sds_s, dtype=float).reshape(-1, 1)
        mix = ServiceMix(means, sds, None if weights is None else np.asarray(weights, dtype=float),
                         types=tuple(str(i) for i in range(means.shape[0])), components=("x",))
    mu_i = mix.type_means_s
    ex = float(np.dot(mix.weights, mu_i))
    ex2 = float(np.dot(mix.weights, mix.type_vars_s2 + mu_i ** 2))
    return ex, ex2


@dataclass(frozen=True)
class MG1Result:
    """M/G/1 results.  ``W_s`` is the mean wait in queue (eq. 4.2); ``T_s = W_s + E[X]`` the sojourn.

    Where ρ ≥ 1 the queue is unstable: ``stable`` is False and W_s, T_s, Lq are +inf (never a
    negative number).
    """

    lam_pps: _F
    ex_s: _F
    ex2_s2: _F
    rho: _F
    stable: NDArray[np.bool_]
    W_s: _F
    T_s: _F
    Lq: _F


def mg1_wait(lam_pps: ArrayLike, ex_s: ArrayLike, ex2_s2: ArrayLike) -> MG1Result:
    """Pollaczek–Khinchine mean waiting time, thesis eq. 4.2: W = λE[X²] / (2(1 - ρ)), ρ = λE[X].

    Vectorised (broadcast) over all arguments; λ in packets/s, E[X] in s, E[X²] in s².
    Raises ValueError for NaN/inf inputs, λ < 0, E[X] ≤ 0 or E[X²] < E[X]² (impossible moments).
    """
    lam, ex, ex2 = np.broadcast_arrays(finite("packet rate lam_pps", lam_pps, ge=0),
                                       finite("mean service time ex_s", ex_s, gt=0),
                                       finite("second moment ex2_s2", ex2_s2, ge=0))
    if np.any(ex2 < ex ** 2 * (1 - 1e-12)):
        raise ValueError("second moment ex2_s2 must be >= ex_s**2 (variance cannot be negative)")
    rho = lam * ex
    stable = rho < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(stable, lam * ex2 / (2.0 * (1.0 - np.where(stable, rho, 0.0))), np.inf)
    return MG1Result(lam_pps=lam, ex_s=ex, ex2_s2=ex2, rho=rho, stable=stable, W_s=w, T_s=w + ex,
                     Lq=np.where(stable, lam * w, np.inf))


@dataclass(frozen=True)
class ThesisMG1Result:
    """Tables 4.4/4.5-style output (µs).  Rows follow ``lam_pps``."""

    lam_pps: _F
    alpha: _F
    ex_us: _F
    ex2_us2: _F
    rho: _F
    stable: NDArray[np.bool_]
    W_us: _F


def thesis_mg1(lam_pps: ArrayLike, t_sip_us: ArrayLike, arrivals: Arrivals = "poisson", *,
               t_sip_sd_us: ArrayLike = 0.0, k_copy_us: float = K_COPY_US,
               k_sockq_base_us: ArrayLike = TABLE_4_3["k_sockq_base_us"],
               k_snd_us: ArrayLike = TABLE_4_3["k_snd_us"],
               alpha_breakpoints: tuple[ArrayLike, ArrayLike] | None = None) -> ThesisMG1Result:
    """The thesis's M/G/1 computation of Tables 4.4/4.5 (eq. 4.1–4.4) from Table 4.3 inputs.

    Per message type i and rate λ (pkt/s):
    ``X_i = α(λ)·K^{s,base}_sockq,i + K_copy + T_sip,i + K_snd,i`` (eq. 4.1, 4.4);
    ``E[X] = mean_i X_i``; ``E[X²] = mean_i (X_i² + sd_i²)`` (eq. 4.3); W by eq. 4.2.

    ``t_sip_us`` (and ``t_sip_sd_us``) broadcast to shape (len(lam_pps), 6): a scalar is the same
    for every type and rate, a 1-D array of length 6 is per type, shape (n, 1) is per rate and
    (n, 6) per rate and type.  The thesis did not print T_sip (Figures 4.6/4.7); use
    :func:`thesis_implied_inputs` to recover the values its Tables 4.4/4.5 imply.
    The default ``t_sip_sd_us = 0`` matches what the thesis's printed W imply (within-type
    variance not included); pass measured within-type sds to include it.
    """
    lam = np.atleast_1d(finite("packet rate lam_pps", lam_pps, ge=0))
    if lam.ndim != 1:
        raise ValueError("lam_pps must be a scalar or 1-D array")
    a = alpha(lam, arrivals, alpha_breakpoints)
    n = lam.shape[0]
    try:
        tsip = np.broadcast_to(finite("t_sip_us", t_sip_us, ge=0), (n, 6))
        tsd = np.broadcast_to(finite("t_sip_sd_us", t_sip_sd_us, ge=0), (n, 6))
    except ValueError:
        raise ValueError("t_sip_us / t_sip_sd_us must broadcast to (len(lam_pps), 6): scalar, per type (6,), "
                         "per rate (n, 1) or (n, 6)") from None
    kb = np.broadcast_to(finite("k_sockq_base_us", k_sockq_base_us, ge=0), (6,))
    ks = np.broadcast_to(finite("k_snd_us", k_snd_us, ge=0), (6,))
    finite("k_copy_us", k_copy_us, ge=0)
    x_i = a[:, None] * kb[None, :] + k_copy_us + tsip + ks[None, :]
    ex = x_i.mean(axis=1)
    ex2 = (x_i ** 2 + tsd ** 2).mean(axis=1)
    r = mg1_wait(lam, ex * 1e-6, ex2 * 1e-12)
    return ThesisMG1Result(lam_pps=lam, alpha=a, ex_us=ex, ex2_us2=ex2, rho=r.rho, stable=r.stable,
                           W_us=r.W_s * 1e6)


def pps_from_cps(lam_cps: ArrayLike, messages_per_call: int = 6) -> _F:
    """Packet rate from call rate: every call brings six SIP messages through the proxy (Table 4.4 row 1)."""
    lam = finite("call rate lam_cps", lam_cps, ge=0)
    m = finite("messages_per_call", messages_per_call, gt=0, integer=True)
    return lam * m


def thesis_implied_inputs(lam_pps: ArrayLike, ex_us: ArrayLike, w_us: ArrayLike, alpha_: ArrayLike,
                          *, k_sockq_base_us: float = 7.9, k_snd_us: float = 5.6,
                          k_copy_us: float = K_COPY_US) -> dict[str, _F]:
    """Back out what a printed Table 4.4/4.5 column implies.

    Returns ``t_sip_us`` = E[X] - α·K^{s,base} - K_snd - K_copy (the overall mean T_sip the
    thesis must have used), ``rho`` = λE[X], ``ex2_us2`` = 2W(1-ρ)/λ (inverting eq. 4.2) and
    ``scv`` = E[X²]/E[X]² - 1 (NaN where ρ ≥ 1 or W is missing).  A missing W (a printed "N/A")
    is passed as NaN; every other input must be finite (ValueError otherwise).
    """
    lam = finite("packet rate lam_pps", lam_pps, gt=0)
    ex = finite("ex_us", ex_us, gt=0)
    w = finite("w_us", w_us, ge=0, allow_nan=True)
    a = finite("alpha_", alpha_, gt=0)
    for name, v in (("k_sockq_base_us", k_sockq_base_us), ("k_snd_us", k_snd_us), ("k_copy_us", k_copy_us)):
        finite(name, v, ge=0)
    rho = lam * ex * 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        ex2 = np.where(rho < 1, 2.0 * w * 1e-6 * (1.0 - rho) / lam * 1e12, np.nan)
    return {"t_sip_us": ex - a * k_sockq_base_us - k_snd_us - k_copy_us, "rho": rho,
            "ex2_us2": ex2, "scv": ex2 / ex ** 2 - 1.0}
