"""The connection series (``datasets/lab/connections``, issue 39 item 3): what its README and
ch. 10 say of it holds in its files."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sipperf.stats import paired_ci

D = Path(__file__).resolve().parents[1] / "datasets" / "lab" / "connections"


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    r = pd.read_csv(D / "runs.csv")
    r["uac_share"] = r["uac_cpu_s"] / r["window_s"]
    r["proxy_share"] = r["proxy_cpu_s"] / r["window_s"]
    r["reached"] = r["report_rate_cps"] / r["offered_cps"]
    # the generator did not keep its schedule: its CPU busy, or the proxy saw fewer calls than offered
    r["generator_bound"] = (r["uac_share"] > 0.3) | (r["reached"] < 0.97)
    return r


def test_every_series_is_whole(runs):
    assert set(runs["transport"]) == {"tcp", "tcp-tn"}
    n = runs.groupby(["rep", "transport"]).size()
    assert len(n) == 6 and (n == n.iloc[0]).all() and runs["label"].is_unique
    assert runs["load_before"].max() < 2


def test_the_generator_limits_a_connection_per_call(runs):
    tcp, tn = runs[runs.transport == "tcp"], runs[runs.transport == "tcp-tn"]
    assert not tcp["generator_bound"].any() and tcp["uac_share"].max() < 0.2
    assert tn.loc[tn.offered_cps >= 750, "generator_bound"].all()
    assert tn.loc[tn.rep == 2, "generator_bound"].all()
    bound = tn[tn["generator_bound"]]
    assert bound["uac_share"].between(0.45, 0.9).all()
    assert bound.loc[bound.offered_cps >= 750, "reached"].between(0.25, 0.85).all()
    assert (bound["proxy_share"] < 0.4).all()                         # the proxy was not the limit
    assert bound["report_srd_p99_ms"].max() < 400


def test_cpu_per_call_cannot_be_told_apart_where_the_generator_kept_up(runs):
    r = runs.assign(ms=1e3 * runs["proxy_cpu_s"] / runs["sipp_started"])
    w = r.pivot_table(index=["rep", "offered_cps"], columns="transport", values=["ms", "generator_bound"])
    ok = w[(w["generator_bound"]["tcp"] == 0) & (w["generator_bound"]["tcp-tn"] == 0)]
    assert len(ok) >= 4
    d = paired_ci(ok["ms"]["tcp-tn"], ok["ms"]["tcp"])
    assert d.low < 0 < d.high


def test_one_connection_never_failed(runs):
    tcp = runs[runs.transport == "tcp"]
    assert (tcp["sipp_failed"] == 0).all() and (tcp["report_failed_percent"] == 0).all()
    assert tcp["report_srd_p99_ms"].max() < 25
