"""The verdict an engineer can trust (issue 21): honest knee intervals, utilisation from CPU
accounting, no saturation without evidence, no headline the data cannot carry, refuted models
said so, each final response class on its own, progress bars only on a terminal."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.cli import main

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "datasets" / "lab" / "runs"
FIX = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def top_sweep(tmp_path_factory):
    """The lab's short sweep around its knee: one run of 1,500 calls or fewer per rate."""
    from sipperf.report import build_report

    out = tmp_path_factory.mktemp("top")
    return build_report([LAB / r for r in ("rate-0300", "rate-0900", "rate-1500", "rate-2000", "rate-3000")],
                        out, n_boot=20, n_slowest=0, html=True)


def test_a_short_coarse_sweep_gives_an_honest_interval(top_sweep):
    """The issue's first complaint: ±0.6 % around a knee interpolated between two runs of about one
    second, 500 calls/s apart.  Now: the interval spans at least the gap between the runs around
    1 % (1,544 and 2,044 calls/s measured), the verdict says "between" and what to run next, and
    the headroom and C₁,₁ carry the same interval."""
    rep = top_sweep
    n = rep.verdict["numbers"]
    runs = {r.label: r.measure for r in rep.runs}
    below, above = runs["rate-1500"].lam_cps, runs["rate-2000"].lam_cps
    lo, hi = n["knee_measured_ci95"]
    assert not n["knee_located"]
    assert lo <= below and hi >= above
    head = " ".join(rep.verdict["headline"])
    assert f"between {lo:,.0f} and {hi:,.0f} calls/s" in head and "Next: run" in head
    k = rep.fit.knees[0]
    assert all(below < x < above for x in k["measured_next_rates"])
    hci = n["headroom_ci95"]
    ref = n["headroom_from_cps"]
    assert hci == pytest.approx([lo / ref - 1, hi / ref - 1])
    c11 = rep.fit.constants["c11_cps"]
    assert c11["source"] == "measured" and c11["ci95"] == pytest.approx([lo, hi])
    # the HTML shows the interval, not a point, on the first screen
    html = (rep.html).read_text()
    assert f"{lo:,.0f}–{hi:,.0f} calls/s" in html


def test_a_refuted_drop_model_is_said_and_not_used(top_sweep):
    """M/M/1/K with the light-load service time predicts large drops where the 1,500-calls/s run
    dropped none: refuted, with the size of the miss, and not used for the knee, the headroom or
    C₁,₁ (which come from the measured knee)."""
    rep = top_sweep
    k = rep.fit.knees[0]
    assert k["model_refuted"] and not k["model_usable"]
    w = k["model_check"]["worst"]
    assert abs(w["pred"] - w["meas"]) >= 0.005
    head = " ".join(rep.verdict["headline"])
    assert "is refuted by the runs" in head and f"{100 * w['pred']:.2g} % drops" in head
    assert rep.verdict["numbers"]["headroom_knee_source"].startswith("measured")
    # the capacity rule is a prediction, with the rule's own error on the lab's long recording
    from sipperf.report.runs import lab_rule_miss

    miss = lab_rule_miss()
    assert miss is not None and miss["ratio"] > 2
    assert f"{miss['ratio']:.1f}×" in head and "model prediction" in head and "not a capacity" in head
    cap = pd.read_csv(rep.html.parent / "runs.csv")
    assert len(cap)


