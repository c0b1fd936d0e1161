"""Call-level metrics of RFC 6076 measured at the proxy, and the packet drop rate (seed 000 ch. 6).

RFC 6076 defines its metrics at a measurement point; here the point is the proxy's upstream
side: a **request instant** is when the request reached the proxy (``t_arr``; if null the
earliest non-null instant of the row) and a **response instant** is when the response left
the proxy towards the caller (``t_dep``; if null the latest non-null instant).  A call is one
Call-ID; its *initial* INVITE is its earliest INVITE request (re-INVITEs are ignored).

=========  ================================================================================
metric     definition used (RFC 6076 section)
=========  ================================================================================
SRD        Session Request Delay (§4.1): first non-100 response to the initial INVITE
           (e.g. 180, or the final response when no provisional) minus the INVITE;
           ``SRD_successful`` for calls whose final INVITE response is 2xx,
           ``SRD_failed`` for 4xx/5xx/6xx.
SDD        Session Disconnect Delay (§4.2): 2xx to the BYE minus the BYE.
SDT        Session Duration Time (§4.3): BYE minus the 2xx to the INVITE (successful calls).
SER        Session Establishment Ratio (§4.6): INVITEs answered 2xx /
           (INVITEs − INVITEs answered 3xx), in %.
SEER       Session Establishment Effectiveness Ratio (§4.7): INVITEs answered 200, 480, 486,
           600 or 603 / (INVITEs − INVITEs answered 3xx), in %.
ISA        Ineffective Session Attempts (§4.8): INVITEs answered 500, 503, 504 or with no
           final response (timeout) / INVITEs, in %.
SCR        Session Completion Ratio (§4.9): calls answered 2xx whose BYE got a 2xx / INVITEs, in %.
RRD        Registration Request Delay (§4.4): 2xx to a REGISTER minus the REGISTER (by
           Call-ID and CSeq).
IRA        Ineffective Registration Attempts (§4.5): REGISTERs without a 2xx (failure or no
           answer) / REGISTERs, in %.
PDR        packet drop rate (seed 000 ch. 6): dropped / total messages, where total is the
           timeline's rows or, if given, the number offered (e.g. 6 M sent by SIPp).
=========  ================================================================================

Delays are reported in µs (count, mean, median, p99); ratios in %; NaN when undefined.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sipperf.timeline import INSTANTS


def _instants(tl: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(request instant, response instant) per row as float ns relative to the earliest instant
    (relative, so float64 keeps the ns exactly)."""
    ints = [tl[c].to_numpy(dtype="int64", na_value=0) for c in INSTANTS]
    nas = [tl[c].isna().to_numpy() for c in INSTANTS]
    present = [i[~n] for i, n in zip(ints, nas) if (~n).any()]
    ref = min(int(p.min()) for p in present) if present else 0
    m = np.stack([np.where(n, np.nan, (i - ref).astype(np.float64)) for i, n in zip(ints, nas)])
    if not m.shape[1]:
        return np.zeros(0), np.zeros(0)
    with np.errstate(all="ignore"):
        first = np.where(np.isnan(m), np.inf, m).min(axis=0)
        last = np.where(np.isnan(m), -np.inf, m).max(axis=0)
    req_t = np.where(np.isnan(m[0]), first, m[0])
    resp_t = np.where(np.isnan(m[6]), last, m[6])
    req_t[np.isinf(req_t)] = np.nan
    resp_t[np.isinf(resp_t)] = np.nan
    return req_t, resp_t


