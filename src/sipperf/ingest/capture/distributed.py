"""Many capture files on Dask: read each file of a ring buffer on a worker, pair in one pass here.

``sipperf analyze DIR`` on a directory of ring-buffer captures (``dumpcap -b filesize:... -w
x.pcapng`` writes ``x_00001_20261123190000.pcapng``, ``x_00002_...``) reads the files in
parallel and analyses them as the one capture they were cut from:

* **map, in parallel**: one Dask task per file parses it with the bulk reader and turns it into
  compact integer columns (:func:`sipperf.ingest.capture.chunks.produce_list`; no pairing, no state);
  its packet account comes back with it;
* **reduce, in time order, here**: the streaming engine (:class:`sipperf.analysis.stream.Engine`)
  takes the files' results in the order of their sequence numbers, numbers their packets on
  as in the merged capture, and pairs transaction by transaction.  A transaction that starts in
  one file and ends in the next is still open when the next file's rows arrive, so the pairing
  across a file boundary is exact: the results equal those of the merged capture read serially
  (tests/test_stream.py, test_ring_buffer_equals_the_merged_capture).

At most ``2 × workers`` files are in flight (read but not yet consumed), so memory stays
bounded however many files the directory holds.  Without ``scheduler`` a local cluster of
``workers`` processes (one thread each) is started and stopped; with it, the tasks go to that
cluster (its workers need sipperf installed and the files at the same paths).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Iterator

from sipperf.timeline import IngestError


def _task(path: str, chunk_rows: int, strict: bool) -> list[tuple]:
    """One file's messages (run on a worker); an unusable file comes back as an error message
    (an exception with the file's name and position, rebuilt here)."""
    from sipperf.ingest.capture.chunks import produce_list

    try:
        return produce_list(path, chunk_rows=chunk_rows, strict=strict)
    except IngestError as e:
        return [("error", e.path, e.position, str(e).split(": ", 2)[-1])]


def map_files(files: list[Path], *, workers: int | None = None, scheduler: str | None = None,
              progress: bool | None = None, chunk_rows: int = 250_000, strict: bool = False
              ) -> Iterator[tuple[int, tuple]]:
    """(file index, message) for every file, in file order (see :func:`sipperf.ingest.capture.chunks.produce`),
    the files read by Dask tasks."""
    from dask.distributed import Client, LocalCluster

    files = [str(f) for f in files]
    cluster = None
    if scheduler is None:
        n = max(1, min(workers or (os.cpu_count() or 1), len(files)))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        client = Client(cluster)
    else:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as e:
            raise IngestError("--scheduler", scheduler, f"cannot reach the Dask scheduler: {e}") from None
    bar = None
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})) or 1)
        window = 2 * n_workers
        if progress or (progress is None and sys.stderr.isatty()):
            from tqdm.auto import tqdm
            bar = tqdm(total=len(files), unit="file", desc="reading", leave=False)
        futures: dict[int, object] = {}
        nxt = 0

        def submit_upto(k: int) -> None:
            nonlocal nxt
            while nxt < len(files) and nxt < k:
                f = client.submit(_task, files[nxt], chunk_rows, strict, pure=False)
                if bar is not None:
                    f.add_done_callback(lambda _f: bar.update(1))
                futures[nxt] = f
                nxt += 1

        for i in range(len(files)):
            submit_upto(i + window)
            fut = futures.pop(i)
            result = fut.result()
            fut.release()
            for msg in result:
                yield i, msg
    finally:
        if bar is not None:
            bar.close()
        client.close()
        if cluster is not None:
            cluster.close()
