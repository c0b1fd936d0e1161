"""Why the short series' knee was so low: its runs replayed, one factor changed at a time (issue 22).

    sudo .venv/bin/python datasets/lab/short_replay.py [--rates 1500 2000 2500 3000] [--reps 2]
                                                       [--out datasets/lab/protocol/short_replay.csv]

The short series (``index.csv``, 2026-11-21) crossed 1 % drops between 1,500 and 2,000 calls/s;
every protocol set-up searched since puts the one-worker knee near 3,000 (ch. *How to run a load
test*, "Why the book's knees differ").  Its runs were short (1,500 calls, about a second at these
rates), the generator shared both CPUs at nice -10, SIPp kept its default 64-KB socket buffer and
retransmitted (``datasets/lab/record.py --plan short``).  The ``setup`` series measured the
placement, the priority, the observers and 1-s probes, but always with a 4-MB SIPp buffer and
without retransmissions, and none of them reproduced the low knee.  This script runs the short
series' own configuration again (``record.py``'s plan, same calls and seeds) and two variants:

* ``first``      -- the short series' set-up as recorded (shared CPUs, SIPp at nice -10, SIPp's
                    default socket buffer, retransmissions on, tracer ``map`` and capture on);
* ``buffer-4mb`` -- the same with SIPp's socket buffer at 4 MB (the protocol's);
* ``protocol``   -- the same runs under the protocol's placement (proxy on CPU 0, the generator
                    and observers on CPU 1, nice 0), 4-MB buffer, retransmissions off.

Each run is a knee probe of the protocol (:func:`sipperf.lab.longrun.probe_rate`, no ingest):
the proxy socket's drops over the datagrams it read plus dropped (``pdr_counters``), SIPp's own
sockets' drops, its retransmissions and failed calls, the generator's verdict, the machine's
other load and the kernel build.  Rates are run in a shuffled order
within each replicate, the three set-ups of one rate back to back.  Every process is stopped by
its pid (``sipperf.lab.run``); loopback only.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import record  # noqa: E402  (datasets/lab/record.py: the short series' plan)

from sipperf.lab import longrun  # noqa: E402
from sipperf.lab.plan import PROTOCOL_SIPP_BUFFER  # noqa: E402

VARIANTS = {
    "first": {},
    "buffer-4mb": {"sipp_buffer_bytes": PROTOCOL_SIPP_BUFFER},
    "protocol": {"sipp_buffer_bytes": PROTOCOL_SIPP_BUFFER, "placement": "split", "load_nice": 0,
                 "retransmissions": False},
}


def short_config(rate: int):
    """The short series' configuration at ``rate`` (its plan's calls; the seed set per replicate)."""
    for series, run_id, cfg in record.plan():
        if series == "rate" and run_id == f"rate-{rate:04d}":
            return cfg
    base = next(c for s, r, c in record.plan() if s == "rate" and r == "rate-3000")
    return dataclasses.replace(base, rate_cps=rate, seed=rate)


def one(cfg, rate: int, replicate: int, scratch: Path) -> dict:
    """One run of ``cfg`` as a knee probe (:func:`sipperf.lab.longrun.probe_rate`: waits for an
    idle machine, drop rate from the proxy socket's counters, the generator's verdict), with the
    short series' calls per run; its seed is the probe's (the rate for replicate 0, as the short
    series had)."""
    row = longrun.probe_rate(cfg, rate, cfg.calls / rate, scratch, force=False, wait_idle_s=300.0,
                             log=print, run_id="short-replay", replicate=replicate)
    row["pdr_counters"] = row.pop("pdr")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", nargs="+", type=int, default=[1500, 2000, 2500, 3000])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "protocol" / "short_replay.csv")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/sipperf-short-replay"))
    a = ap.parse_args(argv)
    a.scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.monotonic()
    for rep in range(a.reps):
        rates = list(a.rates)
        random.Random(rep).shuffle(rates)
        for rate in rates:
            base = short_config(rate)
            for name, change in VARIANTS.items():
                cfg = dataclasses.replace(base, **change)
                try:
                    r = one(cfg, rate, rep, a.scratch)
                except Exception as e:  # noqa: BLE001 - one failed run must not lose the others
                    print(f"{name:11s} {rate:5d} rep {rep}: FAILED {type(e).__name__}: {e}", flush=True)
                    continue
                r.update({"variant": name, "sipp_buffer_bytes": cfg.sipp_buffer_bytes,
                          "retransmissions": cfg.retransmissions})
                rows.append(r)
                print(f"{name:11s} {rate:5d} rep {rep}: pdr {r['pdr_counters']:.4f}, SIPp socket drops "
                      f"{r['generator_socket_drops']}, retransmissions {r['uac_retransmissions']}, "
                      f"failed {r['failed_calls']}", flush=True)
    pd.DataFrame(rows).to_csv(a.out, index=False)
    print(f"wrote {a.out} ({len(rows)} runs) in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
