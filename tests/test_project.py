"""Project-level checks: Binder is a closed, pin-identical subset of the lock, the layout of
the design card, the console command, the book configuration, and the repository URL written
once (_config.yml) with the book's buttons derived from it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
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


def _binder_tool():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "binder"))
    try:
        import make_requirements
    finally:
        sys.path.pop(0)
    return make_requirements


def test_binder_pins_are_the_locks(root):
    """Every Binder pin is the lock's pin, and every locked package Binder names has it."""
    project = _pins(root / "requirements.txt")
    binder = _pins(root / "binder" / "requirements.txt")
    assert binder, "binder/requirements.txt is empty"
    not_locked = sorted(set(binder) - set(project))
    assert not not_locked, f"binder pins packages the lock does not have: {not_locked}"
    drift = {k: (project[k], binder[k]) for k in binder if project[k] != binder[k]}
    assert not drift, f"binder/requirements.txt drifted from requirements.txt (lock, binder): {drift}"
    wanted = {_norm(r.name) for r in _binder_tool().wanted()}
    assert wanted <= set(binder), f"binder/requirements.in names missing from binder: {wanted - set(binder)}"


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def test_binder_requirements_closed_and_consistent(root):
    """An offline `pip check` of the Binder set: every requirement of every Binder package
    (markers evaluated for this Python) is in the set, at a version its specifier allows."""
    from importlib import metadata

    from packaging.requirements import Requirement

    binder = {_norm(k): v for k, v in _pins(root / "binder" / "requirements.txt").items()}
    problems = []
    for name, version in binder.items():
        assert metadata.version(name) == version, f"the venv has {name} {metadata.version(name)}"
        for dep in metadata.distribution(name).requires or []:
            r = Requirement(dep)
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue
            have = binder.get(_norm(r.name))
            if have is None:
                problems.append(f"{name} needs {r}, not in binder")
            elif not r.specifier.contains(have, prereleases=True):
                problems.append(f"{name} needs {r}, binder has {have}")
    assert not problems, problems


#: Binder's pip installs binder/requirements.txt on top of repo2docker's base environment
#: (jupyterhub/repo2docker, repo2docker/buildpacks/conda/environment.py-3.11-linux-64.lock,
#: frozen 2025-11-13: jupyterlab 4.4.10, notebook 7.4.7, jupyterhub-singleuser 5.4.2, ...).
#: Base packages whose requirements a Binder pin can break, as (version, requirements), from
#: their wheels' metadata; found by installing that base set and then the Binder set in a fresh
#: venv: `pip check` named only notebook.  A base package Binder pins itself is replaced by the
#: pinned one, whose requirements test_binder_requirements_closed_and_consistent checks.
R2D_BASE_PY311 = {"notebook": ("7.4.7", ["jupyter-server>=2.4.0,<3", "jupyterlab-server>=2.27.1,<3",
                                        "jupyterlab>=4.4.9,<4.5", "notebook-shim>=0.2,<0.3",
                                        "tornado>=6.2.0"])}


def test_binder_fits_repo2docker_base(root):
    from packaging.requirements import Requirement

    binder = {_norm(k): v for k, v in _pins(root / "binder" / "requirements.txt").items()}
    problems = []
    for base, (version, reqs) in R2D_BASE_PY311.items():
        if _norm(base) in binder:
            continue  # upgraded to Binder's pin
        for r in map(Requirement, reqs):
            have = binder.get(_norm(r.name))
            if have is not None and not r.specifier.contains(have, prereleases=True):
                problems.append(f"repo2docker's {base} {version} needs {r}; Binder pins {have}")
    assert not problems, (f"{problems}: pin {list(R2D_BASE_PY311)} in the lock and name it in "
                          "binder/requirements.in (`make lock`), or pin a version the base allows")


def test_binder_requirements_up_to_date(root):
    assert _binder_tool().render() == (root / "binder" / "requirements.txt").read_text(), \
        "binder/requirements.txt is stale: run `make lock` (binder/make_requirements.py)"


