"""The lab join (:mod:`sipperf.ingest.lab_runs.run`) on a run with drop bursts and a late tracer.

Regression for a 20 000-call run at 600 calls/s whose join raised ``TimelineError: t_dep <
t_sip_in`` and was rejected whole: recvfrom records were paired to the wrong ``in`` lines.
The fixture is a real cut of that run (tests/fixtures/lab_drops_cut/README.md).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sipperf.ingest.lab_runs import run as lab_run
from sipperf.timeline import INSTANTS, validate_timeline

CUT = Path(__file__).parent / "fixtures" / "lab_drops_cut"


_ALIGN = lab_run._align_by_length


def _old_rule(f_tid, f_ret, x_pid, x_len, f_exit=None, x_t=None, tol_ns=0):
    """The join rule before the fix: in order, lengths only (no instants)."""
    return _ALIGN(f_tid, f_ret, x_pid, x_len)


def test_cut_joins_and_every_recvfrom_precedes_its_line():
    tl, rep = lab_run.read_run(CUT)
    validate_timeline(tl)  # the run is read, not rejected
    assert rep.balanced
    # a worker's recvfrom returns before the script writes the line of the same datagram
    have = tl["t_sip_in"].notna() & tl["t_script_in"].notna()
    assert have.sum() > 200
    gap = (tl.loc[have, "t_script_in"] - tl.loc[have, "t_sip_in"]).astype("int64").to_numpy()
    assert (gap >= -lab_run.ALIGN_TOL_NS).all()
    assert (tl.loc[have, "t_dep"].isna() | (tl.loc[have, "t_dep"] >= tl.loc[have, "t_sip_in"])).all()
    assert "instants_blanked" not in rep.details  # a correct join needs no blanking


def test_old_rule_mis_pairs_but_the_run_is_kept_and_counted(monkeypatch):
    """With the old pairing rule the cut has rows whose recvfrom instant follows their departure:
    they are blanked and counted, and every other row is kept."""
    good, _ = lab_run.read_run(CUT)
    monkeypatch.setattr(lab_run, "_align_by_length", _old_rule)
    tl, rep = lab_run.read_run(CUT)
    validate_timeline(tl)
    blanked = rep.details.get("instants_blanked", {})
    n = sum(v for k, v in blanked.items() if k.startswith("recvfrom-derived"))
    assert n >= 1
    assert any(k.startswith("recvfrom-derived") for k in blanked)
    assert any(note.startswith(f"{n} rows: recvfrom-derived") for note in rep.notes)
    assert len(good) == len(tl)  # no row lost


def test_blank_inconsistent_only_touches_bad_rows():
    ns = 1_000_000_000
    rows = {c: [ns + 10 * k for k in range(len(INSTANTS))] for c in range(3)}
    df = pd.DataFrame({c: pd.array([rows[r][k] for r in range(3)], dtype="Int64")
                       for k, c in enumerate(INSTANTS)})
    df["recv_exit"] = df["t_sip_in"]
    df.loc[1, "t_sip_in"] = ns + 1000  # after t_dep: a recvfrom of another datagram
    df.loc[2, "t_dep"] = ns - 5  # the egress packet left before the message arrived
    out, counts = lab_run._blank_inconsistent(df)
    assert not lab_run._order_violations(out).any()
    assert out.loc[0].equals(df.loc[0])
    assert pd.isna(out.loc[1, "t_sip_in"]) and pd.isna(out.loc[1, "recv_exit"])
    assert out.loc[1, "t_dep"] == df.loc[1, "t_dep"] and out.loc[1, "t_sip_c"] == df.loc[1, "t_sip_c"]
    assert pd.isna(out.loc[2, "t_dep"]) and out.loc[2, "t_arr"] == df.loc[2, "t_arr"]
    assert list(counts.values()) == [2, 1, 1]  # step 1: rows 1 and 2; steps 2 and 3: row 2


def test_alignment_takes_the_latest_recvfrom_before_each_line():
    # one worker; lines 0 and 2 were seen by the tracer, line 1's recvfrom was lost, and the
    # tracer started after line 0 (no record for it): lengths alone would pair line 0 with
    # the first record (same length 447)
    f_tid = np.array([7, 7])
    f_ret = np.array([447, 447])
    f_exit = np.array([2_000_000, 4_000_000])
    x_pid = np.array([7, 7, 7])
    x_len = np.array([447, 447, 447])
    x_t = np.array([1_000_000, 2_500_000, 4_010_000])
    idx, sk_f, sk_x = lab_run._align_by_length(f_tid, f_ret, x_pid, x_len, f_exit=f_exit, x_t=x_t)
    assert idx.tolist() == [-1, 0, 1]
    assert (sk_f, sk_x) == (0, 1)
    old, _, _ = lab_run._align_by_length(f_tid, f_ret, x_pid, x_len)
    assert old.tolist() == [0, 1, -1]  # the drift the instants prevent
    # a line whose latest recvfrom returned another length gets none
    idx, _, sk_x = lab_run._align_by_length(f_tid, np.array([447, 500]), x_pid, x_len, f_exit=f_exit, x_t=x_t)
    assert idx.tolist() == [-1, 0, -1] and sk_x == 2


@pytest.mark.parametrize("tol", [0, lab_run.ALIGN_TOL_NS])
def test_alignment_tolerates_the_xlog_rounding(tol):
    # the µs-truncated line may read up to ~1 µs before the kernel's return instant
    idx, _, _ = lab_run._align_by_length(np.array([1]), np.array([10]), np.array([1]), np.array([10]),
                                         f_exit=np.array([5_900]), x_t=np.array([5_000]), tol_ns=tol)
    assert idx.tolist() == ([0] if tol >= 900 else [-1])
