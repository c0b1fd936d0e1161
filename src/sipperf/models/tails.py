"""Delay distributions, not only means: sojourn and waiting-time tails and percentiles.

None of this is in seed 000, which models mean waits only (its eq. 4.2); the chapter "Delay
distributions" derives each formula and checks it by computation.  Notation (book glossary):
λ arrival rate, μ service rate of one server, c servers, ρ utilisation, X service time, W wait
before service, S = W + X sojourn (FCFS, so W and the message's own X are independent),
``sf`` = survival function P(· > t), ``quantile(q)`` = the smallest t with P(· ≤ t) ≥ q.

* **M/M/1 sojourn** (Kleinrock 1975): S is exponential with rate μ − λ,
  ``P(S > t) = exp(-(μ - λ) t)``, so ``s_q = -ln(1 - q)/(μ - λ)``.
* **M/M/c wait** (Erlang): an atom ``1 - C(c, a)`` at 0 and an exponential tail,
  ``P(W > t) = C(c, a) exp(-(cμ - λ) t)`` with C the Erlang-C probability (``a = λ/μ``).
  Sojourn S = W + X, X ~ Exp(μ) independent of W (the convolution, δ = cμ − λ)::

      P(S > t) = (1 - C) e^{-μt} + C (μ e^{-δt} - δ e^{-μt}) / (μ - δ)   [(1 + μt) e^{-μt} if δ = μ]

* **Atom + exponential** (:func:`atom_exp_sf`): ``P(W > t) = p e^{-p t / w}`` with
  ``p = P(W > 0)`` and mean ``w``; exact for M/M/1 (p = ρ) and M/M/c (p = C), and the form of
  the two approximations below.
* **M/G/1 wait** (Pollaczek–Khinchine transform, Kleinrock 1975): with ``X*(s) = E[e^{-sX}]``,
  ``W*(s) = (1 - ρ) s / (s - λ (1 - X*(s)))`` and ``S*(s) = W*(s) X*(s)``.  Inverted
  numerically (:func:`mg1_wait_sf`, :func:`mg1_sojourn_sf`) by the Euler algorithm of Abate and
  Whitt (1995) applied to the Laplace transform of the survival function, ``(1 - W*(s))/s``
  (A = 18.4: discretisation error about e^{-A} ≈ 1e-8; 38 terms and Euler summation of 11 more).
* **Cramér–Lundberg asymptotic** (:func:`cramer_lundberg`; Asmussen 2003): if
  ``M(γ) = E[e^{γX}]`` exists near the root, ``P(W > t) ~ C e^{-γt}`` as t → ∞, where γ > 0
  solves ``λ (M(γ) - 1) = γ`` and ``C = (1 - ρ) / (λ M'(γ) - 1)``; then
  ``P(S > t) ~ C M(γ) e^{-γt}``.  The decay rate is exact; only the prefactor is asymptotic.
* **Kingman's heavy-traffic exponential** (Kingman 1961): as ρ → 1 the G/G/1 wait is
  exponential, ``P(W > t) ≈ exp(-t / w_K)`` with ``w_K = (c_a² + c_s²)/2 · ρ/(1 - ρ) · E[X]``
  (:func:`sipperf.models.kingman_wait`); no atom at 0.

Service times are a :class:`GammaMix`: a mixture of gamma distributions given by weight, mean and
SCV (SCV 0 is a point mass, 1 an exponential), which covers the six-type message mixture, M/D/1,
M/M/1, and a measured sample (:meth:`GammaMix.from_samples`, mean and variance kept exactly).
Times in seconds, rates per second (any consistent units work).  Where the queue is unstable
(ρ ≥ 1) every survival function is 1 and every quantile +inf.  NaN, ±inf and out-of-range inputs
raise ``ValueError`` naming the argument.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import finite
from sipperf.models.kingman import kingman_wait
from sipperf.models.mmck import erlang_c

__all__ = ["GammaMix", "CramerLundberg", "mm1_sojourn_sf", "mm1_sojourn_quantile", "mmc_wait_sf",
           "mmc_wait_quantile", "mmc_sojourn_sf", "mmc_sojourn_quantile", "atom_exp_sf", "atom_exp_quantile",
           "mg1_wait_lst", "mg1_wait_sf", "mg1_sojourn_sf", "mg1_quantile", "cramer_lundberg",
           "kingman_wait_sf", "kingman_wait_quantile"]

_F = NDArray[np.float64]

#: Abate–Whitt EULER parameters: A (error ≈ e^{-A}), terms n, Euler-averaged terms m
EULER_A, EULER_N, EULER_M = 18.4, 38, 11
#: a gamma part with a smaller SCV is treated as its mean (a point mass): its shape 1/SCV would
#: overflow the transform, and the two distributions differ by less than 1e-5 of the mean
POINT_SCV = 1e-10


# -- service-time distributions ------------------------------------------------------------------
@dataclass(frozen=True)
class GammaMix:
    """A service time that is component i (probability ``weights[i]``) with probability weight,
    then gamma-distributed with mean ``means_s[i]`` and SCV ``scvs[i]`` (0: the constant
    ``means_s[i]``; 1: exponential).  Weights are normalised to sum to one."""

    weights: _F
    means_s: _F
    scvs: _F

    def __post_init__(self):
        w = finite("weights", self.weights, ge=0)
        m = finite("means_s", self.means_s, gt=0)
        v = finite("scvs", self.scvs, ge=0)
        w, m, v = (np.atleast_1d(a).ravel() for a in np.broadcast_arrays(w, m, v))
        if w.sum() <= 0:
            raise ValueError("weights must not all be zero")
        object.__setattr__(self, "weights", w / w.sum())
        object.__setattr__(self, "means_s", m)
        object.__setattr__(self, "scvs", v)

    @classmethod
    def exponential(cls, mean_s: float) -> "GammaMix":
        return cls(np.ones(1), np.asarray([mean_s], float), np.ones(1))

    @classmethod
    def constant(cls, value_s: float) -> "GammaMix":
        return cls(np.ones(1), np.asarray([value_s], float), np.zeros(1))

    @classmethod
    def from_samples(cls, x_s: ArrayLike, groups: int = 256) -> "GammaMix":
        """A measured sample as a mixture: the sorted sample cut into ``groups`` runs of (nearly)
        equal size, each a gamma with the run's mean and SCV (a point mass for one value).  The
        mixture's mean and variance equal the sample's (law of total variance); its tail follows
        the sample's largest values."""
        x = np.sort(finite("x_s", x_s, gt=0).ravel())
        if x.size == 0:
            raise ValueError("x_s must hold at least one value")
        parts = np.array_split(x, min(int(groups), x.size))
        n = np.array([len(p) for p in parts], float)
        mean = np.array([p.mean() for p in parts])
        var = np.array([p.var() for p in parts])
        return cls(n, mean, var / mean**2)

    def moment(self, k: int) -> float:
        """E[X^k] = Σ w m^k Π_{j<k} (1 + j c²) (gamma moments; exact for point masses too)."""
        prod = np.ones_like(self.means_s)
        for j in range(int(k)):
            prod = prod * (1.0 + j * self.scvs)
        return float(np.sum(self.weights * self.means_s**k * prod))

    @property
    def gamma_max(self) -> float:
        """Where the moment generating function E[e^{γX}] ends: min over gamma parts of k/m = 1/(m c²)."""
        g = self.scvs > POINT_SCV
        return float(np.min(1.0 / (self.means_s[g] * self.scvs[g]))) if g.any() else np.inf

    def one_minus_lst(self, s: ArrayLike) -> NDArray:
        """1 − X*(s) for complex or real s with Re s ≥ 0, without cancellation near s = 0."""
        s = np.asarray(s)[..., None]
        m, v = self.means_s, self.scvs
        g = v > POINT_SCV
        kappa = np.where(g, 1.0 / np.where(g, v, 1.0), 1.0)
        theta = m * v
        part = np.where(g, -np.expm1(-kappa * np.log1p(theta * s)), -np.expm1(-m * s))
        return np.sum(self.weights * part, axis=-1)

    def mgf(self, g: ArrayLike) -> _F:
        """E[e^{γX}] for real 0 ≤ γ < :attr:`gamma_max`."""
        g = np.asarray(g, float)[..., None]
        m, v = self.means_s, self.scvs
        gam = v > POINT_SCV
        kappa = np.where(gam, 1.0 / np.where(gam, v, 1.0), 1.0)
        part = np.where(gam, np.exp(-kappa * np.log1p(-m * v * g)), np.exp(m * g))
        return np.sum(self.weights * part, axis=-1)

    def mgf_prime(self, g: ArrayLike) -> _F:
        """E[X e^{γX}], the derivative of :meth:`mgf`."""
        g = np.asarray(g, float)[..., None]
        m, v = self.means_s, self.scvs
        gam = v > POINT_SCV
        kappa = np.where(gam, 1.0 / np.where(gam, v, 1.0), 1.0)
        part = np.where(gam, m * np.exp(-(kappa + 1.0) * np.log1p(-m * v * g)), m * np.exp(m * g))
        return np.sum(self.weights * part, axis=-1)