def test_binder_leaves_out_dev_tools(root):
    binder = set(_pins(root / "binder" / "requirements.txt"))
    for tool in ("pytest", "hypothesis", "playwright", "jupyter-book", "sphinx-book-theme", "dask",
                 "distributed"):
        assert tool not in binder, f"{tool} is not needed to read and run the book"
    for need in ("jupyterlab", "jupytext", "ipywidgets", "plotly", "myst-nb", "numba", "ipykernel"):
        assert need in binder, f"{need} is needed to read and run the book"


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
    for script in ("postBuild", "start"):
        assert os.access(b / script, os.X_OK), f"binder/{script} must be executable"
    post = (b / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post
    assert "binder/jupyter-config/labconfig/default_setting_overrides.json" in post
    # numba compiled at image build for a generic CPU, and used with the same key at run time
    assert "NUMBA_CPU_NAME=generic" in post
    assert "python -m sipperf.warm" in post, "postBuild does not compile the numba kernels"
    start = (b / "start").read_text()
    assert "NUMBA_CPU_NAME=generic" in start and 'exec "$@"' in start
    assert "ARROW_DEFAULT_MEMORY_POOL=system" in start  # kernel memory (ch. 4 under 500 MB)


@pytest.mark.slow
def test_binder_warm_up_runs(root):
    """postBuild's numba warm-up (``python -m sipperf.warm``: the chapters' reading calls on the
    repository's own files) runs, and leaves every kernel in the cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}  # this machine's cache
    r = subprocess.run([sys.executable, "-m", "sipperf.warm"], cwd=root, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "kernels in the cache" in r.stdout


def _repo_slug(cfg) -> tuple[str, str]:
    import re

    url = cfg["repository"]["url"].rstrip("/")
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", url)
    assert m, f"repository.url is not a GitHub repository URL: {url}"
    return m.group(1), m.group(2)


def test_repository_url_in_one_place(root):
    """The repository URL is written only in _config.yml (README says what to change)."""
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    owner, repo = _repo_slug(cfg)
    needle = f"{owner}/{repo}"
    skip = {".venv", "_build", ".git", "datasets", "node_modules", ".pytest_cache", ".hypothesis",
            "_static", "__pycache__"}
    hits = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in skip]
        for f in files:
            p = Path(d) / f
            if f != "_config.yml" and p.suffix in {".md", ".py", ".yml", ".yaml", ".txt", ".toml",
                                                   ".cfg", ".json", ""} and p.stat().st_size < 2_000_000:
                if needle in p.read_text(errors="ignore"):
                    hits.append(str(p.relative_to(root)))
    assert not hits, f"{needle} written outside _config.yml: {hits}"


def test_buttons_derive_from_repository_url(root):
    """In the built book, the repository button and each chapter's Binder launch button point
    at the repository, branch and file _config.yml names."""
    import re

    from conftest import BOOK_HTML

    cfg = yaml.safe_load((root / "_config.yml").read_text())
    owner, repo = _repo_slug(cfg)
    url = cfg["repository"]["url"].rstrip("/")
    branch = cfg["repository"].get("branch", "main")
    binderhub = cfg["launch_buttons"]["binderhub_url"].rstrip("/")
    prefix = cfg["repository"].get("path_to_book") or ""
    page = BOOK_HTML / "book" / "ch05_one_thread.html"
    if not page.exists():
        pytest.fail(f"the book is not built ({page} missing): run `make book` first")
    html = page.read_text()
    assert f'href="{url}"' in html, "repository button does not point at repository.url"
    launch = re.findall(r'href="(https://[^"]*/v2/gh/[^"]+)"', html)
    path = "/".join(p for p in (prefix.strip("/"), "book/ch05_one_thread.md") if p)
    assert launch == [f"{binderhub}/v2/gh/{owner}/{repo}/{branch}?urlpath=lab/tree/{path}"], launch


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
