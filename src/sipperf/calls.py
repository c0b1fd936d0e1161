"""Call-level metrics of RFC 6076 measured at the proxy, and the packet drop rate (seed 000 ch. 6).

RFC 6076 (Malas & Morton, 2011) defines its metrics at the originating user agent; here the
measurement point is the proxy's upstream side: a **request instant** is when the request reached
the proxy (``t_arr``; if null the earliest non-null instant of the row) and a **response instant**
is when the response left the proxy towards the caller (``t_dep``; if null the latest non-null
instant).  So SRD, SDD and RRD below are the caller's delays minus the caller↔proxy round trip.

Units of counting (what the RFC calls a "request" or an "attempt"):

* A **transaction** is (run, Call-ID, CSeq number, method); retransmissions fold into it (earliest
  request instant; first response of each kind).
* A **session attempt** is a new-session INVITE transaction (re-INVITEs, i.e. INVITEs sent after the
  call's first 2xx, are ignored, §4.6 speaks of *new session* INVITEs).  An INVITE answered by an
  authentication challenge (401, 402, 407) and the INVITE that retries it with credentials (same
  Call-ID, next CSeq) are **one** attempt that starts at the first INVITE: RFC 6076 does not count the
  challenges as failures (§4.2, §4.3.2) and counts the time spent authenticating (§5.3).  A
  REGISTER *registration attempt* is built the same way.
* An attempt's **outcome** is the first final response of its last transaction that left the proxy
  towards the caller (a response dropped at the proxy never reached the UA and does not count).
  With no final response it is a **timeout** once the timeline extends ``timer_s`` (default 32 s =
  64·T1, RFC 3261 Timers B and F) beyond the request, except for an INVITE that got any provisional
  response (that stops Timer B); otherwise it is **pending** (open when the capture ended) and is
  left out of every ratio.  RFC 3261 §8.1.3.1 makes a transaction timeout equivalent to a 408.
* The **status-indicative response** of an attempt is its first response other than 100 Trying and
  the challenges 401/402/407 (§4.3).

Challenges = {401, 402, 407}; *failure* = 4xx except challenges, 5xx, 6xx (§4.2, §4.3.2).  An
attempt that ends on a challenge nobody answered (or on a 3xx, for IRA and SRD) is neither a
success nor a failure: it stays in the denominators only.

================  =========  ===========================================================================
metric            RFC 6076   definition used here
================  =========  ===========================================================================
RRD               §4.1       registration attempts answered 2xx: 2xx − first REGISTER of the attempt
                             (a 401/407 round trip included, §5.3).  Failures are left to IRA.
IRA               §4.2       registration attempts ending in a failure response or a timeout /
                             registration attempts (pending ones excluded), in %.  3xx and an
                             unanswered challenge are neither.
SRD_successful    §4.3.1     attempts whose status-indicative response is a 101–199 provisional or
                             a 2xx: that response − first INVITE.  Reported apart from failures.
SRD_failed        §4.3.2     attempts whose status-indicative response is a failure:
                             that response − first INVITE.
SDD_successful    §4.4       first BYE of a call answered 2xx: 2xx − BYE.
SDD_failed        §4.4       first BYE answered 3xx–6xx: that response − BYE; a BYE that timed out
                             counts ``timer_s`` (the end event is the timeout, Timer F).
SDT_successful    §4.5.1     established calls with a BYE: BYE − 2xx to the INVITE.  The
                             failed-completion variant (§4.5.2) is not computed.
SER               §4.6       attempts answered 200 / (attempts − attempts answered 3xx), in %.
SEER              §4.7       attempts answered 200, 480, 486, 600 or 603 / (attempts − attempts
                             answered 3xx), in %.
ISA               §4.8       attempts answered 408, 500, 503 or 504, or timed out / attempts, in %.
SCR               §4.9       completed sessions / attempts, in %: completed = established (2xx) and
                             its BYE got a final response (the session did not fail for lack of a
                             response).  Established calls still open at the end (no BYE, or a
                             pending BYE) are left out of numerator and denominator.
PDR               seed 000   packet drop rate: dropped / messages the proxy should have forwarded
                  ch. 6      = relayed + dropped when the timeline has the drop rule's
                             ``disposition`` (:mod:`sipperf.ingest.pairing.hop`: hop-by-hop, absorbed and
                             answered messages are not drops), else all rows; or, if given, the
                             number offered (e.g. 6 M sent by SIPp).  Not defined (NaN) for a
                             capture with no proxy (``vantage`` endpoint).
================  =========  ===========================================================================

Where the timeline comes from (extra column ``vantage``, :mod:`sipperf.ingest.pairing.vantage`): at an
**endpoint** (no proxy) each row has one instant, the capture instant, which is both the request
and the response instant: the metrics are then exactly RFC 6076's, at the capture point.  With
**several hops** (column ``hop``) the metrics use the first hop's rows (:func:`caller_side`).
At a **B2BUA** the rows carry the caller leg's identity.  Responses that never left the proxy
(dropped, or absorbed by the drop rule) never reached the caller and do not count.
:func:`transactions` gives request -> response times per transaction type with retransmissions
apart; :func:`message_counts` counts messages by method / status.  :func:`complete_call` and
:func:`call_messages` pick one call and list its six messages with their times in the proxy.

Delays are reported in µs (count, mean, median, p99); ratios in % with the denominator as count;
NaN when undefined.  Drafts of RFC 6076 also defined Hops-per-Request; the RFC no longer lists it
between SDT (§4.5) and SER (§4.6), so it is not computed here.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sipperf.components import COMPONENTS
from sipperf.timeline import CALL_FLOW, INSTANTS

#: authentication challenges: not failures (RFC 6076 §4.2, §4.3.2)
CHALLENGES: tuple[int, ...] = (401, 402, 407)
#: final responses that show the called user's choice (RFC 6076 §4.7)
SEER_CODES: tuple[int, ...] = (200, 480, 486, 600, 603)
#: final responses that show a failed or overloaded downstream element (RFC 6076 §4.8)
ISA_CODES: tuple[int, ...] = (408, 500, 503, 504)
#: Timer B = Timer F = 64·T1 with T1 = 500 ms (RFC 3261 §17.1.1.2, §17.1.2.2)
TIMER_S: float = 32.0


def _instants(tl: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(request instant, response instant, latest instant) per row as float ns relative to the
    earliest instant (relative, so float64 keeps the ns exactly)."""
    ints = [tl[c].to_numpy(dtype="int64", na_value=0) for c in INSTANTS]
    nas = [tl[c].isna().to_numpy() for c in INSTANTS]
    present = [i[~n] for i, n in zip(ints, nas) if (~n).any()]
    ref = min(int(p.min()) for p in present) if present else 0
    m = np.stack([np.where(n, np.nan, (i - ref).astype(np.float64)) for i, n in zip(ints, nas)])
    if not m.shape[1]:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    with np.errstate(all="ignore"):
        first = np.where(np.isnan(m), np.inf, m).min(axis=0)
        last = np.where(np.isnan(m), -np.inf, m).max(axis=0)
    req_t = np.where(np.isnan(m[0]), first, m[0])
    resp_t = np.where(np.isnan(m[6]), last, m[6])
    for a in (req_t, resp_t, last):
        a[np.isinf(a)] = np.nan
    return req_t, resp_t, last


