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
    """Student-t quantile ``t_{p, df}`` (scipy.stats.t.ppf, imported only when not tabled)."""
    v = _T_QUANTILES.get((int(df), float(p)))
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
