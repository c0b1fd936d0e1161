"""How ``sipperf analyze`` grows from 10 k to 12 M packets, and a ring buffer on Dask (issue 14).

    .venv/bin/python bench/scale.py [--sizes 10000,100000,1000000,4000000,12000000] [--runs 3]
                                    [--ring-packets 4000000] [--ring-files 8] [--skip bulk,scale,ring]
                                    [--csv datasets/precomputed/bench_ingest.csv] [--source CAPTURE]
                                    [--record-lab DIR]

The captures are bench/ingest.py's: REAL lab traffic (``datasets/lab/raw/rate-0025``, Kamailio
relaying SIPp calls on loopback, or ``--source``) replicated with unique Call-IDs into ``/tmp``
(never committed).  ``--record-lab DIR`` first records a different, harder source with
``sipperf lab run`` (root; issue 23): 4 Kamailio workers, 8000 Poisson calls offered at 1000
calls/s with retransmissions on and the ``ratelimit`` guard admitting 700 INVITEs/s, so the
capture holds retransmissions, 503s and 408s beside the completed calls (:data:`LAB_RUN`);
it is then the source.
Every measurement runs in a fresh process; each figure is the median of ``--runs`` runs, with
/proc/loadavg (1-minute load) read before each run.  Each capture is read once before its timed
runs, so they find it in the page cache (a figure of the analysis, not of the disk).  Printed, and written to ``--csv`` (with a
provenance file beside it) unless ``--csv ''``:

* **bulk** -- :func:`sipperf.ingest.capture.fast.read_packets` on the largest capture, one core:
  the read itself into one in-memory table, after the compiled code is loaded (bench/ingest.py's
  child); **scan** -- the compiled pass alone (the time spent in :func:`sipperf.ingest.capture.scan.scan`
  while :func:`~sipperf.ingest.capture.fast.iter_packets` streams the same capture) and
  **bulk-stream** -- that streamed read whole (compiled pass plus DataFrame chunks, bounded memory);
* **analyze** -- the ``sipperf analyze CAPTURE --out DIR`` command end to end (interpreter
  start, imports, reading, pairing, statistics, tables and figures), per size: wall, CPU of the
  whole process tree (the command and its reader process), peak memory as (a) the largest sum
  of the resident sets of the command and its children, sampled every 0.1 s, and (b) each
  process's own high-water mark (VmHWM: the command's read by itself, the reader process's
  reported in report.json);
* **fixed costs** -- on the smallest capture, the CPU of a first ``analyze`` in a fresh
  process (imports, compiled-code load, figures) and of a second one in the same process (the
  compute alone);
* **ring** -- the ``--ring-packets`` capture cut by ``editcap -c`` into ``--ring-files``
  ring-buffer files (named as ``dumpcap -b`` names them; calls span the cuts), analysed as a
  directory serially (``--workers 0 --stream``) and on a local Dask cluster of 1 and 2 workers;
  each run's tables are compared byte for byte with those of the uncut capture.

The machine is shared: wall times inflate with the load printed beside them; CPU seconds do not.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as B  # noqa: E402  (bench/ingest.py: the replicated captures, the bulk child)

ROOT = B.ROOT
TABLES = ("components.csv", "calls.csv", "transactions.csv", "counts.csv")
CSV_DEFAULT = ROOT / "datasets" / "precomputed" / "bench_ingest.csv"

CHILD_CLI = r"""
import contextlib, io, json, os, resource, sys, time
t0 = time.perf_counter()
from sipperf.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", *sys.argv[1:]])
dt = time.perf_counter() - t0
me = resource.getrusage(resource.RUSAGE_SELF)
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
with open("/proc/self/status") as fh:
    hwm = int(next(l for l in fh if l.startswith("VmHWM:")).split()[1]) / 1024
