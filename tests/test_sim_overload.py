"""The SIP overload model (src/sipperf/sim/overload.py) and the reader of the lab's overload runs
(src/sipperf/sim/overload_lab.py).

Expected values come from RFC 3261's timer rules worked out here, from conservation of calls, and
from SIPp's own statistics files read with the csv module — not from the code under test."""
from __future__ import annotations

import csv
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import simpy

from sipperf.sim.overload import OverloadParams, Overload, run_overload, summarise, timeseries
from sipperf.sim.calibration.overload_lab import read_overload_runs, summarise_run

FIXTURES = Path(__file__).parent / "fixtures" / "overload_runs"


def rfc3261_schedule(t1: float, cap: float, timeout: float) -> list[float]:
    """Send instants of a request nobody answers: intervals T1, 2 T1, 4 T1, ... capped at ``cap``."""
    out, t, step = [], 0.0, t1
    while t < timeout:
        out.append(t)
        t += step
        step = min(2 * step, cap)
    return out


def _sends(cap: float, retransmissions: bool = True) -> list[float]:
    env = simpy.Environment()
    m = Overload.__new__(Overload)              # only the timer: no UAC, proxy or UAS processes
    m.env, m.p = env, OverloadParams(retransmissions=retransmissions)
    sent = []
    never = env.event()
    env.process(m.retransmit(lambda r: sent.append(env.now), never, cap))
    env.run()
    return sent


def test_timer_a_and_e_schedules():
    # INVITE: 0, .5, 1.5, 3.5, 7.5, 15.5, 31.5 (7 sends) before Timer B at 32 s
    assert _sends(math.inf) == pytest.approx(rfc3261_schedule(0.5, math.inf, 32.0))
    assert len(_sends(math.inf)) == 7
    # BYE: capped at T2 = 4 s: 11 sends before Timer F
    assert _sends(4.0) == pytest.approx(rfc3261_schedule(0.5, 4.0, 32.0))
    assert len(_sends(4.0)) == 11
    assert _sends(4.0, retransmissions=False) == [0.0]


def test_a_dead_proxy_sees_every_invite_copy():
    """A proxy whose socket holds nothing drops every datagram: each call's INVITE arrives 7
    times, one network delay after the RFC 3261 instants, and no call is set up."""
    p = OverloadParams(offered_cps=2.0, buffer_pkts=0, warmup_s=0.0, measure_s=3.0, seed=1)
    m = run_overload(p)
    first = m.calls[0]
    drops = [t for t, ev, kind, _, cid in m.log if ev == "drop" and kind == "INVITE" and cid == first.cid]
    expect = np.array(rfc3261_schedule(p.t1_s, math.inf, 64 * p.t1_s)) + first.start + p.net_ms / 1000
    assert np.allclose(sorted(drops), expect)
    s = summarise(m)
    assert s["goodput_cps"] == 0 and s["drop_share"] == 1.0
    assert all(c.outcome == "timeout" for c in m.calls if c.start < 64 * p.t1_s)


def test_light_load_every_call_completes_with_six_messages():
    p = OverloadParams(offered_cps=0.3 * OverloadParams().capacity_cps(), warmup_s=5.0, measure_s=20.0, seed=2)
    s = summarise(run_overload(p))
    assert s["timeout_share"] == 0 and s["drop_share"] == 0
    assert s["goodput_cps"] * p.measure_s == s["calls"]          # every counted call completed
    assert s["amplification"] == pytest.approx(1.0, abs=0.02)    # INVITE, 180, 200, ACK, BYE, 200
    assert s["setup_p95_s"] < 0.2


def test_retransmissions_off_means_one_copy():
    p = OverloadParams(offered_cps=2.0 * OverloadParams().capacity_cps(), retransmissions=False,
                       warmup_s=5.0, measure_s=10.0, seed=3)
    m = run_overload(p)
    assert not any(flag for _, ev, _, flag, _ in m.log if ev in ("arrive", "drop"))
    s = summarise(m)
    assert s["amplification"] <= 1.0 and s["retrans_per_s"] == 0


