"""Benchmark: a 6 M-message thesis-format log -> timeline + components (issue 3 item 5).

Generates a SYNTHETIC log (sipperf.ingest.thesis_logs.read.synthetic_timeline, 1 M calls = 6 M
messages = 12 M lines, seed 1) in /tmp (not committed), then times, in a fresh subprocess per
run, ``read_thesis_log`` + ``components.summary`` (which derives the nine components of every
message; ``components.derive`` would add them as 9 Int64 columns, +0.5 GB).  Prints the median
seconds, messages/s and peak RSS (MB) over several runs.

Peak RSS is the child's own high-water mark, ``VmHWM`` from ``/proc/self/status`` read by the
child itself: ``getrusage().ru_maxrss`` is not, because Linux carries the parent's peak over
fork/exec into the child's counter (so a parent that once held the generated log made every
child look as large as the parent).

    python bench/logs.py [--calls 1000000] [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
from sipperf.ingest.thesis_logs.read import read_thesis_log
from sipperf import components
t = time.perf_counter()
tl, rep = read_thesis_log(sys.argv[1], progress=False)
t_read = time.perf_counter() - t
summ = components.summary(tl)  # derives all nine components per message (float ns arrays)
assert rep.balanced and summ["count"].iloc[-1] == len(tl)
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
with open("/proc/self/status") as fh:  # this process's own peak, not one inherited over exec
    hwm_kb = int(next(l for l in fh if l.startswith("VmHWM:")).split()[1])
print(json.dumps({"seconds": dt, "read_s": t_read, "messages": len(tl), "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_mb": hwm_kb / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--path", default=None)
    a = ap.parse_args()
    path = a.path or f"/tmp/sipperf_bench_thesis_{a.calls}.log"
    if not os.path.exists(path):
        from sipperf.ingest.thesis_logs.read import synthetic_timeline, write_thesis_log
        t = time.perf_counter()
        tl = synthetic_timeline(a.calls, seed=1)
        write_thesis_log(tl, path, label=f"SYNTHETIC: bench/logs.py synthetic_timeline({a.calls}, seed=1)")
        del tl
        print(f"generated {path} ({os.path.getsize(path) / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s")
    res = []
    for _ in range(a.runs):
        out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=True)
        res.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = res[-1]
        print(f"  run {len(res)}: {r['seconds']:.2f} s wall (read {r['read_s']:.2f} s), {r['cpu_s']:.2f} s CPU, "
              f"peak RSS {r['peak_mb']:.0f} MB, load average {os.getloadavg()[0]:.1f}", flush=True)
    sec = statistics.median(r["seconds"] for r in res)
    rd = statistics.median(r["read_s"] for r in res)
    mb = statistics.median(r["peak_mb"] for r in res)
    cpu = statistics.median(r["cpu_s"] for r in res)
    n = res[0]["messages"]
    print(f"thesis log {a.calls * 6:,} messages ({os.path.getsize(path) / 1e9:.2f} GB), median of {a.runs} runs:")
    print(f"  read+derive+summary {sec:.2f} s wall (read {rd:.2f} s), {cpu:.2f} s CPU incl. imports, "
          f"{n / sec:,.0f} messages/s, peak RSS {mb:.0f} MB")
    print(f"  load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall time inflates when shared)")
    print(f"  goal: <= 10 s and <= 2048 MB -> {'met' if sec <= 10 and mb <= 2048 else 'NOT met'}")


if __name__ == "__main__":
    main()
