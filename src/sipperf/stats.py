"""Output analysis: batch-means confidence intervals, MSER-5 warm-up truncation, percentiles, ECDFs.

The thesis (seed 000, §4.2, §5.x) reports "the half-width of the 95% confidence interval
around the overall mean" obtained with "the method of batch means" but does not say how it
batched.  Our choice (documented guess): the series in arrival order is cut into ``b = 30``
non-overlapping batches of equal size ``m = n // b`` (the first ``n - b·m`` observations are
dropped so the last batch ends at the last observation); the batch means ``Y_j`` give

    half-width = t_{1-(1-c)/2, b-1} · s_Y / sqrt(b),

the usual batch-means interval (Law & Kelton).  With ``b`` fixed and ``m`` growing the
batch means become nearly independent and normal, so the interval is valid for correlated
queueing output such as consecutive waiting times.

MSER-5 (White 1997; White, Cobb & Spratt 2000): average the series in batches of 5,
``Z_1..Z_k``; for each truncation ``d`` (in batches) compute
``MSER(d) = sum_{j>d} (Z_j - mean(Z_{d+1..k}))^2 / (k-d)^2`` and take the ``d`` that
minimises it over ``d <= k/2``; the warm-up is ``5·d`` observations.

Planning a run (chapter "How to run a load test"; not in seed 000, whose ch. 4 runs 1M calls
per point and reports batch-means intervals without saying how long a run must be).  For a
stationary series with variance σ² and lag-j autocorrelations r_j,
``n Var[x̄] → σ² Φ`` with the **variance inflation** ``Φ = 1 + 2 Σ_{j≥1} r_j`` (the integrated
correlation time in observations; ``n / Φ`` is the effective number of independent ones).
:func:`variance_inflation` estimates Φ from batch means, ``Φ̂ = m s_Y² / s²`` (m the batch size);
:func:`run_length` inverts the half-width ``ε = t σ sqrt(Φ / n)`` into ``n = Φ (t σ / ε)²``.
Comparing two configurations: :func:`paired_ci` (the t interval of the mean of paired
differences, for common random numbers or blocked runs) and :func:`welch_ci` (independent
samples, unequal variances, Welch–Satterthwaite degrees of freedom).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_BATCHES = 30

#: t quantiles (degrees of freedom, probability) -> value used without importing scipy.stats
#: (about 1 s of CPU at start-up): the default interval, 30 batches at 95 %.  Checked against
#: ``scipy.stats.t.ppf`` in tests/test_stats.py.
_T_QUANTILES: dict[tuple[int, float], float] = {(29, 0.975): 2.045229642132703}


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile ``t_{p, df}`` (scipy.stats.t.ppf, imported only when not tabled; ``df``
    may be fractional, as Welch's is)."""
    v = _T_QUANTILES.get((int(df), float(p))) if float(df).is_integer() else None
    if v is not None:
        return v
    from scipy import stats as _st

    return float(_st.t.ppf(p, df))


