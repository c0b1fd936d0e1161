"""Join one lab run directory (``sipperf lab run``) into the per-message timeline.

Inputs (plain or ``.gz``): ``meta.json``, ``capture.pcapng`` (read with
:func:`sipperf.ingest.capture.fast.read_packets`), ``proxy.log`` (:mod:`.xlog`) and, when the
tracer ran, ``trace.log`` (:mod:`.tracelog`).  One row per datagram that reached the
proxy's port (pcap), plus one row per datagram the proxy sent that relays nothing it received
(its own 100 Trying, retransmissions).  How each instant is found:

=============  ===============================================================================
``t_arr``      tracepoint ``net:netif_receive_skb`` of the packet whose ``skb->tstamp`` equals
               the pcap timestamp (exact join); without the tracer: the pcap timestamp
``t_stack``    ``sock:sk_data_ready`` on the proxy's socket, in the same softirq on the same
               CPU as that ``netif_receive_skb`` (exact join by CPU)
``t_sockq``    ``sys_enter_recvfrom`` when the datagram was already queued; when the worker
               was blocked in ``recvfrom`` before the datagram arrived, the first
               ``sched_switch`` into the worker after ``t_stack`` (``sockq_src`` says which)
``t_sip_in``   ``sys_exit_recvfrom`` of the call that returned this datagram (the worker's
               k-th recvfrom is its k-th ``SIPPERF|in`` xlog line, lengths checked); without
               the tracer: the xlog script-entry instant
``t_sip_c``    xlog ``SIPPERF|c`` (µs wall clock) of the same worker and message
``t_sip_out``  xlog ``SIPPERF|out`` (onsend_route) of the relayed copy
``t_dep``      ``sys_exit_sendto`` of the sendto during which ``net:net_dev_xmit`` saw the
               relayed packet (``skb->tstamp`` = its pcap timestamp); without the tracer: the
               pcap timestamp of the relayed packet
=============  ===============================================================================

Kernel times (CLOCK_MONOTONIC) become epoch ns with the REALTIME-MONOTONIC offset measured
by the runner (``meta.json`` ``clock_before``/``clock_after``).

K_copy: ``skb:skb_copy_datagram_iovec`` does not fire for UDP on 6.x, so the copy is bounded:
``0 <= k_copy <= recv_copied - t_sockq`` where ``recv_copied`` is ``sock:sock_recv_length``
(fired after the kernel copied the datagram into user memory, before recvfrom returns).
Extra columns: ``worker``, ``t_wire_in``/``t_wire_out`` (pcap), ``t_script_in`` (xlog entry),
``recv_enter``, ``recv_copied``, ``k_copy_max_ns``, ``sockq_src``, ``send_enter``, ``origin``.
"""
from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import INSTANTS, IngestError, IngestReport, make_timeline
from sipperf.ingest.lab_runs.tracelog import read_tracelog
from sipperf.ingest.lab_runs.xlog import read_xlog

NA = pd.NA


def _find(run_dir: Path, name: str) -> Path | None:
    for cand in (run_dir / name, run_dir / f"{name}.gz"):
        if cand.exists():
            return cand
    return None


def _read_pcap(path: Path) -> tuple[pd.DataFrame, IngestReport]:
    from sipperf.ingest.capture.fast import read_packets

    if path.suffix != ".gz":
        return read_packets(path)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / path.stem
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except (OSError, EOFError, zlib.error) as e:
            raise IngestError(path, "gzip", f"corrupt or truncated gzip file: {e}") from None
        pk, rep = read_packets(plain)
        rep.path = str(path)
        return pk, rep


