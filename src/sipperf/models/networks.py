"""Networks of queues: operational bounds, open Jackson networks, exact MVA (chapter "A network
of SIP servers").

Not in seed 000, which models one proxy (its related work mentions a six-queue network model of
a proxy and a UAS, which it sets aside, and two M/G/1/B queues in tandem).  Notation of the
chapter: stations (devices, proxies) k = 1..K; a customer (a call, a registration) visits
station k on average ``v_k`` times and needs ``E[X]`` per visit there, so its **service demand**
at k is ``D_k = v_k E[X]`` (s per customer); the system's throughput is Λ (customers/s).

* **Forced flow and utilisation** (Denning & Buzen 1978): ``λ_k = v_k Λ`` and
  ``U_k = λ_k E[X] = Λ D_k``; so ``Λ ≤ c_k / D_k`` at every station with ``c_k`` servers (the
  **bottleneck law**: ``Λ ≤ min_k c_k / D_k``).
* **Asymptotic bounds** (:func:`network_bounds`), ``D = Σ D_k``, ``D_max = max_k D_k`` over
  single-server stations, think time Z: open, ``Λ < 1/D_max`` and ``S ≥ D``; closed with N
  customers, ``N / (N D + Z) ≤ Λ(N) ≤ min(N / (D + Z), 1/D_max)`` and
  ``max(D, N D_max - Z) ≤ S(N) ≤ N D``; the two upper throughput lines cross at
  ``N* = (D + Z) / D_max``.
* **Open Jackson network** (Jackson 1963; :func:`jackson`): Poisson arrivals from outside at
  rate ``λ^ext_k``, routing probabilities ``P_jk`` (from j to k; ``1 - Σ_k P_jk`` leaves),
  exponential service at rate ``μ_k`` by ``c_k`` servers.  The traffic equations
  ``λ_k = λ^ext_k + Σ_j λ_j P_jk`` give every station's rate, and when every ``λ_k < c_k μ_k``
  the stationary distribution is the **product form**
  ``P(N_1 = n_1, …, N_K = n_K) = Π_k p_k(n_k)``, ``p_k`` the M/M/c_k distribution at rate λ_k
  (:func:`jackson_pmf`): each station behaves as if it were an M/M/c alone.  The mean time in
  the network per customer is ``Σ_k L_k / Σ_k λ^ext_k`` (Little).
* **Exact mean value analysis** (Reiser & Lavenberg 1980; :func:`mva`) of a closed
  product-form network with N customers, think time Z (a delay station), single-server
  stations and delay stations, by the arrival theorem (an arriving customer sees the network
  in equilibrium with one customer fewer)::

      S_k(n) = D_k (1 + L_k(n-1))      (queueing station; D_k at a delay station)
      Λ(n)   = n / (Z + Σ_k S_k(n))
      L_k(n) = Λ(n) S_k(n)

  and for a station with ``c_k > 1`` servers the load-dependent form, with the marginal
  probabilities ``p_k(j | n)`` of j customers at k::

      S_k(n)     = D_k Σ_{j=1..n} j / min(j, c_k) · p_k(j-1 | n-1)
      p_k(j | n) = Λ(n) D_k / min(j, c_k) · p_k(j-1 | n-1),   p_k(0 | n) = 1 - Σ_{j≥1} p_k(j | n)

Rates in 1/s, times in s.  NaN, ±inf, negative or out-of-range inputs raise ``ValueError``
naming the argument.  Pure numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sipperf.models._guard import count, finite
from sipperf.models.mmck import mmc

__all__ = ["JacksonResult", "MVAResult", "NetworkBounds", "traffic_rates", "jackson", "jackson_pmf", "mva",
           "network_bounds"]

_F = NDArray[np.float64]


def _routing(routing: ArrayLike, k: int | None = None) -> _F:
    p = finite("routing", routing, ge=0)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"routing must be a square matrix (from station j to station k), got shape {p.shape}")
    if k is not None and p.shape[0] != k:
        raise ValueError(f"routing is {p.shape[0]}x{p.shape[0]} but there are {k} stations")
    if np.any(p.sum(axis=1) > 1 + 1e-12):
        raise ValueError("routing: each row is a probability distribution over the next station; a row sums "
                         f"to more than 1 ({p.sum(axis=1).max():.6g})")
    if p.size and np.max(np.abs(np.linalg.eigvals(p))) >= 1 - 1e-12:
        raise ValueError("routing: some customers never leave (the network is not open: a set of stations "
                         "routes all its traffic among itself)")
    return p


def traffic_rates(lam_ext_pps: ArrayLike, routing: ArrayLike) -> _F:
    """The traffic equations of an open network: ``λ = λ^ext + Pᵀ λ`` solved for every station's
    total arrival rate λ (1/s).  With ``λ^ext`` a distribution of where a customer enters (sums to
    1) the result is the visit ratios ``v_k``."""
    lam_ext = finite("lam_ext_pps", lam_ext_pps, ge=0)
    if lam_ext.ndim != 1:
        raise ValueError("lam_ext_pps must be a vector, one rate per station")
    p = _routing(routing, lam_ext.size)
    return np.linalg.solve(np.eye(lam_ext.size) - p.T, lam_ext)


@dataclass(frozen=True)
class JacksonResult:
    """Per station (arrays): total arrival rate ``lam_pps``, utilisation per server ``rho``, mean
    number present ``L``, mean wait ``W_s`` and sojourn ``S_s`` per visit, probability of waiting
    ``p_wait``; for the network: ``throughput_pps`` (= Σ λ^ext), ``L_total`` and the mean time in
    the network per customer ``response_s`` (Little); ``stable`` per station."""

    lam_pps: _F
    rho: _F
    L: _F
    W_s: _F
    S_s: _F
    p_wait: _F
    throughput_pps: float
    L_total: float
    response_s: float
    stable: NDArray[np.bool_]


def jackson(lam_ext_pps: ArrayLike, mu: ArrayLike, routing: ArrayLike, c: ArrayLike = 1) -> JacksonResult:
    """Open Jackson network (module doc): traffic equations, then each station an M/M/c_k queue.

    ``lam_ext_pps`` arrivals from outside per station, ``mu`` service rate of one server at each
    station (1/s), ``routing[j, k]`` probability that a customer leaving j goes to k, ``c``
    servers per station (scalar or per station).  An unstable station (λ_k ≥ c_k μ_k) has
    infinite L, W and S, and so has the network."""
    lam = traffic_rates(lam_ext_pps, routing)
    k = lam.size
    mu_ = np.broadcast_to(finite("mu", mu, gt=0), (k,)).astype(float)
    c_ = np.broadcast_to(finite("c", c, ge=1, integer=True), (k,)).astype(float)
    r = mmc(lam, mu_, c_)
    ext = float(finite("lam_ext_pps", lam_ext_pps).sum())
    l_tot = float(np.sum(r.L))
    with np.errstate(divide="ignore", invalid="ignore"):
        resp = l_tot / ext if ext > 0 else float("nan")
    return JacksonResult(lam_pps=lam, rho=lam / (c_ * mu_), L=np.asarray(r.L, float), W_s=np.asarray(r.Wq, float),
                         S_s=np.asarray(r.W, float), p_wait=np.asarray(r.p_wait, float), throughput_pps=ext,
                         L_total=l_tot, response_s=float(resp), stable=np.asarray(r.stable))


def _mmc_log_pmf(n: _F, a: _F, c: _F) -> _F:
    """log P(N = n) of a stable M/M/c queue with offered load a = λ/μ (< c), elementwise."""
    from scipy.special import gammaln, logsumexp

    rho = a / c
    cmax = int(np.max(c))
    j = np.arange(cmax)[..., None]                                   # 0..c-1 down the first axis
    with np.errstate(divide="ignore", invalid="ignore"):
        la = np.log(a)
        terms = np.where(j < c, j * la - gammaln(j + 1.0), -np.inf)   # a^j / j!, j < c
        tail = c * la - gammaln(c + 1.0) - np.log1p(-rho)             # a^c / (c! (1 - ρ))
    with np.errstate(invalid="ignore"):
        log_norm = logsumexp(np.concatenate([terms, tail[None]], axis=0), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        below = n * la - gammaln(n + 1.0)
        above = n * la - gammaln(c + 1.0) - (n - c) * np.log(c)
    out = np.where(n < c, below, above) - log_norm
    return np.where((n == 0) & (a == 0), 0.0, np.where((a == 0) & (n > 0), -np.inf, out))


def jackson_pmf(n: ArrayLike, lam_pps: ArrayLike, mu: ArrayLike, c: ArrayLike = 1) -> _F:
    """Product form of an open Jackson network: ``P(N_1 = n_1, …, N_K = n_K) = Π_k p_k(n_k)``, with
    ``p_k`` the M/M/c_k distribution at the station's total rate ``lam_pps[k]`` (from
    :func:`traffic_rates`).  ``n`` has the stations on its last axis (leading axes: many states).
    Every station must be stable."""
    n_ = finite("n", n, ge=0, integer=True)
    lam = finite("lam_pps", lam_pps, ge=0)
    mu_ = finite("mu", mu, gt=0)
    c_ = finite("c", c, ge=1, integer=True)
    lam, mu_, c_ = np.broadcast_arrays(np.atleast_1d(lam), np.atleast_1d(mu_), np.atleast_1d(c_))
    if n_.shape[-1:] != lam.shape[-1:]:
        raise ValueError(f"n has {n_.shape[-1:]} stations on its last axis, lam_pps {lam.shape[-1]}")
    a = lam / mu_
    if np.any(a >= c_):
        raise ValueError("jackson_pmf: a station is unstable (lam_pps >= c * mu): no stationary distribution")
    return np.exp(np.sum(_mmc_log_pmf(n_, a, c_), axis=-1))


@dataclass(frozen=True)
class MVAResult:
    """Exact MVA for populations ``N = 1..population`` (first axis): throughput ``throughput``
    Λ(N) (customers/s), the time per cycle outside the think station ``response_s`` S(N), and per
    station (second axis) residence time per cycle ``residence_s`` S_k(N), mean number
    present ``L`` and utilisation per server ``U`` = Λ D_k / c_k."""

    population: NDArray[np.int64]
    throughput: _F
    response_s: _F
    residence_s: _F
    L: _F
    U: _F


def mva(demands_s: ArrayLike, population: int, think_s: float = 0.0, servers: ArrayLike = 1,
        delay: ArrayLike | None = None) -> MVAResult:
    """Exact mean value analysis of a closed single-class product-form network (module doc).

    ``demands_s[k]`` service demand D_k = v_k E[X_k] per cycle (s), ``population`` N ≥ 1,
    ``think_s`` the think time Z (an infinite-server station outside S), ``servers`` c_k per
    station (1: an ordinary queue, load-independent), ``delay[k]`` True for an infinite-server
    (pure delay) station inside S."""
    d = finite("demands_s", demands_s, ge=0)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("demands_s must be a non-empty vector, one demand per station")
    n_max = count("population", population, ge=1)
    z = float(finite("think_s", think_s, ge=0))
    k = d.size
    c = np.broadcast_to(finite("servers", servers, ge=1, integer=True), (k,)).astype(int)
    dl = np.zeros(k, bool) if delay is None else np.broadcast_to(np.asarray(delay, dtype=bool), (k,))
    if np.sum(d) + z <= 0:
        raise ValueError("demands_s and think_s are all zero: the cycle takes no time")
    multi = (c > 1) & ~dl
    L = np.zeros(k)
    p = np.zeros((k, n_max + 1))                      # p_k(j | n) for multi-server stations
    p[:, 0] = 1.0
    out_x, out_s, out_sk, out_l = (np.empty(n_max), np.empty(n_max), np.empty((n_max, k)), np.empty((n_max, k)))
    j = np.arange(1, n_max + 1)
    for n in range(1, n_max + 1):
        sk = np.where(dl, d, d * (1.0 + L))
        for i in np.flatnonzero(multi):
            sk[i] = d[i] * np.sum(j[:n] / np.minimum(j[:n], c[i]) * p[i, :n])
        s = float(sk.sum())
        x = n / (z + s)
        L = x * sk
        for i in np.flatnonzero(multi):
            new = np.zeros(n_max + 1)
            new[1:n + 1] = x * d[i] / np.minimum(j[:n], c[i]) * p[i, :n]
            new[0] = max(0.0, 1.0 - new[1:n + 1].sum())
            p[i] = new
        out_x[n - 1], out_s[n - 1], out_sk[n - 1], out_l[n - 1] = x, s, sk, L
    u = out_x[:, None] * d[None, :] / np.where(dl, np.inf, c)[None, :]
    return MVAResult(population=np.arange(1, n_max + 1), throughput=out_x, response_s=out_s, residence_s=out_sk,
                     L=out_l, U=u)


@dataclass(frozen=True)
class NetworkBounds:
    """Asymptotic bounds (module doc).  ``D_s`` total demand, ``D_max_s`` the largest demand per
    server, ``bottleneck`` its station, ``throughput_max`` = 1/D_max (both open and closed),
    ``n_star`` = (D + Z)/D_max; for the populations asked for (arrays, NaN if none):
    ``throughput_upper``, ``throughput_lower``, ``response_lower_s``, ``response_upper_s``."""

    D_s: float
    D_max_s: float
    bottleneck: int
    throughput_max: float
    n_star: float
    population: _F
    throughput_upper: _F
    throughput_lower: _F
    response_lower_s: _F
    response_upper_s: _F


def network_bounds(demands_s: ArrayLike, think_s: float = 0.0, population: ArrayLike | None = None,
                   servers: ArrayLike = 1) -> NetworkBounds:
    """Asymptotic (operational) bounds on throughput and response time of a network with service
    demands ``demands_s`` (s per customer), think time ``think_s`` and, for a closed network, the
    populations ``population``.  A station with ``c_k`` servers caps the throughput at c_k/D_k
    (the bottleneck law); the pessimistic bounds treat every station as one server."""
    d = finite("demands_s", demands_s, ge=0)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("demands_s must be a non-empty vector, one demand per station")
    z = float(finite("think_s", think_s, ge=0))
    c = np.broadcast_to(finite("servers", servers, ge=1, integer=True), d.shape)
    per_server = d / c
    b = int(np.argmax(per_server))
    d_max = float(per_server[b])
    if d_max <= 0:
        raise ValueError("demands_s are all zero: no station limits the throughput")
    d_tot = float(d.sum())
    if population is None:
        n = np.array([], float)
    else:
        n = np.atleast_1d(finite("population", population, ge=1))
    x_up = np.minimum(n / (d_tot + z), 1.0 / d_max)
    x_lo = n / (n * d_tot + z)
    s_lo = np.maximum(d_tot, n * d_max - z)
    s_up = n * d_tot
    return NetworkBounds(D_s=d_tot, D_max_s=d_max, bottleneck=b, throughput_max=1.0 / d_max,
                         n_star=(d_tot + z) / d_max, population=n, throughput_upper=x_up, throughput_lower=x_lo,
                         response_lower_s=s_lo, response_upper_s=s_up)
