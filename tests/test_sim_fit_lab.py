"""The model fitted to the lab's protocol recording (src/sipperf/sim/calibration/fit_lab.py).

References are computed here straight from the Parquet files with pyarrow + numpy (not through
sipperf's loader or components), or from the recording's own runs.csv.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sipperf.sim.calibration import fit_lab as F

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "datasets" / "lab" / "protocol"
TYPES = ("INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE")


def _raw(run_id: str) -> pd.DataFrame:
    """The stored table as plain floats (ns offsets; differences do not depend on the offset)."""
    d = pq.read_table(LAB / "runs" / run_id / "timeline.parquet").to_pandas()
    for c in ("t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"):
        d[c] = d[c].astype("float64")
    d["dropped"] = d["dropped"].astype("boolean").fillna(False).astype(bool)
    return d


@pytest.fixture(scope="module")
def light() -> pd.DataFrame:
    d = pd.concat([_raw(r) for r in F.LIGHT_RUNS], ignore_index=True)
    return d[(d["origin"].astype(str) != "proxy") & ~d["dropped"]]


@pytest.fixture(scope="module")
def service():
    tls = [F.load_run(LAB / "runs" / r)[0] for r in F.LIGHT_RUNS]
    est = F.estimate_components(tls)
    return F.service_from_lab(est, F.service_cv(tls)), est


def test_service_inputs_are_the_lab_light_load_statistics(light, service):
    s, _ = service
    for i, t in enumerate(TYPES):
        g = light[light["msg_type"].astype(str) == t]
        assert len(g) > 300
        k_stack = np.nanmean(g["t_stack"] - g["t_arr"]) / 1e3
        t_sip = np.nanmean(g["t_sip_out"] - g["t_sip_in"]) / 1e3
        k_snd = np.nanmean(g["t_dep"] - g["t_sip_out"]) / 1e3
        asleep = g[g["sockq_src"].astype(str) == "switch_in"]
        ks = np.nanmedian(asleep["t_sockq"] - asleep["t_stack"]) / 1e3
        assert s.k_stack_us[i] == pytest.approx(k_stack, rel=1e-9)
        assert s.t_sip_us[i] == pytest.approx(t_sip, rel=1e-6)
        assert s.k_snd_us[i] == pytest.approx(k_snd, rel=1e-9)
        assert s.ks_base_us[i] == pytest.approx(ks, rel=1e-9)
    t1 = (light["t_sip_c"] - light["t_sip_in"]).to_numpy()
    tt = (light["t_sip_out"] - light["t_sip_in"]).to_numpy()
    ok = np.isfinite(t1) & np.isfinite(tt)
    assert s.t_sip1_share == pytest.approx(t1[ok].sum() / tt[ok].sum(), rel=1e-6)
    assert s.k_copy_us == pytest.approx(np.nanmean(light["t_sip_in"] - light["t_sockq"]) / 1e3, rel=1e-9)
    assert s.alpha_fixed == 1.0 and s.t_sip_growth_per_call == 0.0
    # a service time is positive and the CV a sensible number
    assert all(v > 0 for v in (*s.k_stack_us, *s.ks_base_us, *s.t_sip_us, *s.k_snd_us))
    assert 0.05 < s.cv < 2.0


def test_k_copy_bound_brackets_the_lab_median(service):
    _, est = service
    # the README's median bound is 1-5 us per run; the pooled bound is <= the model's segment
    assert 0.5 < est.loc["ALL", "k_copy_max_median"] < 6.0
    assert est.loc["ALL", "k_copy_max_median"] <= est.loc["ALL", "k_copy_median"]


def test_queue_at_drops_on_a_hand_made_timeline():
    us = 1000
    tl = pd.DataFrame({
        "t_stack": pd.array([0, 1 * us, 2 * us, None, 3 * us], dtype="Int64"),
        "t_sockq": pd.array([10 * us, 10 * us, 3 * us, None, 20 * us], dtype="Int64"),
        "t_arr": pd.array([0, 1 * us, 2 * us, 5 * us, 3 * us], dtype="Int64"),
        "size": pd.array([100, 200, 300, 400, 500], dtype="Int64"),
        "dropped": pd.array([False, False, False, True, False], dtype="boolean"),
    })
    q, b = F.queue_at_drops(tl)
    # at t = 5 us messages 0, 1 and 4 are queued (2 was picked at 3 us)
    assert q.tolist() == [3] and b.tolist() == [800]


def test_same_arrivals_and_light_load_sojourn():
    tls = [F.load_run(LAB / "runs" / r)[0] for r in F.LIGHT_RUNS]
    s = F.service_from_lab(F.estimate_components(tls), F.service_cv(tls))
    rcv = {"rcvbuf_bytes": 524288, "skb_overhead_b": 1100}
    lab_soj, sim_soj = [], []
    for rid, tl, rate in zip(F.LIGHT_RUNS, tls, (25.0, 50.0)):
        raw = _raw(rid)
        ua = raw[raw["origin"].astype(str) != "proxy"]
        inv = ua[ua["msg_type"].astype(str) == "INVITE"].groupby("call_id", observed=True)["t_arr"].min()
        lab_iat_us = np.diff(np.sort(inv.to_numpy())) / 1e3
        wl = F.lab_workload(tl)
        p = F.lab_params(s, rcv, wl, rate, rid)
        stl, st = F.simulate_lab(p, wl, seed=int(rate))
        sim_inv = stl[stl["msg_type"] == "INVITE"]["t_arr"].to_numpy(dtype="float64")
        np.testing.assert_allclose(np.diff(np.sort(sim_inv)) / 1e3, lab_iat_us, atol=0.002)
        assert st["dropped"] == 0
        served = ua[~ua["dropped"]]
        lab_soj.append((served["t_dep"] - served["t_arr"]).to_numpy() / 1e3)
        sim_soj.append((stl["t_dep"] - stl["t_arr"]).to_numpy(dtype="float64") / 1e3)
    # stated tolerance: the median sojourn of the two light-load points pooled within 15 % (the
    # inputs are their pool; the two points differ from each other by more than that, and the
    # tail of the wake-ups, waits for the CPU, is not in the model)
    assert np.nanmedian(np.concatenate(sim_soj)) == pytest.approx(
        np.nanmedian(np.concatenate(lab_soj)), rel=0.15)


def test_warm_pass_keeps_the_second_copy_of_the_arrivals():
    tl = F.load_run(LAB / "runs" / F.LIGHT_RUNS[1])[0]
    wl = F.lab_workload(tl)
    s = F.service_from_lab(F.estimate_components([tl]), F.service_cv([tl]))
    p = F.lab_params(s, {"rcvbuf_bytes": 524288, "skb_overhead_b": 1100}, wl, 50.0, "x")
    cold, _ = F.simulate_lab(p, wl, seed=1)
    warm, st = F.simulate_lab(p, wl, seed=1, warm=True)
    n = len(wl["t0_us"])
    assert st["calls"] == 2 * n
    ids = warm["call_id"].str.slice(4).astype(int)
    assert ids.min() == n and ids.max() == 2 * n - 1
    inv = lambda t: np.sort(t.loc[t["msg_type"] == "INVITE", "t_arr"].to_numpy("float64"))  # noqa: E731
    np.testing.assert_allclose(np.diff(inv(warm)), np.diff(inv(cold)), atol=2.0)  # ns, same spacing


def test_complete_span_on_a_hand_made_window():
    ms = 1_000_000
    # call a: all six messages (INVITE at 0, last at 300 ms); call b: INVITE at 100 ms, lost 180
    # (dropped), so it is not complete; b's INVITE is the window's last INVITE
    rows = [("a", t, m, False) for t, m in zip((0, 1, 2, 3, 250, 300),
                                                ("INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"))]
    rows += [("b", 100, "INVITE", False), ("b", 101, "180", True), ("b", 5100, "ACK", False)]
    tl = pd.DataFrame({"call_id": [r[0] for r in rows],
                       "t_arr": pd.array([r[1] * ms for r in rows], dtype="Int64"),
                       "msg_type": [r[2] for r in rows],
                       "dropped": pd.array([r[3] for r in rows], dtype="boolean"),
                       "origin": "relayed"})
    start, end = F.complete_span(tl)
    assert start == 300 * ms and end == 100 * ms


def test_fit_table_has_one_row_per_kept_one_worker_point():
    pts = pd.read_csv(LAB / "runs.csv")
    one = pts[(pts["series"] == "workers") & (pts["workers"] == 1)]
    kept = one[[(LAB / "runs" / r / "timeline.parquet").exists() for r in one["run_id"]]]
    sweep = kept[kept["tracer"] == "map"]
    fit = pd.read_csv(F.OUT_CSV)
    assert sorted(fit["run_id"]) == sorted(sweep["run_id"])           # the tracer-off twin is not in it
    assert not fit["run_id"].str.contains("tracer-off").any()
    assert fit["rate_cps"].is_monotonic_increasing and fit["run_id"].is_unique
    assert fit.loc[fit["light_load_input"], "run_id"].tolist() == list(F.LIGHT_RUNS)
    # the point_* columns are runs.csv's own numbers (context)
    m = fit.merge(pts, on="run_id", suffixes=("", "_pts"))
    np.testing.assert_allclose(m["point_pdr"], m["pdr"], rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(m["point_sojourn_mean_us"], m["sojourn_mean_us"], rtol=1e-5)
    # the lab columns are the window's own numbers, recomputed here from the Parquet files
    for r in fit.itertuples():
        d = _raw(r.run_id)
        ua = d[d["origin"].astype(str) != "proxy"]
        t0 = ua["t_arr"].min()
        last_inv = ua.loc[ua["msg_type"].astype(str) == "INVITE", "t_arr"].max()
        assert r.compared_ms == pytest.approx((last_inv - t0) / 1e6, rel=1e-5)
        cmp = ua[ua["t_arr"] <= last_inv]
        assert r.lab_drop_rate == pytest.approx(cmp["dropped"].mean(), rel=1e-5, abs=1e-9)
        assert r.lab_window_drop_rate == pytest.approx(ua["dropped"].mean(), rel=1e-5, abs=1e-9)
        ok = cmp[~cmp["dropped"]]
        assert r.lab_sojourn_median_us == pytest.approx(np.nanmedian(ok["t_dep"] - ok["t_arr"]) / 1e3,
                                                        rel=1e-4)
    assert (F.OUT_CSV.with_suffix(".provenance.md")).exists()


def test_asleep_share_is_the_switch_in_share_of_served_messages():
    rid = F.LIGHT_RUNS[0]
    raw = _raw(rid)
    ok = raw[(raw["origin"].astype(str) != "proxy") & ~raw["dropped"]]
    ref = (ok["sockq_src"].astype(str) == "switch_in").mean()
    assert F.asleep_share(F.load_run(LAB / "runs" / rid)[0]) == pytest.approx(ref, rel=1e-12)
    assert 0.5 < ref < 1.0                         # at 25 calls/s most messages wake the worker


def test_complete_span_of_a_kept_window_ignores_calls_that_lost_a_message():
    """The span starts one longest *complete* call after the first INVITE (a call that lost a
    message ends seconds later, with a retransmission) and ends at the last INVITE; exact in ns."""
    import pandas as pd

    from sipperf.ingest.lab_runs.dataset import complete_span

    t0 = 1_764_000_000_123_456_789                      # epoch ns: beyond float64's exact integers
    types = ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"]
    rows = []
    for k, (start, length, drop) in enumerate([(0, 300, False), (100, 5_000, True), (400, 250, False)]):
        for j, mt in enumerate(types):
            rows.append(dict(call_id=f"c{k}", msg_type=mt, origin="relayed", dropped=drop and mt == "BYE",
                             t_arr=t0 + (start + length * j // 5) * 1_000_000 + 7))
    tl = pd.DataFrame(rows)
    lo, hi = complete_span(tl)
    assert lo == t0 + 7 + 300 * 1_000_000 and hi == t0 + 7 + 400 * 1_000_000