def _meta(run_dir: Path) -> dict:
    """meta.json of a lab run, checked: a JSON object with the keys the join needs."""
    meta_p = run_dir / "meta.json"
    if not meta_p.exists():
        raise IngestError(run_dir, "meta.json", "not a lab run directory (no meta.json)")
    try:
        meta = json.loads(meta_p.read_bytes())
    except (ValueError, OSError) as e:
        raise IngestError(meta_p, "file", f"not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise IngestError(meta_p, "file", f"not a JSON object (a {type(meta).__name__})")
    proxy = meta.get("proxy")
    if not isinstance(proxy, dict) or "addr" not in proxy or "port" not in proxy:
        raise IngestError(meta_p, "key proxy", 'missing or incomplete: a lab run needs '
                          '"proxy": {"addr": ..., "port": ...}')
    try:
        int(proxy["port"])
    except (TypeError, ValueError):
        raise IngestError(meta_p, "key proxy.port", f"not a port number: {proxy['port']!r}") from None
    for k in ("clock_before", "clock_after"):
        if k in meta and not (isinstance(meta[k], dict) and isinstance(meta[k].get("offset_ns"), (int, float))):
            raise IngestError(meta_p, f"key {k}", 'must be {"offset_ns": <number>}')
    return meta


def _ident(method: pd.Series, status: pd.Series) -> pd.Series:
    """Method for requests, status code (as text) for responses."""
    st = status.astype("Int64").astype("string")
    return method.astype("string").where(method.notna() & (method != ""), st).fillna("")


def _rank_merge(left: pd.DataFrame, right: pd.DataFrame, keys: list[str], lsort: str, rsort: str,
                suffix: str) -> pd.DataFrame:
    """Pair the k-th row of ``left`` with the k-th row of ``right`` within each key (FIFO per key)."""
    l = left.sort_values(lsort, kind="stable").copy()
    r = right.sort_values(rsort, kind="stable").copy()
    l["_k"] = l.groupby(keys, sort=False).cumcount()
    r["_k"] = r.groupby(keys, sort=False).cumcount()
    r = r.rename(columns={c: c + suffix for c in r.columns if c not in keys and c != "_k"})
    return l.merge(r, on=[*keys, "_k"], how="left").drop(columns="_k")


#: an xlog ``in`` line is written after its recvfrom returned; its µs wall clock is truncated and
#: read through another clock, so it may sit this much (ns) before the kernel's return instant
ALIGN_TOL_NS = 2_000


def _align_by_length(f_tid: np.ndarray, f_ret: np.ndarray, x_pid: np.ndarray, x_len: np.ndarray,
                     f_exit: np.ndarray | None = None, x_t: np.ndarray | None = None,
                     tol_ns: int = ALIGN_TOL_NS) -> tuple[np.ndarray, int, int]:
    """Per worker, pair each ``in`` line with the recvfrom call that returned its datagram.

    A worker runs one loop: recvfrom returns a datagram, then the script writes its ``in`` line,
    then the next recvfrom.  So the recvfrom of an ``in`` line is the worker's **latest** one
    that returned before the line's instant (``f_exit <= x_t + tol_ns``), and it must have
    returned the line's length; it is used once.  A lost ``in`` line or a lost tracer record
    then costs only its own pair, never the pairs after it.  (Without instants: walk both in
    order and pair equal lengths, skipping one recvfrom record when the next one fits -- the
    old rule, which drifts onto a later datagram of the same length after a burst of losses.)

    Records must be given in time order per worker (recvfrom by exit, lines by line number).
    Returns for each ``in`` line the index of its recvfrom record (-1 if none), and the
    numbers of recvfrom records and ``in`` lines left without a pair.
    """
    out = np.full(len(x_pid), -1, dtype=np.int64)
    skipped_f = skipped_x = 0
    timed = f_exit is not None and x_t is not None
    for w in np.unique(x_pid):
        fi = np.flatnonzero(f_tid == w)
        xi = np.flatnonzero(x_pid == w)
        if timed:
            used = np.zeros(len(fi), bool)
            fe = np.asarray(f_exit, dtype=np.int64)[fi]
            # index of the latest recvfrom returning before each line (lines in time order)
            last = np.searchsorted(fe, np.asarray(x_t, dtype=np.int64)[xi] + tol_ns, side="right") - 1
            for k, j in enumerate(xi):
                i = last[k]
                if i >= 0 and not used[i] and f_ret[fi[i]] == x_len[j]:
                    out[j] = fi[i]
                    used[i] = True
                else:
                    skipped_x += 1
            skipped_f += int((~used).sum())
            continue
        i = j = 0
        while i < len(fi) and j < len(xi):
            if f_ret[fi[i]] == x_len[xi[j]]:
                out[xi[j]] = fi[i]
                i += 1
                j += 1
            elif i + 1 < len(fi) and f_ret[fi[i + 1]] == x_len[xi[j]]:
                i += 1
                skipped_f += 1
            else:
                j += 1
                skipped_x += 1
        skipped_f += len(fi) - i
        skipped_x += len(xi) - j
    return out, skipped_f, skipped_x


def read_run(run_dir: str | Path, *, run_id: str | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """The joined timeline of one lab run and the combined account of its files."""
    run_dir = Path(run_dir)
    meta = _meta(run_dir)
    from sipperf.ingest.paths import display_path
    run_id = run_id or display_path(run_dir.name)
    addr, port = meta["proxy"]["addr"], int(meta["proxy"]["port"])
    offs = [meta[k]["offset_ns"] for k in ("clock_before", "clock_after") if k in meta]
    offset = int(np.mean(offs)) if offs else None

    pcap_p = _find(run_dir, "capture.pcapng")
    if pcap_p is None:
        raise IngestError(run_dir, "capture.pcapng", "missing")
    pk, rep_p = _read_pcap(pcap_p)
    xlog_p = _find(run_dir, "proxy.log")
    if xlog_p is None:
        raise IngestError(run_dir, "proxy.log", "missing")
    xl, rep_x = read_xlog(xlog_p)
    reports = [rep_p, rep_x]
    notes: list[str] = []
    trace_p = _find(run_dir, "trace.log")
    ev = None
    if trace_p is not None and offset is not None:
        ev, rep_t = read_tracelog(trace_p)
        reports.append(rep_t)
        if sum(len(ev[k]) for k in ("R", "F", "S", "T")) == 0:
            notes.append("tracer log has no per-event records (hist mode?): kernel instants absent")
            ev = None
    else:
        notes.append("no tracer log: t_arr/t_dep from pcap, t_sip_in from xlog script entry, "
                     "t_stack/t_sockq absent")

    pk = pk.copy()
    pk["ident"] = _ident(pk["method"], pk["status"])
    ing = pk[(pk["dst"] == addr) & (pk["dport"] == port)].copy()
    egr = pk[(pk["src"] == addr) & (pk["sport"] == port)].copy()
    other = len(pk) - len(ing) - len(egr)
    if other:
        notes.append(f"{other} captured messages neither to nor from the proxy")

    # ---- xlog: ident, groups per worker episode --------------------------------------------
    xl = xl.copy()
    xl["ident"] = xl["method"].where(xl["status"] == 0, xl["status"].astype("string"))
    xl["cseq_method"] = xl["method"]
    xl = xl.sort_values("line", kind="stable")
    xl["episode"] = (xl["tag"] == "in").astype("int64").groupby(xl["pid"]).cumsum()
    xin = xl[xl["tag"] == "in"].copy()
    xc = xl[xl["tag"] == "c"]
    xout = xl[xl["tag"] == "out"]
    idkeys = ["call_id", "cseq", "cseq_method", "ident"]

    # ---- kernel records joined to ingress packets by skb->tstamp ---------------------------
    ing["t_arr"] = pd.array([NA] * len(ing), dtype="Int64")
    ing["t_stack"] = pd.array([NA] * len(ing), dtype="Int64")
    ing["drop_evidence"] = False
    if ev is not None:
        R = ev["R"].drop_duplicates("tstamp")
        ing = ing.merge(R[["tstamp", "t", "cpu"]].rename(columns={"tstamp": "ts_ns", "t": "_r_t", "cpu": "rx_cpu"}),
                        on="ts_ns", how="left")
        ing["t_arr"] = (ing["_r_t"] + offset).astype("Int64")
        Q = ev["Q"][ev["Q"]["key"] != 0].drop_duplicates("key")
        ing = ing.merge(Q[["key", "t"]].rename(columns={"key": "ts_ns", "t": "_q_t"}), on="ts_ns", how="left")
        ing["t_stack"] = (ing["_q_t"] + offset).astype("Int64")
        D = ev["D"][ev["D"]["key"] != 0]
        ing["drop_evidence"] = ing["ts_ns"].isin(set(D["key"].tolist()))
        n_r = int(ing["_r_t"].notna().sum())
        notes.append(f"netif_receive_skb matched {n_r}/{len(ing)} ingress packets by skb->tstamp")
        ing = ing.drop(columns=["_r_t", "_q_t"])

    # ---- xlog 'in' lines <-> ingress packets (FIFO per message identity and sender port) ----
    cand = ing[~ing["drop_evidence"]].copy()
    cand["sport_key"] = cand["sport"]
    xin["sport_key"] = xin["peer_port"]
    pair = _rank_merge(
        xin[[*idkeys, "sport_key", "line", "t_ns", "pid", "length", "episode"]],
        cand[[*idkeys, "sport_key", "frame", "ts_ns"]], [*idkeys, "sport_key"], "line", "ts_ns", "_p")
    unmatched_in = int(pair["frame_p"].isna().sum())
    if unmatched_in:
        notes.append(f"{unmatched_in} xlog 'in' lines without a captured ingress packet")
    pair = pair[pair["frame_p"].notna()].copy()
    pair["frame"] = pair["frame_p"].astype("int64")
    late = int((pair["t_ns"] + 1000 < pair["ts_ns_p"]).sum())
    if late:
        notes.append(f"{late} xlog 'in' lines earlier than their packet's capture time")

    # ---- recvfrom records <-> 'in' lines (per worker, in order, lengths equal) -------------
    pair["recv_enter"] = pd.array([NA] * len(pair), dtype="Int64")
    pair["recv_copied"] = pd.array([NA] * len(pair), dtype="Int64")
    pair["recv_exit"] = pd.array([NA] * len(pair), dtype="Int64")
    if ev is not None and len(ev["F"]):
        F = ev["F"].sort_values("t", kind="stable").reset_index(drop=True)
        if F["tid"].nunique() == 1:
            # one reader: the n-th datagram queued is the n-th recvfrom -- check by length
            queued = ing[ing["t_stack"].notna()].sort_values("t_stack")["size"].to_numpy()
            got = F["ret"].to_numpy()
            n = min(len(queued), len(got))
            same = int((queued[:n] == got[:n]).sum())
            notes.append(f"FIFO check (one reader): the n-th queued datagram has the n-th "
                         f"recvfrom's length for {same}/{n}")
        xs = pair.sort_values("line", kind="stable").reset_index(drop=True)
        idx, sk_f, sk_x = _align_by_length(F["tid"].to_numpy(), F["ret"].to_numpy(),
                                           xs["pid"].to_numpy(), xs["length"].to_numpy(),
                                           f_exit=F["t"].to_numpy(np.int64) + offset,
                                           x_t=xs["t_ns"].to_numpy(dtype="int64",
                                                                  na_value=np.iinfo(np.int64).min))
        ok = idx >= 0
        fe = F["enter"].to_numpy()
        xs.loc[ok, "recv_exit"] = F["t"].to_numpy()[idx[ok]] + offset
        xs.loc[ok, "recv_copied"] = F["copied"].to_numpy()[idx[ok]] + offset
        ent = fe[idx[ok]]
        xs.loc[ok, "recv_enter"] = pd.array(np.where(ent > 0, ent + offset, 0), dtype="Int64")
        xs.loc[xs["recv_enter"] == 0, "recv_enter"] = NA
        pair = xs
        notes.append(f"recvfrom<->xlog: {int(ok.sum())} paired, {sk_f} recvfrom and {sk_x} "
                     f"'in' lines skipped to keep lengths in step")

    # ---- the worker's episode: 'c' and the relayed 'out' line -------------------------------
    c_first = xc.groupby(["pid", "episode"], sort=False).agg(t_c=("t_ns", "first")).reset_index()
    pair = pair.merge(c_first, on=["pid", "episode"], how="left")
    o = xout.merge(pair[["pid", "episode", *idkeys, "frame"]], on=["pid", "episode", *idkeys], how="inner")
    o = o.sort_values("line", kind="stable").drop_duplicates(["frame"])
    o = o.rename(columns={"t_ns": "t_out", "peer_port": "out_port", "line": "out_line",
                          "length": "out_length"})

    # ---- 'out' lines <-> egress packets (FIFO per identity and destination port) ------------
    egr["dport_key"] = egr["dport"]
    o["dport_key"] = o["out_port"]
    opair = _rank_merge(o[[*idkeys, "dport_key", "out_line", "t_out", "frame"]],
                        egr[[*idkeys, "dport_key", "frame", "ts_ns", "dst", "dport", "size"]].rename(
                            columns={"frame": "eframe"}),
                        [*idkeys, "dport_key"], "out_line", "ts_ns", "_e")

    # ---- sendto records <-> egress packets via net_dev_xmit (tstamp) inside the sendto ------
    egr["t_send_exit"] = pd.array([NA] * len(egr), dtype="Int64")
    egr["t_send_enter"] = pd.array([NA] * len(egr), dtype="Int64")
    if ev is not None and len(ev["T"]) and len(ev["S"]):
        T = ev["T"].drop_duplicates("tstamp").sort_values("t")
        S = ev["S"].sort_values("t")
        TS = pd.merge_asof(T, S[["t", "tid", "enter"]].rename(columns={"t": "s_exit", "enter": "s_enter"}),
                           left_on="t", right_on="s_exit", by="tid", direction="forward")
        TS = TS[TS["s_enter"].notna() & (TS["s_enter"] <= TS["t"])]
        egr = egr.merge(TS[["tstamp", "s_exit", "s_enter"]].rename(columns={"tstamp": "ts_ns"}),
                        on="ts_ns", how="left")
        egr["t_send_exit"] = (egr["s_exit"] + offset).astype("Int64")
        egr["t_send_enter"] = (egr["s_enter"] + offset).astype("Int64")
        notes.append(f"sendto matched {int(egr['s_exit'].notna().sum())}/{len(egr)} egress packets")
        egr = egr.drop(columns=["s_exit", "s_enter"])

    # ---- assemble the ingress rows ------------------------------------------------------------
    rows = ing.merge(pair[["frame", "pid", "t_ns", "t_c", "recv_enter", "recv_copied", "recv_exit"]]
                     .rename(columns={"t_ns": "t_script_in"}), on="frame", how="left")
    op = opair[opair["eframe_e"].notna()][["frame", "t_out", "eframe_e"]].rename(
        columns={"eframe_e": "eframe"})
    op["eframe"] = op["eframe"].astype("int64")
    rows = rows.merge(op, on="frame", how="left")
    eg_cols = egr[["frame", "ts_ns", "dst", "dport", "t_send_exit", "t_send_enter"]].rename(
        columns={"frame": "eframe", "ts_ns": "t_wire_out", "dst": "e_dst", "dport": "e_dport"})
    rows = rows.merge(eg_cols, on="eframe", how="left")

    tracer = ev is not None
    n = len(rows)
    t_arr = rows["t_arr"] if tracer else rows["ts_ns"].astype("Int64")
    t_stack = rows["t_stack"]
    rexit = rows["recv_exit"].astype("Int64")
    renter = rows["recv_enter"].astype("Int64")
    t_sockq = pd.array([NA] * n, dtype="Int64")
    sockq_src = pd.array([NA] * n, dtype="string")
    if tracer:
        # queued before the worker asked: readiness = recvfrom entry
        q = renter.notna() & t_stack.notna() & (renter >= t_stack)
        t_sockq[q.to_numpy(dtype=bool)] = renter[q]
        sockq_src[q.to_numpy(dtype=bool)] = "recv_enter"
        # the worker waited in recvfrom: readiness = first switch into it after t_stack
        w = (t_stack.notna() & rows["recv_copied"].notna() & ~q).to_numpy(dtype=bool)
        if w.any() and len(ev["C"]):
            C = ev["C"][["t", "next_pid"]].rename(columns={"t": "sw_t", "next_pid": "pid"})
            C = C.assign(sw_t=C["sw_t"] + offset).sort_values("sw_t")
            wr = rows.loc[w, ["pid", "t_stack", "recv_copied"]].copy()
            wr["_i"] = np.flatnonzero(w)
            wr["ts"] = wr["t_stack"].astype("int64")
            wr["pid"] = wr["pid"].astype("int64")
            wr = wr.sort_values("ts")
            m = pd.merge_asof(wr, C, left_on="ts", right_on="sw_t", by="pid", direction="forward")
            good = m["sw_t"].notna() & (m["sw_t"] <= m["recv_copied"].astype("float64"))
            gi = m.loc[good, "_i"].to_numpy()
            t_sockq[gi] = m.loc[good, "sw_t"].astype("int64").to_numpy()
            sockq_src[gi] = "switch_in"
            rest = np.setdiff1d(np.flatnonzero(w), gi)
            t_sockq[rest] = t_stack.to_numpy()[rest]
            sockq_src[rest] = "t_stack"
    t_sip_in = rexit if tracer else rows["t_script_in"].astype("Int64")
    t_dep = rows["t_send_exit"] if tracer else rows["t_wire_out"].astype("Int64")
    received = rows["t_script_in"].notna()
    dropped = ~received
    reason = pd.array([NA] * n, dtype="string")
    reason[(dropped & rows["drop_evidence"]).to_numpy(dtype=bool)] = "rcvbuf"
    reason[(dropped & ~rows["drop_evidence"]).to_numpy(dtype=bool)] = (
        "not_received" if tracer else "not_in_proxy_log")
    kind = np.where(rows["method"].notna(), "request", "response")
    ing_tl = pd.DataFrame({
        "run_id": run_id, "call_id": rows["call_id"], "cseq": rows["cseq"],
        "cseq_method": rows["cseq_method"], "kind": kind, "method": rows["method"],
        "status": rows["status"], "src": rows["src"] + ":" + rows["sport"].astype("string"),
        "dst": (rows["e_dst"] + ":" + rows["e_dport"].astype("Int64").astype("string")),
        "size": rows["size"],
        "t_arr": t_arr, "t_stack": t_stack, "t_sockq": t_sockq, "t_sip_in": t_sip_in,
        "t_sip_c": rows["t_c"].astype("Int64"), "t_sip_out": rows["t_out"].astype("Int64"),
        "t_dep": t_dep, "dropped": dropped.astype("boolean"), "drop_reason": reason,
        "worker": rows["pid"].astype("Int64"), "t_wire_in": rows["ts_ns"].astype("Int64"),
        "t_wire_out": rows["t_wire_out"].astype("Int64"),
        "t_script_in": rows["t_script_in"].astype("Int64"),
        "recv_enter": renter, "recv_copied": rows["recv_copied"].astype("Int64"),
        "send_enter": rows["t_send_enter"].astype("Int64"), "sockq_src": sockq_src,
        "origin": "relayed", "frame_in": rows["frame"].astype("Int64"),
        "frame_out": rows["eframe"].astype("Int64"), "via_branch": rows["via_branch"],
    })
    ing_tl["k_copy_max_ns"] = (ing_tl["recv_copied"] - ing_tl["t_sockq"]).astype("Int64")

    # ---- proxy-originated rows: egress packets relaying nothing received ---------------------
    used = set(rows["eframe"].dropna().astype("int64").tolist())
    own = egr[~egr["frame"].isin(used)]
    own_tl = pd.DataFrame({
        "run_id": run_id, "call_id": own["call_id"], "cseq": own["cseq"],
        "cseq_method": own["cseq_method"],
        "kind": np.where(own["method"].notna(), "request", "response"),
        "method": own["method"], "status": own["status"],
        "src": own["src"] + ":" + own["sport"].astype("string"),
        "dst": own["dst"] + ":" + own["dport"].astype("string"), "size": own["size"],
        "t_dep": own["t_send_exit"] if tracer else own["ts_ns"].astype("Int64"),
        "dropped": False, "t_wire_out": own["ts_ns"].astype("Int64"),
        "send_enter": own["t_send_enter"], "origin": "proxy",
        "frame_out": own["frame"].astype("Int64"), "via_branch": own["via_branch"],
    })
    tl = pd.concat([ing_tl, own_tl], ignore_index=True) if len(own_tl) else ing_tl
    sort_t = tl["t_wire_in"].fillna(tl["t_wire_out"])
    tl = tl.iloc[np.argsort(sort_t.to_numpy(dtype="int64"), kind="stable")]
    tl, fixed = _enforce_order(tl)
    if fixed:
        notes.append(f"{fixed} instants blanked: a µs xlog instant fell outside its ns kernel "
                     f"neighbours (clock rounding)")
    tl, blanked = _blank_inconsistent(tl)
    for why, k in blanked.items():
        notes.append(f"{k} rows: {why}")
    timeline = make_timeline(tl)

    report = IngestReport.combine(reports, source="lab-run")
    report.path = str(run_dir)
    report.messages = len(timeline)
    report.notes.extend(notes)
    report.notes.append(_completeness_note(timeline))
    if fixed or blanked:
        report.details["instants_blanked"] = {
            **({"xlog instant outside its kernel neighbours (clock rounding)": fixed} if fixed else {}),
            **blanked}
    return timeline, report.check()


def _enforce_order(tl: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Blank xlog (µs) instants that break the order against ns kernel instants.

    The xlog clock is truncated to the µs and taken through a different clock read, so an
    xlog instant can sit up to ~1 µs before the kernel instant that precedes it.
    """
    fixed = 0
    tl = tl.copy()
    for col in ("t_sip_c", "t_sip_out"):
        i = INSTANTS.index(col)
        prev = tl[list(INSTANTS[:i])].max(axis=1, skipna=True)
        nxt = tl[list(INSTANTS[i + 1:])].min(axis=1, skipna=True)
        bad = tl[col].notna() & (((tl[col] < prev).fillna(False)) | ((tl[col] > nxt).fillna(False)))
        fixed += int(bad.sum())
        tl.loc[bad, col] = NA
    return tl, fixed


#: instants that come from the recvfrom records (joined per worker, :func:`_align_by_length`)
RECV_SIDE = ("t_sockq", "t_sip_in")
RECV_EXTRAS = ("recv_enter", "recv_copied", "recv_exit", "k_copy_max_ns", "sockq_src")


def _order_violations(tl: pd.DataFrame) -> np.ndarray:
    """Rows where some present instant is earlier than a present instant before it on the path."""
    v = np.stack([tl[c].to_numpy(dtype="float64", na_value=np.nan) for c in INSTANTS], axis=1)
    run_max = np.fmax.accumulate(np.where(np.isnan(v), -np.inf, v), axis=1)
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(v[:, 1:]) & (v[:, 1:] < run_max[:, :-1])
    return bad.any(axis=1)


def _blank_inconsistent(tl: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Never reject a whole run for a few inconsistent rows: blank what cannot be right, count it.

    After the join a row may still break the order of the seven instants (e.g. a recvfrom record
    of another datagram joined to it: ``t_sip_in`` after ``t_dep``).  Such rows lose, in this
    order until the row is consistent: (1) the instants taken from the recvfrom records
    (``t_sockq``, ``t_sip_in`` and their extra columns), (2) every instant between ``t_arr``
    and ``t_dep``, (3) ``t_dep`` itself (an egress packet that left before the message
    arrived).  Returns the timeline and {what was blanked: rows}."""
    out: dict[str, int] = {}
    bad = _order_violations(tl)
    if not bad.any():
        return tl, out
    tl = tl.copy()
    steps = (
        ("recvfrom-derived instants (t_sockq, t_sip_in) blanked: inconsistent with the row's other "
         "instants (a recvfrom record of another datagram)", RECV_SIDE + RECV_EXTRAS),
        ("instants between t_arr and t_dep blanked: still inconsistent", INSTANTS[1:-1]),
        ("t_dep blanked: the egress packet precedes the message's arrival", ("t_dep", "t_wire_out")),
    )
    for why, cols in steps:
        if not bad.any():
            break
        idx = tl.index[bad]
        for c in cols:
            if c in tl.columns:
                tl.loc[idx, c] = NA
        out[why] = int(bad.sum())
        bad = _order_violations(tl)
    return tl, out


def _completeness_note(tl: pd.DataFrame) -> str:
    rel = tl[(tl["origin"] == "relayed") & ~tl["dropped"].fillna(False)]
    if not len(rel):
        return "no relayed messages"
    full = rel[list(INSTANTS)].notna().all(axis=1)
    return f"all seven instants present for {int(full.sum())}/{len(rel)} relayed messages " \
           f"({full.mean():.4f})"


def completeness(tl: pd.DataFrame) -> float:
    """Fraction of relayed, not dropped messages with all seven instants."""
    rel = tl[(tl["origin"] == "relayed") & ~tl["dropped"].fillna(False)]
    return float(rel[list(INSTANTS)].notna().all(axis=1).mean()) if len(rel) else float("nan")
