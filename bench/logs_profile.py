"""Profile: where the time of bench/logs.py goes (thesis log -> timeline -> components.summary).

Runs ``read_thesis_log`` (without and then with validation is the caller's choice) and
``components.summary`` once under cProfile and prints the wall/CPU seconds of each stage plus
the functions with the largest own CPU time.  The log is the SYNTHETIC one bench/logs.py
generates (run that first).

    python bench/logs_profile.py [--path /tmp/sipperf_bench_thesis_1000000.log] [--top 25]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import time


def _stage(name: str, fn, prof: cProfile.Profile | None):
    w, c = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    out = fn()
    if prof is not None:
        prof.disable()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {name:<28s} {time.perf_counter() - w:7.2f} s wall {time.process_time() - c:7.2f} s CPU"
          f"  (peak RSS so far {peak:.0f} MB)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default="/tmp/sipperf_bench_thesis_1000000.log")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true", help="stage timings only")
    a = ap.parse_args()
    w0, c0 = time.perf_counter(), time.process_time()
    from sipperf import components
    from sipperf.ingest.thesis_logs.read import read_thesis_log
    from sipperf.timeline import validate_timeline
    print(f"  {'imports':<28s} {time.perf_counter() - w0:7.2f} s wall {time.process_time() - c0:7.2f} s CPU")
    # CPU time, not wall: the machine is shared, so wall time per function is noisy
    prof = None if a.no_profile else cProfile.Profile(time.process_time)
    tl, rep = _stage("read_thesis_log (no validate)",
                     lambda: read_thesis_log(a.path, progress=False, validate=False), prof)
    _stage("validate_timeline", lambda: validate_timeline(tl), prof)
    _stage("components.summary", lambda: components.summary(tl), prof)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"  {len(tl):,} messages; peak RSS {ru.ru_maxrss / 1024:.0f} MB; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(a.top)
        print(s.getvalue())


if __name__ == "__main__":
    main()
