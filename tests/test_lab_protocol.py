"""The recording protocol (docs/lab.md): knees with their noise, paired comparisons, the
generator's verdict, CPU accounting and placement from /proc, the protocol plan, network
namespaces.  References are independent: scipy's t intervals, numpy's interpolation, the
kernel's wait4 rusage, sched_getaffinity, a simulated drop curve with a known knee."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sipperf.lab import cpuacct, knees as K, pairs, plan as P, protocol

ROOT = Path(__file__).resolve().parents[1]
LONG = ROOT / "datasets" / "lab" / "long"


# ---- knees -----------------------------------------------------------------------------------

def test_replicate_knee_interpolates_between_the_bracketing_probes():
    rates = [200, 300, 450, 675, 1012, 800, 900]
    pdrs = [0, 0, 0.0005, 0.002, 0.2, 0.004, 0.02]
    k = K.replicate_knee(rates, pdrs)
    assert (k.rate_below, k.rate_above) == (800, 900)
    # numpy's interpolation of the rate as a function of the drop rate between the bracket
    assert k.knee_cps == pytest.approx(np.interp(0.01, [0.004, 0.02], [800, 900]))


def _reps(values, width=0.0):
    return [K.ReplicateKnee(i, v, v - width, v + width, 6) for i, v in enumerate(values)]


def test_knee_interval_is_the_t_interval_when_the_brackets_are_points():
    v = [1510.0, 1480.0, 1555.0, 1500.0]
    est = K.knee_estimate(_reps(v))
    ref = stats.ttest_1samp(v, 0).confidence_interval(0.95)
    assert est.status == "replicated" and est.n == 4
    assert est.knee_cps == pytest.approx(np.mean(v))
    assert (est.low_cps, est.high_cps) == pytest.approx((ref.low, ref.high))


def test_knee_interval_adds_the_interpolation_range():
    v = [1510.0, 1480.0, 1555.0]
    wide = K.knee_estimate(_reps(v, width=40.0))
    tight = K.knee_estimate(_reps(v))
    assert wide.low_cps == pytest.approx(tight.low_cps - 40.0)
    assert wide.high_cps == pytest.approx(tight.high_cps + 40.0)


def test_knee_difference_is_welch_when_the_brackets_are_points():
    a, b = [3110.0, 3040.0, 3180.0], [2746.0, 2900.0, 2810.0, 2790.0]
    d = K.knee_difference(K.knee_estimate(_reps(a)), K.knee_estimate(_reps(b)), names=("1 worker", "8 workers"))
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (d.low_cps, d.high_cps) == pytest.approx((ref.low, ref.high))
    assert d.finding is True and "higher" in d.what


def test_knee_difference_without_replicates_cannot_tell():
    """One search each (the long recording's probes): the knee noise is unknown, so a
    difference is never called a finding, however far apart the two knees are."""
    one = K.knee_estimate(_reps([3110.0], width=80))
    eight = K.knee_estimate(_reps([2746.0], width=70))
    d = K.knee_difference(one, eight)
    assert d.finding is None and d.what.startswith("cannot tell")
    assert d.low_cps == pytest.approx(3030 - 2816) and d.high_cps == pytest.approx(3190 - 2676)


def test_long_recording_knees_are_single_searches():
    probes = pd.read_csv(LONG / "probes.csv")
    est = {w: K.knee_from_probes(g) for w, g in probes.groupby("workers")}
    assert all(e.status == "single" for e in est.values())
    ref = pd.read_csv(LONG / "knees.csv").set_index("workers")["knee_cps"]
    for w, e in est.items():   # the same interpolation as the recorder's
        assert e.knee_cps == pytest.approx(ref[w], abs=0.01)
    assert K.knee_difference(est[1], est[8]).finding is None


def test_generator_bound_probes_never_make_a_knee():
    k = K.replicate_knee([200, 300, 450, 675], [0, 0, 0.0004, 0.05], generator_bound=[0, 0, 0, 1])
    assert k.knee_cps is None and k.rate_below == 450 and k.excluded == 1
    assert "generator-bound from 675" in k.censored
    est = K.knee_estimate([k])
    assert est.status == "censored" and est.knee_cps is None


def _logistic_pdr(rate, knee, slope):
    """A drop curve with pdr(knee) = 1 % exactly."""
    x0 = knee + np.log(99.0) / slope
    return 1.0 / (1.0 + np.exp(-slope * (np.asarray(rate, float) - x0)))


def test_replicated_knee_interval_covers_a_known_knee():
    """Searches on a simulated drop curve (known 1 % knee, the knee itself moving between
    replicates by a normal spread, noisy drop counts): the interval covers the true mean
    knee at least at its nominal rate (it is conservative by construction)."""
    rng = np.random.default_rng(7)
    true, spread, slope = 1500.0, 40.0, 0.02
    hits = 0
    trials = 200
    for _ in range(trials):
        reps = []
        for i in range(3):
            kn = rng.normal(true, spread)
            rates = [200.0]
            while True:
                p = rng.binomial(20000, _logistic_pdr(rates[-1], kn, slope)) / 20000
                if p >= 0.01 or rates[-1] > 5000:
                    break
                rates.append(rates[-1] * 1.5)
            pd_ = [rng.binomial(20000, _logistic_pdr(r, kn, slope)) / 20000 for r in rates]
            for _ in range(3):
                rk = K.replicate_knee(rates, pd_)
                if rk.rate_below is None or rk.rate_above is None:
                    break
                mid = np.sqrt(rk.rate_below * rk.rate_above)
                rates.append(mid)
                pd_.append(rng.binomial(20000, _logistic_pdr(mid, kn, slope)) / 20000)
            reps.append(K.replicate_knee(rates, pd_, replicate=i))
        est = K.knee_estimate(reps)
        hits += est.low_cps <= true <= est.high_cps
    assert hits / trials >= 0.93


def test_estimates_from_a_replicate_table():
    t = pd.DataFrame({"setup": ["protocol"] * 3 + ["shared"] * 3, "workers": 1,
                      "replicate": [0, 1, 2] * 2,
                      "knee_cps": [1500, 1520, np.nan, 1700, 1690, 1720],
                      "rate_below": [1480, 1500, 1450, 1680, 1670, 1700],
                      "rate_above": [1540, 1550, np.nan, 1750, 1710, 1760],
                      "probes": 6, "censored": [None, None, "no probe reached 1 % drops", None, None, None]})
    e = K.estimates_from_replicates(t)
    assert e[("protocol", 1)].n == 2 and e[("shared", 1)].n == 3
    d = K.knee_difference(e[("shared", 1)], e[("protocol", 1)])
    assert d.diff_cps == pytest.approx(np.mean([1700, 1690, 1720]) - 1510)


# ---- paired comparisons ------------------------------------------------------------------------

def test_paired_difference_is_the_paired_t_interval():
    a = np.array([310.0, 295.0, 330.0, 301.0])
    b = np.array([290.0, 281.0, 300.0, 299.0])
    d = pairs.paired_difference(a, b)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (d["low"], d["high"]) == pytest.approx((ref.low, ref.high))
    assert pairs.paired_difference([1.0], [2.0])["shown"] is None


def test_tracer_pairs_from_a_points_table():
    pts = pd.DataFrame({"run_id": ["a", "a-off", "b"], "series": "workers", "workers": 1,
                        "rate_cps": 1000, "tracer": ["map", "none", "map"],
                        "tracer_pair": ["workers-c1", "workers-c1", np.nan],
                        "sojourn_mean_us": [300.0, 250.0, 9.0], "sojourn_ci_hw_us": [3.0, 4.0, 1.0],
                        "proxy_cpu_us_per_call": [600.0, 520.0, 1.0], "pdr": [0.0, 0.0, 0.0]})
    t = pairs.tracer_pairs(pts)
    assert len(t) == 1
    r = t.iloc[0]
    assert r["diff"] == 50.0 and r["high"] - r["diff"] == pytest.approx(5.0) and r["shown"]



def test_treatment_effects_compare_each_tuning_with_the_default_of_its_condition():
    pts = pd.DataFrame({
        "run_id": ["dq", "dq-off", "fq", "dl", "fl", "bl"], "series": "sched", "rate_cps": 2300,
        "treatment": ["default", "default", "fifo", "default", "fifo", "batch"],
        "tracer": ["map", "none", "map", "map", "map", "map"], "background_hogs": [0, 0, 0, 2, 2, 2],
        "sojourn_mean_us": [2000.0, 1500.0, 1990.0, 30000.0, 2100.0, 29000.0],
        "sojourn_ci_hw_us": [30.0, 20.0, 40.0, 3000.0, 50.0, 4000.0],
        "pdr": [0.0, 0.0, 0.0, 0.12, 0.0, 0.14], "pdr_ci_hw": [0.0, 0.0, 0.0, 0.01, 0.0, 0.01],
        "generator_bound": [False, False, False, False, False, True]})
    t = pairs.treatment_effects(pts).set_index(["condition", "treatment"])
    assert set(t.index) == {("quiet", "default"), ("quiet", "fifo"), ("load", "default"), ("load", "fifo")}
    q = t.loc[("quiet", "fifo")]             # -10 +- hypot(30, 40) = 50: not shown
    assert q["sojourn_diff"] == -10.0 and q["sojourn_high"] == pytest.approx(40.0) and not q["sojourn_shown"]
    f = t.loc[("load", "fifo")]               # compared with the default *under load*, not the quiet one
    assert f["sojourn_diff"] == -27900.0 and f["sojourn_shown"]
    assert f["drops_diff"] == pytest.approx(-12.0) and f["drops_shown"]
    assert not t.loc[("load", "default"), "sojourn_shown"]
    assert pairs.treatment_effects(pts[pts["treatment"] != "default"]).empty   # no baseline, no rows


# ---- the generator's verdict ------------------------------------------------------------------

def _meta(**kw):
    m = {"load_seconds": 10.0, "proxy_xlog_in": 60000,
         "placement": {"generator_cpus": [1]},
         "cpu_busy_during_load": {"cpu0": 0.8, "cpu1": 0.5},
         "generator_cpu": {"window_s": 10.0, "cpu_s": 4.5, "per_process": [{"user_s": 2.0, "system_s": 1.0},
                                                              {"user_s": 1.0, "system_s": 0.5}]},
         "generator_sockets": {"uac": {"drops": 0}, "uas": {"drops": 0}},
         "sipp_watchdog": {"late_ms": 20},
         "sipp_stats": {"WatchdogMinor(C)": 0, "WatchdogMajor(C)": 0, "FailedCall(C)": 0},
         "sipp_uas_stats": {"WatchdogMinor(C)": 0}}
    m.update(kw)
    return m


def test_a_healthy_generator_is_not_flagged():
    v = protocol.generator_verdict(_meta())
    assert v["bound"] is False and v["why"] == [] and v["unknown"] == []
    assert v["generator_cpus_busy"] == 0.5 and v["generator_process_max"] == pytest.approx(0.3)
    assert v["generator_side_share"] == pytest.approx(0.45)          # (4.5 s) / 10 s on one CPU


def test_a_busy_machine_alone_does_not_make_the_generator_bound():
    """Other processes keeping the generator's CPU busy are the machine's problem (machine_busy);
    the generator is flagged by its own demand or by its symptoms (lateness, drops)."""
    v = protocol.generator_verdict(_meta(cpu_busy_during_load={"cpu0": 1.0, "cpu1": 1.0}))
    assert v["bound"] is False and v["generator_cpus_busy"] == 1.0


@pytest.mark.parametrize("change, word", [
    ({"offered_window": {"seconds": 8.0, "generator_cpu_s": 6.9, "observer_cpu_s": 0.5,
                         "cpu_busy": {"cpu1": 0.97}}}, "used"),
    ({"generator_cpu": {"window_s": 10.0, "per_process": [{"user_s": 8.0, "system_s": 1.5}]}}, "one SIPp"),
    ({"generator_sockets": {"uac": {"drops": 100}, "uas": {"drops": 0}}}, "dropped"),
    ({"sipp_stats": {"WatchdogMinor(C)": 5, "WatchdogMajor(C)": 0}}, "late"),
    ({"invite_lateness": {"p99_ms": 45.0, "burst_p99_ms": 25.0, "rate_shortfall": 0.001}}, "bursts"),
    ({"invite_lateness": {"p99_ms": 45.0, "burst_p99_ms": 2.0, "rate_shortfall": 0.03}}, "below"),
])
def test_each_criterion_flags_the_generator(change, word):
    v = protocol.generator_verdict(_meta(**change))
    assert v["bound"] is True and any(word in w for w in v["why"])


def test_a_smooth_lateness_alone_does_not_flag_the_generator():
    """SIPp's pauses drift late smoothly (a slightly slower Poisson stream): a p99 far above
    the burst limit is information, not a verdict, while the stream keeps within 2 % of its rate."""
    v = protocol.generator_verdict(_meta(invite_lateness={"p99_ms": 45.0, "burst_p99_ms": 3.0,
                                                          "rate_shortfall": 0.008}))
    assert v["bound"] is False and v["invite_late_p99_ms"] == 45.0 and v["rate_shortfall"] == 0.008
    old = protocol.generator_verdict(_meta(invite_lateness={"p99_ms": 45.0}))   # before the split
    assert old["bound"] is False and any("trend" in u for u in old["unknown"])


@pytest.mark.parametrize("trips, seconds, bound", [
    (1, 8.0, False),     # one trip in a short probe: 0.8 expected at the limit's rate
    (2, 8.0, False),     # P(N >= 2 | 0.8) = 0.19
    (3, 8.0, True),      # P(N >= 3 | 0.8) = 0.047
    (6, 30.0, False),    # P(N >= 6 | 3) = 0.084
    (7, 30.0, True),     # P(N >= 7 | 3) = 0.034
])
def test_watchdog_trips_need_a_count_the_limit_rate_does_not_explain(trips, seconds, bound):
    m = _meta(load_seconds=seconds, generator_cpu={"window_s": seconds, "cpu_s": 1.0},
              sipp_stats={"WatchdogMinor(C)": trips, "WatchdogMajor(C)": 0})
    v = protocol.generator_verdict(m)
    assert v["bound"] is bound
    assert v["late_trips_p"] == pytest.approx(protocol.late_trips_p_value(trips, seconds), abs=1e-6)


def test_missing_data_is_listed_not_passed():
    v = protocol.generator_verdict({"load_seconds": 5.0})
    assert v["bound"] is False and len(v["unknown"]) >= 4


def test_invite_lateness_against_the_plan():
    plan = np.arange(1000) * 2.0                         # ms
    late = np.zeros(1000)
    late[990:] = 30.0                                    # the last 1 % late by 30 ms
    wire = (plan + 5.0 + late) * 1e6 + 1.7e18
    r = protocol.invite_lateness_ms(wire, plan)
    assert r["median_ms"] == pytest.approx(0.0, abs=1e-3) and r["max_ms"] == pytest.approx(30.0, abs=1e-3)
    assert r["late_share"] == pytest.approx(0.01)
    # the last 1 % are a burst around a flat trend: the whole 30 ms in the burst's max
    assert r["trend_rise_ms"] == pytest.approx(0.0, abs=1e-6) and r["burst_max_ms"] == pytest.approx(30.0)


def test_invite_lateness_splits_a_drift_from_a_burst():
    """A stream whose pauses drift 8 ms per second (0.8 % slow) plus one 60-ms stall: the trend
    carries the drift (rate shortfall 0.8 %), the burst the stall, each found from the wire times."""
    rng = np.random.default_rng(3)
    plan = np.cumsum(rng.exponential(1000 / 2300, size=23000))           # ms, 10 s at 2,300 calls/s
    drift = 0.008 * plan
    stall = np.where((plan > 5000) & (plan < 5060), 5060 - plan, 0.0)    # sent when the stall ends
    jitter = rng.uniform(0, 1, size=plan.size)                          # SIPp's 1-ms timer
    wire = (plan + drift + stall + jitter) * 1e6 + 1.7e18
    r = protocol.invite_lateness_ms(wire, plan)
    assert r["p99_ms"] > 70                                              # the old rule's number
    assert r["rate_shortfall"] == pytest.approx(0.008 / 1.008, rel=0.05)
    assert r["burst_max_ms"] == pytest.approx(60, abs=3)                 # the stall, not the drift
    assert r["burst_p99_ms"] < 3                                         # 0.6 % of calls in the stall
    assert r["trend_windows"] == int((plan.max() - plan.min()) // 500) + 1


def test_check_placement():
    good = [{"role": "proxy-main", "cpus_allowed": "0", "nice": 0, "policy": "SCHED_OTHER"},
            {"role": "uac", "cpus_allowed": "1", "nice": 0}, {"role": "tracer", "cpus_allowed": "1"}]
    assert protocol.check_placement(good)["ok"]
    bad = good + [{"role": "uas", "cpus_allowed": "0-1", "nice": -10}]
    c = protocol.check_placement(bad)
    assert not c["ok"] and len(c["problems"]) == 2


def test_point_columns_sum_the_rounds_cpu():
    from sipperf.lab import longrun
    from sipperf.lab.run import LabConfig

    rounds = [{"placement": "split", "placement_ok": True, "proxy_cpu_s": 6.0, "proxy_cpu_window_s": 12.0,
               "proxy_processes": 6, "generator_cpu_s": 3.0, "generator_cpu_window_s": 12.0,
               "generator_bound": False},
              {"placement": "split", "placement_ok": True, "proxy_cpu_s": 3.0, "proxy_cpu_window_s": 7.0,
               "proxy_processes": 6, "generator_cpu_s": 1.0, "generator_cpu_window_s": 7.0,
               "generator_bound": True, "generator_bound_why": "its sockets dropped 9 datagrams"}]
    c = longrun.protocol_columns(LabConfig(), rounds, offered=30000)
    assert c["proxy_cpu_s"] == 9.0 and c["proxy_cpu_window_s"] == 19.0
    assert c["proxy_cpu_util"] == pytest.approx(9.0 / 19.0)
    assert c["proxy_cpu_us_per_call"] == pytest.approx(9.0 / 30000 * 1e6)
    assert c["generator_bound"] and c["generator_bound_rounds"] == 1 and "dropped" in c["generator_bound_why"]
    assert (c["proxy_cpus"], c["generator_cpus"], c["load_nice"]) == ("0", "1", 0)
    m = longrun.point_cpu(rounds, "proxy_cpu", 30000)
    assert (m["cpu_s"], m["window_s"], m["processes"]) == (9.0, 19.0, 6) and "stat" in m["source"]
    # a round without accounting (older runs) makes the sums unknown, not smaller
    assert np.isnan(longrun.protocol_columns(LabConfig(), rounds + [{}], offered=1)["proxy_cpu_s"])


def test_invite_lateness_from_a_timeline():
    from sipperf.lab import longrun, sipp

    rate, calls, seed = 200.0, 400, 11
    plan = sipp.poisson_offsets_ms(rate, calls, seed)
    late = np.where(np.arange(calls) % 50 == 0, 40.0, 0.0)           # 2 % of calls 40 ms late
    t = ((plan + 3.0 + late) * 1e6).astype("int64") + 1_700_000_000_000_000_000
    tl = pd.DataFrame({"call_id": [f"{k + 1}-999@127.0.0.1" for k in range(calls)],
                       "msg_type": "INVITE", "origin": "relayed",
                       "t_wire_in": pd.array(t, dtype="Int64")}).sample(frac=1.0, random_state=1)
    meta = {"config": {"rate_cps": rate, "calls": calls, "seed": seed, "arrivals": "poisson"}}
    r = longrun.invite_lateness(tl, meta)
    assert r["n"] == calls and r["late_share"] == pytest.approx(0.02)
    assert r["median_ms"] == pytest.approx(0.0, abs=1e-3) and r["max_ms"] == pytest.approx(40.0, abs=1e-3)


# ---- /proc accounting and placement -------------------------------------------------------------

_BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4:\n    pass\ntime.sleep(0.3)\n"


def test_cpu_seconds_from_proc_stat_agree_with_wait4_rusage():
    """The same child's CPU read two ways: /proc/<pid>/stat ticks while it lives, the kernel's
    wait4 rusage (µs) when it is reaped."""
    p = subprocess.Popen([sys.executable, "-c", _BUSY])
    acct = cpuacct.GroupCpu("t").start([])
    acct.add(p.pid)
    deadline = time.monotonic() + 20
    ru = None
    while ru is None and time.monotonic() < deadline:
        acct.sample()               # the last /proc reading before it ends (it sleeps 0.3 s)
        ru = cpuacct.wait_rusage(p)
        time.sleep(0.02)
    assert ru is not None and p.poll() == 0
    from_stat = sum(acct.last[p.pid])
    from_rusage = ru["user_s"] + ru["system_s"]
    assert from_rusage >= 0.4
    assert from_stat == pytest.approx(from_rusage, abs=2.0 / cpuacct.CLK_TCK + 0.02)
    acct.ended(p.pid, ru)
    rec = acct.stop()
    assert rec["cpu_s"] == pytest.approx(from_rusage, abs=1e-3) and rec["processes"] == 1
    assert set(rec) >= {"cpu_s", "window_s", "processes", "source"}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_placement_reads_back_the_kernel_affinity_and_nice():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"],
                         preexec_fn=lambda: (os.sched_setaffinity(0, {1}), os.nice(3)))
    try:
        time.sleep(0.2)
        d = cpuacct.placement_of(p.pid, "uac")
        assert protocol._cpu_list(d["cpus_allowed"]) == os.sched_getaffinity(p.pid) == {1}
        assert d["nice"] == os.getpriority(os.PRIO_PROCESS, p.pid) == os.nice(0) + 3
        assert d["policy"] == "SCHED_OTHER"
    finally:
        p.kill()
        p.wait()


# ---- the protocol plan ---------------------------------------------------------------------

def test_protocol_plan_pairs_every_series_and_replicates_knees():
    pp = P.PLANS["protocol"]
    assert pp.protocol and pp.knee_replicates >= protocol.KNEE_REPLICATES
    for c in pp.workers:
        pts = P.worker_points(pp, c, 1500.0)
        pair = [p for p in pts if p.label.get("tracer_pair")]
        assert sorted(p.cfg.tracer for p in pair) == ["map", "none"]
        a, b = pair
        assert (a.cfg.rate_cps, a.cfg.seed, a.cfg.workers) == (b.cfg.rate_cps, b.cfg.seed, b.cfg.workers)
        assert all(p.cfg.placement == "split" and p.cfg.load_nice == 0 for p in pts)
    names = [n for n in P.TREATMENTS if all(f.startswith("/proc/") for f in P.treatment_files(n))]
    for pts in (P.sched_points(pp, 1500.0, names), P.overload_points(pp, 1500.0)):
        pair = [p for p in pts if p.label.get("tracer_pair")]
        assert len(pair) == 2 and {p.cfg.tracer for p in pair} == {"map", "none"}
    ns = P.netns_points(pp, 1500.0)
    assert [p.cfg.netns for p in ns][:4] == [False, True, True, False]
    assert len({p.run_id for p in ns}) == len(ns) == 2 * pp.netns_pairs
    # knee probes: counters only under the protocol, each set-up's overrides on top
    c = P.probe_config(pp, 1, "shared-nice-10-observed")
    assert (c.placement, c.load_nice, c.tracer, c.capture) == ("shared", -10, "map", True)
    c = P.probe_config(pp, 1, "protocol")
    assert (c.placement, c.load_nice, c.tracer, c.capture) == ("split", 0, "none", False)
    assert set(pp.setups) <= set(P.SETUPS)


def test_older_plans_keep_the_first_recordings_setup():
    for name in ("full", "pilot"):
        c = P.base_config(P.PLANS[name], workers=1, rate_cps=100)
        assert (c.placement, c.load_nice) == ("shared", -10)


def test_protocol_estimate_adds_up():
    pp = P.PLANS["protocol"]
    e = P.estimate(pp, ["setup", "workers", "sched", "overload", "netns"], {}, ["default", "nice-10"])
    series = [k for k in e if k not in ("total", "knees_assumed")]
    assert e["total"][0] == pytest.approx(sum(e[k][0] for k in series))
    assert all(e[k][1] >= e[k][0] > 0 for k in series)
    # replicated searches cost more probes than one search
    one = P.probe_count(pp, 1500.0, pp.probe_start_cps)
    assert P.protocol_probe_count(pp, 1500.0, pp.probe_start_cps) > one


# ---- network namespaces (root) -------------------------------------------------------------

@pytest.mark.root
def test_namespaces_are_made_and_always_deleted(tmp_path):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    from sipperf.lab import knobs, netns

    log = knobs.RestoreLog(tmp_path / "restore.jsonl")
    topo = netns.Topology(tag=f"t{os.getpid()}", log=log)
    with topo:
        names = netns.list_namespaces()
        assert {topo.proxy_ns, topo.uac_ns, topo.uas_ns} <= set(names)
        # the proxy reaches both peers over its veth pairs (the kernel's own routing decision)
        r = subprocess.run(["ip", "-n", topo.proxy_ns, "route", "get", netns.UAS_ADDR],
                           capture_output=True, text=True)
        assert "dev pxs" in r.stdout and f"src {netns.PROXY_ADDR}" in r.stdout
        assert log.pending()                  # recorded before it was made
    assert not {topo.proxy_ns, topo.uac_ns, topo.uas_ns} & set(netns.list_namespaces())
    assert log.pending() == []


@pytest.mark.root
def test_a_killed_runs_namespace_is_deleted_by_restore(tmp_path):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    from sipperf.lab import knobs, netns

    name = f"sipperf-t{os.getpid()}-orphan"
    log = knobs.RestoreLog(tmp_path / "restore.jsonl")
    # a record left by a process that is gone (pid 1's start time never matches a fake one)
    log._append({"id": "x-1", "pid": 1, "start": -1, "kind": "netns", "path": name})
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done = knobs.restore_pending(log)
        assert [d["path"] for d in done] == [name] and done[0]["restored"]
        assert name not in netns.list_namespaces()
    finally:
        if name in netns.list_namespaces():
            subprocess.run(["ip", "netns", "del", name])


# ---- real runs under the protocol (root, lab tools) -------------------------------------------

PORTS = dict(proxy_port=5170, uas_port=5190, uac_port=5171)


def _lab_or_skip(netns: bool = False):
    missing = [t for t in ("kamailio", "sipp", "dumpcap") + (("mergecap", "ip") if netns else ())
               if not shutil.which(t)]
    if missing or os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip(f"needs root, two CPUs and {', '.join(missing) or 'the lab tools'}")
    from sipperf.lab.netutil import port_in_use
    if not netns and any(port_in_use("127.0.0.1", p) for p in PORTS.values()):
        pytest.skip("lab ports in use")


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
def test_a_protocol_run_records_placement_cpu_and_the_generator(tmp_path):
    _lab_or_skip()
    import json

    from sipperf.lab.run import LabConfig, run_lab

    out = tmp_path / "run"
    run_lab(LabConfig(rate_cps=40, calls=120, tracer="none", arrivals="poisson", retransmissions=False,
                      idle_check_s=0.5, max_seconds=60, **PORTS), out, log=lambda s: None)
    m = json.loads((out / "meta.json").read_text())
    pl = m["placement"]
    assert pl["mode"] == "split" and pl["check"]["ok"], pl["check"]
    roles = {p["role"] for p in pl["processes"]}
    assert {"proxy-main", "proxy", "uac", "uas", "capture"} <= roles
    assert all(p["cpus_allowed"] == "0" for p in pl["processes"] if p["role"].startswith("proxy"))
    assert all(p["cpus_allowed"] == "1" for p in pl["processes"] if p["role"] in ("uac", "uas", "capture"))
    for key in ("proxy_cpu", "generator_cpu"):
        c = m[key]
        assert {"cpu_s", "window_s", "processes", "source"} <= set(c)
        # a group pinned to one CPU cannot use more than the window's seconds of it
        assert 0 < c["cpu_s"] <= c["window_s"] + 2 * c["resolution_s"]
    assert m["proxy_cpu"]["processes"] == len(m["proxy"]["pids"])
    assert m["generator_cpu"]["processes"] == 2
    assert {"uac", "uas"} <= set(m["generator_sockets"])
    assert m["generator"]["bound"] in (True, False) and "limits" in m["generator"]
    assert m["sipp_watchdog"]["late_ms"] == protocol.LATE_MS


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
def test_a_namespace_run_joins_all_seven_instants(tmp_path):
    _lab_or_skip(netns=True)
    import json

    from sipperf.ingest.lab_runs.run import read_run
    from sipperf.lab import netns
    from sipperf.lab.run import LabConfig, run_lab
    from sipperf.timeline import INSTANTS

    out = tmp_path / "run"
    run_lab(LabConfig(rate_cps=40, calls=100, tracer="map", arrivals="poisson", retransmissions=False,
                      netns=True, idle_check_s=0.5, max_seconds=60, **PORTS), out, log=lambda s: None)
    m = json.loads((out / "meta.json").read_text())
    assert m["proxy"]["addr"] == netns.PROXY_ADDR and all(d["restored"] for d in m["netns"]["deleted"])
    assert not any(n.startswith(f"sipperf-{PORTS['proxy_port']}-") for n in netns.list_namespaces())
    tl, rep = read_run(out)
    rel = tl[tl["origin"] == "relayed"]
    assert len(rel) == 100 * 6 and rep.balanced
    assert rel[list(INSTANTS)].notna().all(axis=1).mean() >= 0.99
    # the wire instants bracket the kernel's: t_arr is the receive stamp itself, t_dep follows
    # the peer's receive inside the proxy's sendto
    assert ((rel["t_arr"] - rel["t_wire_in"]).astype("int64") >= 0).all()
    assert ((rel["t_dep"] - rel["t_wire_out"]).astype("int64") >= 0).all()


def test_replicated_search_replaces_a_censored_search(monkeypatch, tmp_path):
    """The recorder's search logic on a stand-in for the lab (a known drop curve; the first
    search's generator stalls): three valid searches, each with its own probes and seeds."""
    from sipperf.lab import longrun
    from sipperf.lab.run import LabConfig

    seen = []

    def fake_probe(cfg, rate, seconds, scratch, *, force, wait_idle_s, log, run_id, replicate):
        seen.append((replicate, rate))
        bound = replicate == 0 and rate >= 400
        return {"pdr": float(_logistic_pdr(rate, 1500.0 + 20 * replicate, 0.02)),
                "generator_bound": bound, "generator_bound_why": "stalled" if bound else None,
                "replicate": replicate, "rate_cps": rate}

    monkeypatch.setattr(longrun, "probe_rate", fake_probe)
    probes = []
    est, rows = longrun.find_knee_replicated(
        LabConfig(), replicates=3, start_cps=200, factor=1.5, refine_steps=3, probe_s=1,
        max_rate_cps=8000, scratch=tmp_path, force=False, wait_idle_s=0, on_probe=probes.append,
        log=lambda s: None)
    assert rows[0]["knee_cps"] is None and "generator-bound" in rows[0]["censored"]
    assert est.n == 3 and sorted(rows) == [0, 1, 2, 3]
    # each search's knee lies in its own bracket and near its curve's 1 % point
    for i in (1, 2, 3):
        r = rows[i]
        assert r["rate_below"] <= r["knee_cps"] <= r["rate_above"]
        assert r["knee_cps"] == pytest.approx(1500 + 20 * i, rel=0.05)
    assert {p["replicate"] for p in probes} == {0, 1, 2, 3}
    assert est.low_cps <= np.mean([1520, 1540, 1560]) <= est.high_cps


# ---- issue 25: the guards compared, replicated overload points ----------------------------------

def test_guard_scripts_limit_what_they_say(tmp_path):
    """The INVITE-only limit sits after the in-dialog routing and checks only initial INVITEs;
    the all-request limit sits before it, counts every request at 3 R, drops an ACK over it;
    Kamailio 5.6 accepts all of them (``kamailio -c``)."""
    from sipperf.lab import kamailio

    texts = {}
    for g in ("ratelimit", "ratelimit-all"):
        texts[g] = kamailio.render_config(kamailio.ProxyConfig(guard=g, guard_cps=120, absorb_early=True), tmp_path)
    inv, allr = texts["ratelimit"], texts["ratelimit-all"]
    dialog = inv.index("if (has_totag()) {\n\t\t# in-dialog")
    assert inv.index('is_method("INVITE") && !has_totag()') > dialog
    assert '"0:TAILDROP:120"' in inv and "$var(pipe) = 0;" in inv
    assert allr.index('rl_check("$var(pipe)")') < allr.index("if (has_totag()) {\n\t\t# in-dialog")
    assert '"1:TAILDROP:360"' in allr and "drop;" in allr
    # retransmissions are absorbed before either limit counts them
    for t in texts.values():
        assert t.index("t_precheck_trans()") < t.index("rl_check(")
    if not shutil.which("kamailio"):
        pytest.skip("kamailio not installed")
    for g, t in texts.items():
        p = tmp_path / f"{g}.cfg"
        p.write_text(t)
        r = subprocess.run(["kamailio", "-c", "-f", str(p)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr[-500:]


@pytest.mark.parametrize("guard", ["ratelimit", "ratelimit-all", "pike"])
def test_guard_script_is_what_the_config_runs(guard, tmp_path):
    """The chapter prints ``guard_script``: every line of it is in the rendered config (tabs
    shown as four spaces), in the same order, and the script of no guard adds nothing."""
    from sipperf.lab import kamailio

    text = kamailio.render_config(kamailio.ProxyConfig(guard=guard, guard_cps=120, absorb_early=True),
                                  tmp_path).expandtabs(4)
    script = kamailio.guard_script(guard, 120)
    code = [ln for ln in script.splitlines() if ln.strip() and not ln.startswith("# ")]
    assert len(code) >= 5
    at = 0
    for ln in code:
        at = text.index(ln + "\n", at) + 1          # found, and after the previous line
    assert ("rl_check" in script) == guard.startswith("ratelimit")
    assert ("before the in-dialog routing" in script) == (guard == "ratelimit-all")
    assert kamailio.guard_script("none", 0).strip() == "# request_route, after the in-dialog routing: " \
        "initial requests only\n" + kamailio._ABSORB.rstrip("\n").expandtabs(4)


def test_protocol_overload_series_compares_three_guards_replicated():
    pp = P.PLANS["protocol"]
    pts = P.overload_points(pp, 1500.0)
    loads = (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0)
    from sipperf.sim.overload import PRIORITY_FACTORS
    assert tuple(pp.overload_factors) == loads == tuple(PRIORITY_FACTORS)   # the model's loads
    for g in ("none", "ratelimit", "ratelimit-all"):
        mine = [p for p in pts if p.cfg.guard == g and p.cfg.tracer == "none"]
        assert sorted({p.label["fraction_of_knee"] for p in mine}) == list(loads)
        assert all(sum(p.label["fraction_of_knee"] == f for p in mine) >= 3 for f in loads)
        assert all(p.cfg.retransmissions and not p.cfg.capture for p in mine)
        assert all(p.min_calls == int(p.cfg.rate_cps * 30) for p in mine)
    # the same limit R = 0.8 x knee for both rate limits; replicate k shares its seed across guards
    assert {p.cfg.guard_cps for p in pts if p.cfg.guard.startswith("ratelimit")} == {1200.0}
    key = lambda p: (p.label["fraction_of_knee"], p.label["replicate"])          # noqa: E731
    seeds = {}
    for p in pts:
        if p.cfg.tracer == "none":
            seeds.setdefault(key(p), set()).add(p.cfg.seed)
    assert all(len(s) == 1 for s in seeds.values())
    assert len({next(iter(s)) for s in seeds.values()}) == len(seeds)
    assert len({p.run_id for p in pts}) == len(pts)
    # the older plans keep their point names (datasets/lab/long resumes by them)
    assert {p.run_id for p in P.overload_points(P.PLANS["full"], 3110.0)} >= {"overload-none-x1.0",
                                                                               "overload-ratelimit-x3.0"}


def _runs(rows):
    base = dict(series="overload", tracer="none", rate_cps=1500.0, knee_cps=1500.0, guard_cps=1200.0,
                offered_seconds=30.0, proxy_read=1000, proxy_socket_drops=0, calls_offered=45000,
                successful_calls=45000, failed_calls=0, rejected_503=0, bye_refused_503=0)
    return pd.DataFrame([{**base, **r} for r in rows])


def test_overload_table_combines_replicates_with_a_t_interval():
    from sipperf.lab.store import overload_table

    gp = [1400.0, 1410.0, 1460.0]
    rows = [dict(run_id=f"overload-none-x1.00-rep{k}", guard="none", fraction_of_knee=1.0, replicate=k,
                 goodput_cps=g, goodput_ci_hw_cps=5.0, proxy_socket_drops=10 * (k + 1)) for k, g in enumerate(gp)]
    rows += [dict(run_id="overload-none-x1.00-rep0-tracer-map", guard="none", fraction_of_knee=1.0, replicate=0,
                  tracer="map", goodput_cps=900.0),
             dict(run_id="overload-ratelimit-x1.00-rep0", guard="ratelimit", fraction_of_knee=1.0, replicate=0,
                  goodput_cps=1200.0, goodput_ci_hw_cps=7.0)]
    o = overload_table(_runs(rows)).set_index("guard")
    assert len(o) == 2                                 # one row per (guard, load); no tracer twin
    n = o.loc["none"]
    lo, hi = stats.t.interval(0.95, 2, loc=np.mean(gp), scale=stats.sem(gp))
    assert n["goodput_cps"] == pytest.approx(np.mean(gp))
    assert n["goodput_ci_hw_cps"] == pytest.approx((hi - lo) / 2)
    assert n["replicates"] == 3 and n["run_id"] == "overload-none-x1.00"
    assert n["calls_offered"] == 3 * 45000 and n["proxy_socket_drops"] == 60
    assert n["pdr_counters"] == pytest.approx(60 / 3060)
    r = o.loc["ratelimit"]                              # one run: its own batch-means interval
    assert r["replicates"] == 1 and r["goodput_ci_hw_cps"] == 7.0 and "one run" in r["goodput_ci_source"]


def test_long_overload_table_is_unchanged_by_the_replicate_view():
    from sipperf.lab.store import overload_table

    if not (LONG / "runs.csv").exists():
        pytest.skip("no long recording")
    new = overload_table(pd.read_csv(LONG / "runs.csv")).set_index(["guard", "fraction_of_knee"]).sort_index()
    old = pd.read_csv(LONG / "overload.csv").set_index(["guard", "fraction_of_knee"]).sort_index()
    assert list(new.index) == list(old.index)
    for c in ("goodput_cps", "goodput_ci_hw_cps", "rejected_503", "pdr_counters", "calls_offered"):
        assert np.allclose(new[c].to_numpy(float), old[c].to_numpy(float), equal_nan=True), c


def _sipp_files(d: Path, succ: list[int], inv503: list[int], bye503: list[int]) -> None:
    """SIPp's -trace_stat and -trace_counts files as SIPp 3.6 writes them (cumulative rows, one per
    -fd period; counts keyed by scenario index)."""
    head = "StartTime;LastResetTime;CurrentTime;SuccessfulCall(P);SuccessfulCall(C);FailedCall(C);"
    lines = [head] + [f"t;t;t;{s - (succ[i - 1] if i else 0)};{s};0;" for i, s in enumerate(succ)]
    (d / "uac_stats.csv").write_text("\n".join(lines) + "\n")
    head = "CurrentTime;ElapsedTime;2_INVITE_Sent;4_503_Recv;6_200_Recv;9_BYE_Sent;10_503_Recv;11_200_Recv;"
    lines = [head] + [f"t;e;0;{a};0;0;{b};0;" for a, b in zip(inv503, bye503)]
    (d / "uac_poisson_1_counts.csv").write_text("\n".join(lines) + "\n")


def test_goodput_series_takes_the_503s_out(tmp_path):
    from sipperf.lab import sipp

    _sipp_files(tmp_path, succ=[0, 100, 250, 400], inv503=[0, 10, 30, 60], bye503=[0, 0, 5, 5])
    c = sipp.read_counts(tmp_path, "uac")
    assert (sipp.invite_rejected(c), sipp.bye_refused(c)) == (60, 5)
    # per period: successful calls less the period's 503s (INVITE and BYE)
    assert sipp.goodput_series(tmp_path) == [0.0, 90.0, 125.0, 120.0]
    assert sum(sipp.goodput_series(tmp_path)) == 400 - 60 - 5
    # files that do not line up give no series rather than a wrong one
    _sipp_files(tmp_path, succ=[0, 100, 250], inv503=[0, 10, 30, 60], bye503=[0, 0, 5, 5])
    assert sipp.goodput_series(tmp_path) == []


def test_uac_scenarios_end_a_call_whose_bye_is_refused():
    import xml.etree.ElementTree as ET

    from sipperf.lab import sipp

    for path in (sipp.UAC_XML, sipp.UAC_POISSON_XML):
        root = list(ET.parse(path).getroot())
        bye = next(i for i, e in enumerate(root) if e.tag == "send" and (e.text or "").strip().startswith("BYE"))
        after = [e for e in root[bye + 1:] if e.tag == "recv"]
        assert after[0].get("response") == "503" and after[0].get("optional") == "true"
        assert after[0].get("next") == "byerefused" and after[1].get("response") == "200"
        assert "byerefused" in {e.get("id") for e in root if e.tag == "label"}


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("guard", ["ratelimit", "ratelimit-all"])
def test_a_guarded_run_refuses_what_its_limit_says(guard, tmp_path):
    """Over a limit of 10 calls/s (30 requests/s for the all-request limit) at 40 calls/s: every
    503 SIPp received is one Kamailio sent statelessly (its sl counters); the INVITE-only limit
    never refuses a BYE, the all-request limit does; every INVITE reached the proxy once."""
    _lab_or_skip()
    import json

    from sipperf.lab import sipp
    from sipperf.lab.run import LabConfig, run_lab

    out = tmp_path / "run"
    cfg = LabConfig(rate_cps=40, calls=160, tracer="none", capture=False, arrivals="poisson", seed=7,
                    retransmissions=True, guard=guard, guard_cps=10, absorb_early=True,
                    idle_check_s=0.5, max_seconds=60, **PORTS)
    run_lab(cfg, out, log=lambda s: None)
    m = json.loads((out / "meta.json").read_text())
    c, st = m["sipp_counts"]["uac"], m["proxy_stats"]
    inv, bye = sipp.invite_rejected(c), sipp.bye_refused(c)
    assert inv > 0 and st["sl:5xx_replies"] == inv + bye
    assert st["sl:received_ACKs"] == inv            # the 503s to INVITEs are ACKed, hop by hop
    assert st["core:rcv_requests_invite"] == cfg.calls
    assert (bye > 0) == (guard == "ratelimit-all")
    assert m["guard"]["what"].startswith("INVITE-only" if guard == "ratelimit" else "all-request")


# ---- the recorded protocol knee (datasets/lab/protocol) ----------------------------------------

PROTO = ROOT / "datasets" / "lab" / "protocol"


@pytest.mark.parametrize("where", ["", "first-64k"])
def test_recorded_protocol_knees_follow_from_their_probes(where):
    """knees.csv and knee_replicates.csv are what the replicate rule makes of probes.csv, on an idle
    machine; a censored search has a generator-bound probe above its highest clean one (the
    recording, and its first attempt kept in first-64k/)."""
    d = PROTO / where
    if not (d / "probes.csv").exists():
        pytest.skip(f"{d} holds no protocol knee probes")
    probes = pd.read_csv(d / "probes.csv")
    reps = pd.read_csv(d / "knee_replicates.csv")
    assert not probes["machine_busy"].any()
    for (setup, w, rep), g in probes.groupby(["setup", "workers", "replicate"]):
        got = K.replicate_knee(g["rate_cps"], g["pdr"], generator_bound=g["generator_bound"], replicate=rep)
        row = reps[(reps["setup"] == setup) & (reps["workers"] == w) & (reps["replicate"] == rep)]
        assert len(row) == 1
        row = row.iloc[0]
        if got.knee_cps is None:
            assert pd.isna(row["knee_cps"]) and row["rate_below"] == pytest.approx(got.rate_below)
            assert (g.loc[g["generator_bound"], "rate_cps"] > got.rate_below).any()
        else:
            assert row["knee_cps"] == pytest.approx(got.knee_cps, abs=0.01)  # the CSV keeps 2 decimals
    est = K.estimates_from_replicates(reps)
    knees = pd.read_csv(d / "knees.csv")
    for r in knees.itertuples():
        e = est[(r.setup, r.workers)]
        assert e.status == r.status
        if e.knee_cps is None:
            assert pd.isna(r.knee_cps)
        else:
            assert e.knee_cps == pytest.approx(r.knee_cps, abs=0.01)


def test_recorded_protocol_overload_is_its_runs():
    """The shipped overload series (issue 25, item 3): every planned run recorded once, on an idle
    machine, under the plan's rate, guard, limit and tracer for the knee it records (so replicate
    k of a load shared its seed across the guards); overload.csv is what overload_table makes of
    runs.csv; and the counters say what each guard does (only a limit answers 503, only the
    all-request limit refuses BYEs)."""
    from sipperf.lab.store import overload_table

    if not (PROTO / "overload.csv").exists():
        pytest.skip("the protocol recording holds no overload series")
    runs = pd.read_csv(PROTO / "runs.csv")
    o = runs[runs["series"] == "overload"]
    table_ = pd.read_csv(PROTO / "overload.csv")
    knees = table_["knee_cps"].unique()
    assert len(knees) == 1
    plan = {p.run_id: p for p in P.overload_points(P.PLANS["protocol"], float(knees[0]))}
    assert sorted(o["run_id"]) == sorted(plan)                    # complete, nothing extra
    for r in o.itertuples():
        p = plan[r.run_id]
        assert (r.rate_cps, r.guard, r.tracer) == (p.cfg.rate_cps, p.cfg.guard, p.cfg.tracer)
        assert r.guard_cps == pytest.approx(p.cfg.guard_cps) and r.replicate == p.label.get("replicate", 0)
        assert r.calls_offered == p.min_calls
    assert not o["machine_busy"].astype(bool).any() and not o["forced"].astype(bool).any()
    assert (o["successful_calls"] + o["failed_calls"] <= o["calls_offered"]).all()
    assert (o.loc[o["guard"] == "none", "rejected_503"] == 0).all()
    assert (o.loc[o["guard"] != "ratelimit-all", "bye_refused_503"] == 0).all()
    assert (o.loc[o["guard"].isin(["ratelimit", "ratelimit-all"]), "rejected_503"].groupby(
        o["fraction_of_knee"]).sum().loc[lambda s: s.index >= 1.5] > 0).all()
    new = overload_table(runs).set_index(["guard", "fraction_of_knee"]).sort_index()
    old = table_.set_index(["guard", "fraction_of_knee"]).sort_index()
    assert list(new.index) == list(old.index)
    for c in ("goodput_cps", "goodput_ci_hw_cps", "rejected_503", "bye_refused_503", "pdr_counters",
              "calls_offered", "replicates"):
        assert np.allclose(new[c].to_numpy(float), old[c].to_numpy(float), rtol=1e-5, equal_nan=True), c


def test_summary_probes_read_the_protocol_setup_and_skip_flagged_probes(tmp_path):
    """A protocol recording's probes.csv holds every set-up's searches: only the protocol's own
    reach `sipperf fit`, and a generator-bound or busy-machine probe never does."""
    from sipperf.report.runs import summary_probes

    rows = [dict(setup="protocol", workers=1, rate_cps=1000, proxy_read=6000, proxy_socket_drops=0,
                 generator_bound=False, machine_busy=False),
            dict(setup="protocol", workers=1, rate_cps=3000, proxy_read=17000, proxy_socket_drops=900,
                 generator_bound=True, machine_busy=False),
            dict(setup="protocol", workers=1, rate_cps=2000, proxy_read=12000, proxy_socket_drops=10,
                 generator_bound=False, machine_busy=True),
            dict(setup="shared", workers=1, rate_cps=1500, proxy_read=9000, proxy_socket_drops=200,
                 generator_bound=False, machine_busy=False)]
    pd.DataFrame(rows).to_csv(tmp_path / "probes.csv", index=False)
    got = summary_probes(tmp_path)
    assert [q.rate_cps for q in got] == [1000]
    pd.DataFrame(rows).drop(columns=["setup", "generator_bound"]).to_csv(tmp_path / "probes.csv", index=False)
    assert sorted(q.rate_cps for q in summary_probes(tmp_path)) == [1000, 1500, 3000]   # older recordings


def test_summary_measures_keep_one_setup_of_a_protocol_recording(tmp_path):
    """The tracer-off twin of a sweep is another set-up and stays out of the fit; where the knee
    searches ran counters-only (probes.csv with a setup column), the traced points' rounds are not
    knee probes.  An older recording (no setup column) keeps every point's rounds as probes."""
    import json

    from sipperf.report.runs import summary_measures

    pts = pd.DataFrame({"run_id": ["w-a", "w-b", "w-b-off"], "series": "workers", "workers": 1,
                        "rate_cps": [1000, 2000, 2000], "tracer": ["map", "map", "none"],
                        "tracer_pair": [np.nan, "workers-c1", "workers-c1"], "pdr": 0.0, "pdr_ci_hw": 0.0,
                        "steady_msgs": 60000, "sojourn_n": 60000, "calls_offered": 10000})
    pts.to_csv(tmp_path / "runs.csv", index=False)
    comp = pd.DataFrame([dict(run_id=r, msg_type="ALL", component=k, n=60000, mean_us=m, ci_hw_us=1.0)
                         for r in pts["run_id"] for k, m in (("k_sockq", 50.0), ("k_copy", 5.0),
                                                            ("t_sip", 40.0), ("k_snd", 10.0))])
    comp.to_csv(tmp_path / "components.csv", index=False)
    for r in pts["run_id"]:
        (tmp_path / "runs" / r).mkdir(parents=True)
        (tmp_path / "runs" / r / "meta.json").write_text(json.dumps(
            {"rounds": [{"proxy_socket_drops": 0, "proxy_read": 60000}]}))
    probes = pd.DataFrame([dict(setup="protocol", workers=1, rate_cps=3000, proxy_read=17000,
                                proxy_socket_drops=900, tracer="none")])
    probes.to_csv(tmp_path / "probes.csv", index=False)
    got = {rid: m for rid, _, m in summary_measures(tmp_path)}
    assert sorted(got) == ["w-a", "w-b"]                                   # the twin is left out
    assert all(len(m.fit_input.probes) == 0 for m in got.values())         # searched counters-only
    assert any("not used for the knee" in w for w in got["w-a"].warnings)
    probes.drop(columns=["setup"]).to_csv(tmp_path / "probes.csv", index=False)
    got = {rid: m for rid, _, m in summary_measures(tmp_path)}
    assert all(len(m.fit_input.probes) == 1 for m in got.values())         # an older recording
