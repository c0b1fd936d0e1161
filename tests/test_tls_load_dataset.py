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


@pytest.fixture(scope="module")
def resume() -> pd.DataFrame:
    r = _add(pd.read_csv(D / "resume" / "runs.csv"))
    r["ms"] = 1e3 * r["proxy_cpu_s"] / r["sipp_started"]
    r["ok"] = (r["sipp_failed"] == 0) & (r["reached"] >= 0.9)
    return r


def test_the_resumption_series_is_whole_and_counted_by_handshake(resume):
    assert set(resume["transport"]) == {"tls-tn"} and set(resume["tls_key"]) == {"rsa:2048", "rsa:4096"}
    assert (resume.groupby(["rep", "tls_key", "tls_resume"]).size() == 4).all() and resume["label"].is_unique
    # the 1-minute load before a run holds the report's reading of the series before it (README)
    assert (resume["workers"] == 1).all() and resume["load_before"].max() < 3.5
    assert ((resume["uac_cpu_s"] + resume["tunnel_cpu_s"]) / resume["window_s"]).max() < 0.9
    res, full = resume[resume["tls_resume"] == "yes"], resume[resume["tls_resume"] == "no"]
    # a full handshake per call: the report saw one per call it read, and no resumed one
    assert (full["report_tls_resumed"] == 0).all()
    clean = full[full["sipp_failed"] == 0]         # (SIPp's own count is whole only when nothing failed)
    assert (clean["report_tls_full"] == clean["sipp_started"] + 1).all()
    # resumed: a few full ones (a connection opened before a ticket came back), the rest resumed
    assert (res["report_tls_full"] < 0.05 * res["sipp_started"]).all()
    assert (res["report_tls_full"] + res["report_tls_resumed"] == res["sipp_started"] + 1).all()


def test_resumption_removes_what_the_key_costs(resume):
    cells = resume.set_index(["tls_key", "tls_resume", "rep", "offered_cps"])
    for rep in sorted(resume["rep"].unique()):
        for rate in (100, 200):                     # the rates at which every cell kept up
            ms = {(k, r): cells.loc[(k, r, rep, rate), "ms"] for k in ("rsa:2048", "rsa:4096") for r in ("no", "yes")}
            assert all(cells.loc[(k, r, rep, rate), "ok"] for k, r in ms)
            assert ms[("rsa:4096", "yes")] < ms[("rsa:4096", "no")] - 2.0, (rep, rate)
            assert ms[("rsa:2048", "yes")] < ms[("rsa:2048", "no")], (rep, rate)
    # resumed, the two keys cannot be told apart over every rate and replication (all kept up)
    from sipperf.stats import paired_ci
    res = resume[resume["tls_resume"] == "yes"].pivot_table(index=["rep", "offered_cps"], columns="tls_key", values="ms")
    ci = paired_ci(res["rsa:4096"], res["rsa:2048"])
    assert ci.low < 0 < ci.high and abs(ci.diff) < 0.3


def test_past_its_ceiling_the_one_worker_proxy_failed_calls_and_the_report_saw_them(resume):
    big = resume[(resume["tls_key"] == "rsa:4096") & (resume["offered_cps"] >= 300)]
    full, res = big[big["tls_resume"] == "no"], big[big["tls_resume"] == "yes"]
    assert full["sipp_failed"].sum() > 0.05 * full["sipp_started"].sum() and (full["proxy_queue_full"] > 0).all()
    assert res["sipp_failed"].sum() == 0 and (res["u"] < 0.85).all() and (res["proxy_queue_full"] == 0).all()
    # the report counted the handshakes the proxy answered past the 2-s deadline, or never, as failed:
    # at 400 calls/s at least as many as SIPp failed (SIPp also stopped on a fatal error there)
    at400 = full[full["offered_cps"] == 400]
    assert (at400["report_tls_late"] > 0).all()
    assert (at400["report_failed_percent"] >= 100 * at400["sipp_failed"] / at400["sipp_started"]).all()
    assert (full["report_failed_percent"] > 0).all()
    assert (full["report_tls_hello_p99_ms"] > 1000).all() and (res["report_tls_hello_p99_ms"] < 50).all()
