"""`sipperf report` and `sipperf fit`: runs compared and never pooled, the --group-by rules, the
files written, what degrades how, and exit codes 0 / 2 with no traceback."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.cli import main

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "datasets" / "lab" / "runs"
FIX = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    rc = main(["report", str(LAB / "rate-0025"), str(LAB / "rate-0300"), str(LAB / "rate-2000"),
               "--out", str(out), "--bootstrap", "20", "--slowest", "1"])
    assert rc == 0
    return out


def test_runs_are_compared_not_pooled(sweep, tmp_path):
    runs = pd.read_csv(sweep / "runs.csv")
    assert runs["run"].tolist() == ["rate-0025", "rate-0300", "rate-2000"]
    comp = pd.read_csv(sweep / "components.csv")
    assert sorted(comp["run"].unique()) == ["rate-0025", "rate-0300", "rate-2000"]
    # each run's table is exactly what `sipperf analyze` gives for that run alone
    for r in ("rate-0025", "rate-2000"):
        assert main(["analyze", str(LAB / r), "--out", str(tmp_path / r), "--no-figures"]) == 0
        alone = pd.read_csv(tmp_path / r / "components.csv").set_index("msg_type")
        mine = comp[comp["run"] == r].set_index("msg_type")
        assert mine.loc["ALL", "sojourn_median"] == pytest.approx(alone.loc["ALL", "sojourn_median"])
        assert (sweep / "runs" / r / "calls.csv").is_file()
    # the runs really differ (a pooled mean would hide it): 25 vs 2000 calls/s
    p50 = runs.set_index("run")["sojourn_p50_us"]
    assert p50["rate-2000"] > 10 * p50["rate-0025"]
    # measured rates come from the data, not the file name
    rate = runs.set_index("run")["rate_cps"]
    assert 15 < rate["rate-0025"] < 35 and 1500 < rate["rate-2000"] < 2500


def test_files_and_fit_json(sweep):
    for f in ("index.html", "runs.csv", "components.csv", "calls.csv", "transactions.csv", "counts.csv",
              "components_ci.csv", "fit.json", "report.json"):
        assert (sweep / f).is_file(), f
    fj = json.loads((sweep / "fit.json").read_text())
    assert fj["format"] == "sipperf-fit-v1"
    svc = fj["constants"]["service_demand_us"]
    assert svc["runs"] == ["rate-0025"] and svc["ci95"][0] < svc["value"] < svc["ci95"][1]
    assert fj["knees"][0]["measured_censored"] == ""    # 300 (no drops) and 2000 (drops) bracket 1 %
    rep = json.loads((sweep / "report.json").read_text())
    assert rep["verdict"]["headline"] and all(r["account"]["balanced"] for r in rep["runs"])
    html = (sweep / "index.html").read_text()
    # plotly.js inlined: no script or style sheet fetched from anywhere (the browser test checks requests)
    assert "<script src=" not in html and "<link " not in html and "Plotly.newPlot" in html
    ci = pd.read_csv(sweep / "components_ci.csv")
    assert {"median_us", "p99_us", "ci95_hw_us"} <= set(ci.columns)


def test_model_reads_the_fit(sweep, capsys):
    fj = json.loads((sweep / "fit.json").read_text())
    cur = fj["ex1_curve"]
    lam = 2000.0
    assert main(["model", "mg1", "--fit", str(sweep / "fit.json"), "--lam", str(lam)]) == 0
    out = json.loads(capsys.readouterr().out)
    ex = np.interp(lam, cur["lam_pps"], cur["ex_us"]) * 1e-6
    scv = np.interp(lam, cur["lam_pps"], cur["scv"])
    w = lam * ex * ex * (1 + scv) / (2 * (1 - lam * ex))       # Pollaczek-Khinchine by hand
    assert out["W_us"] == pytest.approx(w * 1e6, rel=1e-9)
    assert main(["model", "capacity", "--p", "1", "--c", "2", "--fit", str(sweep / "fit.json")]) == 0
    cap = json.loads(capsys.readouterr().out)
    assert cap["capacity_cps"] == pytest.approx(4 * fj["constants"]["c11_cps"]["value"])
    # beta was not fitted (one worker only): two threads cannot be modelled, and it says so
    assert main(["model", "mmck", "--c", "2", "--lam", "5000", "--fit", str(sweep / "fit.json")]) == 2
    assert "no fitted beta" in capsys.readouterr().err


def _tidy_two_bursts(path: Path, gap_s: float, two_ids: bool) -> None:
    """SYNTHETIC: the synthetic thesis-format fixture twice, the copy shifted by ``gap_s``."""
    from sipperf.ingest import load

    tl, _ = load(FIX / "thesis_small.log")
    b = tl.copy()
    for c in ("t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"):
        b[c] = b[c] + int(gap_s * 1e9)
    b["call_id"] = "b-" + b["call_id"].astype(str)
    if two_ids:
        tl["run_id"], b["run_id"] = "first", "second"
    keep = ["run_id", "call_id", "cseq", "cseq_method", "kind", "method", "status", "src", "dst",
            "t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep", "dropped"]
    pd.concat([tl, b])[keep].to_csv(path, index=False)


def _runs(out: Path) -> list[str]:
    return pd.read_csv(out / "runs.csv")["run"].tolist()


def test_group_by_rules(tmp_path):
    f = tmp_path / "bursts.csv"
    _tidy_two_bursts(f, 60.0, two_ids=False)
    assert main(["report", str(f), "--out", str(tmp_path / "a"), "--bootstrap", "0", "--slowest", "0"]) == 0
    assert len(_runs(tmp_path / "a")) == 1
    assert main(["report", str(f), "--out", str(tmp_path / "g"), "--group-by", "gap:10", "--bootstrap", "0",
                 "--slowest", "0"]) == 0
    assert _runs(tmp_path / "g") == ["all inputs part 1", "all inputs part 2"] or len(_runs(tmp_path / "g")) == 2
    f2 = tmp_path / "ids.csv"
    _tidy_two_bursts(f2, 5.0, two_ids=True)
    assert main(["report", str(f2), "--out", str(tmp_path / "i"), "--bootstrap", "0", "--slowest", "0"]) == 0
    assert sorted(r.split("/")[-1] for r in _runs(tmp_path / "i")) == ["first", "second"]
    ins = [str(LAB / "rate-0025"), str(LAB / "workers-1-r0100"), str(LAB / "workers-2-r0100")]
    assert main(["report", *ins, "--out", str(tmp_path / "n"), "--group-by", "none", "--bootstrap", "0",
                 "--slowest", "0"]) == 0
    assert _runs(tmp_path / "n") == ["all inputs"]
    assert main(["report", *ins, "--out", str(tmp_path / "r"), "--group-by", r"regex:(rate|workers)-",
                 "--bootstrap", "0", "--slowest", "0"]) == 0
    assert sorted(_runs(tmp_path / "r")) == ["rate", "workers"]
    # worker counts come from the lab runs' metadata; a group that pools 1 and 2 workers has none
    runs = pd.read_csv(tmp_path / "r" / "runs.csv").set_index("run")
    assert runs.loc["rate", "threads"] == 1 and pd.isna(runs.loc["workers", "threads"])
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    w = next(r for r in rep["runs"] if r["run"] == "workers")["warnings"]
    assert any("configurations differ (threads)" in x for x in w)


def test_endpoint_capture_degrades_to_call_metrics(tmp_path, capsys):
    assert main(["report", str(FIX / "endpoint.pcapng"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no proxy" in out
    fj = json.loads((tmp_path / "fit.json").read_text())
    assert "error" in fj and "constants" not in fj
    calls = pd.read_csv(tmp_path / "calls.csv")
    assert "SRD_successful" in set(calls["metric"])
    html = (tmp_path / "index.html").read_text()
    assert "cannot tell" in html.lower() or "cannot" in html


def test_one_short_run_says_what_it_cannot_conclude(tmp_path, capsys):
    assert main(["report", str(FIX / "thesis_small.log"), "--out", str(tmp_path), "--bootstrap", "20"]) == 0
    rep = json.loads((tmp_path / "report.json").read_text())
    text = " ".join(rep["verdict"]["cannot"])
    assert "One run only" in text and "α(λ) is not fitted" in text


def test_unusable_input_exit_2_without_traceback(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nthis is not SIP\n")
    cases = [
        [str(junk), "--out", str(tmp_path / "o1")],
        [str(LAB / "rate-0025"), "--out", str(junk)],                       # --out is a file
        [str(LAB / "rate-0025"), "--out", str(tmp_path / "o2"), "--group-by", "regex:("],
        [str(LAB / "rate-0025"), "--out", str(tmp_path / "o3"), "--group-by", "gap:-1"],
        [str(FIX / "udp4.pcapng"), "--out", str(tmp_path / "o4"), "--proxy", "not-an-address"],
        [str(LAB / "rate-0025"), "--out", str(tmp_path / "o5"), "--threads", "0"],
        [str(tmp_path / "missing.pcap"), "--out", str(tmp_path / "o6")],
    ]
    for args in cases:
        p = subprocess.run([sys.executable, "-m", "sipperf.cli", "report", *args], capture_output=True, text=True)
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.strip(), (args, p.stderr)


def test_a_bad_input_among_good_ones_is_listed(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("not a log\n")
    assert main(["report", str(LAB / "rate-0025"), str(junk), "--out", str(tmp_path / "o"), "--bootstrap", "0",
                 "--slowest", "0"]) == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [f["run"] for f in rep["failed_inputs"]] == ["junk"]
    assert "junk" in (tmp_path / "o" / "index.html").read_text()
    # --strict: the bad input stops everything
    assert main(["report", str(LAB / "rate-0025"), str(junk), "--out", str(tmp_path / "s"), "--strict"]) == 2


def test_fit_command_prints_json(capsys):
    assert main(["fit", str(LAB / "rate-0025"), str(LAB / "rate-0150"), str(LAB / "rate-0300"),
                 "--bootstrap", "20"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "sipperf-fit-v1"
    assert set(d["constants"]) >= {"service_demand_us", "b_us", "alpha"}
    assert d["constants"]["alpha"]["runs"][0] == "rate-0025"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["defaults", "proxy"])
def test_notebook_runs_from_the_repo_root(tmp_path, case):
    """notebooks/analyze_your_logs.md with papermill from the repository root: with its defaults
    (the engineer's three plain captures and the collected CPU file), and on a capture with PROXY
    set and no CPU file."""
    pytest.importorskip("papermill")
    nb = tmp_path / "nb.ipynb"
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(nb),
                    str(ROOT / "notebooks" / "analyze_your_logs.md")], check=True, capture_output=True)
    args = ["-p", "OUT_DIR", str(tmp_path / "res"), "-p", "BOOTSTRAP", "20"]
    if case == "proxy":
        args += ["-p", "LOG_PATH", "tests/fixtures/udp4.pcapng", "-p", "PROXY", "127.0.0.1:15060",
                 "-y", "CPU_FILE: null\nTHREADS: null"]
    r = subprocess.run([sys.executable, "-m", "papermill", str(nb), str(tmp_path / "out.ipynb"), *args,
                        "-k", "python3"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "res" / "runs.csv")
    if case == "defaults":
        assert runs["run"].tolist() == ["r0300", "r0900", "r1500"]            # the engineer's plain captures
        assert runs["utilisation_from"].eq("CPU accounting").all()             # with the collected file
        assert runs["kernel_socket_drops"].iloc[-1] > 0 and not runs["tracepoints"].any()
    else:
        rep = json.loads((tmp_path / "res" / "report.json").read_text())
        v = rep["runs"][0]["account"]["vantage"]
        assert v["proxy_given"] and v["kind"] == "proxy"
    out = json.loads((tmp_path / "out.ipynb").read_text())
    text = json.dumps(out, ensure_ascii=False)
    assert "median (µs)" in text and "p99 (µs)" in text and "± 95 % (µs)" in text


def _summary_dataset(out: Path, runs: list[str]) -> None:
    """SYNTHETIC: a stored-summary dataset in the format of the lab's long recording
    (datasets/lab/README.md: runs.csv + components.csv), computed here with plain pandas from
    short lab runs (all relayed messages, no warm-up cut, iid CIs)."""
    from sipperf.ingest.lab_runs.dataset import load_run

    out.mkdir(parents=True, exist_ok=True)
    comps = {"k_sockq": ("t_sockq", "t_stack"), "k_copy": ("t_sip_in", "t_sockq"),
             "t_sip": ("t_sip_out", "t_sip_in"), "k_snd": ("t_dep", "t_sip_out"), "sojourn": ("t_dep", "t_arr")}
    prow, crow = [], []
    for r in runs:
        tl, _ = load_run(LAB / r)
        rel = tl[tl["t_dep"].notna() & tl["t_arr"].notna() & ~tl["dropped"].fillna(False)]
        pdr = float(tl[tl["t_arr"].notna()]["dropped"].fillna(False).mean())
        prow.append({"run_id": r, "series": "workers", "workers": 1, "rate_cps": int(r.split("-")[1]),
                     "pdr": pdr, "pdr_ci_hw": 0.0, "machine_busy": False})
        for name, (a, b) in comps.items():
            v = (rel[a] - rel[b]).astype("float64") / 1e3
            for t, g in list(v.groupby(rel["msg_type"].astype(str))) + [("ALL", v)]:
                x = g.to_numpy()
                crow.append({"run_id": r, "msg_type": t, "component": name, "n": len(x), "mean_us": x.mean(),
                             "ci_hw_us": 1.96 * x.std() / np.sqrt(len(x)), "p50_us": np.median(x),
                             "p90_us": np.percentile(x, 90), "p99_us": np.percentile(x, 99)})
    pd.DataFrame(prow).to_csv(out / "runs.csv", index=False)
    pd.DataFrame(crow).to_csv(out / "components.csv", index=False)


def test_stored_summaries_are_runs(tmp_path, sweep):
    """A directory of stored per-point summaries (the lab's long format) is read as one run per
    point: the fitted service demand agrees with the one from the same runs' timelines."""
    ds = tmp_path / "long"
    _summary_dataset(ds, ["rate-0025", "rate-0300", "rate-2000"])
    assert main(["report", str(ds), "--out", str(tmp_path / "o"), "--bootstrap", "20"]) == 0
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert runs["run"].tolist() == ["rate-0025", "rate-0300", "rate-2000"]
    fj = json.loads((tmp_path / "o" / "fit.json").read_text())
    ref = json.loads((sweep / "fit.json").read_text())
    assert fj["constants"]["service_demand_us"]["value"] == pytest.approx(
        ref["constants"]["service_demand_us"]["value"], rel=0.15)
    assert 300 < fj["knees"][0]["measured_cps"] < 2000
    assert "could not be drawn" not in (tmp_path / "o" / "index.html").read_text()
    # a broken summary (no run_id column) is unusable input, not a traceback
    pd.read_csv(ds / "runs.csv").drop(columns="run_id").to_csv(ds / "runs.csv", index=False)
    assert main(["report", str(ds), "--out", str(tmp_path / "o2")]) == 2


def test_summary_socket_capacity_and_fit_runs(tmp_path):
    """A summary dataset's kept timelines say how full the socket was at the drops: that count
    (plus the workers in service) becomes each point's K, and ``fit_runs`` reads the dataset."""
    import shutil

    from sipperf.ingest.lab_runs.dataset import load_run
    from sipperf.report import fit_runs
    from sipperf.report.runs import queue_at_drops, summary_measures, summary_sockq_pkts

    ds = tmp_path / "long"
    _summary_dataset(ds, ["rate-0025", "rate-0300", "rate-2000"])
    assert summary_sockq_pkts(ds) == (None, [])          # no kept timeline: no claim about K
    assert all(m.fit_input.k_pkts is None for _, _, m in summary_measures(ds))
    (ds / "runs").mkdir()
    shutil.copytree(LAB / "rate-2000", ds / "runs" / "rate-2000")     # it dropped 5 % of its messages
    shutil.copytree(LAB / "rate-0300", ds / "runs" / "rate-0300")     # it dropped none: not used
    kq = queue_at_drops(load_run(LAB / "rate-2000")[0])
    assert kq is not None and kq > 10
    assert summary_sockq_pkts(ds) == (kq, ["rate-2000"])
    ms = summary_measures(ds)
    assert {m.fit_input.k_pkts for _, _, m in ms} == {kq + 1}
    assert all(any("socket-queue capacity" in w for w in m.warnings) for _, _, m in ms)
    f = fit_runs([ds], n_boot=0)
    assert [d["run"] for d in f.per_run] == ["rate-0025", "rate-0300", "rate-2000"]
    assert {d["k_pkts"] for d in f.per_run} == {kq + 1}
    assert f.constants["service_demand_us"]["value"] > 0
    # an override wins over what the data say
    assert {d["k_pkts"] for d in fit_runs([ds], n_boot=0, k_pkts=64).per_run} == {64}