def caller_side(tl: pd.DataFrame) -> pd.DataFrame:
    """The rows that show the caller's side: with several hops (extra column ``hop``), the first
    hop's rows only (a message between two hops is a row of both: counting both would count
    every transaction twice)."""
    if "hop" in tl.columns and tl["hop"].nunique(dropna=True) > 1:
        return tl[(tl["hop"] == tl["hop"].min()).fillna(False).to_numpy(bool)]
    return tl


def _not_delivered(tl: pd.DataFrame) -> np.ndarray:
    """Messages that never left the measurement point towards their receiver: dropped, or ended
    there by design (``disposition`` absorbed / terminated, :mod:`sipperf.ingest.pairing.hop`)."""
    d = tl["dropped"].fillna(False).to_numpy(bool)
    if "disposition" in tl.columns:
        disp = tl["disposition"].astype("string").fillna("")
        d = d | (disp.str.startswith("absorbed") | disp.str.startswith("terminated")).to_numpy(bool)
    return d


def _messages(tl: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The columns the metrics need, one row per message, and the last instant of each run."""
    tl = caller_side(tl)
    req_t, resp_t, last = _instants(tl)
    run = tl["run_id"].astype("string").fillna("").to_numpy(str)
    d = pd.DataFrame({
        "run": run,
        "key": (pd.Series(run) + "\x00" + tl["call_id"].astype("string").reset_index(drop=True)).to_numpy(str),
        "kind": tl["kind"].astype(str).to_numpy(),
        "method": tl["method"].astype("string").fillna("").str.upper().to_numpy(str),
        "cmeth": tl["cseq_method"].astype("string").fillna("").str.upper().to_numpy(str),
        "cseq": tl["cseq"].to_numpy(dtype="float64", na_value=-1.0),
        "status": tl["status"].to_numpy(dtype="float64", na_value=np.nan),
        "dropped": _not_delivered(tl),
        "req_t": req_t, "resp_t": resp_t, "last": last,
    })
    run_end = d.groupby("run")["last"].max()
    return d, run_end


def _transactions(d: pd.DataFrame, method: str) -> pd.DataFrame:
    """One row per (key, cseq) transaction of ``method``: t_req, first status-indicative response
    (t_ind, s_ind) and first final response (t_fin, s_fin); sorted by key and t_req."""
    rq = d[(d.kind == "request") & (d.method == method)]
    tx = rq.groupby(["key", "cseq"]).agg(t_req=("req_t", "min"), run=("run", "first"))
    # a response dropped at the proxy never reached the caller: it does not count
    rs = d[(d.kind == "response") & (d.cmeth == method) & ~d.dropped].sort_values("resp_t", kind="stable")
    ind = rs[(rs.status != 100) & ~rs.status.isin(CHALLENGES)].groupby(["key", "cseq"]).first()
    fin = rs[rs.status >= 200].groupby(["key", "cseq"]).first()
    tx["t_any"] = rs.groupby(["key", "cseq"])["resp_t"].min()
    tx["t_ind"] = ind["resp_t"]
    tx["s_ind"] = ind["status"]
    tx["t_fin"] = fin["resp_t"]
    tx["s_fin"] = fin["status"]
    return tx.reset_index().sort_values(["key", "t_req"], kind="stable").reset_index(drop=True)


def _attempts(tx: pd.DataFrame, run_end: pd.Series, timer_ns: float, invite: bool) -> pd.DataFrame:
    """Fold challenged transactions into the retry that follows them (one attempt per row):
    t_start (first request), t_ind/s_ind (first status-indicative response), t_fin/s_fin (final
    response of the last transaction), t_last (last request), timeout and pending flags.  For an
    INVITE any provisional response stops Timer B (RFC 3261 §17.1.1.2), so only an INVITE that got
    no response at all can time out; a non-INVITE's Timer F runs on (§17.1.2.2)."""
    cols = ["key", "t_start", "t_ind", "s_ind", "t_fin", "s_fin", "t_last", "timeout", "pending"]
    if tx.empty:
        return pd.DataFrame(columns=cols)
    closes = ~tx["s_fin"].isin(CHALLENGES)
    opens = closes.groupby(tx["key"]).shift(1, fill_value=True)
    tx = tx.assign(att=opens.astype(int).groupby(tx["key"]).cumsum())
    # positional first/last rows (GroupBy.first/last would skip nulls and mix transactions)
    first = tx.drop_duplicates(["key", "att"], keep="first").set_index(["key", "att"])
    last = tx.drop_duplicates(["key", "att"], keep="last").set_index(["key", "att"])
    ind = tx.dropna(subset=["t_ind"]).sort_values("t_ind", kind="stable")
    ind = ind.drop_duplicates(["key", "att"], keep="first").set_index(["key", "att"])
    a = pd.DataFrame({"t_start": first["t_req"], "run": first["run"], "t_last": last["t_req"],
                      "t_fin": last["t_fin"], "s_fin": last["s_fin"], "t_any": last["t_any"]},
                     index=first.index)
    a["t_ind"] = ind["t_ind"]
    a["s_ind"] = ind["s_ind"]
    a = a.reset_index()
    no_final = a["s_fin"].isna().to_numpy()
    seen_for = run_end.reindex(a["run"]).to_numpy() - a["t_last"].to_numpy()
    can_time_out = a["t_any"].isna().to_numpy() if invite else np.ones(len(a), bool)
    a["timeout"] = no_final & can_time_out & (seen_for >= timer_ns)
    a["pending"] = no_final & ~a["timeout"].to_numpy(bool)
    return a[cols]


def _first_bye(d: pd.DataFrame, run_end: pd.Series, timer_ns: float) -> pd.DataFrame:
    """Per key, the earliest BYE transaction: t_bye, its final response (t_bye_fin, s_bye_fin) and
    whether it timed out or is still pending."""
    return _first_bye_from(_transactions(d, "BYE"), run_end, timer_ns)


def _first_bye_from(tx: pd.DataFrame, run_end: pd.Series, timer_ns: float) -> pd.DataFrame:
    b = tx.drop_duplicates("key", keep="first").set_index("key")  # tx is sorted by (key, t_req)
    no_final = b["s_fin"].isna().to_numpy()
    seen_for = run_end.reindex(b["run"]).to_numpy() - b["t_req"].to_numpy()
    return pd.DataFrame({"t_bye": b["t_req"], "t_bye_fin": b["t_fin"], "s_bye_fin": b["s_fin"],
                         "bye_timeout": no_final & (seen_for >= timer_ns),
                         "bye_pending": no_final & ~(seen_for >= timer_ns)}, index=b.index)


def call_table(timeline: pd.DataFrame, timer_s: float = TIMER_S) -> pd.DataFrame:
    """One row per session attempt (new-session INVITE, challenge retries folded in), instants as
    float ns relative to the timeline's earliest instant: ``key`` (run_id NUL Call-ID), t_start,
    status-indicative response (t_ind, s_ind), final response (t_fin, s_fin), timeout/pending, and
    for the established attempt the call's first BYE (t_bye, t_bye_fin, s_bye_fin, bye_timeout,
    bye_pending)."""
    d, run_end = _messages(timeline)
    return call_table_from(_transactions(d, "INVITE"), _transactions(d, "BYE"), run_end, timer_s)


def call_table_from(inv: pd.DataFrame, bye_tx: pd.DataFrame, run_end: pd.Series,
                    timer_s: float = TIMER_S) -> pd.DataFrame:
    """:func:`call_table` from the INVITE and BYE transactions (:func:`_transactions` tables)."""
    timer_ns = timer_s * 1e9
    tx = inv
    ok = (tx.s_fin >= 200) & (tx.s_fin < 300)
    t_est = tx[ok].groupby("key")["t_fin"].min()
    tx = tx[~(tx["t_req"] > t_est.reindex(tx["key"]).to_numpy())].reset_index(drop=True)  # no re-INVITEs
    a = _attempts(tx, run_end, timer_ns, invite=True)
    bye = _first_bye_from(bye_tx, run_end, timer_ns).reindex(a["key"])
    est = ((a.s_fin >= 200) & (a.s_fin < 300)).to_numpy() & ~(bye["t_bye"].to_numpy() < a["t_fin"].to_numpy())
    for col in ("t_bye", "t_bye_fin", "s_bye_fin"):  # only the established attempt owns the BYE
        a[col] = np.where(est, bye[col].to_numpy(dtype="float64"), np.nan)
    for col in ("bye_timeout", "bye_pending"):
        a[col] = est & bye[col].fillna(False).to_numpy(bool)
    return a


#: a call's setup deadline (s): a caller that has no answer by then has, for its user, failed
SETUP_DEADLINE_S: float = 2.0


def setup_outcomes(timeline: pd.DataFrame, deadline_s: float = SETUP_DEADLINE_S,
                   timer_s: float = TIMER_S) -> dict:
    """How the session attempts of a run ended, against a setup deadline: the overload signal of
    a transport that drops nothing (TCP, TLS, WebSocket), and of UDP beside its drops.

    An attempt *failed* when it ended in 408, 500, 503 or 504 (RFC 6076 §4.8, ``ISA_CODES``) or
    timed out (Timer B), and was *late* when its first status-indicative response came more than
    ``deadline_s`` after the INVITE, or not at all although the run went on that long.  An attempt
    with no answer yet and less than ``deadline_s`` of run after it is *undecided* and counts in
    neither.  The setup delay is RFC 6076's SRD (§4.3: INVITE to the first status-indicative
    response).  Returns ``attempts`` (decided), ``failed`` (failed or late, each attempt once),
    ``late``, ``undecided``, ``srd_p50_ms``, ``srd_p99_ms`` (of the answered attempts) and
    ``deadline_s``.  The capture's view: a backlog that waits in a sender's socket buffer is not
    on the wire yet, so on TCP the SRD seen by the caller can be longer than this one."""
    out = {"attempts": 0, "failed": 0, "late": 0, "undecided": 0, "srd_p50_ms": float("nan"),
           "srd_p99_ms": float("nan"), "deadline_s": float(deadline_s)}
    if timeline.empty:
        return out
    d, run_end = _messages(timeline)
    c = call_table_from(_transactions(d, "INVITE"), _transactions(d, "BYE"), run_end, timer_s)
    if c.empty:
        return out
    run = c["key"].astype(str).str.split("\x00", n=1).str[0]
    end = run_end.reindex(run).to_numpy(dtype="float64")
    t0 = c["t_start"].to_numpy(dtype="float64")
    t_ind = c["t_ind"].to_numpy(dtype="float64")
    srd = t_ind - t0
    dl = deadline_s * 1e9
    s_fin = c["s_fin"].to_numpy(dtype="float64")
    failed = np.isin(s_fin, ISA_CODES) | c["timeout"].to_numpy(bool)
    answered = np.isfinite(srd)
    late = (answered & (srd > dl)) | (~answered & (end - t0 >= dl))
    undecided = ~answered & ~failed & ~late
    bad = failed | late
    out.update({"attempts": int((~undecided).sum()), "failed": int(bad.sum()), "late": int((late & ~failed).sum()),
                "undecided": int(undecided.sum())})
    if answered.any():
        out["srd_p50_ms"] = float(np.percentile(srd[answered], 50) / 1e6)
        out["srd_p99_ms"] = float(np.percentile(srd[answered], 99) / 1e6)
    return out


def registration_table(timeline: pd.DataFrame, timer_s: float = TIMER_S) -> pd.DataFrame:
    """One row per registration attempt (REGISTER, challenge retries folded in); columns as in
    :func:`call_table` without the BYE."""
    d, run_end = _messages(timeline)
    return _attempts(_transactions(d, "REGISTER"), run_end, timer_s * 1e9, invite=False)


def exact_mean(v: np.ndarray) -> float:
    """Mean of ``v`` from its correctly rounded sum (``math.fsum``): the same number whatever
    the order of the values (so a streaming pass and an in-memory pass agree bit for bit)."""
    return math.fsum(v) / len(v) if len(v) else np.nan


def _delay_row(name: str, v_ns: np.ndarray, definition: str) -> dict:
    v = np.asarray(v_ns, dtype=float)
    v = v[np.isfinite(v)] / 1e3
    return {"metric": name, "unit": "us", "count": int(len(v)),
            "value": exact_mean(v),
            "median": float(np.median(v)) if len(v) else np.nan,
            "p99": float(np.percentile(v, 99)) if len(v) else np.nan,
            "definition": definition}


def _ratio_row(name: str, num: int, den: int, definition: str) -> dict:
    return {"metric": name, "unit": "%", "count": int(den),
            "value": 100.0 * num / den if den else np.nan, "median": np.nan, "p99": np.nan,
            "definition": definition}


def has_proxy(timeline: pd.DataFrame) -> bool:
    """False when the timeline says it holds no proxy (``vantage`` = endpoint on every row)."""
    if "vantage" not in timeline.columns or not len(timeline):
        return True
    return bool((timeline["vantage"].astype("string") != "endpoint").fillna(True).any())


def pdr(timeline: pd.DataFrame, offered: int | None = None) -> float:
    """Packet drop rate (seed 000 ch. 6): dropped / messages the proxy should have forwarded.

    With the drop rule's ``disposition`` column (:mod:`sipperf.ingest.pairing.hop`) the denominator is
    relayed + dropped messages: hop-by-hop messages that end at the proxy by design, requests
    it answered itself, its own messages and messages still in flight when the capture ended
    are in neither count.  Without it (e.g. a tidy file), dropped / all rows.  ``offered``
    replaces the denominator and then drops = offered − delivered when that is larger than the
    flagged drops.  NaN for a timeline with no proxy (endpoint view) or no message."""
    tl = caller_side(timeline) if len(timeline) else timeline
    if not has_proxy(tl):
        return np.nan
    dropped = int(tl["dropped"].fillna(False).astype(bool).sum()) if len(tl) else 0
    if "disposition" in tl.columns and len(tl):
        disp = tl["disposition"].astype("string")
        total = int(((disp == "relayed") | (disp == "dropped")).fillna(False).sum())
    else:
        total = len(tl)
    if offered is not None:
        delivered = total - dropped
        dropped = max(dropped, offered - delivered)
        return dropped / offered if offered else np.nan
    return dropped / total if total else np.nan


def _is_failure(s: np.ndarray) -> np.ndarray:
    return (s >= 400) & (s < 700) & ~np.isin(s, CHALLENGES)


def metrics(timeline: pd.DataFrame, offered: int | None = None, timer_s: float = TIMER_S) -> pd.DataFrame:
    """All metrics as a table (metric, unit, count, value, median, p99, definition)."""
    d, run_end = _messages(timeline)
    c = call_table_from(_transactions(d, "INVITE"), _transactions(d, "BYE"), run_end, timer_s)
    r = _attempts(_transactions(d, "REGISTER"), run_end, timer_s * 1e9, invite=False)
    return metrics_from(c, r, _pdr_row(timeline, offered), timer_s)


def metrics_from(c: pd.DataFrame, r: pd.DataFrame, pdr_row: dict, timer_s: float = TIMER_S) -> pd.DataFrame:
    """The metrics table from the call table ``c`` (:func:`call_table`), the registration table
    ``r`` (:func:`registration_table`) and the PDR row."""
    fs = c["s_fin"].to_numpy(dtype="float64")
    si = c["s_ind"].to_numpy(dtype="float64")
    srd = (c.t_ind - c.t_start).to_numpy(dtype="float64")
    done = ~c["pending"].to_numpy(bool)
    ok = (fs >= 200) & (fs < 300)
    n3 = int((done & (fs >= 300) & (fs < 400)).sum())
    has_bye = np.isfinite(c["t_bye"].to_numpy(dtype="float64"))
    bye_answered = np.isfinite(c["s_bye_fin"].to_numpy(dtype="float64"))
    bye_to = c["bye_timeout"].to_numpy(bool)
    open_ = ok & (~has_bye | c["bye_pending"].to_numpy(bool))
    sbf = c["s_bye_fin"].to_numpy(dtype="float64")
    bye_d = (c.t_bye_fin - c.t_bye).to_numpy(dtype="float64")
    n_att = int(done.sum())
    scr_den = int((done & ~open_).sum())
    timer_ns = timer_s * 1e9
    rows = [
        _delay_row("SRD_successful", srd[((si > 100) & (si < 200)) | ((si >= 200) & (si < 300))],
                   "§4.3.1: first 101-199/2xx response (t_dep) - first INVITE of the attempt (t_arr)"),
        _delay_row("SRD_failed", srd[_is_failure(si)],
                   "§4.3.2: failure response (4xx but 401/402/407, 5xx, 6xx; t_dep) - first INVITE (t_arr)"),
        _delay_row("SDD_successful", bye_d[(sbf >= 200) & (sbf < 300)], "§4.4: 2xx to BYE (t_dep) - BYE (t_arr)"),
        _delay_row("SDD_failed", np.concatenate([bye_d[sbf >= 300], np.full(int(bye_to.sum()), timer_ns)]),
                   f"§4.4: 3xx-6xx to BYE (t_dep) - BYE (t_arr); a BYE timeout counts {timer_s:g} s"),
        _delay_row("SDT_successful", (c.t_bye - c.t_fin).to_numpy(dtype="float64")[ok & has_bye],
                   "§4.5.1: BYE (t_arr) - 2xx to INVITE (t_dep)"),
        _ratio_row("SER", int((done & (fs == 200)).sum()), n_att - n3,
                   "§4.6: attempts answered 200 / (attempts - attempts answered 3xx)"),
        _ratio_row("SEER", int((done & np.isin(fs, SEER_CODES)).sum()), n_att - n3,
                   "§4.7: attempts answered 200,480,486,600,603 / (attempts - attempts answered 3xx)"),
        _ratio_row("ISA", int((done & (np.isin(fs, ISA_CODES) | c["timeout"].to_numpy(bool))).sum()), n_att,
                   "§4.8: attempts answered 408,500,503,504 or timed out / attempts"),
        _ratio_row("SCR", int((done & ok & bye_answered).sum()), scr_den,
                   "§4.9: established sessions whose BYE got a final response / attempts"),
    ]
    rows += _registration_rows(r)
    rows.append(pdr_row)
    return pd.DataFrame(rows)


def _pdr_row(timeline: pd.DataFrame, offered: int | None) -> dict:
    tl = caller_side(timeline)
    if not has_proxy(tl):
        return pdr_row_from(False, False, 0, 0, offered)
    dropped = int(tl["dropped"].fillna(False).astype(bool).sum()) if len(tl) else 0
    if "disposition" in tl.columns:
        disp = tl["disposition"].astype("string")
        total = int(((disp == "relayed") | (disp == "dropped")).fillna(False).sum())
    else:
        total = len(tl)
    return pdr_row_from(True, "disposition" in tl.columns, dropped, total, offered)


def pdr_row_from(proxy: bool, by_disposition: bool, dropped: int, total: int, offered: int | None) -> dict:
    """The PDR row of :func:`metrics` from the caller side's counts: ``dropped`` rows and
    ``total`` (relayed + dropped with the drop rule's dispositions, else all rows)."""
    if not proxy:
        return {"metric": "PDR", "unit": "%", "count": 0, "value": np.nan, "median": np.nan, "p99": np.nan,
                "definition": "not defined: no proxy in this capture (endpoint view)"}
    if by_disposition:
        what = "dropped / (relayed + dropped) messages: hop-by-hop, absorbed and answered messages excluded"
    else:
        what = "dropped / total messages"
    if offered is not None:
        delivered = total - dropped
        v = max(dropped, offered - delivered) / offered if offered else np.nan
        total = offered
    else:
        v = dropped / total if total else np.nan
    return {"metric": "PDR", "unit": "%", "count": int(total), "value": 100.0 * v if total else np.nan,
            "median": np.nan, "p99": np.nan, "definition": f"{what} (seed 000 ch. 6)"}


def _registration_rows(r: pd.DataFrame) -> list[dict]:
    fs = r["s_fin"].to_numpy(dtype="float64")
    done = ~r["pending"].to_numpy(bool)
    ok = (fs >= 200) & (fs < 300)
    d = (r.t_fin - r.t_start).to_numpy(dtype="float64")
    return [_delay_row("RRD", d[ok], "§4.1: 2xx to REGISTER (t_dep) - first REGISTER of the attempt (t_arr)"),
            _ratio_row("IRA", int((done & (_is_failure(fs) | r["timeout"].to_numpy(bool))).sum()), int(done.sum()),
                       "§4.2: registration attempts ending in failure or timeout / attempts")]


# --------------------------------------------------------------------------- per transaction type
def transactions(timeline: pd.DataFrame) -> pd.DataFrame:
    """Request -> response times per transaction type (request method), at the caller side.

    A transaction is (run, Call-ID, CSeq number, method) -- ACK included, CANCEL apart; it is
    timed from its **first** request copy.  Retransmissions are kept apart: ``request_copies``
    counts every copy seen (a proxy's own retransmissions towards the next hop, ``disposition``
    originated, are not caller-side copies and not counted), ``retransmitted`` the transactions
    with more than one copy, and the delays are given separately for transactions without a
    retransmission (``*_clean``) and with one (``*_retrans``: they contain the retransmission
    timer).  ``first_response``: first response of any kind (a 100 Trying too);
    ``final``: first final response (>= 200).  Delays in µs (median, p99), counts as numbers.
    """
    tl = caller_side(timeline)
    if not len(tl):
        return transactions_from(None)
    d, _ = _messages(tl)
    own = np.zeros(len(d), bool)  # tl is already the caller side: rows align with d
    if "disposition" in tl.columns:
        own = (tl["disposition"].astype("string") == "originated").fillna(False).to_numpy(bool)
    rq = d[(d.kind == "request") & ~own & np.isfinite(d.req_t)]
    if rq.empty:
        return transactions_from(None)
    tx = rq.groupby(["key", "cseq", "method"]).agg(t_req=("req_t", "min"), copies=("req_t", "size")).reset_index()
    rs = d[(d.kind == "response") & ~d.dropped & np.isfinite(d.resp_t)].sort_values("resp_t", kind="stable")
    rs = rs.drop(columns="method").rename(columns={"cmeth": "method"})
    first = rs.groupby(["key", "cseq", "method"])["resp_t"].min().rename("t_first")
    fin = rs[rs.status >= 200].groupby(["key", "cseq", "method"])["resp_t"].min().rename("t_fin")
    tx = tx.join(first, on=["key", "cseq", "method"]).join(fin, on=["key", "cseq", "method"])
    return transactions_from(tx)


TRANSACTION_COLUMNS = [
    "method", "transactions", "request_copies", "retransmitted", "answered_final", "no_final",
    "first_response_clean_median_us", "first_response_clean_p99_us", "final_clean_count",
    "final_clean_mean_us", "final_clean_median_us", "final_clean_p99_us", "final_retrans_count",
    "final_retrans_median_us", "final_retrans_p99_us"]


def transactions_from(tx: pd.DataFrame | None) -> pd.DataFrame:
    """The :func:`transactions` table from one row per transaction: ``method`` (upper case),
    ``copies`` (request copies), ``t_req`` (first copy), ``t_first`` / ``t_fin`` (first response
    / first final response, NaN if none), instants in float ns."""
    if tx is None or not len(tx):
        return pd.DataFrame(columns=TRANSACTION_COLUMNS)
    out = []
    for m, g in tx.groupby("method", sort=True):
        re = g["copies"].to_numpy() > 1
        fr = (g["t_first"] - g["t_req"]).to_numpy(dtype="float64") / 1e3
        fd = (g["t_fin"] - g["t_req"]).to_numpy(dtype="float64") / 1e3
        fr_c, fd_c, fd_r = fr[~re], fd[~re], fd[re]
        fr_c, fd_c, fd_r = (x[np.isfinite(x) & (x >= 0)] for x in (fr_c, fd_c, fd_r))

        def q(v, p):
            return float(np.percentile(v, p)) if len(v) else np.nan
        out.append({
            "method": m or "(none)", "transactions": int(len(g)), "request_copies": int(g["copies"].sum()),
            "retransmitted": int(re.sum()), "answered_final": int(np.isfinite(fd).sum()),
            "no_final": int((~np.isfinite(fd)).sum()),
            "first_response_clean_median_us": q(fr_c, 50), "first_response_clean_p99_us": q(fr_c, 99),
            "final_clean_count": int(len(fd_c)), "final_clean_mean_us": exact_mean(fd_c),
            "final_clean_median_us": q(fd_c, 50), "final_clean_p99_us": q(fd_c, 99),
            "final_retrans_count": int(len(fd_r)), "final_retrans_median_us": q(fd_r, 50),
            "final_retrans_p99_us": q(fd_r, 99),
        })
    return pd.DataFrame(out, columns=TRANSACTION_COLUMNS)


def message_counts(timeline: pd.DataFrame) -> pd.DataFrame:
    """Messages by method (requests) and by status and CSeq method (responses): ``messages``
    (rows: copies seen), ``retransmissions`` (copies after the first of the same message, from
    the ``retrans`` column or the drop rule's ``absorbed: retransmission``) and, at a proxy, the
    counts per ``disposition``."""
    tl = timeline
    if not len(tl):
        return message_counts_from(None)
    kind = tl["kind"].astype("string")
    df = pd.DataFrame({
        "kind": kind,
        "method": tl["method"].astype("string").str.upper().fillna(""),
        "status": tl["status"].astype("Int64").astype("string").fillna(""),
        "cseq_method": tl["cseq_method"].astype("string").str.upper().fillna(""),
    })
    df.loc[(kind == "response").fillna(False).to_numpy(bool), "method"] = ""
    re = np.zeros(len(tl), bool)
    if "retrans" in tl.columns:
        re |= tl["retrans"].fillna(False).to_numpy(bool)
    if "disposition" in tl.columns:
        disp = tl["disposition"].astype("string").fillna("")
        re |= (disp == "absorbed: retransmission").to_numpy(bool)
        df["disposition"] = disp.to_numpy(object)
    df["re"] = re.astype(np.int64)
    df["n"] = np.ones(len(df), np.int64)
    return message_counts_from(df)


def message_counts_from(df: pd.DataFrame | None) -> pd.DataFrame:
    """The :func:`message_counts` table from rows of (kind, method, status, cseq_method,
    [disposition], re, n): ``n`` messages, all retransmissions when ``re`` (text columns as
    :func:`message_counts` writes them)."""
    if df is None or not len(df):
        return pd.DataFrame(columns=["kind", "method", "status", "cseq_method", "messages", "retransmissions"])
    keys = ["kind", "method", "status", "cseq_method"]
    df = df.assign(re=df["re"].astype(np.int64) * df["n"])
    g = df.groupby(keys, sort=True)
    out = g["n"].sum().astype(np.int64).rename("messages").to_frame()
    out["retransmissions"] = g["re"].sum().astype(int)
    if "disposition" in df.columns:
        piv = df.groupby([*keys, "disposition"])["n"].sum().unstack("disposition", fill_value=0)
        out = out.join(piv, how="left").fillna(0)
        for c in piv.columns:
            out[c] = out[c].astype(int)
    return out.reset_index()


def message_class(timeline: pd.DataFrame) -> pd.Series:
    """A per-type grouping finer than ``msg_type``: the six call-flow types as they are (INVITE,
    180, 200-INVITE, ACK, BYE, 200-BYE), and what the timeline's schema lumps into ``OTHER`` split
    by what it is -- a request by its method (``CANCEL``, ``OPTIONS``, ``PRACK``, ...), a response
    by its status and CSeq method (``100-INVITE``, ``486-INVITE``, ``487-INVITE``,
    ``503-INVITE``, ``408-BYE``, ...), so that each final response class has a row of its own in
    the per-type tables.  ``msg_type`` itself (the schema) is unchanged; the result is a string
    Series aligned with ``timeline`` (``OTHER`` only where method and status are both unknown)."""
    mt = timeline["msg_type"].astype("string").fillna("OTHER")
    other = (mt == "OTHER").to_numpy(bool)
    out = mt.copy()
    if other.any():
        kind = timeline["kind"].astype("string").fillna("")[other]
        meth = timeline["method"].astype("string").str.upper().fillna("")[other]
        st = pd.to_numeric(timeline["status"], errors="coerce")[other]
        cm = timeline["cseq_method"].astype("string").str.upper().fillna("")[other]
        resp = (kind == "response").to_numpy(bool) & st.notna().to_numpy(bool)
        lab = np.where(resp, st.fillna(0).astype("int64").astype(str).to_numpy(object) + "-" + cm.to_numpy(object),
                       meth.to_numpy(object))
        lab = np.where(resp & (cm == "").to_numpy(bool), st.fillna(0).astype("int64").astype(str).to_numpy(object),
                       lab)
        lab = np.where(lab == "", "OTHER", lab)
        out[other] = lab
    return out.astype("string")


def class_order(classes) -> list[str]:
    """The classes of :func:`message_class` in the order the tables show them: the call flow's six
    types first, then requests by name, then responses by status and CSeq method, ``OTHER`` last."""
    from sipperf.timeline import CALL_FLOW

    cs = [str(c) for c in dict.fromkeys(classes) if c is not None and not pd.isna(c)]
    flow = [t for t in CALL_FLOW if t in cs]
    rest = [c for c in cs if c not in CALL_FLOW and c != "OTHER"]

    def key(c: str):
        head = c.split("-")[0]
        return (1, int(head), c) if head.isdigit() else (0, 0, c)
    return flow + sorted(rest, key=key) + (["OTHER"] if "OTHER" in cs else [])


def complete_call(timeline: pd.DataFrame) -> str:
    """The Call-ID of the first call (by INVITE arrival) whose six call-flow messages all passed
    the proxy with both ``t_arr`` and ``t_dep``; ``ValueError`` if there is none."""
    tl = timeline[timeline["msg_type"].isin(CALL_FLOW) & timeline["t_arr"].notna()
                  & timeline["t_dep"].notna()]
    n = tl.groupby("call_id", observed=True)["msg_type"].nunique()
    ok = n[n == len(CALL_FLOW)].index
    if not len(ok):
        raise ValueError("no call with all six messages relayed")
    inv = tl[tl["call_id"].isin(ok) & (tl["msg_type"] == "INVITE")].sort_values("t_arr")
    return str(inv["call_id"].iloc[0])


def call_messages(timeline: pd.DataFrame, call_id: str) -> pd.DataFrame:
    """The six call-flow messages of one call relayed by the proxy, in arrival order.

    Columns: ``msg_type``, ``t_in_ms`` (``t_arr`` relative to the INVITE's ``t_arr``),
    ``t_out_ms`` (``t_dep``, same origin), ``in_proxy_us`` (``t_dep - t_arr``) and every
    component of :data:`sipperf.components.COMPONENTS` in µs (NaN where an instant is missing).
    Rows the proxy originated (e.g. its 100 Trying) and types outside the six are left out;
    ``KeyError`` if the call has none."""
    tl = timeline[(timeline["call_id"] == call_id) & timeline["msg_type"].isin(CALL_FLOW)]
    tl = tl[tl["t_arr"].notna()].sort_values("t_arr", kind="stable")
    if tl.empty:
        raise KeyError(f"no relayed call-flow messages for call {call_id!r}")
    is_inv = tl["msg_type"] == "INVITE"
    t0 = int(tl.loc[is_inv, "t_arr"].min()) if is_inv.any() else int(tl["t_arr"].min())

    def ns(col: str) -> np.ndarray:
        return tl[col].to_numpy(dtype="float64", na_value=np.nan)

    out = pd.DataFrame({"msg_type": tl["msg_type"].astype(str).to_numpy(),
                        "t_in_ms": (ns("t_arr") - t0) / 1e6,
                        "t_out_ms": (ns("t_dep") - t0) / 1e6,
                        "in_proxy_us": (ns("t_dep") - ns("t_arr")) / 1e3})
    for name, (a, b) in COMPONENTS.items():
        out[name] = (ns(a) - ns(b)) / 1e3
    return out.reset_index(drop=True)
