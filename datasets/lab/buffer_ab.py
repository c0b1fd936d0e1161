"""Why the protocol's first knee searches were censored: SIPp's socket buffer, not its CPU.

    sudo .venv/bin/python datasets/lab/buffer_ab.py [--rates 2300,2800,3400] [--replicates 2]
                                                    [--out datasets/lab/protocol/buffer_ab.csv]

Knee probes exactly as the protocol's searches make them (``sipperf.lab.plan.probe_config`` of
the ``protocol`` plan, one worker: proxy on CPU 0, SIPp UAC and UAS on CPU 1 at equal priority,
Poisson arrivals, counters only, 8 s; ``sipperf.lab.longrun.probe_rate``), at each rate with
SIPp's default socket buffer (``-buff_size`` not given: 64 KB) and with 4 MB, in alternation,
``--replicates`` times.  One row per probe: the proxy's datagrams read and dropped, the
generator's own socket drops, its CPU share, the protocol's generator verdict, and the
``net.core.rmem_max`` / ``wmem_max`` in force (the kernel caps SIPp's ``setsockopt`` at them).
Loopback only; every process stopped by its pid (``sipperf.lab.run``).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from pathlib import Path

import pandas as pd

from sipperf.lab import plan as P
from sipperf.lab.longrun import probe_rate

HERE = Path(__file__).resolve().parent
BUFFERS = (0, 4 << 20)


def _sysctl(name: str) -> int:
    return int(Path(f"/proc/sys/net/core/{name}").read_text().split()[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="2300,2800,3400")
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=HERE / "protocol" / "buffer_ab.csv")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/sipperf-buffer-ab"))
    a = ap.parse_args(argv)
    base = P.probe_config(P.PLANS["protocol"], 1)
    rows = []
    for rep in range(a.replicates):
        for rate in [float(x) for x in a.rates.split(",")]:
            for buf in BUFFERS:
                cfg = dataclasses.replace(base, sipp_buffer_bytes=buf)
                row = probe_rate(cfg, rate, a.seconds, a.scratch, force=True, wait_idle_s=0,
                                 log=lambda s: None, run_id=f"ab-{buf}", replicate=rep)
                row.update(sipp_buffer_bytes=buf, rmem_max=_sysctl("rmem_max"), wmem_max=_sysctl("wmem_max"),
                           load_1min=float(Path("/proc/loadavg").read_text().split()[0]))
                rows.append(row)
                print(f"rep {rep} rate {rate:5.0f} buffer {buf or 'default':>8}: proxy dropped "
                      f"{row['proxy_socket_drops']} of {row['proxy_read'] + row['proxy_socket_drops']}, generator "
                      f"sockets dropped {row['generator_socket_drops']}, generator CPU {row['generator_cpus_busy']:.0%}"
                      f" busy, generator-bound {row['generator_bound']}", flush=True)
    df = pd.DataFrame(rows)
    df.insert(0, "recorded_utc", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False)
    print(f"wrote {a.out} ({len(df)} probes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