def _mix(mix) -> GammaMix:
    if not isinstance(mix, GammaMix):
        raise ValueError(f"mix must be a GammaMix, got {type(mix).__name__}")
    return mix


def _q(q: ArrayLike) -> _F:
    a = finite("q", q)
    if np.any((a <= 0) | (a >= 1)):
        raise ValueError(f"q must lie strictly between 0 and 1, got {a.ravel()[:6].tolist()}")
    return a


def _bisect_quantile(sf, q: _F, hi: _F, iters: int = 100) -> _F:
    """Smallest t with sf(t) ≤ 1 − q, by bisection on [0, hi] after doubling hi until it holds."""
    target = 1.0 - q
    hi = np.array(hi, float, copy=True)
    for _ in range(200):
        short = sf(hi) > target
        if not short.any():
            break
        hi = np.where(short, 2.0 * hi, hi)
    lo = np.zeros_like(hi)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        above = sf(mid) > target
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return hi


# -- M/M/1 and M/M/c ---------------------------------------------------------------------------------
def mm1_sojourn_sf(t_s: ArrayLike, lam: ArrayLike, mu: ArrayLike) -> _F:
    """M/M/1 sojourn: ``P(S > t) = exp(-(μ - λ) t)``; 1 where λ ≥ μ."""
    t, la, m = np.broadcast_arrays(finite("t_s", t_s, ge=0), finite("lam", lam, ge=0), finite("mu", mu, gt=0))
    return np.where(la < m, np.exp(-(m - la) * t), 1.0)