@pytest.mark.slow
def test_controls_order_at_twice_capacity():
    """At 2x capacity with retransmissions: feedback and rate limiting keep goodput high, no
    control and 503 + Retry-After do not (the orderings chapter 11 states)."""
    base = OverloadParams(warmup_s=33.0, measure_s=12.0, seed=4)
    base = replace(base, offered_cps=2.0 * base.capacity_cps())
    g = {c: summarise(run_overload(replace(base, control=c)))["goodput_cps"]
         for c in ("none", "503", "ratelimit", "loss")}
    cap = base.capacity_cps()
    assert g["loss"] > 0.8 * cap and g["ratelimit"] > 0.8 * cap
    assert g["none"] < 0.75 * g["loss"] and g["503"] < 0.75 * g["loss"]


def test_timeseries_and_bad_parameters():
    m = run_overload(OverloadParams(offered_cps=5.0, warmup_s=1.0, measure_s=2.0, seed=5))
    ts = timeseries(m)
    assert (ts["setups_per_s"] >= 0).all() and ts["setups_per_s"].sum() == sum(c.outcome == "set up" for c in m.calls)
    for bad in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ValueError):
            run_overload(OverloadParams(offered_cps=bad))
    with pytest.raises(ValueError, match="control"):
        run_overload(OverloadParams(control="pike"))


# --- the real proxy's overload runs (three short runs recorded with `sipperf lab run`) -------

def _uac_last_row(run: Path) -> dict:
    rows = list(csv.reader((run / "uac_stats.csv").read_text().splitlines(), delimiter=";"))
    return dict(zip(rows[0], rows[-1]))


def test_reader_on_recorded_runs():
    df, problems = read_overload_runs(FIXTURES)
    assert problems == [] and len(df) == 3
    for r in df.itertuples():
        run = FIXTURES / r.run_id
        last = _uac_last_row(run)
        meta = json.loads((run / "meta.json").read_text())
        assert r.retransmissions_uac == int(last["Retransmissions(C)"])
        assert r.sipp_successful == int(last["SuccessfulCall(C)"])
        assert r.calls == int(last["OutgoingCall(C)"])
        # every call either completed, was rejected with 503, or failed (SIPp counts the 503 ones
        # as successful when its scenario ends after them)
        assert r.completed + r.rejected_503 + r.sipp_failed == r.calls
        assert r.goodput_cps == pytest.approx(r.offered_cps * r.completed / r.calls)
        assert r.retransmissions == meta["config"]["retransmissions"]
    by = df.set_index("run_id")
    assert by.loc["overload-r1500-noretrans", "retransmissions_uac"] == 0
    assert by.loc["overload-r1500-retrans", "retransmissions_uac"] > 0
    assert by.loc["overload-r1500-ratelimit", "rejected_503"] > 0
    assert by.loc["overload-r1500-ratelimit", "guard"] == "ratelimit"


def test_reader_skips_unusable_runs(tmp_path):
    good = FIXTURES / "overload-r1500-retrans"
    shutil.copytree(good, tmp_path / "overload-ok")
    (tmp_path / "overload-list").mkdir()
    (tmp_path / "overload-list" / "meta.json").write_text("[1, 2]")
    (tmp_path / "overload-empty").mkdir()
    (tmp_path / "overload-garbage").mkdir()
    (tmp_path / "overload-garbage" / "meta.json").write_bytes(b"\xff\xfe{")
    meta = json.loads((good / "meta.json").read_text())
    del meta["sipp_stats"]["Retransmissions(C)"]
    (tmp_path / "overload-nokey").mkdir()
    (tmp_path / "overload-nokey" / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "rate-0100").mkdir()                         # not an overload run: not read
    df, problems = read_overload_runs(tmp_path)
    assert df["run_id"].tolist() == ["overload-ok"]
    why = dict(problems)
    assert set(why) == {"overload-list", "overload-empty", "overload-garbage", "overload-nokey"}
    assert "Retransmissions(C)" in why["overload-nokey"] and "no meta.json" in why["overload-empty"]
    assert read_overload_runs(tmp_path / "nowhere") [0].empty
    with pytest.raises(ValueError):
        summarise_run(tmp_path / "overload-list")


