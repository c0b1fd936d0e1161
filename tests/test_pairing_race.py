"""The race rule of the drop rule (sipperf.ingest.pairing.hop, docs/formats.md section 4): with
several workers reading one socket, a 180 read just before its transaction's 200 can lose the race
to it and be discarded by the transaction; with one reader (FIFO) a 180 that never left, read
before a 200 that did, was dropped by the kernel."""
from __future__ import annotations

import numpy as np
import pandas as pd

from sipperf.ingest.pairing import hop
from sipperf.ingest.pairing.proxy import concurrent

UAS = "127.0.0.1:5080"


def _transaction(gap_ns: float, sojourn_200_ns: float):
    """INVITE relayed; 180 and 200 from the callee gap_ns apart; the 200 relayed after
    sojourn_200_ns; the 180 never left."""
    tl = pd.DataFrame({
        "call_id": ["c1"] * 3, "cseq": [1, 1, 1], "cseq_method": ["INVITE"] * 3,
        "kind": ["request", "response", "response"], "method": ["INVITE", None, None],
        "status": [None, 180, 200], "src": ["127.0.0.1:5061", UAS, UAS], "dst": ["", "", ""],
        "via_branch": ["b1", "", ""]})
    t_in = np.array([0.0, 1e6, 1e6 + gap_ns])
    t_out = np.array([50e3, np.nan, 1e6 + gap_ns + sojourn_200_ns])
    return tl, t_in, t_out


def test_a_concurrent_proxy_absorbs_a_provisional_that_lost_the_race():
    # read 5 µs before the 200, which was relayed 80 µs later; relayed messages stayed up to 200 µs
    tl, t_in, t_out = _transaction(gap_ns=5e3, sojourn_200_ns=80e3)
    assert hop.classify(tl, t_in, t_out, longest=200e3, concurrent=True)[1] == hop.ABSORBED_AFTER_FINAL
    assert hop.classify(tl, t_in, t_out, longest=200e3, concurrent=False)[1] == hop.DROPPED


def test_a_provisional_that_lost_the_race_to_a_slow_final_is_absorbed():
    # a 2-worker Kamailio at 2,100 calls/s, no socket drop: the 180 read 2 ms before the 200, which
    # a busy worker relayed 13 ms later; no relayed message stayed longer than that 200 did
    tl, t_in, t_out = _transaction(gap_ns=2e6, sojourn_200_ns=13e6)
    assert hop.classify(tl, t_in, t_out, longest=13e6, concurrent=True)[1] == hop.ABSORBED_AFTER_FINAL
    # read 20 ms before the 200: no relayed message stayed that long, so it was not inside: dropped
    tl, t_in, t_out = _transaction(gap_ns=20e6, sojourn_200_ns=13e6)
    assert hop.classify(tl, t_in, t_out, longest=13e6, concurrent=True)[1] == hop.DROPPED


def test_a_provisional_longer_ahead_than_any_sojourn_is_a_drop_even_when_concurrent():
    # read 1 ms before the 200 left: longer than any relayed message stayed in the proxy (200 µs)
    tl, t_in, t_out = _transaction(gap_ns=1e6, sojourn_200_ns=80e3)
    assert hop.classify(tl, t_in, t_out, longest=200e3, concurrent=True)[1] == hop.DROPPED


def test_concurrency_is_seen_only_when_a_relayed_message_overtakes_another():
    a = np.array([0.0, 10.0, 20.0, 30.0])
    assert not concurrent(a, a + 5)                                  # FIFO
    assert concurrent(a, np.array([50.0, 15.0, 25.0, 35.0]))         # the first left after the second
    assert not concurrent(np.array([0.0, np.nan]), np.array([np.nan, 1.0]))