print(json.dumps({"rc": rc, "inner_s": dt, "cpu_self_s": me.ru_utime + me.ru_stime,
                  "cpu_children_s": ch.ru_utime + ch.ru_stime, "hwm_mb": hwm}))
"""

CHILD_FIXED = r"""
import json, sys, tempfile, time
c0 = time.process_time()
from sipperf.analysis import analyze
from sipperf.figures.analysis_figs import write_figures
def run(out):
    res = analyze([sys.argv[1]])
    res.write(out)
    write_figures(res, out)
with tempfile.TemporaryDirectory() as d:
    run(d + "/a")
    c1 = time.process_time()
    run(d + "/b")
    c2 = time.process_time()
print(json.dumps({"first_cpu_s": c1 - c0, "second_cpu_s": c2 - c1}))
"""


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _tree_rss_mb(p: psutil.Process) -> float:
    tot = 0
    for q in [p, *p.children(recursive=True)]:
        try:
            tot += q.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return tot / 2 ** 20


def run_cli(args: list[str], timeout: float = 1800) -> dict:
    """``sipperf analyze ARGS`` in a fresh interpreter: wall, CPU, peaks (see the module doc)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    ps = psutil.Process(proc.pid)
    peak = 0.0
    while proc.poll() is None:
        try:
            peak = max(peak, _tree_rss_mb(ps))
        except psutil.NoSuchProcess:
            break
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            raise RuntimeError(f"timeout after {timeout} s")
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}")
    r = json.loads(out.strip().splitlines()[-1])
    if r["rc"] != 0:
        raise RuntimeError(f"sipperf analyze exit code {r['rc']}: {err.strip()[-300:]}")
    r.update(wall_s=wall, tree_peak_mb=peak, cpu_s=r["cpu_self_s"] + r["cpu_children_s"])
    return r


def _report_extra(out_dir: Path) -> dict:
    rep = json.loads((out_dir / "report.json").read_text())
    st = rep.get("streaming", {})
    return {"engine": st.get("engine", "in memory"),
            "reader_hwm_mb": st.get("reader_process", {}).get("peak_rss_mb", float("nan")),
            "read": rep["read"]}


def median_runs(fn, runs: int) -> tuple[list[dict], list[float]]:
    res, loads = [], []
    for _ in range(runs):
        loads.append(load1())
        res.append(fn())
    return res, loads


def med(res: list[dict], k: str) -> float:
    return statistics.median(r[k] for r in res)


SOURCE = B.DEFAULT_SOURCE
#: the harder recording of --record-lab (sipperf lab run options)
LAB_RUN = ["--rate", "1000", "--calls", "8000", "--workers", "4", "--arrivals", "poisson", "--tracer", "none",
           "--proxy-port", "15360", "--uas-port", "15380", "--uac-port", "15361", "--max-seconds", "60",
           "--seed", "23", "--guard", "ratelimit", "--guard-cps", "700"]


def record_lab(out: Path) -> Path:
    """Record the harder source with ``sipperf lab run`` (root); returns its capture."""
    cap = out / "capture.pcapng"
    if not cap.exists():
        subprocess.run([str(Path(sys.executable).with_name("sipperf")), "lab", "run", *LAB_RUN, "--out", str(out)],
                       check=True, cwd=ROOT)
    return cap


def capture(n: int) -> Path:
    tag = "capture" if SOURCE == B.DEFAULT_SOURCE else B.tag_of(SOURCE)
    p = Path(tempfile.gettempdir()) / f"sipperf-bench-{tag}-{n}.pcapng"
    if not p.exists():
        t = time.perf_counter()
        B.replicate(SOURCE, p, n)
        print(f"wrote {p} ({n} packets, {p.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s",
              flush=True)
    return p