def call_table(timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per (run_id, Call-ID) with an INVITE (index ``run_id\\x00call_id``): instants (ns, float) of the initial INVITE, first
    non-100 response, final response (and its status), BYE and the 2xx to the BYE."""
    tl = timeline
    req_t, resp_t = _instants(tl)
    d = pd.DataFrame({
        "call_id": (tl["run_id"].astype("string").fillna("") + "\x00" + tl["call_id"].astype("string")).to_numpy(str),
        "kind": tl["kind"].astype(str).to_numpy(),
        "method": tl["method"].astype("string").fillna("").str.upper().to_numpy(str),
        "cmeth": tl["cseq_method"].astype("string").fillna("").str.upper().to_numpy(str),
        "status": tl["status"].to_numpy(dtype="float64", na_value=np.nan),
        "req_t": req_t, "resp_t": resp_t,
    })
    inv = d[(d.kind == "request") & (d.method == "INVITE")].groupby("call_id")["req_t"].min()
    out = pd.DataFrame({"t_invite": inv})
    r = d[(d.kind == "response") & (d.cmeth == "INVITE")]
    out["t_first"] = r[r.status != 100].groupby("call_id")["resp_t"].min()
    fin = r[r.status >= 200].sort_values("resp_t")
    fin = fin.groupby("call_id").first()
    out["t_final"] = fin["resp_t"]
    out["final_status"] = fin["status"]
    out["t_2xx"] = r[(r.status >= 200) & (r.status < 300)].groupby("call_id")["resp_t"].min()
    out["t_bye"] = d[(d.kind == "request") & (d.method == "BYE")].groupby("call_id")["req_t"].min()
    rb = d[(d.kind == "response") & (d.cmeth == "BYE") & (d.status >= 200) & (d.status < 300)]
    out["t_bye_2xx"] = rb.groupby("call_id")["resp_t"].min()
    return out


def _delay_row(name: str, v_ns: np.ndarray, definition: str) -> dict:
    v = v_ns[np.isfinite(v_ns)] / 1e3
    return {"metric": name, "unit": "us", "count": int(len(v)),
            "value": float(v.mean()) if len(v) else np.nan,
            "median": float(np.median(v)) if len(v) else np.nan,
            "p99": float(np.percentile(v, 99)) if len(v) else np.nan,
            "definition": definition}


def _ratio_row(name: str, num: int, den: int, definition: str) -> dict:
    return {"metric": name, "unit": "%", "count": int(den),
            "value": 100.0 * num / den if den else np.nan, "median": np.nan, "p99": np.nan,
            "definition": definition}


def pdr(timeline: pd.DataFrame, offered: int | None = None) -> float:
    """Packet drop rate = dropped / total (seed 000 ch. 6); ``offered`` replaces the total
    and then drops = offered − delivered rows when that is larger than the flagged drops."""
    dropped = int(timeline["dropped"].fillna(False).astype(bool).sum()) if len(timeline) else 0
    if offered is not None:
        delivered = len(timeline) - dropped
        dropped = max(dropped, offered - delivered)
        return dropped / offered if offered else np.nan
    return dropped / len(timeline) if len(timeline) else np.nan


def metrics(timeline: pd.DataFrame, offered: int | None = None) -> pd.DataFrame:
    """All metrics as a table (metric, unit, count, value, median, p99, definition)."""
    c = call_table(timeline)
    fs = c["final_status"].to_numpy(dtype="float64")
    n_inv = len(c)
    ok = (fs >= 200) & (fs < 300)
    fail = fs >= 400
    n3 = int(((fs >= 300) & (fs < 400)).sum())
    rows = [
        _delay_row("SRD_successful", (c.t_first - c.t_invite).to_numpy()[ok],
                   "first non-100 response to INVITE (t_dep) - INVITE (t_arr), final 2xx"),
        _delay_row("SRD_failed", (c.t_first - c.t_invite).to_numpy()[fail],
                   "first non-100 response to INVITE (t_dep) - INVITE (t_arr), final 4xx-6xx"),
        _delay_row("SDD", (c.t_bye_2xx - c.t_bye).to_numpy(), "2xx to BYE (t_dep) - BYE (t_arr)"),
        _delay_row("SDT", (c.t_bye - c.t_2xx).to_numpy()[ok], "BYE (t_arr) - 2xx to INVITE (t_dep)"),
        _ratio_row("SER", int(ok.sum()), n_inv - n3, "INVITE answered 2xx / (INVITE - 3xx)"),
        _ratio_row("SEER", int(np.isin(fs, [200, 480, 486, 600, 603]).sum()), n_inv - n3,
                   "INVITE answered 200,480,486,600,603 / (INVITE - 3xx)"),
        _ratio_row("ISA", int((np.isin(fs, [500, 503, 504]) | np.isnan(fs)).sum()), n_inv,
                   "INVITE answered 500,503,504 or unanswered / INVITE"),
        _ratio_row("SCR", int((ok & np.isfinite(c.t_bye_2xx.to_numpy())).sum()), n_inv,
                   "calls with 2xx to INVITE and 2xx to BYE / INVITE"),
    ]
    rows += _registration_rows(timeline)
    total = offered if offered is not None else len(timeline)
    rows.append({"metric": "PDR", "unit": "%", "count": int(total),
                 "value": 100.0 * pdr(timeline, offered) if total else np.nan,
                 "median": np.nan, "p99": np.nan, "definition": "dropped / total messages"})
    return pd.DataFrame(rows)


def _registration_rows(tl: pd.DataFrame) -> list[dict]:
    req_t, resp_t = _instants(tl)
    kind = tl["kind"].astype(str).to_numpy()
    method = tl["method"].astype("string").fillna("").str.upper().to_numpy(str)
    cm = tl["cseq_method"].astype("string").fillna("").str.upper().to_numpy(str)
    st = tl["status"].to_numpy(dtype="float64", na_value=np.nan)
    key = tl["call_id"].astype(str).to_numpy() + "\x00" + tl["cseq"].astype("string").fillna("").to_numpy(str)
    reg = (kind == "request") & (method == "REGISTER")
    if not reg.any():
        return [_delay_row("RRD", np.array([]), "2xx to REGISTER (t_dep) - REGISTER (t_arr)"),
                _ratio_row("IRA", 0, 0, "REGISTER without 2xx / REGISTER")]
    r = pd.DataFrame({"key": key[reg], "t": req_t[reg]}).groupby("key")["t"].min()
    okm = (kind == "response") & (cm == "REGISTER") & (st >= 200) & (st < 300)
    a = pd.DataFrame({"key": key[okm], "t": resp_t[okm]}).groupby("key")["t"].min()
    j = pd.concat([r.rename("req"), a.rename("ok")], axis=1).loc[r.index]
    return [_delay_row("RRD", (j.ok - j.req).to_numpy(), "2xx to REGISTER (t_dep) - REGISTER (t_arr)"),
            _ratio_row("IRA", int(j.ok.isna().sum()), len(j), "REGISTER without 2xx / REGISTER")]
