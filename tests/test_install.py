"""The analyser on its own (issue 37, item 1): a wheel built from the repository, installed in a
fresh venv outside it (its dependencies from the package index the project already uses, no
book, no lab, no Dask), analyses a shipped capture to the same numbers as the repository's own
environment, writes a report, fits and evaluates a model; an optional package that is missing
is named with the extra that installs it, never a traceback.

Slow (a venv, about 30 s of pip with a warm cache, then the compiled reader's first build,
about 3 minutes on 2 cores)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capgen as G  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures"


def _run(cmd, cwd, timeout=900, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    # the wheel is built from a copy of the tracked tree (a build must not write into the checkout)
    files = subprocess.run(["git", "ls-files", "pyproject.toml", "README.md", "src"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    wheels = base / "wheels"
    p = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, "."],
             cwd=src)
    assert p.returncode == 0, p.stderr[-2000:]
    wheel = next(wheels.glob("sipperf-*.whl"))
    v = base / "venv"
    p = _run([sys.executable, "-m", "venv", v], cwd=base)
    assert p.returncode == 0, p.stderr
    env = {k: val for k, val in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "NUMBA_CACHE"))}
    p = _run([v / "bin" / "python", "-m", "pip", "install", "-q", wheel], cwd=base, env=env)
    if p.returncode != 0 and ("No matching distribution" in p.stderr or "Could not find" in p.stderr
                              or "Network is unreachable" in p.stderr):
        pytest.skip(f"the package index cannot be reached from here: {p.stderr.strip().splitlines()[-1]}")
    assert p.returncode == 0, p.stderr[-3000:]
    work = base / "work"
    work.mkdir()
    return {"bin": v / "bin", "work": work, "env": env, "wheel": wheel}


def test_the_wheel_declares_the_analysers_dependencies_and_the_extras():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for d in meta["dependencies"]}
    assert {"numpy", "scipy", "pandas", "numba", "pyarrow", "matplotlib", "plotly"} <= deps
    assert all(any(op in d for op in (">=", "==", "<")) for d in meta["dependencies"]), "every dependency has a range"
    assert {"book", "lab", "distributed"} <= set(meta["optional-dependencies"])
    # the book's packages are not the analyser's
    assert not deps & {"jupyter-book", "jupyterlab", "dask", "pyshark", "seaborn"}


def test_installed_alone_it_analyses_a_shipped_capture_as_the_repository_does(venv, tmp_path):
    w = venv["work"]
    shutil.copy(FIX / "udp4.pcapng", w / "udp4.pcapng")
    p = _run([venv["bin"] / "sipperf", "--help"], cwd=w, env=venv["env"])
    assert p.returncode == 0 and "analyze" in p.stdout, p.stderr
    p = _run([venv["bin"] / "sipperf", "analyze", "udp4.pcapng", "--out", "a"], cwd=w, env=venv["env"])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "first capture read since install" in p.stderr       # the compiler's wait is said, once
    again = _run([venv["bin"] / "sipperf", "analyze", "udp4.pcapng", "--out", "a2", "--no-figures"], cwd=w,
                 env=venv["env"])
    assert again.returncode == 0 and "first capture read" not in again.stderr
    here = _run([Path(sys.executable).with_name("sipperf"), "analyze", FIX / "udp4.pcapng", "--out", tmp_path / "r",
                 "--no-figures"], cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    for t in ("components", "calls", "counts"):
        pd.testing.assert_frame_equal(pd.read_csv(w / "a" / f"{t}.csv"), pd.read_csv(tmp_path / "r" / f"{t}.csv"),
                                      obj=t)
    assert (w / "a" / "components.png").is_file()


def test_installed_alone_report_fit_and_model_run(venv):
    w, b, env = venv["work"], venv["bin"], venv["env"]
    for f in ("udp4", "retrans"):
        shutil.copy(FIX / f"{f}.pcapng", w / f"{f}.pcapng")
    p = _run([b / "sipperf", "report", "udp4.pcapng", "retrans.pcapng", "--out", "rep"], cwd=w, env=env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert (w / "rep" / "index.html").stat().st_size > 100_000          # plotly.js inlined
    p = _run([b / "sipperf", "fit", "udp4.pcapng", "retrans.pcapng", "--out", "fit.json"], cwd=w, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    fit = json.loads((w / "fit.json").read_text())
    assert fit
    p = _run([b / "sipperf", "model", "mg1", "--lam", "1000", "--fit", "rep/fit.json"], cwd=w, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["lam_pps"] in (1000.0, [1000.0]) and out["ex_s"]


def test_a_missing_extra_is_named_not_a_traceback(venv):
    """Dask is the [distributed] extra: a ring buffer spread over local workers without it."""
    w = venv["work"]
    r = G.records(FIX / "udp4.pcapng")
    ring = w / "ring"
    ring.mkdir(exist_ok=True)
    G.write_records(ring / "cap_00001_20261202040000.pcapng", r[:len(r) // 2])
    G.write_records(ring / "cap_00002_20261202040001.pcapng", r[len(r) // 2:])
    p = _run([venv["bin"] / "sipperf", "analyze", "ring", "--out", "d", "--workers", "2"], cwd=w, env=venv["env"])
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    assert "pip install 'sipperf[distributed]'" in p.stderr, p.stderr
    # without asking for workers the same ring buffer is read here, in one process
    p = _run([venv["bin"] / "sipperf", "analyze", "ring", "--out", "d2", "--no-figures"], cwd=w, env=venv["env"])
    assert p.returncode == 0, p.stderr[-2000:]