def _md2_timeline(lam_pps: float, s_us: float, n_msgs: int, seed: int, run_id: str) -> pd.DataFrame:
    """SYNTHETIC: a proxy with TWO workers (M/D/2, FIFO): Poisson message arrivals at ``lam_pps``,
    each message held for ``s_us`` µs by the first free worker; the messages cycle through the
    six call-flow types (a new call every six messages)."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / lam_pps, n_msgs))
    free = np.zeros(2)
    dep = np.empty(n_msgs)
    for i, a in enumerate(arr):
        k = int(np.argmin(free))
        free[k] = max(a, free[k]) + s_us * 1e-6
        dep[i] = free[k]
    flow = [("request", "INVITE", None, "INVITE"), ("response", None, 180, "INVITE"),
            ("response", None, 200, "INVITE"), ("request", "ACK", None, "ACK"), ("request", "BYE", None, "BYE"),
            ("response", None, 200, "BYE")]
    rows = []
    t0 = 1_700_000_000_000_000_000
    for i in range(n_msgs):
        kind, method, status, cm = flow[i % 6]
        rows.append({"run_id": run_id, "call_id": f"{run_id}-c{i // 6}", "cseq": 1 if cm in ("INVITE", "ACK") else 2,
                     "cseq_method": cm, "kind": kind, "method": method, "status": status,
                     "src": "10.0.0.1:5060", "dst": "10.0.0.2:5060",
                     "t_arr": t0 + int(arr[i] * 1e9), "t_dep": t0 + int(dep[i] * 1e9), "dropped": False})
    df = pd.DataFrame(rows)
    df["status"] = df["status"].astype("Int64")
    return df


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """SYNTHETIC runs of a two-worker proxy, as tidy CSV timelines.

    ``md2-*``: 1.4 ms per message at 100 and 1,000 messages/s: each worker 70 % busy at the
    higher rate.  ``wake-*``: 1 ms of work per message, but at light load each message also waits
    1.5 ms for its sleeping worker to be woken (held in the sojourn, not work): read off the light
    run, the service demand is 2.5 ms and 1,000 messages/s look like ρ = 1.25 per worker, while
    the workers are 50 % busy and the queue does not grow."""
    d = tmp_path_factory.mktemp("md2")
    _md2_timeline(100.0, 1400.0, 3_000, 1, "md2-light").to_csv(d / "md2-light.csv", index=False)
    _md2_timeline(1000.0, 1400.0, 30_000, 2, "md2-heavy").to_csv(d / "md2-heavy.csv", index=False)
    _md2_timeline(100.0, 2500.0, 3_000, 3, "wake-light").to_csv(d / "wake-light.csv", index=False)
    _md2_timeline(1000.0, 1000.0, 30_000, 4, "wake-heavy").to_csv(d / "wake-heavy.csv", index=False)
    return d


def test_utilisation_per_worker_from_the_sojourn(two_workers, tmp_path):
    """With --threads 2 the utilisation per worker read off the sojourn is the planted 0.7 within
    10 %, and labelled an upper bound; without a worker count the report says it assumed one."""
    from sipperf.report import build_report

    ins = [two_workers / "md2-light.csv", two_workers / "md2-heavy.csv"]
    two = build_report(ins, tmp_path / "two", n_boot=0, n_slowest=0, html=False, threads=2)
    n2 = two.verdict["numbers"]
    assert n2["top_run"] == "md2-heavy" and n2["rho_upper_bound"] and not n2.get("threads_assumed")
    assert n2["top_rho"] == pytest.approx(0.7, rel=0.10)
    assert "at most" in " ".join(two.verdict["headline"])
    one = build_report(ins, tmp_path / "one", n_boot=0, n_slowest=0, html=False)
    assert one.verdict["numbers"]["threads_assumed"]
    assert "assumed one worker" in " ".join(one.verdict["headline"])


def test_no_saturation_without_its_evidence(two_workers, tmp_path):
    """The issue's second lab: the sojourn-based estimate says ρ = 1.25 per worker, but the run's
    queue does not grow, nothing is dropped or retransmitted: the verdict says the proxy was NOT
    saturated and lists no saturated run."""
    from sipperf.report import build_report

    ins = [two_workers / "wake-light.csv", two_workers / "wake-heavy.csv"]
    rep = build_report(ins, tmp_path / "w", n_boot=0, n_slowest=0, html=False, threads=2)
    heavy = next(r.measure for r in rep.runs if r.label == "wake-heavy")
    assert heavy.queue_growing is False and heavy.dropped == 0 and heavy.retransmissions == 0
    n = rep.verdict["numbers"]
    head = " ".join(rep.verdict["headline"])
    assert n["top_run"] == "wake-heavy" and n["top_rho"] == pytest.approx(1.25, rel=0.1)
    assert n.get("top_rho_contradicted") and "NOT saturated" in head
    assert "past saturation" not in head and not n["saturated_runs"]


def test_utilisation_and_capacity_from_a_cpu_file(two_workers, tmp_path):
    """--cpu FILE on the same runs: rows naming a run give its utilisation (a measurement, 50 %
    per worker where the sojourn said 125 %); rows of light-load rates give the CPU per call and the
    capacity by the utilisation law, checked against the closed form on the planted line
    (SYNTHETIC CPU numbers: U = 0.02 + 6 ms·λ, λ in calls/s: 1 ms per message, 6 per call)."""
    cpu = tmp_path / "cpu.csv"
    pd.DataFrame({"run": ["wake-light", "wake-heavy", "", ""], "rate_cps": ["", "", 50, 120],
                  "cpu_s": [(0.02 + 0.1) * 30, (0.02 + 1.0) * 30, (0.02 + 0.006 * 50) * 10, (0.02 + 0.006 * 120) * 10],
                  "window_s": [30, 30, 10, 10], "threads": [2, 2, 2, 2]}).to_csv(cpu, index=False)
    out = tmp_path / "rep"
    ins = [str(two_workers / "wake-light.csv"), str(two_workers / "wake-heavy.csv")]
    assert main(["report", *ins, "--out", str(out), "--threads", "2", "--cores", "2", "--cpu", str(cpu),
                 "--bootstrap", "0", "--slowest", "0"]) == 0
    rep = json.loads((out / "report.json").read_text())
    n = rep["verdict"]["numbers"]
    assert n["rho_source"] == "cpu" and not n["rho_upper_bound"]
    assert n["top_rho"] == pytest.approx(1.02 / 2)
    fj = json.loads((out / "fit.json").read_text())
    law = fj["cpu"][0]
    d, u0 = law["demand_s"], law["idle_share"]
    # the two runs' rates are measured (about 16.7 and 167 calls/s): the line is the planted one to 2 %
    assert d == pytest.approx(0.006, rel=0.02) and u0 == pytest.approx(0.02, abs=0.01)
    assert law["cpus"] == 2 and law["capacity_cps"] == pytest.approx((2 - u0) / d)
    head = " ".join(rep["verdict"]["headline"])
    assert "CPU accounting" in head and "utilisation law" in head
    # the sojourn-based service time counts the wake-up as work: it is shown to exceed the CPU time
    assert n["outside_traced_fraction"] < 0 and "counts waiting as work" in head
    runs = pd.read_csv(out / "runs.csv").set_index("run")
    assert runs.loc["wake-heavy", "utilisation_from"] == "CPU accounting"
    assert runs.loc["wake-heavy", "utilisation"] == pytest.approx(0.51)
    # one ρ per run: the verdict's is the table's, and the model's λE[X] is not called ρ anywhere
    assert runs.loc[n["top_run"], "utilisation"] == pytest.approx(n["top_rho"])
    assert not [c for c in runs.columns if c.startswith("rho")]
    assert runs.loc["wake-heavy", "model_load"] > 2 * runs.loc["wake-heavy", "utilisation"]   # the wake-up
    html = (out / "index.html").read_text()
    assert html.count("<th>utilisation ρ</th>") == 1 and "ρ (model)" not in html and "model load λE[X]" in html
    # a row naming a run that is not there, a bad number, a missing file: exit 2 naming where
    pd.DataFrame({"run": ["nosuch"], "cpu_share": [0.5]}).to_csv(tmp_path / "bad.csv", index=False)
    pd.DataFrame({"rate_cps": [10, "x"], "cpu_share": [0.1, 0.2]}).to_csv(tmp_path / "bad2.csv", index=False)
    for bad, where in ((tmp_path / "bad.csv", "line 2"), (tmp_path / "bad2.csv", "line 3"),
                       (tmp_path / "missing.csv", "--cpu")):
        p = subprocess.run([sys.executable, "-m", "sipperf.cli", "report", ins[0], "--out",
                            str(tmp_path / "o"), "--cpu", str(bad), "--bootstrap", "0"], capture_output=True, text=True)
        assert p.returncode == 2 and where in p.stderr and "Traceback" not in p.stderr, p.stderr
    # a file collected over more runs than are reported: the others are left out, and said so
    pd.DataFrame({"run": ["wake-light", "r-not-given", "bisect-2"], "cpu_share": [0.24, 0.9, 1.1]}).to_csv(
        tmp_path / "more.csv", index=False)
    o = tmp_path / "more"
    assert main(["report", ins[0], "--out", str(o), "--cpu", str(tmp_path / "more.csv"), "--bootstrap", "0",
                 "--slowest", "0"]) == 0
    rep = json.loads((o / "report.json").read_text())
    left = [w for w in rep["verdict"]["warnings"] if "name runs not given here" in w]
    assert len(left) == 1 and "2 row(s)" in left[0] and "r-not-given, bisect-2" in left[0]
    assert pd.read_csv(o / "runs.csv").set_index("run").loc["wake-light", "utilisation_from"] == "CPU accounting"


def test_meta_json_cpu_record_is_read(tmp_path):
    """A run directory whose meta.json holds ``proxy_cpu`` (what sipperf lab records: cpu_s over
    window_s, all the proxy's processes) gives the run's CPU share."""
    import shutil

    from sipperf.report.runs import run_meta

    d = tmp_path / "rate-0300"
    shutil.copytree(LAB / "rate-0300", d)
    m = json.loads((d / "meta.json").read_text())
    m["proxy_cpu"] = {"cpu_s": 3.0, "window_s": 12.0, "processes": 9, "source": "/proc/<pid>/stat"}
    m["generator_cpu"] = {"cpu_s": 1.2, "window_s": 12.0, "processes": 2, "source": "/proc/<pid>/stat"}
    (d / "meta.json").write_text(json.dumps(m))
    meta = run_meta([str(d)])
    assert meta["proxy_cpu_share"] == pytest.approx(0.25) and meta["generator_cpu_share"] == pytest.approx(0.1)
    m["proxy_cpu"] = {"cpu_s": "n/a", "window_s": 0}
    (d / "meta.json").write_text(json.dumps(m))
    assert "proxy_cpu_share" not in run_meta([str(d)])


def test_one_call_carries_no_headline_number(tmp_path):
    """The issue's item 4: one proxy capture of a single call.  The first headline says what the
    data cannot carry and what to record; no knee, headroom, utilisation or C₁,₁ is headlined; the
    model's knee, if shown, is labelled a model prediction from that one run."""
    out = tmp_path / "one"
    assert main(["report", str(FIX / "trying1.pcapng"), "--out", str(out), "--bootstrap", "20", "--slowest", "0"]) == 0
    rep = json.loads((out / "report.json").read_text())
    v = rep["verdict"]
    assert len(v["headline"]) == 1 and v["headline"][0].startswith("These data cannot carry")
    assert "record next" in v["headline"][0]
    assert "c11_cps" not in json.loads((out / "fit.json").read_text()).get("constants", {})
    assert not any(k.startswith("headroom") for k in v["numbers"])
    assert any(s.startswith("Model prediction from this one run") for s in v["cannot"])
    html = (out / "index.html").read_text()
    assert "1 %-drop knee, model" not in html and "C₁,₁ fitted" not in html


def test_each_final_response_class_has_its_own_row(tmp_path):
    """486 Busy Here (and the 100 Trying) are not lumped into OTHER in the per-type table."""
    out = tmp_path / "busy"
    assert main(["report", str(FIX / "busy.pcapng"), "--out", str(out), "--bootstrap", "0", "--slowest", "0"]) == 0
    ci = pd.read_csv(out / "components_ci.csv")
    types = set(ci["msg_type"])
    assert "486-INVITE" in types and "OTHER" not in types
    from sipperf.calls import message_class
    from sipperf.ingest import load

    tl, _ = load(FIX / "busy.pcapng")
    cls = message_class(tl)
    # the schema's msg_type is untouched; the class splits exactly its OTHER rows
    assert (cls[tl["msg_type"] != "OTHER"] == tl["msg_type"][tl["msg_type"] != "OTHER"]).all()
    st = pd.to_numeric(tl["status"], errors="coerce")
    assert ((cls == "486-INVITE") == ((st == 486) & (tl["cseq_method"] == "INVITE")).fillna(False)).all()


def _big_pcap(path: Path, min_bytes: int) -> Path:
    """A capture of at least ``min_bytes``: the packets of the real fixture udp4.pcapng repeated
    (a derivation of a real capture; only its size matters here)."""
    from capgen import records, write_pcap

    recs = records(FIX / "udp4.pcapng")
    size = sum(len(d) + 16 for _, _, d in recs)
    frames = [d for _, _, d in recs] * (min_bytes // size + 1)
    return write_pcap(path, frames)


def test_progress_bar_only_on_a_terminal(tmp_path):
    """A capture above the bar's threshold (50 MB) read with stderr to a pipe shows no bar; the
    same with stderr on a terminal (a pseudo-terminal) does."""
    big = _big_pcap(tmp_path / "big.pcap", 51_000_000)
    code = f"from sipperf.ingest.capture.fast import read_packets; read_packets({str(big)!r})"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "it/s" not in p.stderr and "B/s" not in p.stderr and "%|" not in p.stderr
    master, slave = pty.openpty()
    # a terminal 80 columns wide (a fresh pseudo-terminal has 0: tqdm would draw nothing on it)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    q = subprocess.Popen([sys.executable, "-c", code], stderr=slave, stdout=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    q.wait(timeout=600)
    os.close(master)
    tty = b"".join(chunks).decode(errors="replace")
    assert q.returncode == 0 and ("B/s" in tty or "%|" in tty), tty[-500:]


# --------------------------------------------------------------------------------------------
# The CPU ceiling (issue 39, item 2): fitted only below saturation, kept unless a measurement
# overturns it.  SYNTHETIC CPU numbers on a proxy with one CPU: 1.0 ms per call at light load,
# falling to 0.55 ms per call once the CPU is full (batching), as the TCP lab measured.
# --------------------------------------------------------------------------------------------

def _ri(run, cps, share, **kw):
    from sipperf.fit import RunInput

    return RunInput(run=run, lam_pps=6 * cps, lam_cps=cps, q_kind="sojourn", q_mean_us=100.0,
                    cpu_share=share, threads=4, cores=1, **kw)


def test_the_cpu_line_rests_on_runs_below_full_cpus():
    from sipperf.fit import CPU_FULL, _cpu_fits

    runs = [_ri("r200", 200, 0.02 + 0.001 * 200), _ri("r400", 400, 0.02 + 0.001 * 400),
            _ri("r600", 600, 0.02 + 0.001 * 600), _ri("r1300", 1300, 0.97), _ri("r1750", 1750, 0.99),
            _ri("r900-tcp", 900, 0.5, pushed_back=True)]
    law = _cpu_fits(runs, [], cores=1)[0]
    assert law["cpus"] == 1 and sorted(law["runs"]) == ["r200", "r400", "r600"]
    assert set(law["left_out"]) == {"r1300", "r1750", "r900-tcp"}
    # the planted line: D = 1 ms per call, U0 = 0.02, so full at (1 - 0.02)/0.001 = 980 calls/s
    assert law["demand_s"] == pytest.approx(0.001) and law["capacity_cps"] == pytest.approx(980)
    assert [f["run"] for f in law["full"]] == ["r1300", "r1750"] and law["full_from_cps"] == 1300
    assert all(f["cpu_share"] >= CPU_FULL for f in law["full"])


@pytest.mark.parametrize("heavy_share, overturned", [(0.96, False), (0.60, True)])
def test_the_cpu_ceiling_is_kept_unless_a_measurement_overturns_it(heavy_share, overturned):
    """Runs carried 1,750 calls/s under 1 % loss, above the line's 980.  With the CPU measured full
    there, the line stands as a lower bound and the ceiling is where the CPUs were full; with the
    CPU measured at 60 % there, the measurement overturns the line (work not charged to it)."""
    from types import SimpleNamespace

    from sipperf.fit import _cpu_fits
    from sipperf.report.verdict import _cpu_ceiling_against_knee

    runs = [_ri("r200", 200, 0.22), _ri("r400", 400, 0.42), _ri("r600", 600, 0.62),
            _ri("r1750", 1750, heavy_share)]
    fit = SimpleNamespace(cpu=_cpu_fits(runs, [], cores=1))
    measures = [SimpleNamespace(label=r.run, lam_cps=r.lam_cps, cpu_share=r.cpu_share) for r in runs]
    head, numbers = [], {}
    _cpu_ceiling_against_knee(fit, 4, measures, 1700.0, 980.0, "failed calls", head, numbers)
    text = " ".join(head)
    assert numbers["cpu_capacity_contradicted"] is overturned
    assert ("not charged to its processes" in text) is overturned
    if not overturned:
        assert numbers["cpu_full_from_cps"] == 1750 and "lower bound on the capacity" in text
        assert "fell with the load" in text   # 1.1 ms per call at 200 calls/s, 0.55 ms at 1,750


def test_the_measured_utilisation_needs_no_model(two_workers, tmp_path, monkeypatch):
    """If the model fit fails (here made to raise), each run's utilisation from the CPU accounting is
    still in runs.csv: a measurement does not wait for a model; the failure is named."""
    import sipperf.fit as fitmod

    def broken(*a, **k):
        raise ValueError("planted failure")

    monkeypatch.setattr(fitmod, "fit_all", broken)
    cpu = tmp_path / "cpu.csv"
    pd.DataFrame({"run": ["wake-light", "wake-heavy"], "cpu_s": [0.12 * 30, 1.02 * 30],
                  "window_s": [30, 30], "threads": [2, 2]}).to_csv(cpu, index=False)
    out = tmp_path / "rep"
    ins = [str(two_workers / "wake-light.csv"), str(two_workers / "wake-heavy.csv")]
    assert main(["report", *ins, "--out", str(out), "--threads", "2", "--cores", "2", "--cpu", str(cpu),
                 "--bootstrap", "0", "--slowest", "0"]) == 0
    assert "planted failure" in json.loads((out / "report.json").read_text())["fit_error"]
    runs = pd.read_csv(out / "runs.csv").set_index("run")
    assert runs.loc["wake-heavy", "utilisation_from"] == "CPU accounting"
    assert runs.loc["wake-heavy", "utilisation"] == pytest.approx(1.02 / 2)
    assert runs.loc["wake-light", "utilisation"] == pytest.approx(0.12 / 2)


def test_a_run_the_proxy_held_back_with_its_cpu_full_is_past_the_knee():
    """Offered 300 calls/s, 205 reached the proxy, its CPU 91 % busy (a TLS handshake per call on
    one core): no call failed on the wire, yet the run is past the knee; the same shortfall with the
    proxy's CPU a third busy is the generator's, and does not move the knee."""
    from types import SimpleNamespace

    from sipperf.report.runs import _held_back

    def run(lam, cpu):
        return SimpleNamespace(offered_cps=300.0, lam_cps=lam, cpu_share=cpu, cpus=1, held_back=False, warnings=[],
                               fit_input=SimpleNamespace(c=2, pdr=0.0, pushed_back=False))

    full = run(205.0, 0.91)
    _held_back(full)
    assert full.held_back and full.fit_input.pushed_back
    assert abs(full.fit_input.pdr - (1 - 205 / 300)) < 1e-12 and "held the load back" in full.warnings[0]
    for lam, cpu in ((205.0, 0.35), (290.0, 0.95)):       # the generator's shortfall; no shortfall
        r = run(lam, cpu)
        _held_back(r)
        assert not r.held_back and r.fit_input.pdr == 0.0 and not r.warnings
