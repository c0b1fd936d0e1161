"""The TLS load series (``datasets/lab/tls_load``, issue 39 item 3): what its README and the
chapter *What TLS costs a proxy at load* say of it holds in its files."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sipperf.models import demand_with_background, saturation_throughput

D = Path(__file__).resolve().parents[1] / "datasets" / "lab" / "tls_load"


def _add(r: pd.DataFrame) -> pd.DataFrame:
    r = r.copy()
    r["u"] = r["proxy_cpu_s"] / r["window_s"]
    r["x"] = r["sipp_started"] / r["window_s"]
    r["reached"] = r["report_rate_cps"] / r["offered_cps"]
    r["below"] = (r["reached"] >= 0.9) & (r["u"] < 0.85)
    return r


@pytest.fixture(scope="module")
def per_call() -> pd.DataFrame:
    return _add(pd.read_csv(D / "per_call" / "runs.csv"))


@pytest.fixture(scope="module")
def trunk() -> pd.DataFrame:
    return _add(pd.read_csv(D / "trunk" / "runs.csv"))


def test_every_series_is_whole(per_call, trunk):
    assert set(per_call["transport"]) == {"tls-tn"} and set(per_call["tls_key"]) == {"rsa:2048", "rsa:4096", "ec:P-256"}
    assert (per_call.groupby(["rep", "tls_key"]).size() == 5).all() and per_call["label"].is_unique
    assert set(trunk["transport"]) == {"tcp", "tls"} and (trunk.groupby(["rep", "transport"]).size() == 6).all()
    assert trunk["label"].is_unique
    for r in (per_call, trunk):
        assert r["load_before"].max() < 3
        # every run was read by the report, decrypted: it counted the calls SIPp started
        assert r["report_rate_cps"].notna().all() and r["report_failed_percent"].notna().all()


def test_the_generator_never_filled_its_cpu(per_call, trunk):
    for r in (per_call, trunk):
        gen = (r["uac_cpu_s"] + r["tunnel_cpu_s"].fillna(0)) / r["window_s"]
        assert gen.max() < 0.9


def test_rsa4096_was_taken_past_its_ceiling_and_the_law_predicts_it(per_call):
    k = per_call[per_call["tls_key"] == "rsa:4096"]
    past = k[~k["below"]]
    assert set(past["offered_cps"]) == {300, 400} and (past["u"] > 0.85).all() and (past["reached"] < 0.95).all()
    assert past["sipp_failed"].sum() < 0.01 * past["sipp_started"].sum()     # the caller waited instead
    for rep, g in k.groupby("rep"):
        fit = demand_with_background(g.loc[g["below"], "u"], g.loc[g["below"], "x"])
        x_star = float(saturation_throughput(fit.demand, max(fit.background, 0.0)))
        carried = g.loc[~g["below"], "report_rate_cps"].max()
        assert abs(x_star / carried - 1) < 0.10, (rep, x_star, carried)


def test_the_report_reads_a_held_back_run_as_past_the_knee(per_call):
    kn = pd.read_csv(D / "per_call" / "knees.csv")
    k4 = kn[kn["tls_key"] == "rsa:4096"]
    assert len(k4) == 3 and (k4["censored"].fillna("") != "above").all()
    assert (k4["knee_hi_cps"].astype(float) <= 300).all()


def test_speed_has_every_key():
    s = pd.read_csv(D / "speed.csv")
    assert set(s["tls_key"]) == {"rsa:2048", "rsa:4096", "ec:P-256"} and (s.groupby("tls_key").size() >= 3).all()
    ms = s.groupby("tls_key")["ms_per_sign"].median()
    assert ms["rsa:4096"] > 4 * ms["rsa:2048"] > 4 * ms["ec:P-256"]