def mm1_sojourn_quantile(q: ArrayLike, lam: ArrayLike, mu: ArrayLike) -> _F:
    """M/M/1 sojourn quantile ``-ln(1 - q)/(μ - λ)``; +inf where λ ≥ μ."""
    q_, la, m = np.broadcast_arrays(_q(q), finite("lam", lam, ge=0), finite("mu", mu, gt=0))
    with np.errstate(divide="ignore"):
        return np.where(la < m, -np.log1p(-q_) / np.where(la < m, m - la, 1.0), np.inf)


def _mmc_parts(lam, mu, c):
    la, m, cc = np.broadcast_arrays(finite("lam", lam, ge=0), finite("mu", mu, gt=0),
                                    finite("c", c, ge=1, integer=True))
    stable = la < cc * m
    pw = np.where(stable, erlang_c(cc, np.where(stable, la / m, 0.0)), 1.0)
    delta = np.where(stable, cc * m - la, 0.0)
    return la, m, cc, stable, pw, delta


def mmc_wait_sf(t_s: ArrayLike, lam: ArrayLike, mu: ArrayLike, c: ArrayLike) -> _F:
    """M/M/c wait: ``P(W > t) = C(c, λ/μ) exp(-(cμ - λ) t)`` for t ≥ 0 (the atom 1 − C at 0)."""
    t = finite("t_s", t_s, ge=0)
    _, _, _, stable, pw, delta = _mmc_parts(lam, mu, c)
    return np.where(stable, pw * np.exp(-delta * t), 1.0)


