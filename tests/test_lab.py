"""The lab's pieces without running the lab: config/tracer rendering, the Poisson driver, the
log parsers, and the recorded datasets in datasets/lab (checked against independent
references: kernel UDP counters, scipy's exponential distribution, a re-ingest of raw files)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sipperf.ingest.lab_runs.dataset import load_index, load_run
from sipperf.ingest.lab_runs.tracelog import FIELDS, read_tracelog
from sipperf.ingest.lab_runs.xlog import read_xlog
from sipperf.lab import kamailio, sipp, tracer
from sipperf.timeline import INSTANTS, CALL_FLOW, validate_timeline

ROOT = Path(__file__).resolve().parents[1]
DS = ROOT / "datasets" / "lab"


def test_kamailio_config_renders_every_placeholder(tmp_path):
    text = kamailio.render_config(kamailio.ProxyConfig(workers=4, port=5999, uas_port=5998), tmp_path)
    assert "@@" not in text
    assert "children=4" in text and "listen=udp:127.0.0.1:5999" in text
    assert text.count("\"SIPPERF|in|") == 2 and text.count("\"SIPPERF|c|") >= 2
    assert "onsend_route_reply=yes" in text and "$TV(Sn)" in text


@pytest.mark.parametrize("mode", tracer.MODES)
def test_tracer_renders_for_every_mode(mode):
    text = tracer.render(mode, 5999, [11, 12], ifindex=1)
    assert "@@" not in text and "5999" in text and "pid == 12" in text
    n_printf = text.count("printf(")
    assert (n_printf == len(FIELDS)) if mode == "print" else (n_printf == 0)
    if mode == "hist":
        assert "hist(" in text and "//HIST" not in text


_KFREE_618 = ('field:void * skbaddr; field:void * rx_sk; field:enum skb_drop_reason reason;\n'
              'print fmt: "...", __print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" }, '
              '{ 6, "SOCKET_RCVBUFF" }, { 20, "PROTO_MEM" }, { 29, "SOCKET_BACKLOG" })')
_KFREE_61 = ('field:void * skbaddr; field:enum skb_drop_reason reason;\n'
             'print fmt: "...", __print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" }, '
             '{ 4, "SOCKET_RCVBUFF" }, { 17, "PROTO_MEM" })')


@pytest.mark.parametrize("mode", tracer.MODES)
def test_drop_record_follows_the_kernel(mode):
    """Where kfree_skb names the receiving socket, drops are read there with this kernel's own
    reason numbers (6.18 drops datagrams of a batched enqueue without udp_fail_queue_rcv_skb);
    else from udp_fail_queue_rcv_skb."""
    assert tracer.drop_reason_codes(_KFREE_618) == {"SOCKET_RCVBUFF": 6, "PROTO_MEM": 20}
    new = tracer._drop_probe(mode, 5999, _KFREE_618)
    assert "skb:kfree_skb" in new and "args->reason == 6 || args->reason == 20" in new
    assert "skc_num == 5999" in new and "udp_fail" not in new
    old = tracer._drop_probe(mode, 5999, _KFREE_61)    # no rx_sk: the socket is not named
    assert "udp:udp_fail_queue_rcv_skb" in old and "args->dport == 5999" in old and "kfree" not in old
    if mode != "hist":
        assert "$skb->tstamp" in new and "@cur[cpu]" in old


def test_poisson_offsets_are_exponential_gaps():
    off = sipp.poisson_offsets_ms(200.0, 5000, seed=7)
    gaps = np.diff(off)
    assert off[0] == 0 and np.all(gaps > 0)
    # against scipy's exponential with the requested mean (5 ms)
    assert stats.kstest(gaps, stats.expon(scale=5.0).cdf).pvalue > 1e-3


def test_injection_file_has_no_carriage_returns(tmp_path):
    p = tmp_path / "inj.csv"
    sipp.write_injection(p, np.array([0.0, 1.5, 2.25]))
    raw = p.read_bytes()
    assert b"\r" not in raw and raw.splitlines()[0] == b"SEQUENTIAL"
    assert [float(x.rstrip(b";")) for x in raw.splitlines()[1:]] == [0.0, 1.5, 2.25]


def test_tracelog_print_and_map_layouts_agree(tmp_path):
    recs = [("R", 0, 100, 1795291233104529406, 5061, 475, 42),
            ("Q", 0, 120, 1795291233104529406, 42),
            ("F", 1, 300, 7, 250, 290, 447)]
    pr = tmp_path / "print.log"
    pr.write_text("Attaching 13 probes...\n" + "".join(
        f"{r[0]} " + " ".join(map(str, r[1:])) + "\n" for r in recs) + "Lost 3 events\n")
    mp = tmp_path / "map.log"
    mp.write_text("Attaching 13 probes...\n\n" + "".join(
        f"@{r[0]}[{r[1]}, {r[2]}]: (" + ", ".join(map(str, r[3:])) + ")\n" for r in recs)
        + "@n_X: 5\n")
    a, ra = read_tracelog(pr)
    b, rb = read_tracelog(mp)
    for k in FIELDS:
        pd.testing.assert_frame_equal(a[k], b[k])
    assert a["R"]["tstamp"].iloc[0] == 1795291233104529406
    assert ra.skipped["lost events"] == 1 and any("lost 3" in n for n in ra.notes)
    assert ra.parsed == rb.parsed == 3


def test_tracelog_malformed_record_is_counted(tmp_path):
    p = tmp_path / "t.log"
    p.write_text("R 0 1 2\nS 0 5 1 2 3 4\n")
    t, rep = read_tracelog(p)
    assert rep.skipped["malformed"] == 1 and len(t["S"]) == 1 and rep.balanced


def test_xlog_parser_on_kamailio_lines(tmp_path):
    p = tmp_path / "proxy.log"
    p.write_text(
        "loading modules under config path: /usr/lib/x86_64-linux-gnu/kamailio/modules/\n"
        " 1(16050) NOTICE: <script>: SIPPERF|in|1795290835.809706|16050|1-16099@127.0.0.1|1|INVITE|0|127.0.0.1|5061|447\n"
        " 1(16050) NOTICE: <script>: SIPPERF|out|1795290835.810796|16050|1-16099@127.0.0.1|1|INVITE|180|127.0.0.1|5061|318\n"
        " 1(16050) NOTICE: <script>: SIPPERF|in|17952908x5.8|16050|c|1|INVITE|0|127.0.0.1|5061|447\n")
    df, rep = read_xlog(p)
    assert len(df) == 2 and rep.skipped == {"other proxy output": 1, "malformed xlog record": 1}
    assert df["t_ns"].iloc[0] == 1795290835_809706_000
    assert df["status"].tolist() == [0, 180] and df["tag"].tolist() == ["in", "out"]


# ---- recorded datasets --------------------------------------------------------------------------

needs_data = pytest.mark.skipif(not (DS / "index.csv").exists(), reason="datasets/lab not recorded")


@pytest.fixture(scope="module")
def index():
    return load_index(DS)


@needs_data
def test_dataset_index_covers_the_series(index):
    assert {"rate", "workers", "sched"} <= set(index["series"])
    rate = index[index["series"] == "rate"].sort_values("rate_cps")
    assert rate["workers"].eq(1).all() and rate["rate_cps"].nunique() >= 5
    assert rate["pdr"].iloc[0] == 0 and rate["pdr"].max() > 0, "sweep must reach overload"
    assert set(index[index["series"] == "workers"]["workers"]) >= {1, 2, 4, 8}
    sched = index[index["series"] == "sched"]
    assert set(sched["sched"]) >= {"default", "fifo", "pinned"}


@needs_data
def test_dataset_runs_are_timelines_and_match_kernel_counters(index):
    for run_id in index["run_id"]:
        tl, rep = load_run(DS / "runs" / run_id)
        validate_timeline(tl)
        meta = json.loads((DS / "runs" / run_id / "meta.json").read_text())
        for key in ("versions", "cpu", "sched", "udp_snmp_before", "udp_snmp_after", "start_utc",
                    "stop_utc", "skipped", "rates"):
            assert key in meta, f"{run_id}: meta.json lacks {key}"
        assert meta["source"] == "lab"
        rel = tl[tl["origin"] == "relayed"]
        drops = int((rel["drop_reason"] == "rcvbuf").sum())
        # the tracepoint drops are a subset of what the kernel's UDP counter saw machine-wide
        assert drops <= meta["udp_snmp_delta"]["RcvbufErrors"], run_id
        row = index[index["run_id"] == run_id].iloc[0]
        assert row["dropped"] == int(rel["dropped"].sum())
        # the capture and the tracer agree: t_arr (netif_receive_skb) never precedes the pcap
        # timestamp (set at transmit); typically by µs (ms only when softirqs were starved)
        d = (rel["t_arr"] - rel["t_wire_in"]).dropna().astype("int64")
        assert len(d) and (d >= 0).all() and np.median(d) < 1_000_000, run_id


@needs_data
def test_light_load_run_has_every_instant_and_the_call_flow(index):
    run_id = index[index["series"] == "rate"].sort_values("rate_cps")["run_id"].iloc[0]
    tl, _ = load_run(DS / "runs" / run_id)
    rel = tl[(tl["origin"] == "relayed") & ~tl["dropped"]]
    full = rel[list(INSTANTS)].notna().all(axis=1).mean()
    assert full > 0.95
    per_call = rel.groupby("call_id")["msg_type"].apply(lambda s: tuple(sorted(s)))
    assert (per_call == tuple(sorted(CALL_FLOW))).mean() > 0.95


@needs_data
def test_poisson_runs_have_poisson_counts(index):
    """SIPp really produced Poisson arrivals: INVITE counts in 100 ms windows on the wire have
    the Poisson dispersion (variance = mean; index-of-dispersion test against scipy's chi2),
    and the rate offered.

    Only runs where SIPp kept to its plan (99 % of INVITEs within 20 ms of their planned
    offset, ``arrival_late_p99_ms``); on a loaded machine SIPp itself stalls and then sends
    the calls it owes in a burst, which the index records for the other runs.  Below ~1 ms
    the arrivals are batched by SIPp's 1 ms timer, so single gaps are not tested."""
    kept = index[(index["arrivals"] == "poisson") & (index["arrival_late_p99_ms"] < 20)]
    if kept.empty:
        pytest.skip("no Poisson run in which SIPp kept to its arrival plan")
    for run_id, rate in zip(kept["run_id"], kept["rate_cps"]):
        tl, _ = load_run(DS / "runs" / run_id)
        inv = tl[(tl["msg_type"] == "INVITE") & (tl["origin"] == "relayed")]
        t = np.sort(inv.groupby("call_id")["t_wire_in"].min().astype("int64").to_numpy()) / 1e6
        t -= t[0]
        counts = np.bincount((t // 100.0).astype(int))[:-1]     # drop the partial last window
        k = len(counts)
        disp = (k - 1) * counts.var(ddof=1) / counts.mean()
        p = 2 * min(stats.chi2.cdf(disp, k - 1), stats.chi2.sf(disp, k - 1))
        assert p > 1e-3, f"{run_id}: dispersion {counts.var(ddof=1) / counts.mean():.2f}, p={p:.2g}"
        assert abs(len(t) / (t[-1] / 1000.0) - rate) / rate < 0.2, run_id


@needs_data
def test_raw_run_reingests_to_the_stored_timeline():
    raws = sorted((DS / "raw").glob("*/meta.json"))
    if not raws:
        pytest.skip("no raw runs stored")
    from sipperf.ingest.lab_runs.run import read_run

    raw = raws[0].parent
    tl, rep = read_run(raw, run_id=raw.name)
    stored, _ = load_run(DS / "runs" / raw.name)
    assert len(tl) == len(stored)
    for c in INSTANTS:
        np.testing.assert_array_equal(tl[c].fillna(-1).to_numpy(), stored[c].fillna(-1).to_numpy())


# ---- the long recordings: format, stopping rule, knee, knobs, machine --------------------------

from sipperf.ingest.lab_runs import dataset as LD  # noqa: E402
from sipperf.lab import knobs, longrun, machine, plan, store  # noqa: E402


def test_histogram_bins_match_numpy_histogram():
    rng = np.random.default_rng(5)
    v = np.concatenate([rng.lognormal(np.log(300e3), 1.5, 5000), [0.0, -3.0, 99.9, 100.0, 1e10, 5e10, np.nan]])
    counts = LD.hist_counts(v)
    edges = LD.hist_edges_ns()
    assert len(counts) == LD.HIST_BINS + 2 and len(edges) == LD.HIST_BINS + 1
    assert edges[0] == 100.0 and edges[-1] == pytest.approx(1e10)
    np.testing.assert_allclose(np.diff(np.log10(edges)), 1 / LD.HIST_PER_DECADE)
    finite = v[np.isfinite(v)]
    inner, _ = np.histogram(finite[(finite >= edges[0]) & (finite < edges[-1])], bins=edges)
    np.testing.assert_array_equal(counts[1:-1], inner)
    assert counts[0] == (finite < 100.0).sum() == 3 and counts[-1] == (finite >= 1e10).sum() == 2


def test_histogram_quantile_is_within_one_bin_of_the_data():
    rng = np.random.default_rng(6)
    v = rng.lognormal(np.log(200e3), 0.8, 20000)
    c = LD.hist_counts(v)
    h = pd.DataFrame({"bin": np.flatnonzero(c), "count": c[np.flatnonzero(c)]})
    e = LD.hist_edges_ns() / 1e3
    h["lo_us"] = np.concatenate([[np.nan], e])[h["bin"]]
    h["hi_us"] = np.concatenate([e, [np.nan]])[h["bin"]]
    for q in (0.5, 0.9, 0.99):
        est = LD.hist_quantile_us(h, q)
        ref = np.quantile(v, q) / 1e3
        assert abs(np.log10(est / ref)) < 1 / LD.HIST_PER_DECADE, (q, est, ref)


def _synthetic_round(n_calls: int, seed: int, mean_us: float, warm: int = 0, cv: float = 1.0):
    """A relayed-messages timeline: six messages per call, Poisson call arrivals, sojourns
    exponential (cv 1) around ``mean_us``; the first ``warm`` messages ten times slower."""
    rng = np.random.default_rng(seed)
    types = ["INVITE", "180", "200-INVITE", "ACK", "BYE", "200-BYE"]
    t_call = np.cumsum(rng.exponential(2e6, n_calls))                 # 500 calls/s, ns
    t_in = (t_call[:, None] + np.array([0, 1, 2, 3, 250, 251]) * 1e6).ravel()
    n = len(t_in)
    soj = rng.gamma(1 / cv**2, mean_us * 1e3 * cv**2, n)
    order = np.argsort(t_in)
    soj[order[:warm]] *= 10
    tl = pd.DataFrame({
        "call_id": np.repeat([f"{i}-x" for i in range(n_calls)], 6),
        "msg_type": np.tile(types, n_calls), "origin": "relayed",
        "t_wire_in": pd.array(t_in.astype("int64"), dtype="Int64"),
        "t_arr": pd.array((t_in + 2000).astype("int64"), dtype="Int64"),
        "t_dep": pd.array((t_in + 2000 + soj).astype("int64"), dtype="Int64"),
        "dropped": pd.array(np.zeros(n, bool), dtype="boolean"),
    })
    for c in ("t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_wire_out", "recv_copied"):
        tl[c] = pd.array([pd.NA] * n, dtype="Int64")
    return tl


def test_steady_window_cuts_the_warmup_and_the_tail():
    tl = _synthetic_round(3000, 1, 200.0, warm=900)
    w = longrun.steady_window(tl)
    # MSER-5 finds (most of) the slow start and nothing like the whole run
    assert 700 <= w["warmup_msgs"] <= 1200
    kept = w["rows"][w["keep"]]
    soj = (kept["t_dep"] - kept["t_arr"]).astype("float64") / 1e3
    assert soj.mean() == pytest.approx(200.0, rel=0.1)
    # nothing kept arrived after the last INVITE; the last calls' BYE/200 are cut
    last_inv = w["t_last_invite"]
    assert (w["t_in"][w["keep"]] <= last_inv).all() and w["cooldown_msgs"] > 0


@pytest.fixture
def fake_lab(monkeypatch, tmp_path):
    """run_lab / read_run replaced by a synthetic round (a unit test of the stopping rule only)."""
    calls_seen = []

    def fake_run_lab(cfg, rd, log=None):
        rd.mkdir(parents=True)
        calls_seen.append(cfg.calls)
        meta = {"config": {"seed": cfg.seed, "calls": cfg.calls}, "start_utc": "t",
                "load_seconds": cfg.calls / cfg.rate_cps, "sipp_stats": {"SuccessfulCall(C)": cfg.calls},
                "load_samples": {"busy": False, "foreign_mean": 0.01}, "proxy_socket": {"drops": 0},
                "proxy_xlog_in": cfg.calls * 6}
        (rd / "meta.json").write_text(json.dumps(meta))
        return rd

    def fake_read_run(rd, run_id=None):
        seed = json.loads((rd / "meta.json").read_text())["config"]["seed"]
        calls = json.loads((rd / "meta.json").read_text())["config"]["calls"]
        return _synthetic_round(calls, seed, 300.0), type("R", (), {"to_dict": lambda s: {}})()

    monkeypatch.setattr(longrun, "run_lab", fake_run_lab)
    monkeypatch.setattr("sipperf.ingest.lab_runs.run.read_run", fake_read_run)
    monkeypatch.setattr(longrun, "wait_until_idle", lambda force, wait_s, log: {"busy": False})
    return calls_seen


def test_point_stops_when_the_ci_is_within_target(fake_lab, tmp_path):
    from sipperf.lab.run import LabConfig

    spec = longrun.PointSpec("p1", "workers", LabConfig(rate_cps=500, calls=1), min_calls=500,
                             round_calls=500, max_calls=20000, ci_target=0.05)
    res = longrun.record_point(spec, tmp_path / "ds", tmp_path / "scratch", log=lambda s: None)
    s = res["summary"]
    assert s["stop_reason"] == "ci" and s["sojourn_ci_rel"] <= 0.05
    assert s["calls_offered"] >= spec.min_calls and s["rounds"] == len(fake_lab)
    # the same half-width from sipperf.stats on the pooled sojourns
    assert s["sojourn_mean_us"] == pytest.approx(300.0, rel=0.1)
    # an exponential sojourn (cv 1) needs about (1.96 / 0.05)^2 = 1537 messages: few rounds
    assert s["sojourn_n"] >= 1000
    comp = pd.DataFrame(res["components"])
    allrow = comp[(comp["component"] == "sojourn") & (comp["msg_type"] == "ALL")].iloc[0]
    assert allrow["n"] == s["sojourn_n"] and allrow["mean_us"] == pytest.approx(s["sojourn_mean_us"])
    h = pd.DataFrame(res["hist"])
    assert h[(h["component"] == "sojourn") & (h["msg_type"] == "ALL")]["count"].sum() == s["sojourn_n"]
    meta = json.loads((tmp_path / "ds" / "runs" / "p1" / "meta.json").read_text())
    assert meta["format"] == "lab-point-v1" and meta["stop_reason"] == "ci"


def test_point_stops_at_the_call_cap(fake_lab, tmp_path):
    from sipperf.lab.run import LabConfig

    spec = longrun.PointSpec("p2", "workers", LabConfig(rate_cps=500, calls=1), min_calls=600,
                             round_calls=300, max_calls=1500, ci_target=0.001)
    s = longrun.record_point(spec, tmp_path / "ds", tmp_path / "scratch", log=lambda s: None)["summary"]
    assert s["stop_reason"] == "cap_calls" and s["calls_offered"] == 1500
    assert fake_lab == [600, 300, 300, 300]
    with pytest.raises(LD.IngestError, match="summary-only"):
        LD.load_run(tmp_path / "ds" / "runs" / "p2")


def test_knee_interpolation():
    k = store.knee_from_probes([200, 300, 450, 675, 551], [0, 0, 0, 0.04, 0.0])
    assert k["rate_below"] == 551 and k["rate_above"] == 675
    assert k["knee_cps"] == pytest.approx(551 + (0.01 / 0.04) * 124)
    assert store.knee_from_probes([100, 200], [0, 0.001])["knee_cps"] is None


def test_plan_treatments_follow_the_probe_table():
    table = {"proc_sys": [{"path": "/proc/sys/kernel/sched_rt_runtime_us", "writable": True, "restored": True},
                          {"path": "/proc/sys/kernel/sched_rr_timeslice_ms", "writable": True, "restored": True},
                          {"path": "/proc/sys/kernel/sched_autogroup_enabled", "writable": True, "restored": True}],
             "debugfs": [{"path": "/sys/kernel/debug/sched/base_slice_ns", "writable": False}]}
    ok, skipped = plan.available_treatments(table)
    assert "fifo-unthrottled" in ok and "default" in ok and "base-slice-0.1ms" in skipped
    assert "thesis-enhanced" in skipped and "migration_cost_ns" in skipped["thesis-enhanced"]
    p = plan.PLANS["full"]
    pts = (plan.worker_points(p, 1, 1000.0) + plan.sched_points(p, 1000.0, ok)
           + plan.overload_points(p, 1000.0))
    ids = [x.run_id for x in pts]
    assert len(ids) == len(set(ids))
    assert all(x.min_calls >= 20000 for x in pts if x.series == "workers")
    assert all(not x.cfg.retransmissions for x in pts if x.series != "overload")
    assert all(x.cfg.retransmissions and x.cfg.guard_cps == 800 for x in pts
               if x.series == "overload" and x.cfg.guard != "none")
    est = plan.estimate(p, ["workers", "sched", "overload"], {1: 1000.0}, ok)
    assert est["total"][0] <= est["total"][1]
    assert est["total"][0] > sum(x.min_calls / x.cfg.rate_cps for x in pts)


def test_restore_log_repairs_an_interrupted_change(tmp_path):
    f = tmp_path / "knob"
    f.write_text("100\n")
    log = knobs.RestoreLog(tmp_path / "restore.jsonl")
    rec = {"kind": "file", "path": str(f), "old": "100", "new": "10"}
    log.record(rec)
    f.write_text("10\n")
    # the recording process is this one, still alive: its change is not taken from it
    assert knobs.restore_pending(log) == [] and f.read_text().strip() == "10"
    lines = [json.loads(x) for x in (tmp_path / "restore.jsonl").read_text().splitlines()]
    lines[0]["pid"], lines[0]["start"] = 999999999, None            # a process that is gone
    (tmp_path / "restore.jsonl").write_text(json.dumps(lines[0]) + "\n")
    out = knobs.restore_pending(log)
    assert out[0]["restored"] and f.read_text().strip() == "100" and log.pending() == []


def test_tuning_validation():
    with pytest.raises(ValueError):
        knobs.Tuning(files={"/etc/passwd": "x"}).validate()
    with pytest.raises(ValueError):
        knobs.Tuning(policy="fifo", priority=0).validate()
    with pytest.raises(ValueError):
        knobs.Tuning(policy="fifo", priority=50, slice_us=100).validate()
    assert knobs.Tuning().is_default and not knobs.Tuning(slice_us=100).is_default


def test_eevdf_slice_request_reads_back():
    """sched_setattr(sched_runtime) on a child of ours, read back by sched_getattr and
    /proc/<pid>/sched se.slice; the kernel clamps requests below 0.1 ms."""
    import subprocess

    child = subprocess.Popen(["sleep", "10"])
    try:
        base = knobs.sched_getattr(child.pid)
        if base["runtime_ns"] == 0:
            pytest.skip("kernel without per-task slices (Linux < 6.12)")
        knobs.sched_setattr(child.pid, "other", runtime_ns=300_000)
        assert knobs.sched_getattr(child.pid)["runtime_ns"] == 300_000
        if knobs.slice_of(child.pid) is not None:
            assert knobs.slice_of(child.pid) == 300_000
        knobs.sched_setattr(child.pid, "other", runtime_ns=20_000)
        assert knobs.sched_getattr(child.pid)["runtime_ns"] == 100_000
    finally:
        child.kill()
        child.wait()


def test_machine_description_and_busy_verdict():
    d = machine.describe()
    assert d["cpu"]["count"] == os.cpu_count() and d["kernel"]["release"]
    assert "cpufreq" in d["frequency"] and "v1_cpu_mounts" in d["cgroups"]
    quiet = [{"busy": 0.3, "lab": 0.28, "foreign": 0.02, "loadavg1": 1.0}] * 5
    noisy = [{"busy": 0.9, "lab": 0.3, "foreign": 0.6, "loadavg1": 5.0}] * 5
    assert machine.summarize_samples(quiet)["busy"] is False
    assert machine.summarize_samples(noisy)["busy"] is True


def test_sipp_counts_reader(tmp_path):
    # header and rows as SIPp 3.6 -trace_counts writes them (uac_poisson.xml with the 503 branch)
    (tmp_path / "uac_poisson_1234_counts.csv").write_text(
        "CurrentTime;ElapsedTime;0_Pause_Sessions;1_INVITE_Sent;1_INVITE_Retrans;2_100_Recv;"
        "3_503_Recv;3_503_Unexp;4_180_Recv;5_200_Recv;9_BYE_Sent;9_BYE_Retrans;10_200_Recv;\n"
        "2026-11-23\t17:32:58.4\t1.4;00:00:00:003000;0;0;0;0;0;0;0;0;0;0;0;\n"
        "2026-11-23\t17:32:59.9\t1.9;00:00:01:509000;0;50;7;50;12;0;38;38;38;2;38;\n")
    c = sipp.read_counts(tmp_path, "uac")
    assert sipp.count_of(c, "503", "Recv") == 12 and sipp.count_of(c, "200", "Recv") == 76
    assert sipp.count_of(c, "INVITE", "Retrans") == 7 and sipp.read_counts(tmp_path, "uas") == {}


def test_uac_scenarios_have_the_503_branch():
    import xml.etree.ElementTree as ET

    for name in ("uac.xml", "uac_poisson.xml"):
        root = ET.parse(Path(sipp.__file__).with_name(name)).getroot()
        recv503 = [e for e in root if e.tag == "recv" and e.get("response") == "503"]
        labels = {e.get("id") for e in root if e.tag == "label"}
        assert recv503 and recv503[0].get("next") == "rejected" and {"rejected", "done"} <= labels


@pytest.mark.parametrize("guard", ["none", "ratelimit", "pike"])
def test_guarded_config_is_accepted_by_kamailio(guard, tmp_path):
    import shutil
    import subprocess

    text = kamailio.render_config(kamailio.ProxyConfig(guard=guard, guard_cps=100, absorb_early=True,
                                                       retransmissions=False), tmp_path)
    assert "@@" not in text and ("retr_timer1" in text)
    if guard != "none":
        assert "503" in text and "Retry-After: 5" in text and f'"{guard}.so"' in text
    if not shutil.which("kamailio"):
        pytest.skip("kamailio not installed")
    p = tmp_path / "k.cfg"
    p.write_text(text)
    r = subprocess.run(["kamailio", "-c", "-f", str(p)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr[-500:]


# ---- the long recording, once made (datasets/lab/long; SIPPERF_LAB_LONG points elsewhere) -----

LONG = Path(os.environ.get("SIPPERF_LAB_LONG", DS / "long"))
needs_long = pytest.mark.skipif(not (LONG / "runs.csv").exists(),
                                reason=f"{LONG} not recorded (datasets/lab/record.py --plan full)")


@needs_long
def test_long_points_obey_their_stopping_rule():
    pts = LD.load_points(LONG)
    assert pts["run_id"].is_unique
    for _, p in pts.iterrows():
        if p["stop_reason"] == "ci":
            assert p["sojourn_ci_rel"] <= p["ci_target"] + 1e-12 and p["calls_offered"] >= p["min_calls"], p["run_id"]
        elif p["stop_reason"] == "cap_calls":
            assert p["calls_offered"] >= p["max_calls"], p["run_id"]
        elif p["stop_reason"] == "cap_time":
            assert p["load_seconds"] >= p["max_load_s"], p["run_id"]
        else:
            assert p["stop_reason"] in ("fixed", "no_sojourn", "ingest_failed"), p["run_id"]
        if p["series"] == "workers" and not p["pilot"]:
            assert p["calls_offered"] >= 20000, p["run_id"]
        assert p["tuning_restored"], p["run_id"]
        # every point was taken on an idle machine, or says it was not
        assert (not p["machine_busy"]) or p["forced"], p["run_id"]


@needs_long
def test_long_histograms_and_components_agree():
    comp = LD.load_components(LONG)
    h = pd.read_parquet(LONG / "histograms.parquet")
    tot = h.astype({"run_id": object, "msg_type": object, "component": object}).groupby(
        ["run_id", "msg_type", "component"])["count"].sum()
    c = comp.astype({"msg_type": str}).set_index(["run_id", "msg_type", "component"])["n"]
    assert dict(tot) == {k: int(v) for k, v in c.items()}
    assert h["bin"].between(0, LD.HIST_BINS + 1).all()
    # the ALL group is the sum of the message types (every steady message has one type)
    for (rid, comp_name), g in comp.groupby(["run_id", "component"]):
        allrow = g[g["msg_type"] == "ALL"]["n"].sum()
        assert allrow == g[g["msg_type"] != "ALL"]["n"].sum(), (rid, comp_name)
    # the histogram median is within one bin of the exact one
    for _, r in comp[(comp["msg_type"] == "ALL") & (comp["component"] == "sojourn")].iterrows():
        hh = LD.load_histograms(LONG, r["run_id"])
        hh = hh[(hh["msg_type"] == "ALL") & (hh["component"] == "sojourn")]
        est = LD.hist_quantile_us(hh, 0.5)
        assert abs(np.log10(est / r["p50_us"])) <= 1.01 / LD.HIST_PER_DECADE, r["run_id"]


@needs_long
def test_long_knees_are_bracketed_by_their_probes():
    knees = pd.read_csv(LONG / "knees.csv")
    probes = pd.read_csv(LONG / "probes.csv")
    for _, k in knees[knees["knee_cps"].notna()].iterrows():
        p = probes[probes["workers"] == k["workers"]]
        below = p[p["rate_cps"] == k["rate_below"]]["pdr"]
        above = p[p["rate_cps"] == k["rate_above"]]["pdr"]
        assert (below < 0.01).any() and (above >= 0.01).any()
        assert k["rate_below"] <= k["knee_cps"] <= k["rate_above"] or k.get("note") == "non-monotone probes"


@needs_long
def test_long_overload_table():
    path = LONG / "overload.csv"
    if not path.exists():
        pytest.skip("no overload points yet")
    o = pd.read_csv(path)
    assert set(o["guard"]) <= {"none", "ratelimit", "pike"}
    assert (o["rejected_503"][o["guard"] == "none"] == 0).all()
    assert (o["goodput_cps"] <= o["rate_cps"] * 1.05).all()
    assert ((o["successful_calls"] + o["failed_calls"]) <= o["calls_offered"]).all()


def test_a_failed_join_keeps_the_round_counters(fake_lab, tmp_path, monkeypatch):
    """A round whose join raises is counted (calls, SIPp and socket counters) but adds no
    delays; the point goes on with new rounds and says how many joins failed."""
    from sipperf.ingest.lab_runs import run as lab_run
    from sipperf.lab.run import LabConfig
    from sipperf.timeline import TimelineError

    real = lab_run.read_run
    calls = {"n": 0}

    def flaky(rd, run_id=None):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimelineError("row 3901: t_dep < t_sip_in (negative interval -2394172 ns)")
        return real(rd, run_id)

    monkeypatch.setattr(lab_run, "read_run", flaky)
    spec = longrun.PointSpec("p3", "workers", LabConfig(rate_cps=500, calls=1), min_calls=500,
                             round_calls=500, max_calls=3000, ci_target=0.05)
    res = longrun.record_point(spec, tmp_path / "ds", tmp_path / "scratch", log=lambda s: None)
    s = res["summary"]
    assert s["ingest_failed_rounds"] == 1 and s["stop_reason"] == "ci"
    assert s["calls_offered"] == sum(fake_lab) and s["rounds"] >= 2
    assert (tmp_path / "scratch" / "failed" / "p3-r0" / "meta.json").exists()
    assert res["meta"]["rounds"][0]["ingest_error"].startswith("TimelineError")


@needs_long
def test_long_worker_series_crosses_every_knee():
    """Every worker count of the series has points on both sides of its 1 %-drop knee, so the
    knee the chapters use is interpolated, never censored."""
    from sipperf.fit import knee_measured

    pts = LD.load_points(LONG)
    ws = pts[pts["series"] == "workers"]
    if ws.empty:
        pytest.skip("no worker series yet")
    assert set(ws["workers"]) >= {1, 2, 4, 8}
    for c, g in ws.groupby("workers"):
        assert (g["pdr"] < 0.01).any() and (g["pdr"] >= 0.01).any(), c
        assert knee_measured(g["rate_cps"], g["pdr"])["censored"] == "", c


def test_past_knee_points_go_further_out():
    """The extra points of a sweep that never reached 1 % drops: beyond the last fraction, on
    the rate grid, each further out than the one before, with their own seeds and ids."""
    params = plan.PLANS["full"]
    ps = [plan.past_knee_point(params, 8, 2746.0, k) for k in (1, 2, 3)]
    rates = [p.cfg.rate_cps for p in ps]
    assert rates[0] > params.fractions[-1] * 2746.0 and rates == sorted(set(rates))
    assert all(r % 50 == 0 for r in rates)
    assert len({p.run_id for p in ps}) == 3 and len({p.cfg.seed for p in ps}) == 3
    assert all(p.label["past_knee"] == k for p, k in zip(ps, (1, 2, 3)))
    assert {p.run_id for p in ps}.isdisjoint(p.run_id for p in plan.worker_points(params, 8, 2746.0))
