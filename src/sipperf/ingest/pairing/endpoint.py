"""The endpoint view: a capture with no proxy in it (a user agent, SIPp, a plain endpoint).

There is no ingress/egress pair, hence no sojourn and no drop rate; but every message was seen
once at the capture point, which is where RFC 6076 defines its metrics (at the user agent).
One timeline row per SIP message seen:

* ``t_arr`` is the capture instant of the message **at the capture point** (the only instant a
  capture gives there; every other instant is null, so no time component is derived);
* ``src`` / ``dst`` are the sender and receiver ('ip:port');
* extra columns: ``vantage`` = "endpoint", ``disposition`` = "seen", ``retrans`` (True for a
  later copy of a message already seen: a request with the same Call-ID, CSeq, method, sender,
  receiver and top-Via branch, or a response with the same Call-ID, CSeq, status, sender and
  receiver — RFC 3261 §17.1.1.2 / §17.1.2.2 retransmissions), ``frame``, ``via_branch``,
  ``transport``.

:func:`sipperf.calls.transactions` then gives request->response times per transaction type,
timed from the first copy of a request, with retransmissions counted apart.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sipperf.timeline import make_timeline
from sipperf.ingest.pairing.vantage import prep


def retransmissions(p: pd.DataFrame) -> np.ndarray:
    """True for every copy after the first of an identical message (see the module doc)."""
    what = p["method"].astype("string").fillna(p["status"].astype("string")).fillna("")
    br = p["via_branch"].astype("string").fillna("")
    br = br.where(p["method"].notna(), "")  # a response's retransmission: same status, ends
    key = pd.DataFrame({"c": p["call_id"].astype("string").fillna(""),
                        "q": p["cseq"].astype("string").fillna(""),
                        "m": p["cseq_method"].astype("string").fillna(""), "w": what,
                        "s": p["src_ep"], "d": p["dst_ep"], "b": br})
    order = np.lexsort((p["frame"].to_numpy(np.int64), p["ts_ns"].to_numpy(np.int64)))
    dup = key.iloc[order].duplicated(keep="first").to_numpy()
    out = np.zeros(len(p), bool)
    out[order] = dup
    return out


def endpoint_view(packets: pd.DataFrame, *, run_id: str | None = None) -> pd.DataFrame:
    """The endpoint timeline of a packet table (one row per message seen)."""
    p = packets if {"src_ep", "dst_ep", "key"} <= set(packets.columns) else prep(packets)
    p = p.sort_values(["ts_ns", "frame"], kind="stable").reset_index(drop=True)
    tl = pd.DataFrame({
        "call_id": p["call_id"], "cseq": p["cseq"], "cseq_method": p["cseq_method"],
        "kind": np.where(p["method"].isna().to_numpy(), "response", "request"),
        "method": p["method"], "status": p["status"], "src": p["src_ep"], "dst": p["dst_ep"],
        "size": pd.array(p["size"].to_numpy(), dtype="Int64"),
        "t_arr": pd.array(p["ts_ns"].to_numpy(np.int64), dtype="Int64"),
        "vantage": "endpoint", "disposition": "seen",
        "retrans": pd.array(retransmissions(p), dtype="boolean"),
        "frame": pd.array(p["frame"].to_numpy(np.int64), dtype="Int64"),
        "via_branch": p["via_branch"], "transport": p["transport"],
    })
    if run_id is not None:
        tl["run_id"] = run_id
    return make_timeline(tl)
