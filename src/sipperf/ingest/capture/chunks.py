"""One capture file as a stream of compact chunks: what the streaming analysis and Dask workers read.

:func:`produce` reads a capture with the bulk reader, which cuts its rows straight into compact
integer columns (:func:`sipperf.ingest.capture.fast.iter_compact`, :mod:`sipperf.ingest.capture.compact`;
no DataFrame is built).  It holds no pairing state, so it runs anywhere: in
the analysing process, in a helper process that overlaps reading with the analysis
(:func:`produce_in_helper`, :mod:`sipperf.ingest.capture.chunk_reader`), or on Dask workers,
one file each (:mod:`sipperf.ingest.capture.distributed`).
"""
from __future__ import annotations

import os
from typing import Iterator

from sipperf.timeline import IngestError, IngestReport

#: packet-table rows per chunk read
CHUNK_ROWS = 250_000


def produce(path: str | os.PathLike, *, chunk_rows: int = CHUNK_ROWS, strict: bool = False,
            ) -> Iterator[tuple]:
    """Messages describing one capture file, in order: ``("chunk", compact chunk, rows
    without Call-ID)`` for every chunk, then ``("end", report)``.  Picklable, so it runs
    anywhere (this process, a helper process, a Dask worker)."""
    from sipperf.ingest.capture.fast import iter_compact

    from sipperf.ingest.clock import ClockCheck, file_time_ns

    rep = IngestReport(source="pcap-bulk", path=str(path))
    clock = ClockCheck(file_time_ns(path))
    held = None  # one chunk behind: the next chunk's first rows are its clock check's lookahead
    for c, dropped in iter_compact(path, rep, chunk_rows=chunk_rows, on_truncated="raise" if strict else "skip",
                                   progress=False):
        if not c["n"]:
            if held is None:
                yield ("chunk", c, dropped)
            else:
                held = (held[0], held[1] + dropped)
            continue
        if held is not None:
            h, hd = held
            h["ts"] = clock.apply(h["ts"], h["iface"], h["frame"], ahead=(c["ts"], c["iface"]))
            h["clock"] = clock.flags
            yield ("chunk", h, hd)  # at most chunk_rows rows each
        held = (c, dropped)
    if held is not None:
        h, hd = held
        h["ts"] = clock.apply(h["ts"], h["iface"], h["frame"])  # impossible stamps repaired, steps undone
        h["clock"] = clock.flags
        yield ("chunk", h, hd)
    clock.account(path, rep)
    yield ("end", rep)


def produce_list(path: str, chunk_rows: int = CHUNK_ROWS, strict: bool = False) -> list[tuple]:
    """:func:`produce` as one list (a Dask task's result)."""
    return list(produce(path, chunk_rows=chunk_rows, strict=strict))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), MB; NaN where /proc is not there."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


#: chunks read ahead from the reader process while the analysis works (memory: 20-40 MB each).
#: Twelve cover the analysis's longest close (about 2 s with 4 M rows open) at the reader's pace
#: (about 700 k rows/s): with six, the reader of a 12 M-packet capture sat blocked for 5 s of its
#: 20 (bench/scale.py; docs/formats.md); the peak memory of the process tree did not change
READ_AHEAD = 12


def produce_in_helper(path: str, *, chunk_rows: int = CHUNK_ROWS, strict: bool = False) -> Iterator[tuple]:
    """:func:`produce` in a reader process (:mod:`sipperf.ingest.capture.chunk_reader`), so that reading one large
    file and analysing it overlap on two cores.  A thread here takes the reader's chunks off the pipe as they
    come (up to :data:`READ_AHEAD` ahead), so the reader never waits while the analysis closes a large batch."""
    import pickle
    import queue
    import signal
    import subprocess
    import sys
    import tempfile
    import threading

    errf = tempfile.TemporaryFile()  # a file, not a pipe: a chatty reader can never block on it
    proc = subprocess.Popen([sys.executable, "-m", "sipperf.ingest.capture.chunk_reader", str(path), str(chunk_rows),
                             "1" if strict else "0"], stdout=subprocess.PIPE, stderr=errf)
    q: queue.Queue = queue.Queue(maxsize=READ_AHEAD)
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            try:
                msg = pickle.load(proc.stdout)
            except EOFError:
                msg = ("eof",)
            except Exception as e:  # noqa: BLE001  (handed to the consumer, which raises it)
                msg = ("eof", e)
            while not stop.is_set():
                try:
                    q.put(msg, timeout=0.2)
                    break
                except queue.Full:
                    continue
            if msg[0] in ("eof", "end", "error"):
                return

    th = threading.Thread(target=pump, name="chunk-pump", daemon=True)
    th.start()
    try:
        while True:
            msg = q.get()
            if msg[0] == "eof":
                proc.wait()
                errf.seek(0)
                err = errf.read().decode(errors="replace").strip().splitlines()
                if proc.returncode == -signal.SIGBUS:  # its mapped file shrank under it (fast._Source._map)
                    raise IngestError(path, "while reading", "the file was cut shorter while it was being read "
                                      "(overwritten in place?): read it again once it is complete")
                raise RuntimeError(f"the reader process for {path} ended without a result (exit code "
                                   f"{proc.returncode}): {err[-1] if err else ''}") from None
            if msg[0] == "error":
                raise IngestError(msg[1], msg[2], msg[3])
            yield msg
            if msg[0] == "end":
                break
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        th.join(timeout=5)
        proc.stdout.close()
        errf.close()
