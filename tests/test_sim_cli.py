"""``sipperf simulate`` refuses nonsense (issue 13 item 7): exit status 2 and a message naming the
argument, or the file and line; never a hang, a traceback or INT64_MIN timestamps."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sipperf.cli import main
from sipperf.sim import rundir as S

BAD_ARGS = [
    ("--rate=nan", "--rate must be a finite number"),
    ("--rate=inf", "--rate must be a finite number"),
    ("--rate=-inf", "--rate must be a finite number"),
    ("--rate=0", "--rate must be a finite number"),
    ("--rate=-5", "--rate must be a finite number"),
    ("--rate=1e9", "above the bound"),
    ("--rate=1e-300", "span"),                      # would overflow int64 nanoseconds
    ("--calls=0", "--calls must be between"),
    ("--calls=-1", "--calls must be between"),
    ("--calls=1000000000", "--calls must be between"),
    ("--threads=0", "--threads must be between"),
    ("--threads=1000000", "--threads must be between"),
    ("--cores=0", "--cores must be between"),
    ("--cores=100000", "--cores must be between"),
    ("--rcvbuf-pkts=0", "--rcvbuf-pkts must be between"),
    ("--rcvbuf-pkts=-3", "--rcvbuf-pkts must be between"),
    ("--rcvbuf-bytes=0", "--rcvbuf-bytes must be between"),
    ("--seed=-1", "--seed must be"),
    ("--arrivals=bursty", "--arrivals must be"),
]


def _run(argv, capsys):
    rc = main(["simulate", *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("extra, message", BAD_ARGS)
def test_bad_numbers_exit_2_with_a_message(tmp_path, capsys, extra, message):
    base = {"--rate": "100", "--calls": "20"}
    argv = [f"{k}={v}" for k, v in base.items() if not extra.startswith(k + "=")]
    rc, err = _run([*argv, extra, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o" / "timeline.parquet").exists()


@pytest.mark.parametrize("content, message", [
    ("0.01\nnan\n", "iat.txt:2: not a finite"),
    ("0.01\n0.02\ninf\n", "iat.txt:3: not a finite"),
    ("0.01\n-0.5\n", "iat.txt:2: negative"),
    ("0.01\nten\n", "iat.txt:2: not a number"),
    ("# only a comment\n", "no inter-arrival times"),
    ("1e300\n", "span"),
])
def test_bad_arrivals_file(tmp_path, capsys, content, message):
    f = tmp_path / "iat.txt"
    f.write_text(content)
    rc, err = _run(["--rate", "10", "--calls", "5", "--arrivals", f"file:{f}", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and message in err


def test_arrivals_file_not_text_or_missing(tmp_path, capsys):
    f = tmp_path / "iat.bin"
    f.write_bytes(b"\xff\xfe\x00\x81")
    rc, err = _run(["--rate", "10", "--calls", "5", "--arrivals", f"file:{f}", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "not a UTF-8 text file" in err
    rc, err = _run(["--rate", "10", "--calls", "5", "--arrivals", f"file:{tmp_path / 'nope'}",
                    "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "not found" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_as_arrivals_file_does_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "sipperf.cli", "simulate", "--rate", "10", "--calls", "5",
                        "--arrivals", f"file:{fifo}", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr


def test_out_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    rc, err = _run(["--rate", "100", "--calls", "5", "--out", str(f / "run")], capsys)
    assert rc == 2 and "cannot create the output directory" in err


def test_bounds_are_usable(tmp_path, capsys):
    """A run at the edge of the bounds that is cheap (one call) works, with sane instants."""
    rc = main(["simulate", "--rate", str(S.MAX_RATE_CPS), "--calls", "1", "--threads", "4", "--cores", "2",
               "--rcvbuf-pkts", "1", "--out", str(tmp_path / "o")])
    assert rc == 0
    tl = pd.read_parquet(tmp_path / "o" / "timeline.parquet")
    t = tl["t_arr"].to_numpy(dtype="int64")
    assert (t >= 0).all() and (t < 10**12).all()


def test_file_arrivals_and_both_engines(tmp_path):
    f = tmp_path / "iat.txt"
    f.write_text("0.004\n0.001\n")
    for engine in ("twin", "simpy"):
        out = tmp_path / engine
        assert main(["simulate", "--rate", "1", "--calls", "4", "--arrivals", f"file:{f}", "--threads", "2",
                     "--engine", engine, "--seed", "3", "--out", str(out)]) == 0
        meta = json.loads((out / "meta.json").read_text())
        assert meta["engine"] == engine and meta["stats"]["engine"] == engine
        tl = pd.read_parquet(out / "timeline.parquet")
        inv = np.sort(tl.loc[tl.msg_type == "INVITE", "t_arr"].to_numpy(dtype=np.int64))
        assert np.diff(inv).tolist() == [1_000_000, 4_000_000, 1_000_000]
    a = pd.read_parquet(tmp_path / "twin" / "timeline.parquet")
    b = pd.read_parquet(tmp_path / "simpy" / "timeline.parquet")
    pd.testing.assert_frame_equal(a, b)       # same seed, same inputs: the same timeline
