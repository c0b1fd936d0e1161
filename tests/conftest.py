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
