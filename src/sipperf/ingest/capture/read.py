"""A capture from any vantage point -> timeline: ``read_capture(path, proxy=None)``.

1. the packet table (:func:`sipperf.ingest.capture.pcap.read_packets`: the packet-level account,
   read = packets in the file, parsed + skipped by reason);
2. the vantage (:mod:`.vantage`): a proxy, several hops, a B2BUA, or an endpoint;
3. the timeline for that vantage:

   =============  ===========================================================================
   vantage        rows
   =============  ===========================================================================
   proxy          :func:`.pairing.pair_at_proxy`: one row per message copy at the proxy,
                  ``t_arr``/``t_dep``, the drop rule (``disposition``), ``hop`` = 1
   multi-hop      the same for each hop, caller side first; ``hop`` = 1, 2, ...; a message
                  between two hops is a row of both (it left one and arrived at the other)
   b2bua          :func:`.b2bua.pair_legs`: the B2BUA's per-leg delay, caller-leg identity
   endpoint       :func:`.endpoint.endpoint_view`: one row per message seen, ``t_arr`` only
   =============  ===========================================================================

   Every row has the extra column ``vantage``.

The report's ``details`` hold ``vantage`` (class, hops, notes, what follows) and ``messages``,
the account of the SIP messages (not packets): how many the capture holds, how many are in
the timeline, and how many are not, by reason (e.g. "not to or from the proxy").
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import IngestError, IngestReport, make_timeline
from sipperf.ingest.pairing import hop
from sipperf.ingest.pairing.vantage import classify


#: skips that carry no message byte (TCP mechanics): not a reason for --strict to fail
TRANSPORT_ONLY = frozenset({"TCP without payload", "TCP retransmission"})


def capture_stem(path: str | os.PathLike) -> str:
    """'x' for x.pcapng, x.pcap, x.pcapng.gz, x.pcap.zst, x.cap ..."""
    from sipperf.ingest.compression import SUFFIXES
    name = Path(path).name
    for suf in SUFFIXES:
        if name.endswith(suf):
            name = name[:-len(suf)]
    from sipperf.ingest.paths import display_path
    return display_path(Path(name).stem or name)


def read_capture(path: str | os.PathLike, proxy=None, *, strict: bool = False, engine: str = "bulk",
                 run_id: str | None = None, stateful: bool = True, tls_keys: list | None = None
                 ) -> tuple[pd.DataFrame, IngestReport]:
    """Timeline and account of one capture, whatever its vantage point (see the module doc).

    ``proxy``: None (found from the traffic), ``"ip:port"``, several comma-separated (one per
    hop), or ``(ip, port)``; an unusable value raises :class:`IngestError`.  ``strict``: the
    first skipped packet of any kind is an error.  ``tls_keys``: TLS key logs (SSLKEYLOGFILE
    format) that decrypt SIP over TLS (:mod:`sipperf.ingest.capture.tls`); a pcapng's own
    decryption secrets block is used without them.
    """
    from sipperf.ingest.capture.pcap import read_packets

    packets, rep = read_packets(path, engine, on_truncated="raise" if strict else "skip", tls_keys=tls_keys)
    _strict_skips(path, rep, strict)
    packets = check_clock(packets, [path], rep)
    return timeline_of(packets, rep, path, proxy, strict=strict, run_id=run_id or capture_stem(path),
                       stateful=stateful)


def _strict_skips(path, rep: IngestReport, strict: bool) -> None:
    real = {k: v for k, v in rep.skipped.items() if k not in TRANSPORT_ONLY}
    if strict and real:
        reason, n = next(iter(sorted(real.items())))
        raise IngestError(path, "packets", f"--strict: {sum(real.values())} packet(s) skipped, e.g. {n} for "
                                           f"{reason!r} ({real})")


def read_capture_set(paths: list, proxy=None, *, strict: bool = False, engine: str = "bulk",
                     run_id: str | None = None, stateful: bool = True, tls_keys: list | None = None
                     ) -> tuple[pd.DataFrame, IngestReport]:
    """One capture cut into files (a ring buffer, ``dumpcap -b``): the files' packets in order,
    numbered on as in the merged capture, then :func:`read_capture`'s steps on all of them, so
    a call that spans a file boundary pairs as in the merged capture.  The report sums the
    files' accounts and lists each in ``details["capture_set"]``, with the cross-file pairing
    account (transactions and paired messages that span files)."""
    from sipperf.ingest.paths import set_label
    from sipperf.ingest.capture.pcap import read_packets

    paths = [Path(q) for q in paths]
    label, rid = set_label(paths)
    tables, reports, offsets = [], [], []
    offset = 0
    for q in paths:
        pk, r = read_packets(q, engine, on_truncated="raise" if strict else "skip", tls_keys=tls_keys)
        _strict_skips(q, r, strict)
        pk = pk.copy()
        pk["frame"] = pk["frame"] + offset
        offsets.append(offset)
        offset += r.read
        tables.append(pk)
        reports.append(r)
    packets = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    rep = set_report(reports, label)
    packets = check_clock(packets, paths, rep)
    tl, rep = timeline_of(packets, rep, label, proxy, strict=strict, run_id=run_id or rid, stateful=stateful)
    rep.details["capture_set"] = set_account(paths, reports, packets, tl, np.array(offsets, np.int64))
    return tl, rep


def check_clock(packets: pd.DataFrame, paths: list, rep: IngestReport) -> pd.DataFrame:
    """The packet table with impossible stamps repaired and clock steps undone
    (:mod:`sipperf.ingest.clock`), what was done in ``rep``; the table itself when
    nothing was.  ``paths``: the files it was read from (the latest modification time bounds
    the stamps)."""
    from sipperf.ingest.clock import ClockCheck, file_time_ns

    if not len(packets):
        return packets
    times = [t for t in (file_time_ns(q) for q in paths) if t is not None]
    clock = ClockCheck(max(times) if times else None)
    iface = packets["iface"].to_numpy(np.int64) if "iface" in packets.columns else np.zeros(len(packets), np.int64)
    ts = clock.apply(packets["ts_ns"].to_numpy(np.int64), iface, packets["frame"].to_numpy(np.int64))
    label = paths[0] if len(paths) == 1 else rep.path
    clock.account(label, rep)
    if not clock.changed():
        return packets
    packets = packets.copy()
    packets["ts_ns"] = ts
    packets["clock_flags"] = clock.flags  # which stamps were repaired, which steps lie between rows
    return packets


def set_report(reports: list[IngestReport], label: str) -> IngestReport:
    """One packet-level account for the files of a ring buffer: their reads, parses, skips and
    notes summed (the timeline's own account comes after pairing)."""
    rep = IngestReport(source="pcap-set", path=label)
    for r in reports:
        rep.read += r.read
        rep.parsed += r.parsed
        rep.skipped.update(r.skipped)
        rep.notes.extend(r.notes)
    res = [r.details["clock"]["resolution_ns"] for r in reports if (r.details.get("clock") or {}).get("resolution_ns")]
    if res:  # the coarsest clock of the files (their per-interface detail stays in each file's notes)
        rep.details["clock"] = {"resolution_ns": max(res)}
    return rep


def set_account(paths, reports, packets: pd.DataFrame, tl: pd.DataFrame, offsets: np.ndarray) -> dict:
    """Per-file accounts of a ring buffer and the cross-file pairing account."""
    fno = np.searchsorted(offsets, packets["frame"].to_numpy(np.int64), side="left") - 1  # frames are 1-based
    files = []
    for k, (q, r) in enumerate(zip(paths, reports)):
        files.append({"path": display_path_of(q), "read": r.read, "parsed": r.parsed, "skipped": dict(r.skipped),
                      "sip_messages": int((fno == k).sum())})
    grp = pd.DataFrame({"c": packets["call_id"].astype("string").fillna(""),
                        "q": packets["cseq"].astype("Int64").fillna(-1).to_numpy(np.int64), "f": fno})
    span = grp.groupby(["c", "q"])["f"].agg(["min", "max"])
    paired = 0
    if "frame_in" in tl.columns and "frame_out" in tl.columns:
        both = tl["frame_in"].notna() & tl["frame_out"].notna()  # every hop's paired rows
        fi = np.searchsorted(offsets, tl.loc[both, "frame_in"].to_numpy(np.int64), side="left")
        fo = np.searchsorted(offsets, tl.loc[both, "frame_out"].to_numpy(np.int64), side="left")
        paired = int((fi != fo).sum())
    return {"files": files, "pairing": {"transactions_across_files": int((span["min"] != span["max"]).sum()),
                                        "messages_paired_across_files": paired}}


def display_path_of(q) -> str:
    from sipperf.ingest.paths import display_path
    return display_path(q)


def timeline_of(packets: pd.DataFrame, rep: IngestReport, path, proxy=None, *, strict: bool = False,
                run_id: str = "capture", stateful: bool = True) -> tuple[pd.DataFrame, IngestReport]:
    """:func:`read_capture` from the packet table and its account."""
    if len(packets) == 0:
        what = f"skipped: {dict(rep.skipped)}" if rep.skipped else "no packets"
        raise IngestError(path, f"{rep.read} packets", f"no SIP message in this capture ({what})")
    # a SIP message without Call-ID (mandatory, RFC 3261 §8.1.1) cannot be a timeline row
    no_cid = packets["call_id"].isna().to_numpy(bool) | (packets["call_id"].astype("string") == "").fillna(False).to_numpy(bool)
    unusable = {"no Call-ID (malformed SIP message)": int(no_cid.sum())} if no_cid.any() else {}
    n_all = len(packets)
    if no_cid.any():
        packets = packets[~no_cid].reset_index(drop=True)
        if strict:
            raise IngestError(path, "packets", f"--strict: {int(no_cid.sum())} SIP message(s) without Call-ID")
        if not len(packets):
            raise IngestError(path, f"{rep.read} packets", "no usable SIP message in this capture (none has a Call-ID)")
    v, p = classify(packets, proxy, path=path)
    capture_end = float(p["ts_ns"].max())
    used = np.zeros(len(p), bool)
    unused: dict[str, int] = dict(unusable)
    if v.kind in ("proxy", "multi-hop"):
        frames = []
        for k, h in enumerate(v.hops, 1):
            tl, prep_rep = pair_at(p, h, run_id, capture_end, stateful)
            tl["hop"] = pd.array(np.full(len(tl), k), dtype="Int64")
            frames.append(tl)
            s_in, d_in = p["src_ep"].isin(h.sockets).to_numpy(), p["dst_ep"].isin(h.sockets).to_numpy()
            used |= s_in ^ d_in
            if (s_in & d_in).any():
                unused["from the proxy to itself"] = unused.get("from the proxy to itself", 0) + int((s_in & d_in).sum())
            rep.notes.extend(f"hop {k}: {x}" if len(v.hops) > 1 else x for x in prep_rep.notes)
        tl = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        n_other = int((~used).sum()) - sum(unused.values()) + sum(unusable.values())
        if n_other:
            unused["not to or from the proxy" if len(v.hops) == 1 else "not to or from any hop"] = n_other
    elif v.kind == "b2bua":
        from sipperf.ingest.pairing.b2bua import pair_legs
        tl = pair_legs(p, v.b2bua, capture_end)
        tl["run_id"] = run_id
        socks = set(v.b2bua["sockets"])
        legs = {c for a, b, _ in v.b2bua["pairs"] for c in (a, b)}
        used = (p["call_id"].isin(legs) & (p["src_ep"].isin(socks) ^ p["dst_ep"].isin(socks))).to_numpy()
        if (~used).any():
            unused["not on a correlated B2BUA leg"] = int((~used).sum())
    else:
        from sipperf.ingest.pairing.endpoint import endpoint_view
        tl = endpoint_view(p, run_id=run_id)
        used[:] = True
    tl["vantage"] = v.kind
    tl = make_timeline(tl)
    if "clock" in tl.columns and tl["clock"].notna().any():
        from sipperf.ingest.pairing.proxy import INVERTED, STAMP_UNKNOWN
        for what, key in ((INVERTED, "egress_before_ingress"), (STAMP_UNKNOWN, "time_unknown")):
            n = int((tl["clock"] == what).sum())
            if n:
                rep.details[key] = n
    rep.messages = len(tl)
    rep.details["vantage"] = v.to_dict()
    if v.kind == "endpoint":
        rep.details["vantage"]["seen"] = {"messages": int(len(tl)), "retransmissions": int(tl["retrans"].sum()),
                                          "call_ids": int(tl["call_id"].nunique())}
    else:
        rep.details["vantage"]["per_hop"] = per_hop_summary(tl)
    rep.details["messages_account"] = {"sip_messages": n_all, "in_timeline": int(used.sum()),
                                       "not_in_timeline": unused}
    assert int(used.sum()) + sum(unused.values()) == n_all
    rep.notes.extend(v.notes)
    return tl, rep.check()


def pair_at(p: pd.DataFrame, h, run_id: str, capture_end: float, stateful: bool):
    from sipperf.ingest.pairing.proxy import pair_at_proxy
    return pair_at_proxy(p, h.socket, sockets=h.sockets, run_id=run_id, capture_end=capture_end,
                         stateful=stateful)


def per_hop_summary(tl: pd.DataFrame) -> list[dict]:
    """Per hop (or the one proxy / B2BUA): socket, counts by disposition, PDR and sojourn (µs)."""
    if "disposition" not in tl.columns or not len(tl):
        return []
    if "hop" in tl.columns:
        groups = tl.groupby(tl["hop"].fillna(1).astype(int), sort=True)
    else:
        groups = [(1, tl)]
    out = []
    for k, g in groups:
        d = hop.counts(g["disposition"])
        soj = (g["t_dep"] - g["t_arr"]).dropna().to_numpy(dtype="float64") / 1e3
        relayed, dropped = d.get(hop.RELAYED, 0), d.get(hop.DROPPED, 0)
        out.append({
            "hop": int(k), "proxy": str(g["proxy"].dropna().iloc[0]) if "proxy" in g and g["proxy"].notna().any() else None,
            "messages": int(len(g)), "dispositions": d,
            "pdr_percent": 100.0 * dropped / (relayed + dropped) if relayed + dropped else None,
            "sojourn_us": {"count": int(len(soj)), "mean": float(soj.mean()) if len(soj) else None,
                           "median": float(np.median(soj)) if len(soj) else None,
                           "p99": float(np.percentile(soj, 99)) if len(soj) else None},
        })
    return out