@dataclass(frozen=True)
class MeanCI:
    """A mean with its confidence interval (same unit as the data)."""

    mean: float
    half_width: float
    n: int
    batches: int
    batch_size: int
    level: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def _clean(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    return a[np.isfinite(a)]


def batch_means(x, batches: int = DEFAULT_BATCHES) -> np.ndarray:
    """Means of ``batches`` equal, non-overlapping, consecutive batches (leading remainder dropped)."""
    a = _clean(x)
    m = len(a) // batches
    if m < 1:
        raise ValueError(f"need at least {batches} observations for {batches} batches, got {len(a)}")
    a = a[len(a) - m * batches:]
    return a.reshape(batches, m).mean(axis=1)


def batch_means_ci(x, batches: int = DEFAULT_BATCHES, level: float = 0.95) -> MeanCI:
    """Mean of ``x`` (NaN ignored) and the batch-means ``level`` CI half-width (see module doc).

    The point estimate is the mean of all finite observations (the thesis's overall mean);
    the half-width uses the batch means."""
    a = _clean(x)
    y = batch_means(a, batches)
    t = t_quantile(0.5 + level / 2, batches - 1)
    hw = float(t * y.std(ddof=1) / np.sqrt(batches))
    return MeanCI(float(a.mean()), hw, len(a), batches, len(a) // batches, level)


def mser5(x, batch: int = 5) -> int:
    """MSER-5 warm-up length in observations (a multiple of ``batch``); see module doc."""
    a = _clean(x)
    k = len(a) // batch
    if k < 4:
        return 0
    z = a[:k * batch].reshape(k, batch).mean(axis=1)
    # suffix sums over j > d for d = 0..k-1
    s1 = np.cumsum(z[::-1])[::-1]
    s2 = np.cumsum((z * z)[::-1])[::-1]
    nrem = k - np.arange(k)
    sse = s2 - s1 * s1 / nrem
    mser = sse / nrem.astype(np.float64) ** 2
    dmax = k // 2
    d = int(np.argmin(mser[:dmax + 1]))
    return d * batch


def truncate_warmup(x, batch: int = 5) -> np.ndarray:
    """``x`` without its MSER-5 warm-up."""
    a = np.asarray(x, dtype=np.float64).ravel()
    return a[mser5(a, batch):]


def percentiles(x, q=(50, 90, 99)) -> np.ndarray:
    """Percentiles (linear interpolation, Hyndman–Fan type 7) of the finite values of ``x``."""
    a = _clean(x)
    if not len(a):
        return np.full(np.shape(q), np.nan)
    return np.percentile(a, q)


def ecdf_on_grid(x, grid) -> np.ndarray:
    """Empirical CDF of the finite values of ``x`` evaluated on ``grid``: the fraction ≤ each grid
    value (NaN everywhere if ``x`` has no finite value)."""
    a = np.asarray(x, dtype="float64")
    a = np.sort(a[np.isfinite(a)])
    if not len(a):
        return np.full(len(grid), np.nan)
    return np.searchsorted(a, np.asarray(grid, dtype="float64"), side="right") / len(a)


def variance_inflation(x, batches: int = DEFAULT_BATCHES) -> float:
    """Φ̂ = m·s_Y²/s²: how many times larger n·Var[x̄] is than for independent observations,
    estimated from ``batches`` batch means of size m (module doc).  1 for an i.i.d. series; for an
    AR(1) series with lag-1 correlation r, (1 + r)/(1 - r).  Needs batches long against the
    correlation (m ≫ Φ) to be unbiased; too-short batches underestimate it."""
    a = _clean(x)
    y = batch_means(a, batches)
    s2 = float(a[len(a) - len(y) * (len(a) // batches):].var(ddof=1))
    if not s2 > 0:
        raise ValueError("the series is constant: no variance to inflate")
    return float((len(a) // batches) * y.var(ddof=1) / s2)


def run_length(sd: float, half_width: float, inflation: float = 1.0, level: float = 0.95,
               batches: int = DEFAULT_BATCHES) -> int:
    """Observations needed for a batch-means ``level`` interval of half-width ``half_width``:
    ``n = Φ (t σ / ε)²`` with t on ``batches - 1`` degrees of freedom, σ = ``sd`` the series'
    standard deviation and Φ = ``inflation`` (:func:`variance_inflation`); at least one
    observation per batch.  ``sd`` and ``half_width`` in the same unit."""
    vals = {"sd": sd, "half_width": half_width, "inflation": inflation, "level": level}
    for k, v in vals.items():
        if not np.isfinite(v):
            raise ValueError(f"{k} must be finite, got {v!r}")
    if not (sd >= 0 and half_width > 0 and inflation > 0 and 0 < level < 1):
        raise ValueError(f"need sd >= 0, half_width > 0, inflation > 0 and 0 < level < 1, got {vals}")
    if int(batches) < 2:
        raise ValueError(f"need at least 2 batches, got {batches!r}")
    t = t_quantile(0.5 + level / 2, int(batches) - 1)
    return max(int(np.ceil(inflation * (t * sd / half_width) ** 2)), int(batches))


@dataclass(frozen=True)
class DiffCI:
    """A difference of means ``a - b`` with its ``level`` interval and degrees of freedom."""

    diff: float
    low: float
    high: float
    df: float
    level: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def excludes_zero(self) -> bool:
        return bool(self.low > 0 or self.high < 0)


def paired_ci(a, b, level: float = 0.95) -> DiffCI:
    """Mean of the paired differences ``a_i - b_i`` with the t interval on n - 1 degrees of
    freedom: the comparison for common random numbers or blocks (pair i shares its seed or its
    block).  ``a`` and ``b`` of equal length ≥ 2, finite."""
    x, y = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"paired_ci needs two samples of the same length >= 2, got {x.size} and {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("paired_ci: the samples must be finite (no NaN or inf)")
    d = x - y
    n = d.size
    half = t_quantile(0.5 + level / 2, n - 1) * d.std(ddof=1) / np.sqrt(n)
    m = float(d.mean())
    return DiffCI(m, m - float(half), m + float(half), float(n - 1), level)


def welch_ci(a, b, level: float = 0.95) -> DiffCI:
    """Difference of the means of two independent samples with Welch's t interval (unequal
    variances, Welch–Satterthwaite degrees of freedom).  Each sample ≥ 2 finite values."""
    x, y = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if x.size < 2 or y.size < 2:
        raise ValueError(f"welch_ci needs at least 2 values per sample, got {x.size} and {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("welch_ci: the samples must be finite (no NaN or inf)")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se2 = va + vb
    m = float(x.mean() - y.mean())
    if se2 == 0:
        return DiffCI(m, m, m, float("inf"), level)
    df = se2 ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1))
    half = t_quantile(0.5 + level / 2, df) * np.sqrt(se2)
    return DiffCI(m, m - float(half), m + float(half), float(df), level)