def test_long_overload_table_maps_to_run_columns(tmp_path):
    """The long recording's overload.csv (columns of sipperf.lab.store) reads into the same
    columns as a run directory; completed calls are SIPp's successful ones minus the 503s."""
    from sipperf.lab.store import OVERLOAD_COLUMNS
    from sipperf.sim.calibration.overload_lab import read_long_overload, read_overload

    row = dict.fromkeys(OVERLOAD_COLUMNS, 0)
    row.update(run_id="overload-ratelimit-x1.5", guard="ratelimit", guard_cps=960, rate_cps=1800,
               calls_offered=54000, successful_calls=50000, failed_calls=4000, rejected_503=10000,
               goodput_cps=1333.3, uac_retransmissions=700, uas_retransmissions=300,
               proxy_read=300000, proxy_socket_drops=3000, machine_busy=False, offered_seconds=30)
    bad = dict(row, run_id="bad", calls_offered=0)
    p = tmp_path / "overload.csv"
    pd.DataFrame([row, bad]).to_csv(p, index=False)
    df, problems = read_long_overload(p)
    assert problems == [("bad", "rate_cps=1800 calls_offered=0 make no run")]
    r = df.iloc[0]
    assert r["completed"] == 40000 and r["rejected_503"] == 10000
    assert r["completed_share"] == pytest.approx(40000 / 54000)
    assert r["drop_share"] == pytest.approx(3000 / 303000)
    assert r["amplification"] == pytest.approx(303000 / (6 * 54000))
    assert bool(r["retransmissions"]) and r["retransmissions_uas"] == 300
    both, _ = read_overload(FIXTURES, p, tmp_path / "no-protocol.csv")
    assert set(both["source"]) == {"runs", "long"} and len(both) == len(read_overload_runs(FIXTURES)[0]) + 1
    assert read_long_overload(tmp_path / "none.csv")[0].empty
    pd.DataFrame([{"run_id": "x"}]).to_csv(tmp_path / "thin.csv", index=False)
    assert "lacks the columns" in read_long_overload(tmp_path / "thin.csv")[1][0][1]
    assert np.isnan(r["knee_cps"]) and r["replicates"] == 1     # a zero placeholder is no knee
    # the protocol recording's table: BYEs refused by an all-request limit are not completed calls
    prot = dict(row, run_id="overload-ratelimit-all-x1.50", guard="ratelimit-all", bye_refused_503=500,
                knee_cps=1200, fraction_of_knee=1.5, replicates=3, goodput_ci_hw_cps=12.5)
    p2 = tmp_path / "protocol.csv"
    pd.DataFrame([prot]).to_csv(p2, index=False)
    q = read_long_overload(p2)[0].iloc[0]
    assert q["completed"] == 50000 - 10000 - 500 and q["knee_cps"] == 1200 and q["fraction_of_knee"] == 1.5
    assert q["replicates"] == 3 and q["goodput_ci_hw_cps"] == 12.5
    three, _ = read_overload(FIXTURES, p, p2)
    assert set(three["source"]) == {"runs", "long", "protocol"}
    assert len(three) == len(both) + 1


def test_replicated_sweep_extends_the_single_one():
    """sim_overload_reps.csv (``--replicated``): five replications of every point, the first the very
    run of sim_overload.csv (the same seeds), the others independent."""
    from sipperf.sim.precomputed import load_precomputed

    single, reps = load_precomputed("overload"), load_precomputed("overload_reps")
    assert sorted(reps["rep"].unique()) == [0, 1, 2, 3, 4]
    assert (reps.groupby(["scenario", "load_factor"]).size() == 5).all()
    first = reps[reps["rep"] == 0].merge(single, on=["scenario", "load_factor"], suffixes=("", "_1"))
    assert len(first) == len(single) and np.allclose(first["goodput_cps"], first["goodput_cps_1"])
    assert reps.groupby(["scenario", "load_factor"])["seed"].nunique().eq(5).all()
