"""Project-level checks: Binder mirrors the project's pins, the layout of the design card,
the console command, and the book configuration."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        assert "==" in line, f"{path.name}: unpinned requirement {line!r}"
        name, version = line.split("==", 1)
        pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_binder_pins_match_project(root):
    project = _pins(root / "requirements.txt")
    binder = _pins(root / "binder" / "requirements.txt")
    drift = {k: (project.get(k), binder.get(k)) for k in set(project) | set(binder)
             if project.get(k) != binder.get(k)}
    assert not drift, f"binder/requirements.txt drifted from requirements.txt: {drift}"


def test_key_pins(root):
    pins = _pins(root / "requirements.txt")
    assert pins["jupyter-book"] == "1.0.4.post1"
    assert pins["ipykernel"].startswith("6.31")
    assert pins["pyshark"] == "0.6"
    for name in ("numpy", "scipy", "pandas", "seaborn", "simpy", "jupyterlab", "plotly"):
        assert name in pins, f"{name} not pinned"


def test_requirements_in_covered_by_lock(root):
    lock = _pins(root / "requirements.txt")
    for line in (root / "requirements.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name = line.split("==")[0].split("[")[0].strip().lower().replace("_", "-")
            assert name in lock, f"{name} in requirements.in but not locked in requirements.txt"


def test_binder_files(root):
    b = root / "binder"
    assert (b / "runtime.txt").read_text().strip() == "python-3.11"
    assert "tshark" in (b / "apt.txt").read_text().split()
    post = b / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    text = post.read_text()
    assert "pip install" in text and "Jupytext" in text


def test_design_card_layout(root):
    for name in ("book", "notebooks", "datasets", "src", "binder", "_config.yml", "_toc.yml", "README.md"):
        assert (root / name).exists(), f"{name} missing from the top level"


def test_config(root):
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    assert cfg["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert cfg["launch_buttons"]["binderhub_url"]
    assert cfg["html"]["use_repository_button"] is True
    assert cfg["execute"]["execute_notebooks"] == "cache" and cfg["execute"]["timeout"] > 0
    ext = cfg["sphinx"]["extra_extensions"]
    assert "sphinx_exercise" in ext and "sphinx_togglebutton" in ext
    bib = (root / cfg["bibtex_bibfiles"][0]).read_text()
    for key in ("thesis", "paper_ch4", "paper_ch7", "tcp", "process_models"):
        assert f"{{{key}," in bib, f"references.bib lacks {key}"


def test_toc_files_exist(root):
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for p in toc["parts"] for c in p["chapters"]]
    for f in files:
        assert (root / f"{f}.md").exists() or (root / f"{f}.ipynb").exists(), f


def test_chapters_are_myst_notebooks(root):
    for md in sorted((root / "book").glob("ch*.md")):
        head = md.read_text().split("---", 2)[1]
        meta = yaml.safe_load(head)
        assert meta["jupytext"]["text_representation"]["format_name"] == "myst", md.name


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "sipperf.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "info" in out.stdout
    exe = Path(sys.executable).with_name("sipperf")
    assert exe.exists(), "the sipperf console script is not installed"
    out = subprocess.run([str(exe), "info"], capture_output=True, text=True)
    assert out.returncode == 0 and '"kernel"' in out.stdout
