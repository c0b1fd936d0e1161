"""Micro-benchmark: the per-block stages of the thesis-log reader on the first blocks of the
SYNTHETIC bench log (bench/logs.py makes it): newline count, tokenizer (scan_block), pairing
and row assembly (pair_block).  Prints the median CPU seconds per stage, scaled to the file.

    python bench/thesis_blocks.py [--path ...] [--blocks 12] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default="/tmp/sipperf_bench_thesis_1000000.log")
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from sipperf.ingest.thesis_logs import read as T
    from sipperf.ingest.thesis_logs.scan import scan_block

    size = os.path.getsize(a.path)
    blocks = []
    with open(a.path, "rb") as fh:
        rest = b""
        for _ in range(a.blocks):
            raw = rest + fh.read(T.BLOCK_BYTES)
            cut = raw.rfind(b"\n") + 1
            rest = raw[cut:]
            blocks.append(bytearray(T._PADB + raw[:cut] + T._PADB))
    nbytes = sum(len(b) - 2 * T.PAD for b in blocks)
    times: dict[str, list[float]] = {"count_newlines": [], "scan_block": [], "pair_block": []}
    for _ in range(a.repeat):
        pairer = T._BlockPairer(a.path, False, size, Counter(), Counter())
        line0 = 0
        t = dict.fromkeys(times, 0.0)
        for blk in blocks:
            b = np.frombuffer(blk, np.uint8)
            c = time.process_time()
            n = int(np.count_nonzero(b[T.PAD:len(blk) - T.PAD] == 10))
            t["count_newlines"] += time.process_time() - c
            c = time.process_time()
            sc = scan_block(b, T._words(b), T.PAD, n, np.zeros(8, np.int64))
            t["scan_block"] += time.process_time() - c
            c = time.process_time()
            pairer.block(b, *sc, line0, False, len(blk) - 2 * T.PAD)
            t["pair_block"] += time.process_time() - c
            line0 += n
        for k in times:
            times[k].append(t[k])
    f = size / nbytes
    print(f"{len(blocks)} blocks ({nbytes / 1e6:.0f} MB), median of {a.repeat}, CPU s scaled to the "
          f"{size / 1e9:.2f} GB file (load average {os.getloadavg()[0]:.1f}):")
    for k, v in times.items():
        print(f"  {k:<16s} {statistics.median(v) * f:6.2f} s")


if __name__ == "__main__":
    main()
