"""Logs in the format of the thesis's instrumented OpenSIPS (seed 000) -> the tidy timeline.

* :mod:`.read` -- :func:`~sipperf.ingest.thesis_logs.read.read_thesis_log`, the reader and its account;
* :mod:`.scan` -- the compiled line scanner;
* :mod:`.pair` -- the compiled pairing of the kernel's and the proxy's lines into the seven instants.
"""
from sipperf.ingest.thesis_logs.read import read_thesis_log

__all__ = ["read_thesis_log"]
