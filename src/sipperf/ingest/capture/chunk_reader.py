"""The reader process of the streaming engine: ``python -m sipperf.ingest.capture.chunk_reader PATH
CHUNK_ROWS STRICT`` writes :func:`sipperf.ingest.capture.chunks.produce`'s messages to stdout, pickled.

A separate interpreter (not ``multiprocessing``) so that it works from any caller -- a script
without a ``__main__`` guard, a notebook, the ``sipperf`` command.  The back-pressure: the
analysing process takes chunks off the pipe up to :data:`~sipperf.ingest.capture.chunks.READ_AHEAD`
ahead of its work; past that the reader waits.  The last message (``"end"``) carries the reader's own peak memory and CPU.
"""
from __future__ import annotations

import pickle
import sys
import time


def main(argv: list[str]) -> int:
    from sipperf.ingest.capture import fast
    from sipperf.ingest.capture.chunks import peak_rss_mb, produce
    from sipperf.timeline import IngestError

    fast.MAP_MIN_BYTES = 1 << 24  # this process only reads: map large files (fast._Source._map)

    path, chunk_rows, strict = argv[0], int(argv[1]), argv[2] == "1"
    out = sys.stdout.buffer
    try:
        for msg in produce(path, chunk_rows=chunk_rows, strict=strict):
            if msg[0] == "end":
                msg = (*msg, {"peak_rss_mb": peak_rss_mb(), "cpu_s": time.process_time()})
            pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
    except IngestError as e:
        pickle.dump(("error", e.path, e.position, str(e).split(": ", 2)[-1]), out, protocol=pickle.HIGHEST_PROTOCOL)
    except BrokenPipeError:  # the analysis stopped reading (an error there): nothing to say
        return 1
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
