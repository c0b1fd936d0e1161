"""The TCP worker series (``datasets/lab/tcp_children``, issue 39 item 3): what its README and
ch. 10 say of it holds in its files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.stats import paired_ci

D = Path(__file__).resolve().parents[1] / "datasets" / "lab" / "tcp_children"


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    r = pd.read_csv(D / "runs.csv")
    r["share"] = r["proxy_cpu_s"] / r["window_s"]
    return r


def test_every_series_is_whole_and_read(runs):
    assert sorted(runs["workers"].unique()) == [1, 2, 4]
    n = runs.groupby(["rep", "workers"]).size()
    assert len(n) == 9 and (n == 4).all() and runs["label"].is_unique
    assert (runs["report_loss_kind"] == "failed calls").all()           # every series read, the fit included
    assert (runs["uac_cpu_s"] / runs["window_s"]).max() < 0.3
    k = pd.read_csv(D / "knees.csv")
    assert (k["loss_kind"] == "failed calls").all() and (k["censored"] == "above").all()


def test_one_worker_delays_setups_past_saturation(runs):
    w = runs.pivot_table(index=["rep", "offered_cps"], columns="workers", values="report_srd_p99_ms")
    light = w[w.index.get_level_values(1) == 1500]
    assert light.max().max() < 15
    hi = w[w.index.get_level_values(1) >= 3500]
    assert hi[1].min() > 350 and hi[[2, 4]].max().max() < 350
    for c in (2, 4):
        d = paired_ci(np.log(hi[c]), np.log(hi[1]))
        assert d.high < 0                                   # shorter with more workers, shown
    s = runs.pivot_table(index=["rep", "offered_cps"], columns="workers", values="share")
    for c in (2, 4):
        d = paired_ci(s[c], s[1])
        assert d.low < 0 < d.high                           # the CPU used cannot be told apart
    assert (runs.loc[runs.offered_cps >= 3500, "share"] > 0.85).all()


def test_failures(runs):
    failed = runs[runs.sipp_failed > 0]
    assert set(failed["workers"]) == {2} and len(failed) == 2 and (failed.offered_cps >= 3500).all()
