"""The fit on data with a known answer: `sipperf simulate` runs (the kernel-path model of ch. 9)
whose service time is set by the thesis's numbers (Table 4.3, T_sip, the §4.3.1 alpha(lambda)),
one worker, a socket queue of 200 packets.  The references are those parameters, written out
here from the thesis, and the simulated runs' own drop rates -- never the fit's output."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.slow

RATES = (5, 100, 300, 500, 900, 1000)          # calls/s; the last two bracket the 1 %-drop knee
LIGHT = ("r5", "r100", "r300", "r500")
#: thesis §4.3.1, Poisson arrivals: alpha(0) = 1, alpha(600) = 3, alpha(1200) = 5, alpha(>= 2400) = 8
ALPHA_KNOTS = ((0.0, 600.0, 1200.0, 2400.0), (1.0, 3.0, 5.0, 8.0))
#: thesis Table 4.3: K^{s,base}_sockq and K_snd per message type (µs); K_copy = 2 µs (§4.2.1)
KS_BASE = (8.3, 7.6, 8.5, 7.4, 8.1, 7.5)
K_SND = (6.15, 5.2, 5.5, 5.6, 5.9, 5.2)


def true_ex_us(lam_pps: float, params: dict, live_calls: float) -> float:
    """E[X] = mean over the six types of alpha(lam) K^s,base_i + K_copy + T_sip,i (1 + g n) + K_snd,i."""
    s = params["service"]
    a = float(np.interp(lam_pps, *ALPHA_KNOTS))
    assert tuple(s["ks_base_us"]) == KS_BASE and tuple(s["k_snd_us"]) == K_SND
    t_sip = np.asarray(s["t_sip_us"]) * (1 + s["t_sip_growth_per_call"] * live_calls)
    return float(np.mean(a * np.asarray(KS_BASE) + s["k_copy_us"] + t_sip + np.asarray(K_SND)))


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    root = tmp_path_factory.mktemp("sims")
    for r in RATES:
        subprocess.run([sys.executable, "-m", "sipperf.cli", "simulate", "--rate", str(r), "--calls", "4000",
                        "--seed", str(r), "--out", str(root / f"r{r}")], check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def report(sims, tmp_path_factory):
    from sipperf.report import build_report

    return build_report([sims / f"r{r}" for r in RATES], tmp_path_factory.mktemp("rep"), n_boot=60, html=False)


def test_service_demand_is_the_simulated_one(report, sims):
    params = json.loads((sims / "r5" / "meta.json").read_text())["params"]
    m = next(r.measure for r in report.runs if r.label == "r5")
    truth = true_ex_us(m.lam_pps, params, live_calls=5 * 0.2535)
    got = report.fit.constants["service_demand_us"]
    assert got["runs"] == ["r5"]
    assert got["value"] == pytest.approx(truth, rel=0.025)
    # the socket-queue service alpha(lam) K^s,base at the lighter loaded rates (rho < 0.35), where
    # the within-call clustering of arrivals (which P-K ignores and alpha absorbs) is small
    f = report.fit
    for lab in ("r100", "r300"):
        lam = next(r.measure.lam_pps for r in report.runs if r.label == lab)
        ks_true = float(np.interp(lam, *ALPHA_KNOTS)) * np.mean(KS_BASE)
        assert float(f.alpha_curve(lam)) * f.base.b_mean_us == pytest.approx(ks_true, rel=0.15)
    assert report.fit.constants["alpha"]["identified"]


def test_mg1_fits_and_knee_is_predicted_from_light_runs(report):
    v = report.verdict
    assert v["models"]["mg1"]["verdict"] == "fits"
    # the measured knee: the simulated drop rates at 900 and 1000 calls/s bracket 1 %
    k = next(k for k in report.fit.knees if k["threads"] == 1)
    assert k["measured_censored"] == "" and 900 <= k["measured_cps"] <= 1000
    # the model's knee from the four runs at <= 500 calls/s only (no drop seen by the fit)
    from sipperf import fit

    light = [r.measure.fit_input for r in report.runs if r.label in LIGHT]
    f = fit.fit_all(light, msgs_per_call=report.msgs_per_call, n_boot=20)
    km = f.knees[0]["model_cps"]
    assert km == pytest.approx(k["measured_cps"], rel=0.10)
    assert f.knees[0]["measured_censored"] == "above"


def test_sojourn_only_gives_the_service_demand(sims, tmp_path):
    """The same light run seen as a capture would see it (t_arr, t_dep only): the service demand is
    the light-load sojourn minus its M/G/1 wait, i.e. E[X] + K_stack (2.4 µs, Table 4.3)."""
    from sipperf.ingest import load
    from sipperf.report.runs import measure
    from sipperf import fit

    tl, _ = load(sims / "r5")
    keep = ["run_id", "call_id", "cseq", "cseq_method", "kind", "method", "status", "src", "dst", "t_arr", "t_dep",
            "dropped"]
    p = tmp_path / "r5.csv"
    tl[keep].to_csv(p, index=False)
    tl2, _ = load(p)
    assert tl2["t_stack"].isna().all()
    m = measure("r5", tl2)
    assert m.fit_input.q_kind == "sojourn" and not m.tracepoints
    f = fit.fit_all([m.fit_input], n_boot=20)
    params = json.loads((sims / "r5" / "meta.json").read_text())["params"]
    truth = true_ex_us(m.lam_pps, params, live_calls=5 * 0.2535) + np.mean((2.6, 2.2, 2.5, 2.2, 2.5, 2.2))
    assert f.constants["service_demand_us"]["value"] == pytest.approx(truth, rel=0.03)
    assert "sojourn" in f.constants["alpha"]["scope"] or "no tracepoints" in f.constants["alpha"]["scope"]