def warm(p: Path) -> str:
    """Read ``p`` once so the timed runs find it in the page cache (the figure is the analysis,
    not the disk: a 6 GB replica is evicted by the next one written); says how long it took."""
    t = time.perf_counter()
    with open(p, "rb", buffering=0) as fh:
        buf = bytearray(1 << 24)
        while fh.readinto(buf):
            pass
    dt = time.perf_counter() - t
    return f"read once before the runs: {p.stat().st_size / 1e6:,.0f} MB in {dt:.1f} s"


def ring(n: int, files: int) -> Path:
    d = Path(tempfile.gettempdir()) / f"sipperf-bench-ring-{n}-{files}"
    if not d.exists():
        tmp = d.with_suffix(".part")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        subprocess.run(["editcap", "-c", str(-(-n // files)), str(capture(n)), str(tmp / "ring.pcapng")],
                       check=True)
        tmp.rename(d)
    return d


def same_tables(a: Path, b: Path) -> bool:
    return all((a / t).read_bytes() == (b / t).read_bytes() for t in TABLES)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000,4000000,12000000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ring-packets", type=int, default=4_000_000)
    ap.add_argument("--ring-files", type=int, default=8)
    ap.add_argument("--skip", default="", help="comma list of: bulk,scale,fixed,ring")
    ap.add_argument("--csv", default=str(CSV_DEFAULT), help="write the figures here ('' : do not)")
    ap.add_argument("--source", type=Path, default=B.DEFAULT_SOURCE, help="real capture to replicate")
    ap.add_argument("--record-lab", type=Path, default=None,
                    help="record the harder source with sipperf lab run into this directory (root) and use it")
    a = ap.parse_args(argv)
    global SOURCE
    SOURCE = record_lab(a.record_lab) if a.record_lab else a.source
    print(f"source: {SOURCE}", flush=True)
    skip = set(filter(None, a.skip.split(",")))
    sizes = [int(s) for s in a.sizes.split(",")]
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="sipperf-scale-"))
    print(f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2 ** 30:.1f} GiB RAM; "
          f"load average at start {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)

    def add(section, what, packets, res, loads, **extra):
        row = {"section": section, "what": what, "packets": packets, "runs": len(res),
               "load_1min_min": min(loads), "load_1min_max": max(loads), **extra}
        rows.append(row)
        return row

    try:
        if "bulk" not in skip:
            big = capture(max(sizes))
            tiny = capture(100)
            res, loads = median_runs(lambda: B._child(B.CHILD_BULK, str(big), str(tiny), "table"), a.runs)
            sec = med(res, "seconds")
            add("bulk", "read_packets (compiled single pass, one core)", max(sizes), res, loads,
                wall_s=sec, cpu_s=med(res, "cpu"), peak_mb=med(res, "hwm_mb"), packets_per_s=max(sizes) / sec)
            print(f"bulk parse, {max(sizes):,} packets: {max(sizes) / sec:,.0f} packets/s ({sec:.2f} s wall, "
                  f"{med(res, 'cpu'):.2f} s CPU, peak {med(res, 'hwm_mb'):.0f} MB), median of {a.runs}; "
                  f"load {loads}", flush=True)
            res, loads = median_runs(lambda: B._child(B.CHILD_BULK, str(big), str(tiny), "stream"), a.runs)
            scan_s, sec = med(res, "scan_s"), med(res, "seconds")
            add("scan", "compiled pass alone (scan.scan inside iter_packets, one core)", max(sizes), res, loads,
                wall_s=scan_s, packets_per_s=max(sizes) / scan_s)
            add("bulk-stream", "iter_packets, streamed (compiled pass + DataFrame chunks, one core)", max(sizes), res,
                loads, wall_s=sec, cpu_s=med(res, "cpu"), peak_mb=med(res, "hwm_mb"), packets_per_s=max(sizes) / sec)
            print(f"compiled pass alone, {max(sizes):,} packets: {max(sizes) / scan_s:,.0f} packets/s ({scan_s:.2f} s); "
                  f"streamed as DataFrame chunks: {max(sizes) / sec:,.0f} packets/s ({sec:.2f} s wall, peak "
                  f"{med(res, 'hwm_mb'):.0f} MB), median of {a.runs}; load {loads}", flush=True)
        if "scale" not in skip:
            print(f"\n`sipperf analyze CAPTURE --out DIR`, end to end, median of {a.runs} runs each")
            print(f"{'packets':>11} {'wall s':>8} {'CPU s':>8} {'pkt/s':>10} {'tree peak MB':>13} "
                  f"{'cmd VmHWM':>10} {'reader VmHWM':>13}  engine; 1-min load per run")
            for n in sizes:
                p = capture(n)
                print(f"{'':>11} {warm(p)}", flush=True)
                outs = []

                def one():
                    o = work / f"a{n}-{len(outs)}"
                    outs.append(o)
                    r = run_cli([str(p), "--out", str(o)])
                    r.update(_report_extra(o))
                    return r
                res, loads = median_runs(one, a.runs)
                assert all(r["read"] == n for r in res)
                row = add("analyze", "sipperf analyze end to end", n, res, loads, wall_s=med(res, "wall_s"),
                          cpu_s=med(res, "cpu_s"), peak_mb=med(res, "tree_peak_mb"),
                          cmd_hwm_mb=med(res, "hwm_mb"), reader_hwm_mb=med(res, "reader_hwm_mb"),
                          packets_per_s=n / med(res, "wall_s"), engine=res[0]["engine"])
                print(f"{n:>11,} {row['wall_s']:8.2f} {row['cpu_s']:8.2f} {row['packets_per_s']:10,.0f} "
                      f"{row['peak_mb']:13.0f} {row['cmd_hwm_mb']:10.0f} {row['reader_hwm_mb']:13.0f}  "
                      f"{row['engine']}; {loads}", flush=True)
                walls = ", ".join(f"{r['wall_s']:.2f}" for r in res)
                print(f"{'':>11} runs: {walls} s", flush=True)
                if n == a.ring_packets:
                    shutil.copytree(outs[0], work / "merged-ref")
                for o in outs:
                    shutil.rmtree(o, ignore_errors=True)
        if "fixed" not in skip:
            p = capture(min(sizes))
            res, loads = median_runs(lambda: B._child(CHILD_FIXED, str(p)), a.runs)
            add("fixed", "first analyze in a fresh process (imports, compiled code, figures)", min(sizes), res,
                loads, cpu_s=med(res, "first_cpu_s"))
            add("fixed", "second analyze in the same process (compute only)", min(sizes), res, loads,
                cpu_s=med(res, "second_cpu_s"))
            print(f"\nfixed costs, {min(sizes):,} packets with figures: first analyze in a fresh process "
                  f"{med(res, 'first_cpu_s'):.2f} s CPU, a second in the same process "
                  f"{med(res, 'second_cpu_s'):.2f} s CPU; median of {a.runs}; load {loads}", flush=True)
        if "ring" not in skip:
            n = a.ring_packets
            d = ring(n, a.ring_files)
            ref = work / "merged-ref"
            if not ref.exists():
                run_cli([str(capture(n)), "--out", str(ref), "--no-figures"])
            k = len(list(d.glob("ring_*.pcapng")))
            print(f"\nring buffer: {n:,} packets in {k} files ({d}), `sipperf analyze DIR`, "
                  f"median of {a.runs} runs each")
            base = None
            for what, extra in (("serial (--workers 0 --stream)", ["--workers", "0", "--stream"]),
                                ("Dask, 1 local worker", ["--workers", "1"]),
                                ("Dask, 2 local workers", ["--workers", "2"])):
                outs = []

                def one():
                    o = work / f"r{len(rows)}-{len(outs)}"
                    outs.append(o)
                    r = run_cli([str(d), "--out", str(o), *extra])
                    r.update(_report_extra(o))
                    r["same"] = same_tables(ref, o)
                    return r
                res, loads = median_runs(one, a.runs)
                wall = med(res, "wall_s")
                base = base or wall
                same = all(r["same"] for r in res)
                add("ring", what, n, res, loads, wall_s=wall, cpu_s=med(res, "cpu_s"),
                    peak_mb=med(res, "tree_peak_mb"), cmd_hwm_mb=med(res, "hwm_mb"), packets_per_s=n / wall,
                    speedup=base / wall, files=k, identical_to_merged=same, engine=res[0]["engine"])
                print(f"  {what:<32} {wall:7.2f} s wall, {med(res, 'cpu_s'):7.2f} s CPU, speed-up "
                      f"{base / wall:5.2f}, command's peak {med(res, 'hwm_mb'):.0f} MB; tables identical to "
                      f"the uncut capture's: {same}; {res[0]['engine']}; load {loads}", flush=True)
                for o in outs:
                    shutil.rmtree(o, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {Path('/proc/loadavg').read_text().split()[:3]}")
    if a.csv and rows:
        write_csv(Path(a.csv), rows, argv if argv is not None else sys.argv[1:])


COLUMNS = ["section", "what", "packets", "runs", "wall_s", "cpu_s", "packets_per_s", "peak_mb", "cmd_hwm_mb",
           "reader_hwm_mb", "speedup", "files", "identical_to_merged", "engine", "load_1min_min",
           "load_1min_max"]


def write_csv(path: Path, rows: list[dict], argv: list[str]) -> None:
    """The figures (one row per measurement; medians) and their provenance file."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: (round(r[c], 4) if isinstance(r.get(c), float) else r.get(c, "")) for c in COLUMNS})
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    prov = path.with_name(path.stem + ".provenance.md")
    prov.write_text(f"""# {path.name}: measured ingest speed and memory (issue 14)

**Measured, not synthetic.**  Every figure is a median of the runs given in the `runs` column,
measured on the machine below by

    .venv/bin/python bench/scale.py {' '.join(argv)}

on {_dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}.

* Machine: {os.cpu_count()} CPUs ({cpu}), {psutil.virtual_memory().total / 2 ** 30:.1f} GiB RAM,
  {platform.system()} {platform.release()}, Python {platform.python_version()}.
  The machine is **shared** with other work: `load_1min_min` / `load_1min_max` are the lowest
  and highest 1-minute load averages (/proc/loadavg) read before the runs of each row.  Wall
  times inflate with the load; CPU seconds much less so.
* Captures: real lab traffic (`datasets/lab/raw/rate-0025/capture.pcapng.gz`, Kamailio 5.6
  relaying SIPp calls on loopback UDP) replicated to the given number of packets with unique
  Call-IDs by `bench/ingest.py` (`replicate`), in /tmp, not committed; each is read once before
  its timed runs, so they find it in the page cache (the analysis is measured, not the disk).
* Columns: `section` (bulk: the reader into one in-memory table, one core; scan: the compiled
  pass alone, the time inside `sipperf.ingest.capture.scan.scan` while `iter_packets` streams the capture;
  bulk-stream: that streamed read whole, DataFrame chunks included; analyze: the `sipperf analyze`
  command end to end, interpreter start to figures written; fixed: CPU of a first and a second
  analyze of the smallest capture in one process; ring: the `ring_packets` capture cut into
  `files` ring-buffer files by `editcap -c` and analysed as a directory), `wall_s`, `cpu_s` (the
  command and its child processes), `packets_per_s` (packets / wall), `peak_mb` (largest sampled
  sum of the resident sets of the command and its child processes, MiB; for `bulk`, the reader's
  VmHWM), `cmd_hwm_mb` / `reader_hwm_mb` (each process's own VmHWM), `speedup` (serial wall /
  this wall), `identical_to_merged` (all four tables byte for byte those of the uncut capture).
""")
    print(f"wrote {path} and {prov}")


if __name__ == "__main__":
    main()
