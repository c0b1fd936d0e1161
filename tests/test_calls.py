"""RFC 6076 metrics and PDR on hand-built timelines, checked against values derived by hand from
the RFC's definitions (section numbers below are RFC 6076's unless marked RFC 3261)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sipperf import calls
from sipperf.timeline import make_timeline

B = 1_700_000_000_000_000_000
MS = 1_000_000


def _msg(cid, kind, method=None, status=None, cm=None, arr=None, dep=None, cseq=1, dropped=False, run="r1"):
    return {"run_id": run, "call_id": cid, "kind": kind, "method": method, "status": status,
            "cseq_method": cm or method, "cseq": cseq, "t_arr": arr, "t_dep": dep, "dropped": dropped}


def _req(cid, method, arr, cseq=1, **kw):
    return _msg(cid, "request", method, arr=arr, dep=None if kw.get("dropped") else arr, cseq=cseq, **kw)


def _resp(cid, status, cm, dep, cseq=1, **kw):
    return _msg(cid, "response", status=status, cm=cm, dep=dep, cseq=cseq, **kw)


def _frame(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in ("t_arr", "t_dep"):  # ms offsets -> exact int ns (no float on the way)
        df[c] = pd.array([None if v is None or v != v else B + int(round(v * 1000)) * (MS // 1000)
                          for v in df[c]], dtype="Int64")
    for c in ("status", "cseq"):
        df[c] = pd.array([None if v is None or v != v else int(v) for v in df[c]], dtype="Int64")
    return make_timeline(df)


# Times in ms.  The timeline ends at 40 000 ms (the OPTIONS of "Z"), so a request without a
# final response is a timeout if sent at least 32 000 ms (Timer B/F = 64*T1, RFC 3261) before that.
ROWS = [
    # A: 100 from the proxy, 180, 200, ACK, a re-INVITE (not a new session, §4.6), BYE answered 200
    _req("A", "INVITE", 0), _resp("A", 100, "INVITE", 1), _resp("A", 180, "INVITE", 5),
    _resp("A", 200, "INVITE", 8), _req("A", "ACK", 9),
    _req("A", "INVITE", 500, cseq=2), _resp("A", 200, "INVITE", 502, cseq=2),
    _req("A", "BYE", 1000, cseq=3), _resp("A", 200, "BYE", 1002, cseq=3),
    # B: 486 with no provisional; C: 100 then 503; D: redirected 302; E: INVITE dropped, no answer
    _req("B", "INVITE", 10), _resp("B", 486, "INVITE", 13),
    _req("C", "INVITE", 20), _resp("C", 100, "INVITE", 21), _resp("C", 503, "INVITE", 26),
    _req("D", "INVITE", 30), _resp("D", 302, "INVITE", 32),
    _req("E", "INVITE", 40, dropped=True),
    # F: 407 challenge, ACK, INVITE with credentials (CSeq 2), 100, 180, 200; BYE answered 200
    _req("F", "INVITE", 50), _resp("F", 407, "INVITE", 51), _req("F", "ACK", 52),
    _req("F", "INVITE", 53, cseq=2), _resp("F", 100, "INVITE", 54, cseq=2),
    _resp("F", 180, "INVITE", 60, cseq=2), _resp("F", 200, "INVITE", 70, cseq=2),
    _req("F", "BYE", 3000, cseq=3), _resp("F", 200, "BYE", 3004, cseq=3),
    # G: rings, then 480 after 5 s; H: 408 from downstream
    _req("G", "INVITE", 80), _resp("G", 180, "INVITE", 85), _resp("G", 480, "INVITE", 5080),
    _req("H", "INVITE", 90), _resp("H", 408, "INVITE", 100),
    # I: 200 without provisional; BYE never answered (times out); J: BYE answered 481
    _req("I", "INVITE", 110), _resp("I", 200, "INVITE", 115), _req("I", "BYE", 2000, cseq=2),
    _req("J", "INVITE", 120), _resp("J", 180, "INVITE", 122), _resp("J", 200, "INVITE", 130),
    _req("J", "BYE", 4000, cseq=2), _resp("J", 481, "BYE", 4001, cseq=2),
    # M: established, still open (no BYE); K: INVITE 1 s before the end, unanswered -> pending
    _req("M", "INVITE", 140), _resp("M", 200, "INVITE", 150),
    _req("K", "INVITE", 39_000),
    # N: only a 100 Trying, early on: the provisional stops Timer B (RFC 3261), so pending, not timeout;
    # P: the callee's 200 reached the proxy but was dropped there, the proxy later sent 408
    _req("N", "INVITE", 160), _resp("N", 100, "INVITE", 161),
    _req("P", "INVITE", 170), _resp("P", 100, "INVITE", 171),
    _msg("P", "response", status=200, cm="INVITE", arr=175, dropped=True),
    _resp("P", 408, "INVITE", 5170), _req("P", "ACK", 5171),
    # registrations: R1 401 then 200 (one attempt), R1 refresh; R2 403; R3 no answer (timeout);
    # R4 401 and no retry; R5 1/2 s before the end (pending)
    _req("R1", "REGISTER", 200), _resp("R1", 401, "REGISTER", 201),
    _req("R1", "REGISTER", 203, cseq=2), _resp("R1", 200, "REGISTER", 207, cseq=2),
    _req("R1", "REGISTER", 10_000, cseq=3), _resp("R1", 200, "REGISTER", 10_002, cseq=3),
    _req("R2", "REGISTER", 300), _resp("R2", 403, "REGISTER", 302),
    _req("R3", "REGISTER", 400),
    _req("R4", "REGISTER", 500), _resp("R4", 401, "REGISTER", 501),
    _req("R5", "REGISTER", 39_500),
    _req("Z", "OPTIONS", 40_000),
]


def test_rfc6076_hand_computed():
    m = calls.metrics(_frame(ROWS)).set_index("metric")

    def val(k):
        return m.loc[k, "value"]

    # Session attempts (new-session INVITEs, challenge folded in): A B C D E F G H I J M P decided;
    # K pending (no answer, 1 s < 32 s before the end), N pending (a 100 stops Timer B).
    # Outcomes: A 200, B 486, C 503, D 302, E timeout, F 200, G 480, H 408, I 200, J 200, M 200,
    # P 408 (its 200 was dropped at the proxy, so the caller never got it).
    # SRD (§4.3): end = first response other than 100 and 401/402/407.
    #  successful (101-199/2xx): A 180-INVITE 5-0, F 180 at 60 - first INVITE at 50 (the 407
    #  round trip is counted, §5.3) = 10, G 180 85-80 = 5, I 200 115-110 = 5, J 122-120 = 2,
    #  M 150-140 = 10 -> 6 values, mean 37/6 ms, median 5 ms
    assert m.loc["SRD_successful", "count"] == 6
    assert val("SRD_successful") == pytest.approx(37 / 6 * 1000)
    assert m.loc["SRD_successful", "median"] == pytest.approx(5_000)
    #  failed (4xx but challenges, 5xx, 6xx): B 3, C 6 (the 100 does not end it), H 10,
    #  P 5170-170 = 5000 -> mean 5019/4 ms
    assert m.loc["SRD_failed", "count"] == 4
    assert val("SRD_failed") == pytest.approx(5019 / 4 * 1000)
    # SDD (§4.4): successful A 1002-1000 = 2, F 3004-3000 = 4 -> 3 ms;
    # failed: J 481 after 1 ms, I timed out -> Timer F 32 000 ms: mean 16 000.5 ms
    assert m.loc["SDD_successful", "count"] == 2 and val("SDD_successful") == pytest.approx(3_000)
    assert m.loc["SDD_failed", "count"] == 2 and val("SDD_failed") == pytest.approx(16_000_500)
    # SDT (§4.5.1): BYE - 2xx: A 1000-8, F 3000-70, I 2000-115, J 4000-130 -> 9677/4 ms
    assert m.loc["SDT_successful", "count"] == 4
    assert val("SDT_successful") == pytest.approx(9677 / 4 * 1000)
    # SER (§4.6): 200s A F I J M = 5 over 12 - 1 (D, 3xx) = 11
    assert m.loc["SER", "count"] == 11 and val("SER") == pytest.approx(100 * 5 / 11)
    # SEER (§4.7): 5 + B 486 + G 480 = 7 over 11
    assert val("SEER") == pytest.approx(100 * 7 / 11)
    # ISA (§4.8): C 503, E timeout (= 408, RFC 3261 §8.1.3.1), H 408, P 408 -> 4 over all 12
    assert m.loc["ISA", "count"] == 12 and val("ISA") == pytest.approx(100 * 4 / 12)
    # SCR (§4.9): completed A, F, J (BYE answered, even by 481); I's BYE got no response;
    # M still open -> left out: 3 over 11
    assert m.loc["SCR", "count"] == 11 and val("SCR") == pytest.approx(100 * 3 / 11)
    # RRD (§4.1): R1 207-200 = 7 (401 round trip included), refresh 10002-10000 = 2 -> 4.5 ms
    assert m.loc["RRD", "count"] == 2 and val("RRD") == pytest.approx(4_500)
    # IRA (§4.2): attempts R1, R1 refresh, R2, R3, R4 (R5 pending); ineffective R2 (403) and
    # R3 (timeout); R4's unanswered 401 is no failure -> 2 / 5
    assert m.loc["IRA", "count"] == 5 and val("IRA") == pytest.approx(40.0)
    # PDR: E's INVITE and P's 200 are the drops among the 62 messages (A 9, B 2, C 3, D 2, E 1,
    # F 9, G 3, H 2, I 3, J 5, M 2, K 1, N 2, P 5, R1 6, R2 2, R3 1, R4 2, R5 1, Z 1)
    assert len(ROWS) == 62 and val("PDR") == pytest.approx(100 * 2 / 62)
    c = calls.call_table(_frame(ROWS)).set_index("key")
    assert c.loc["r1\x00E", "timeout"] and not c.loc["r1\x00E", "pending"]
    assert c.loc["r1\x00N", "pending"] and c.loc["r1\x00K", "pending"] and not c.loc["r1\x00N", "timeout"]


def test_redirect_then_new_invite_and_longer_timer():
    """A 302 then a new INVITE in the same Call-ID: two attempts (§4.6 removes the redirected one
    from the SER denominator).  With a Timer B longer than the capture, an unanswered INVITE is
    pending, not ineffective."""
    rows = [
        _req("D", "INVITE", 0), _resp("D", 302, "INVITE", 2),
        _req("D", "INVITE", 5, cseq=2), _resp("D", 180, "INVITE", 8, cseq=2),
        _resp("D", 200, "INVITE", 20, cseq=2), _req("D", "BYE", 100, cseq=3), _resp("D", 200, "BYE", 101, cseq=3),
        _req("X", "INVITE", 10),
        _req("Z", "OPTIONS", 40_000),
    ]
    tl = _frame(rows)
    c = calls.call_table(tl)
    assert len(c) == 3 and sorted(c.s_fin.dropna().astype(int)) == [200, 302]
    m = calls.metrics(tl).set_index("metric")
    # attempts: D#1 302, D#2 200, X timeout (39 990 ms >= 32 s) -> SER 1/(3-1), ISA 1/3, SCR 1/3
    assert m.loc["SER", "value"] == pytest.approx(50.0)
    assert m.loc["ISA", "value"] == pytest.approx(100 / 3)
    assert m.loc["SCR", "value"] == pytest.approx(100 / 3)
    # SRD of the second attempt starts at its own INVITE: 8 - 5 = 3 ms; the 302 is no SRD end
    assert m.loc["SRD_successful", "value"] == pytest.approx(3_000) and m.loc["SRD_failed", "count"] == 0
    m2 = calls.metrics(tl, timer_s=60.0).set_index("metric")
    # X pending now: SER 1/(2-1), ISA 0/2
    assert m2.loc["SER", "value"] == pytest.approx(100.0) and m2.loc["ISA", "value"] == pytest.approx(0.0)


def test_runs_are_separate_and_retransmissions_fold():
    """The same Call-ID in two runs is two calls; a retransmitted INVITE (same CSeq) is one
    transaction timed from its first copy."""
    rows = [
        _req("A", "INVITE", 0), _req("A", "INVITE", 500), _resp("A", 180, "INVITE", 510),
        _resp("A", 486, "INVITE", 600),
        _req("A", "INVITE", 0, run="r2"), _resp("A", 180, "INVITE", 3, run="r2"),
        _resp("A", 200, "INVITE", 9, run="r2"),
    ]
    m = calls.metrics(_frame(rows)).set_index("metric")
    # r1: SRD 510-0, r2: 3-0 -> mean 256.5 ms; SER 1/2, SEER 2/2
    assert m.loc["SRD_successful", "count"] == 2
    assert m.loc["SRD_successful", "value"] == pytest.approx(256_500)
    assert m.loc["SER", "value"] == pytest.approx(50.0) and m.loc["SEER", "value"] == pytest.approx(100.0)


def test_empty_and_no_calls():
    m = calls.metrics(_frame([_req("Z", "OPTIONS", 0)])).set_index("metric")
    for k in ("SRD_successful", "SRD_failed", "SDD_successful", "SDD_failed", "SDT_successful",
              "SER", "SEER", "ISA", "SCR", "RRD", "IRA"):
        assert np.isnan(m.loc[k, "value"]), k


def test_pdr_offered():
    tl = _frame(ROWS)
    assert calls.pdr(tl) == pytest.approx(2 / 62)
    # 100 offered, 60 delivered -> 40 lost
    assert calls.pdr(tl, offered=100) == pytest.approx(0.40)


# ------------------------------------------------------------------ issue 13: vantage-aware metrics
def test_transactions_retransmissions_apart():
    """Per transaction type, timed from the first copy; retransmitted transactions apart (ms)."""
    rows = [
        _req("A", "INVITE", 0), _req("A", "INVITE", 500), _resp("A", 180, "INVITE", 510),
        _resp("A", 200, "INVITE", 520),
        _req("B", "INVITE", 0), _resp("B", 200, "INVITE", 5),
        _req("C", "INVITE", 0), _resp("C", 100, "INVITE", 1), _resp("C", 486, "INVITE", 7),
        _req("D", "BYE", 0, cseq=2), _resp("D", 200, "BYE", 2, cseq=2),
        _req("E", "BYE", 0, cseq=2),
    ]
    tx = calls.transactions(_frame(rows)).set_index("method")
    inv = tx.loc["INVITE"]
    assert (inv.transactions, inv.request_copies, inv.retransmitted, inv.answered_final, inv.no_final) == (3, 4, 1, 3, 0)
    assert inv.first_response_clean_median_us == pytest.approx(3000)  # median(5, 1) ms
    assert inv.final_clean_count == 2 and inv.final_clean_median_us == pytest.approx(6000)
    assert inv.final_retrans_count == 1 and inv.final_retrans_median_us == pytest.approx(520_000)
    bye = tx.loc["BYE"]
    assert (bye.transactions, bye.answered_final, bye.no_final) == (2, 1, 1)
    c = calls.message_counts(_frame(rows)).set_index(["kind", "method", "status"])
    assert c.loc[("request", "INVITE", ""), "messages"] == 4


def test_pdr_counts_only_what_should_have_been_forwarded():
    rows = [_req("A", "INVITE", 0), _resp("A", 100, "INVITE", 1), _resp("A", 200, "INVITE", 5),
            _req("B", "INVITE", 10, dropped=True)]
    tl = _frame(rows)
    # without a disposition column: dropped / all rows
    assert calls.pdr(tl) == pytest.approx(1 / 4)
    tl["disposition"] = ["relayed", "originated", "relayed", "dropped"]
    assert calls.pdr(tl) == pytest.approx(1 / 3)
    tl["disposition"] = ["relayed", "absorbed: 100 Trying", "relayed", "dropped"]
    assert calls.pdr(tl) == pytest.approx(1 / 3)
    tl["vantage"] = "endpoint"
    m = calls.metrics(tl).set_index("metric")
    assert np.isnan(calls.pdr(tl)) and np.isnan(m.loc["PDR", "value"]) and "no proxy" in m.loc["PDR", "definition"]


def test_multi_hop_metrics_use_the_first_hop():
    rows = [_req("A", "INVITE", 0), _resp("A", 200, "INVITE", 10)]
    hop1 = _frame(rows)
    hop2 = _frame([_req("A", "INVITE", 2), _resp("A", 200, "INVITE", 8)])
    hop1["hop"], hop2["hop"] = 1, 2
    both = pd.concat([hop1, hop2], ignore_index=True)
    m = calls.metrics(both).set_index("metric")
    assert m.loc["SRD_successful", "count"] == 1 and m.loc["SRD_successful", "value"] == pytest.approx(10_000)


def _tshark_rows(path):
    import shutil
    import subprocess

    if not shutil.which("tshark"):
        pytest.skip("tshark not installed")
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "sip", "-T", "fields", "-E", "separator=|",
                          "-e", "frame.time_epoch", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "sip.Call-ID",
                          "-e", "sip.Method", "-e", "sip.Status-Code", "-e", "sip.CSeq.method"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


def test_setup_outcomes_against_tshark():
    """retrans.pcapng: the callee dies 1 s in, the proxy answers the later INVITEs 408 (setup
    failures) and the BYEs of two established calls 408 (not setup failures).  Failed attempts
    and the setup delay (INVITE to the first status-indicative response, at the caller's side)
    against tshark's own dissection."""
    from pathlib import Path

    from sipperf.ingest import load

    cap = Path(__file__).parent / "fixtures" / "retrans.pcapng"
    rows = _tshark_rows(cap)
    uac = 15076                                   # the caller's port (fixtures/README.md)
    first_inv, first_ind, failed = {}, {}, set()
    for t, sp, dp, cid, meth, st, cm in rows:
        t = float(t)
        if meth == "INVITE" and sp == str(uac):
            first_inv.setdefault(cid, t)
        elif st and cm == "INVITE" and dp == str(uac) and st != "100":
            first_ind.setdefault(cid, t)
            if st in ("408", "500", "503", "504"):
                failed.add(cid)
    srd_ms = np.array([1e3 * (first_ind[c] - first_inv[c]) for c in first_inv if c in first_ind])
    tl, _ = load(cap)
    o = calls.setup_outcomes(tl)
    assert o["attempts"] == len(first_inv) == 16 and o["undecided"] == 0
    assert o["failed"] == len(failed) == 7 and o["late"] == 0
    assert o["srd_p50_ms"] == pytest.approx(np.percentile(srd_ms, 50), rel=1e-3)
    # a deadline shorter than most setups makes those calls late; nothing answered is undecided
    tight = calls.setup_outcomes(tl, deadline_s=np.percentile(srd_ms, 50) / 1e3)
    assert tight["failed"] == len(failed) + int((srd_ms > np.percentile(srd_ms, 50)).sum()) - \
        int(sum(1 for c in failed if 1e3 * (first_ind[c] - first_inv[c]) > np.percentile(srd_ms, 50)))
