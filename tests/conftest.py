"""Shared fixtures: the repository root and the built book served from 127.0.0.1."""
from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the built book; SIPPERF_BOOK_HTML points the browser tests at another build (e.g. a private one)
BOOK_HTML = Path(os.environ.get("SIPPERF_BOOK_HTML") or ROOT / "_build" / "html")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def book_url():
    """Serve _build/html on an ephemeral loopback port for the whole session."""
    if not (BOOK_HTML / "index.html").exists():
        pytest.fail(f"the book is not built ({BOOK_HTML}/index.html missing): run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(BOOK_HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(params=["window", "mapped"])
def reader_mode(request, monkeypatch):
    """A test that uses it runs twice: the file read window by window, and mapped with its read pages
    dropped as it goes (how the streaming engine's reader process reads files over 16 MB),
    forced on these small files -- so a truncation, a corrupt record or a cut inside a record
    is told the same way."""
    from sipperf.ingest.capture import fast

    if request.param == "mapped":
        monkeypatch.setattr(fast, "MAP_MIN_BYTES", 0)
        monkeypatch.setattr(fast, "RELEASE_BYTES", 4096)
    else:
        monkeypatch.setattr(fast, "MAP_MIN_BYTES", None)
    modes = []
    init = fast._Source.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        modes.append("gz" if self.gz else "mapped" if self.mm is not None else "window")

    monkeypatch.setattr(fast._Source, "__init__", spy)
    yield request.param
    assert set(modes) <= {request.param, "gz"}, modes