def mmc_wait_quantile(q: ArrayLike, lam: ArrayLike, mu: ArrayLike, c: ArrayLike) -> _F:
    """M/M/c wait quantile: 0 if ``1 - q ≥ C``, else ``ln(C/(1 - q))/(cμ - λ)``; +inf if unstable."""
    q_ = _q(q)
    _, _, _, stable, pw, delta = _mmc_parts(lam, mu, c)
    q_, stable, pw, delta = np.broadcast_arrays(q_, stable, pw, delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.maximum(0.0, np.log(pw / (1.0 - q_))) / np.where(stable, delta, 1.0)
    return np.where(stable, t, np.inf)


def mmc_sojourn_sf(t_s: ArrayLike, lam: ArrayLike, mu: ArrayLike, c: ArrayLike) -> _F:
    """M/M/c sojourn S = W + X (FCFS): the convolution of the wait with an Exp(μ) service,
    ``(1 - C) e^{-μt} + C (μ e^{-δt} - δ e^{-μt}) / (μ - δ)`` with δ = cμ − λ (the limit
    ``(1 + μt) e^{-μt}`` at δ = μ, by ``expm1`` without cancellation)."""
    t = finite("t_s", t_s, ge=0)
    _, m, _, stable, pw, delta = _mmc_parts(lam, mu, c)
    t, m, stable, pw, delta = np.broadcast_arrays(t, m, stable, pw, delta)
    d = m - delta
    x = d * t
    em = np.exp(-m * t)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        near = np.abs(x) <= 1.0
        # P(Exp(δ) + Exp(μ) > t) = e^{-μt} (1 + μt · expm1(dt)/(dt)); far from d = 0 the direct form
        ratio = np.where(x == 0, 1.0, np.expm1(np.where(near, x, 0.0)) / np.where(x == 0, 1.0, x))
        h_near = em * (1.0 + m * t * ratio)
        h_far = em + m / np.where(d == 0, 1.0, d) * (np.exp(-delta * t) - em)
    h = np.where(near, h_near, h_far)
    return np.where(stable, (1.0 - pw) * em + pw * h, 1.0)


def mmc_sojourn_quantile(q: ArrayLike, lam: ArrayLike, mu: ArrayLike, c: ArrayLike) -> _F:
    """M/M/c sojourn quantile, by bisection on :func:`mmc_sojourn_sf`; +inf where unstable."""
    q_ = _q(q)
    la, m, cc, stable, _, delta = _mmc_parts(lam, mu, c)
    q_, la, m, cc, stable, delta = np.broadcast_arrays(q_, la, m, cc, stable, delta)
    rate = np.where(stable, np.minimum(m, np.where(stable, delta, 1.0)), 1.0)
    sf = lambda t: mmc_sojourn_sf(t, np.where(stable, la, 0.0), m, cc)   # noqa: E731
    t = _bisect_quantile(sf, q_, -np.log1p(-q_) / rate)
    return np.where(stable, t, np.inf)


def atom_exp_sf(t_s: ArrayLike, p_wait: ArrayLike, mean_wait_s: ArrayLike) -> _F:
    """An atom at 0 and an exponential tail with the given P(W > 0) = p and mean w:
    ``P(W > t) = p exp(-p t / w)`` (1 − p at t = 0 is the atom; w = 0 means no wait)."""
    t, p, w = np.broadcast_arrays(finite("t_s", t_s, ge=0), finite("p_wait", p_wait, ge=0),
                                  finite("mean_wait_s", mean_wait_s, ge=0))
    if np.any(p > 1):
        raise ValueError("p_wait must be a probability (<= 1)")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((w > 0) & (p > 0), p * np.exp(-p * t / np.where(w > 0, w, 1.0)), 0.0)


def atom_exp_quantile(q: ArrayLike, p_wait: ArrayLike, mean_wait_s: ArrayLike) -> _F:
    """Quantile of :func:`atom_exp_sf`: 0 if ``1 - q ≥ p``, else ``(w/p) ln(p/(1 - q))``."""
    q_, p, w = np.broadcast_arrays(_q(q), finite("p_wait", p_wait, ge=0), finite("mean_wait_s", mean_wait_s, ge=0))
    if np.any(p > 1):
        raise ValueError("p_wait must be a probability (<= 1)")
    with np.errstate(divide="ignore", invalid="ignore"):
        t = w / np.where(p > 0, p, 1.0) * np.log(np.where(p > 0, p, 1.0) / (1.0 - q_))
    return np.where((p > 1.0 - q_) & (w > 0), t, 0.0)


# -- M/G/1: the Pollaczek–Khinchine transform and its inversion -----------------------------------
def mg1_wait_lst(s: ArrayLike, lam: float, mix: GammaMix) -> NDArray:
    """The Pollaczek–Khinchine transform ``W*(s) = (1 - ρ) s / (s - λ (1 - X*(s)))`` (complex s,
    Re s > 0; W*(0) = 1).  Needs ρ = λE[X] < 1."""
    mix = _mix(mix)
    la = float(finite("lam", lam, ge=0))
    rho = la * mix.moment(1)
    if rho >= 1:
        raise ValueError(f"the M/G/1 wait has no distribution at rho = {rho:.3f} >= 1")
    s = np.asarray(s)
    if np.iscomplexobj(s):
        if not np.all(np.isfinite(s)):
            raise ValueError("s must be finite")
    else:
        s = finite("s", s, ge=0)
    d = mix.one_minus_lst(s)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (1.0 - rho) * s / (s - la * d)
    return np.where(s == 0, 1.0, out)


def _euler_invert(transform, t: _F) -> _F:
    """Abate–Whitt EULER inversion of a Laplace transform at t > 0 (vectorised over t)."""
    a, n, m = EULER_A, EULER_N, EULER_M
    k = np.arange(n + m + 1)
    s = (a + 2j * np.pi * k[None, :]) / (2.0 * t[:, None])                  # (len t, n + m + 1)
    fr = transform(s).real
    terms = fr * np.where(k == 0, 0.5, 1.0)[None, :] * ((-1.0) ** k)[None, :]
    partial = np.cumsum(terms, axis=1)[:, n:] * (np.exp(a / 2) / t[:, None])   # s_n .. s_{n+m}
    binom = np.array([_comb(m, j) for j in range(m + 1)]) / 2.0**m
    return partial @ binom


def _comb(n: int, k: int) -> float:
    from math import comb

    return float(comb(n, k))


def _mg1_sf(t_s, lam, mix, sojourn: bool) -> _F:
    mix = _mix(mix)
    t = finite("t_s", t_s, ge=0)
    la = float(finite("lam", lam, ge=0))
    rho = la * mix.moment(1)
    if rho >= 1:
        return np.ones_like(t)
    flat = np.atleast_1d(t).ravel()
    pos = flat > 0

    def tail(s):                     # Laplace transform of P(W > t) (or P(S > t)): (1 - W*(s)) / s
        d = mix.one_minus_lst(s)
        den = s - la * d
        one_minus_w = (rho * s - la * d) / den
        if not sojourn:
            return one_minus_w / s
        w = (1.0 - rho) * s / den
        return (one_minus_w + w * d) / s

    out = np.empty_like(flat)
    out[~pos] = 1.0 if sojourn else rho            # P(W > 0) = ρ; P(S > 0) = 1
    if pos.any():
        out[pos] = np.clip(_euler_invert(tail, flat[pos]), 0.0, 1.0)
    return out.reshape(np.shape(t))


def mg1_wait_sf(t_s: ArrayLike, lam: float, mix: GammaMix) -> _F:
    """M/G/1 FCFS wait ``P(W > t)``, by numerical inversion of the Pollaczek–Khinchine transform
    (Abate–Whitt EULER on ``(1 - W*(s))/s``); ``P(W > 0) = ρ``.  Scalar ``lam``; 1 where ρ ≥ 1."""
    return _mg1_sf(t_s, lam, mix, sojourn=False)


def mg1_sojourn_sf(t_s: ArrayLike, lam: float, mix: GammaMix) -> _F:
    """M/G/1 FCFS sojourn ``P(S > t)``, S = W + X, inverting ``(1 - W*(s) X*(s))/s``."""
    return _mg1_sf(t_s, lam, mix, sojourn=True)


@dataclass(frozen=True)
class CramerLundberg:
    """The exponential tail of the M/G/1 wait: ``P(W > t) ~ wait_prefactor · e^{-rate t}`` and
    ``P(S > t) ~ sojourn_prefactor · e^{-rate t}`` (rate 0 and prefactors 1 where ρ ≥ 1)."""

    rate_per_s: _F
    wait_prefactor: _F
    sojourn_prefactor: _F

    def wait_sf(self, t_s: ArrayLike) -> _F:
        t = finite("t_s", t_s, ge=0)
        return np.minimum(1.0, self.wait_prefactor * np.exp(-self.rate_per_s * t))

    def sojourn_sf(self, t_s: ArrayLike) -> _F:
        t = finite("t_s", t_s, ge=0)
        return np.minimum(1.0, self.sojourn_prefactor * np.exp(-self.rate_per_s * t))


def cramer_lundberg(lam: ArrayLike, mix: GammaMix) -> CramerLundberg:
    """Decay rate γ and prefactors of the M/G/1 wait tail: γ > 0 solves ``λ (M(γ) - 1) = γ`` (the
    left side is convex in γ, below γ just after 0 because ρ < 1, and grows without bound towards
    :attr:`GammaMix.gamma_max`, so the root is unique; bisection), ``C = (1 - ρ)/(λ M'(γ) - 1)``,
    sojourn prefactor ``C M(γ)``.  Vectorised over ``lam``."""
    mix = _mix(mix)
    la = finite("lam", lam, ge=0)
    ex = mix.moment(1)
    stable = (la * ex < 1) & (la > 0)
    lam_s = np.where(stable, la, 0.0)
    gmax = mix.gamma_max
    # bracket: h(γ) = λ(M(γ) - 1) - γ < 0 on (0, γ*), > 0 beyond
    hi = np.full(la.shape, gmax * (1 - 1e-12) if np.isfinite(gmax) else 1.0 / ex)
    if not np.isfinite(gmax):
        for _ in range(200):
            grow = stable & (lam_s * (mix.mgf(hi) - 1.0) - hi <= 0)
            if not grow.any():
                break
            hi = np.where(grow, 2.0 * hi, hi)
    lo = np.zeros_like(hi)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            neg = lam_s * (mix.mgf(mid) - 1.0) - mid < 0
            lo, hi = np.where(neg, mid, lo), np.where(neg, hi, mid)
    g = 0.5 * (lo + hi)
    rho = lam_s * ex
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (1.0 - rho) / (lam_s * mix.mgf_prime(g) - 1.0)
    return CramerLundberg(rate_per_s=np.where(stable, g, 0.0),
                          wait_prefactor=np.where(stable, c, np.where(la == 0, 0.0, 1.0)),
                          sojourn_prefactor=np.where(stable, c * mix.mgf(g), 1.0))


def mg1_quantile(q: ArrayLike, lam: float, mix: GammaMix, what: str = "wait",
                 method: str = "inversion") -> _F:
    """Quantiles of the M/G/1 wait (``what="wait"``) or sojourn (``"sojourn"``): by bisection on the
    inverted transform (``method="inversion"``, exact to about 1e-8 in probability) or in closed
    form from the Cramér–Lundberg tail (``"cramer-lundberg"``: ``ln(C/(1 - q))/γ``, 0 when
    ``1 - q ≥ C``).  +inf where ρ ≥ 1."""
    mix = _mix(mix)
    q_ = _q(q)
    la = float(finite("lam", lam, ge=0))
    if what not in ("wait", "sojourn") or method not in ("inversion", "cramer-lundberg"):
        raise ValueError("what must be 'wait' or 'sojourn', method 'inversion' or 'cramer-lundberg'")
    if la * mix.moment(1) >= 1:
        return np.full(q_.shape, np.inf)
    cl = cramer_lundberg(la, mix)
    c = float(cl.wait_prefactor if what == "wait" else cl.sojourn_prefactor)
    g = float(cl.rate_per_s)
    guess = np.maximum(np.log(np.maximum(c, 1e-300) / (1.0 - q_)), 0.0) / g if g > 0 else np.zeros_like(q_)
    if method == "cramer-lundberg":
        return guess
    sf = mg1_wait_sf if what == "wait" else mg1_sojourn_sf
    flat = np.atleast_1d(q_).ravel()
    if what == "wait":
        rho = la * mix.moment(1)
        zero = (1.0 - flat) >= rho               # the atom at 0 covers this quantile
    else:
        zero = np.zeros(flat.shape, bool)
    out = np.zeros_like(flat)
    if (~zero).any():
        hi = np.maximum(np.atleast_1d(guess).ravel()[~zero] * 2.0, mix.moment(1))
        out[~zero] = _bisect_quantile(lambda t: sf(t, la, mix), flat[~zero], hi, iters=60)
    return out.reshape(np.shape(q_))


# -- Kingman's heavy-traffic exponential -----------------------------------------------------------
def kingman_wait_sf(t_s: ArrayLike, lam_pps: ArrayLike, ex_s: ArrayLike, ca2: ArrayLike, cs2: ArrayLike) -> _F:
    """Kingman's heavy-traffic exponential ``P(W > t) ≈ exp(-t / w_K)``, ``w_K`` his G/G/1 mean
    (:func:`sipperf.models.kingman_wait`); 1 where ρ ≥ 1, 0 where w_K = 0."""
    t = finite("t_s", t_s, ge=0)
    w = kingman_wait(finite("lam_pps", lam_pps, ge=0), finite("ex_s", ex_s, gt=0), finite("ca2", ca2, ge=0),
                     finite("cs2", cs2, ge=0))
    t, w = np.broadcast_arrays(t, w)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isinf(w), 1.0, np.where(w > 0, np.exp(-t / np.where(w > 0, w, 1.0)), 0.0))


def kingman_wait_quantile(q: ArrayLike, lam_pps: ArrayLike, ex_s: ArrayLike, ca2: ArrayLike,
                          cs2: ArrayLike) -> _F:
    """Quantile of :func:`kingman_wait_sf`: ``w_K ln(1/(1 - q))``; +inf where ρ ≥ 1."""
    q_ = _q(q)
    w = kingman_wait(finite("lam_pps", lam_pps, ge=0), finite("ex_s", ex_s, gt=0), finite("ca2", ca2, ge=0),
                     finite("cs2", cs2, ge=0))
    return -w * np.log1p(-q_)
