"""Radix-selected order statistics against numpy's median / percentile (bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest

from sipperf.order_stats import median_percentile, select


@pytest.mark.parametrize("n", [1, 2, 3, 8, 64, 65, 101, 4096, 30_001])
@pytest.mark.parametrize("dist", ["exp", "int_us", "normal", "const", "tiny", "mixed_sign"])
def test_median_percentile_equals_numpy(n, dist):
    rng = np.random.default_rng(n)
    x = {"exp": lambda: rng.exponential(5.0, n),
         "int_us": lambda: rng.integers(0, 50, n) * 1000 / 1e3,  # few distinct values, many ties
         "normal": lambda: rng.normal(0, 1e6, n),
         "const": lambda: np.full(n, 3.25),
         "tiny": lambda: rng.integers(-5, 5, n) * 1e-300,
         "mixed_sign": lambda: rng.exponential(1e8, n) * rng.choice([-1.0, 1.0], n)}[dist]()
    before = x.copy()
    for q in (0.0, 1.0, 50.0, 99.0, 99.9, 100.0):
        med, p = median_percentile(x, q)
        assert med == float(np.median(x)) and p == float(np.percentile(x, q)), (n, dist, q)
    np.testing.assert_array_equal(x, before)  # input untouched


def test_select_is_sorted_take():
    rng = np.random.default_rng(7)
    x = rng.standard_t(2, 10_000)
    ranks = np.array([0, 1, 4999, 5000, 9998, 9999])
    np.testing.assert_array_equal(select(x, ranks), np.sort(x)[ranks])
