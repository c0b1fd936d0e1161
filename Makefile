# Two commands do all set-up on a fresh Debian 12 machine (root, Python 3.11):
#   make book   -> venv + pinned packages + tshark, executes every chapter (cached), builds _build/html
#   make test   -> the same set-up, then every test (unit, lab smoke, notebooks, the book in a real browser)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSSTAMP := _build/.system-packages
APT_PKGS := tshark chromium kamailio kamailio-tls-modules kamailio-websocket-modules sip-tester bpftrace stunnel4 openssl
JB_FLAGS := -W -n --keep-going --builder html

.PHONY: book test setup system static lock clean help bench lab

help:
	@echo "make book   build the static HTML book into _build/html (all set-up included)"
	@echo "make test   set-up, build the book, run every test"
	@echo "make lab    read the book live: JupyterLab on 127.0.0.1, chapters open as notebooks"

# --- system packages (apt-get) -------------------------------------------------------------
# Installs what is missing: tshark (pcap ingest), chromium (browser test), kamailio + sip-tester
# (SIPp) + bpftrace (the loopback lab). Without root it says what is missing and carries on;
# the tests that need a missing tool skip with a message naming it.
system: $(SYSSTAMP)
$(SYSSTAMP):
	@mkdir -p _build
	@missing=""; \
	for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "apt-get install:$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "WARNING: not root; cannot apt-get install:$$missing (tests needing them will skip)"; \
	  fi; \
	fi
	@touch $@

# --- Python environment ----------------------------------------------------------------------
setup: $(STAMP) system static
	$(BIN)/python -m sipperf.warm
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert (3, 11) <= sys.version_info[:2] < (3, 14), "need Python 3.11-3.13 (pyshark 0.6 breaks on 3.14)"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $@

# plotly.js and MathJax are served from the book itself, so the static HTML works offline.
static: $(STAMP)
	@mkdir -p book/_static
	@$(BIN)/python -c 'import plotly, os, shutil; src = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js"); shutil.copyfile(src, "book/_static/plotly.min.js")'
	@$(BIN)/python -c 'import mathjax, os, shutil; src = os.path.join(os.path.dirname(mathjax.__file__), "static", "mathjax", "es5"); dst = "book/_static/mathjax/es5"; shutil.rmtree(dst, ignore_errors=True); shutil.copytree(src, dst)'

# --- the book ----------------------------------------------------------------------------------
# Jupyter Book's cache keys a chapter on its code cells only: a changed dataset or library would
# leave stale numbers in the book.  Its cache is dropped whenever anything under datasets/ or
# src/ changed since the last build (names, sizes, times), with the pages read from it, so every
# chapter runs again and reads what is there.
book: setup
	@inputs=$$(find datasets src -type f -not -path '*/__pycache__/*' -printf '%P %s %T@\n' | sort | sha1sum); \
	if [ "$$inputs" != "$$(cat _build/.inputs-stamp 2>/dev/null)" ]; then \
	  [ -d _build/.jupyter_cache ] && echo "datasets/ or src/ changed: every chapter runs again"; \
	  rm -rf _build/.jupyter_cache _build/.doctrees; \
	fi; \
	mkdir -p _build && echo "$$inputs" > _build/.inputs-stamp
	@start=$$(date +%s); \
	SIPPERF_STATIC=1 $(BIN)/jupyter-book build . $(JB_FLAGS) || { cat _build/html/reports/*.log 2>/dev/null | tail -50; exit 1; }; \
	echo "Built in $$(( $$(date +%s) - start )) s"; \
	echo "The book is at: file://$(CURDIR)/_build/html/index.html  (or: $(BIN)/python -m http.server -d _build/html -b 127.0.0.1 8000)"

# --- tests -------------------------------------------------------------------------------------
test: book
	$(BIN)/python -m pytest -ra

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Regenerate the full pin list after editing requirements.in; binder/requirements.txt follows:
# the reading-and-running subset named in binder/requirements.in, same pins (a test checks).
lock:
	$(BIN)/python -m pip install -q -r requirements.in
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' > requirements.txt
	$(BIN)/python binder/make_requirements.py

# --- reading it live ------------------------------------------------------------------------
# JupyterLab from the venv, as on Binder: chapters (MyST .md) open as notebooks through Jupytext
# (settings: binder/jupyter-config), figures and sliders live. Loopback only; Ctrl-C stops it.
LAB_PORT ?= 8888
lab: $(STAMP) system
	@root=""; if [ "$$(id -u)" = 0 ]; then root="--allow-root"; fi; \
	echo "Starting JupyterLab; open the URL with the token it prints below (Ctrl-C stops it)."; \
	JUPYTER_CONFIG_PATH="$(CURDIR)/binder/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	exec $(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) $$root \
	  --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/book/intro.md

clean:
	rm -rf _build
