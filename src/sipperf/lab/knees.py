"""Knees with their noise: replicated knee searches, an interval, the difference of two knees.

The *knee* of a configuration is the offered call rate at which the proxy drops
``target`` (1 %) of the datagrams that reach its socket.  One knee search (a *replicate*) probes
rates and interpolates linearly in the drop rate between the highest rate below the target and
the lowest at or above it (:func:`replicate_knee`); its *bracket* is that pair of rates.

A knee is estimated from ``n >= 3`` independent searches (:func:`knee_estimate`): the mean of
the replicate knees, with an interval that includes both sources of error the design asks for,

* the **replication spread**: Student's t interval of the mean, ``t(n-1) s / sqrt(n)``;
* the **interpolation between rates**: each replicate's knee lies somewhere in its bracket, so
  the mean lies in ``[mean(below), mean(above)]``; the t term is added outside that range:

  ``[mean(below) - t s/sqrt(n),  mean(above) + t s/sqrt(n)]``.

Two knees (1 vs 8 workers, two schedulers, a guard on and off) are compared by
:func:`knee_difference`: the difference of the means with Welch's t interval (unequal
variances, Welch-Satterthwaite degrees of freedom), widened in the same way by the brackets.
The difference is a *finding* only when that interval excludes zero; with fewer than two
replicates on either side the noise is unknown and the answer is "cannot tell".

A probe flagged ``generator_bound`` (:func:`sipperf.lab.protocol.generator_verdict`) measured
the load generator, not the proxy: it is never used for a knee; a search whose only probes at
or above the target are generator-bound is *censored* (the proxy's knee is above the highest
clean probe).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

TARGET_PDR = 0.01


@dataclass(frozen=True)
class ReplicateKnee:
    """One knee search: its knee (None when not bracketed), bracket and why it is censored."""

    replicate: int
    knee_cps: float | None
    rate_below: float | None          #: highest clean probe rate with drops below the target
    rate_above: float | None          #: lowest clean probe rate with drops at or above it
    probes: int
    excluded: int = 0                 #: generator-bound probes left out
    censored: str | None = None


def replicate_knee(rates, pdrs, *, target: float = TARGET_PDR, generator_bound=None,
                   replicate: int = 0) -> ReplicateKnee:
    """The knee of one search: linear interpolation of the drop rate between the bracketing
    probes (generator-bound probes excluded).  Non-monotone probes (a rate below the target
    above one at it) give the midpoint of the two, with the bracket spanning both."""
    r = np.asarray(rates, dtype=float)
    p = np.asarray(pdrs, dtype=float)
    gb = np.zeros(len(r), bool) if generator_bound is None else np.asarray(generator_bound, dtype=bool)
    ok = np.isfinite(r) & np.isfinite(p) & ~gb
    n_ex = int((gb & np.isfinite(r)).sum())
    below = ok & (p < target)
    above = ok & (p >= target)
    r0 = float(r[below].max()) if below.any() else None
    r1 = float(r[above].min()) if above.any() else None
    if r0 is None or r1 is None:
        if r1 is None and n_ex and (r0 is None or (r[gb] > r0).any()):
            why = (f"generator-bound from {r[gb].min():g} calls/s: the proxy's knee is above "
                   f"{r0:g} calls/s" if r0 is not None else "every probe was generator-bound")
        elif r1 is None:
            why = f"no probe reached {100 * target:g} % drops (highest clean probe {r0:g} calls/s)" \
                if r0 is not None else "no clean probe"
        else:
            why = f"every probe dropped at least {100 * target:g} % (lowest {r1:g} calls/s)"
        return ReplicateKnee(replicate, None, r0, r1, int(ok.sum()), n_ex, why)
    p0 = float(p[below][np.argmax(r[below])])
    p1 = float(p[above][np.argmin(r[above])])
    if r1 <= r0:
        return ReplicateKnee(replicate, 0.5 * (r0 + r1), min(r0, r1), max(r0, r1), int(ok.sum()), n_ex,
                             None)
    k = r0 + (target - p0) / (p1 - p0) * (r1 - r0)
    return ReplicateKnee(replicate, float(k), r0, r1, int(ok.sum()), n_ex, None)


@dataclass(frozen=True)
class KneeEstimate:
    """A knee from replicated searches: mean, interval, and what it can and cannot say."""

    knee_cps: float | None
    low_cps: float | None
    high_cps: float | None
    level: float
    n: int                            #: replicates with a knee
    sd_cps: float                     #: standard deviation between replicate knees (NaN if n < 2)
    status: str                       #: "replicated" (n >= 2), "single" (n = 1), "censored", "none"
    what: str
    replicates: tuple[ReplicateKnee, ...] = field(default=())

    @property
    def knees(self) -> np.ndarray:
        return np.array([r.knee_cps for r in self.replicates if r.knee_cps is not None], dtype=float)

    @property
    def below(self) -> np.ndarray:
        return np.array([r.rate_below for r in self.replicates if r.knee_cps is not None], dtype=float)

    @property
    def above(self) -> np.ndarray:
        return np.array([r.rate_above for r in self.replicates if r.knee_cps is not None], dtype=float)

    def as_row(self) -> dict:
        return {"knee_cps": self.knee_cps, "low_cps": self.low_cps, "high_cps": self.high_cps,
                "level": self.level, "replicates": self.n, "sd_cps": self.sd_cps,
                "status": self.status, "what": self.what,
                "replicate_knees": ";".join(f"{k:.1f}" for k in self.knees)}


def _t(level: float, df: float) -> float:
    return float(sps.t.ppf(0.5 + level / 2.0, df)) if np.isfinite(df) and df > 0 else float("nan")


def knee_estimate(reps: list[ReplicateKnee], level: float = 0.95) -> KneeEstimate:
    """Combine replicate knee searches (see the module doc for the interval)."""
    reps = tuple(reps)
    got = [r for r in reps if r.knee_cps is not None]
    n = len(got)
    if n == 0:
        cens = [r.censored for r in reps if r.censored]
        lo = max((r.rate_below for r in reps if r.rate_below is not None), default=None)
        return KneeEstimate(None, lo, None, level, 0, float("nan"),
                            "censored" if cens else "none",
                            "no knee: " + ("; ".join(sorted(set(cens))) if cens else "no search"), reps)
    k = np.array([r.knee_cps for r in got])
    b0 = np.array([r.rate_below for r in got], dtype=float)
    b1 = np.array([r.rate_above for r in got], dtype=float)
    mean = float(k.mean())
    if n == 1:
        return KneeEstimate(mean, float(b0[0]), float(b1[0]), level, 1, float("nan"), "single",
                            f"one search: between {b0[0]:,.0f} and {b1[0]:,.0f} calls/s; its noise is "
                            f"unknown until the search is repeated", reps)
    sd = float(k.std(ddof=1))
    half = _t(level, n - 1) * sd / np.sqrt(n)
    lo, hi = float(b0.mean() - half), float(b1.mean() + half)
    return KneeEstimate(mean, lo, hi, level, n, sd, "replicated",
                        f"{mean:,.0f} calls/s ({100 * level:g} % interval {lo:,.0f}-{hi:,.0f}; "
                        f"{n} searches, spread {sd:,.0f})", reps)


def knee_from_probes(probes, level: float = 0.95, target: float = TARGET_PDR) -> KneeEstimate:
    """A knee from a probe table (rows with ``rate_cps``, ``pdr`` and optionally ``replicate``
    and ``generator_bound``): one replicate per distinct ``replicate`` value (all rows one
    replicate when the column is absent, as in the recordings before the protocol)."""
    import pandas as pd

    d = pd.DataFrame(probes)
    if d.empty:
        return knee_estimate([], level)
    rep = d["replicate"] if "replicate" in d else pd.Series(0, index=d.index)
    gb = d["generator_bound"].fillna(False).astype(bool) if "generator_bound" in d else None
    out = []
    for i, idx in rep.groupby(rep).groups.items():
        g = d.loc[idx]
        out.append(replicate_knee(g["rate_cps"], g["pdr"], target=target, replicate=int(i),
                                  generator_bound=None if gb is None else gb.loc[idx]))
    return knee_estimate(out, level)


@dataclass(frozen=True)
class KneeDifference:
    """``a - b`` of two knees with its interval; ``finding`` True/False, or None (cannot tell)."""

    diff_cps: float | None
    low_cps: float | None
    high_cps: float | None
    level: float
    df: float
    finding: bool | None
    what: str

    def as_row(self) -> dict:
        return {"diff_cps": self.diff_cps, "low_cps": self.low_cps, "high_cps": self.high_cps,
                "level": self.level, "df": self.df, "finding": self.finding, "what": self.what}


def knee_difference(a: KneeEstimate, b: KneeEstimate, level: float = 0.95,
                    names: tuple[str, str] = ("A", "B")) -> KneeDifference:
    """The difference of two knees (``a - b``): Welch's t interval on the replicate means,
    widened by both brackets (module doc).  A finding only when the interval excludes 0."""
    na, nb = names
    if a.knee_cps is None or b.knee_cps is None:
        return KneeDifference(None, None, None, level, float("nan"), None,
                              f"cannot tell: no knee for {na if a.knee_cps is None else nb}")
    d = a.knee_cps - b.knee_cps
    # the interpolation ranges: a's mean lies in [mean(below_a), mean(above_a)], b's likewise
    lo_i = a.below.mean() - b.above.mean()
    hi_i = a.above.mean() - b.below.mean()
    if a.n < 2 or b.n < 2:
        return KneeDifference(float(d), float(lo_i), float(hi_i), level, float("nan"), None,
                              f"cannot tell: {na} {a.n} and {nb} {b.n} search(es); the knee noise is "
                              f"unknown below two searches each (interpolation alone: "
                              f"{lo_i:+,.0f} to {hi_i:+,.0f} calls/s)")
    va, vb = a.sd_cps ** 2 / a.n, b.sd_cps ** 2 / b.n
    se = np.sqrt(va + vb)
    if se > 0:
        df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
        half = _t(level, df) * se
    else:
        df, half = float("inf"), 0.0
    lo, hi = float(lo_i - half), float(hi_i + half)
    finding = bool(lo > 0 or hi < 0)
    if finding:
        what = (f"{na}'s knee is {'higher' if d > 0 else 'lower'} than {nb}'s by {abs(d):,.0f} calls/s "
                f"({100 * level:g} % interval {lo:+,.0f} to {hi:+,.0f})")
    else:
        what = (f"no difference shown: {d:+,.0f} calls/s, {100 * level:g} % interval {lo:+,.0f} to "
                f"{hi:+,.0f} includes 0")
    return KneeDifference(float(d), lo, hi, level, float(df), finding, what)


def _none(v):
    return None if v is None or (isinstance(v, float) and not np.isfinite(v)) else v


def estimates_from_replicates(table, level: float = 0.95) -> dict:
    """``{(setup, workers): KneeEstimate}`` from a recording's ``knee_replicates.csv`` (one row
    per knee search: ``setup``, ``workers``, ``replicate``, ``knee_cps``, ``rate_below``,
    ``rate_above``, ``probes``, ``censored``)."""
    import pandas as pd

    d = pd.DataFrame(table)
    out = {}
    if d.empty:
        return out
    if "setup" not in d:
        d = d.assign(setup="protocol")
    for (setup, w), g in d.groupby(["setup", "workers"]):
        reps = [ReplicateKnee(int(r["replicate"]), _none(r.get("knee_cps")), _none(r.get("rate_below")),
                              _none(r.get("rate_above")), int(_none(r.get("probes")) or 0),
                              int(_none(r.get("excluded_generator_bound")) or 0), _none(r.get("censored")))
                for r in g.sort_values("replicate").to_dict("records")]
        out[(setup, int(w))] = knee_estimate(reps, level)
    return out
