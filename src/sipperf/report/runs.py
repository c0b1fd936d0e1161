"""Runs: which inputs form one run (``--group-by``), and what one run measured.

Several inputs are never pooled silently: by default every lab or sim run directory and every
file is its own run, and a file holding several ``run_id`` values is split by them.  Rules
(``group_by``):

============== ==============================================================================
``auto``       each run directory and each file is a run (the files of one ring buffer,
               ``PREFIX_NNNNN_YYYYmmddHHMMSS.pcapng``, one run); several ``run_id`` in one file split
``file``       the same as ``auto``
``dir``        the files of one directory form one run (e.g. a rotated syslog)
``none``       everything is one run (pooling, asked for explicitly)
``regex:PAT``  inputs whose path gives the same match of PAT (its first group, if it has
               one) form one run; a path without a match is a run of its own
``gap:S``      everything is read together, then cut into runs wherever no message arrives
               for S seconds (one long capture of several load steps)
============== ==============================================================================

:func:`measure` turns one run's timeline into the numbers the report shows and the fit needs
(:class:`sipperf.fit.RunInput`): the steady-state window (MSER-5 warm-up cut on the sojourn series
in arrival order, thesis §4.2's batch means after it; the cool-down after the last INVITE left
out), the arrival rates, the inter-arrival SCV of the calls, the drop rate with its batch-means
CI, and per message type the means of Q (K_sockq with tracepoints, else the sojourn) and of
R = t_dep − t_sockq.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sipperf import stats
from sipperf.fit import RunInput
from sipperf.timeline import first_instant

__all__ = ["Group", "group_inputs", "split_timeline", "measure", "RunMeasure", "run_meta", "GROUP_RULES",
           "queue_growth", "cpu_share_of", "point_probes", "summary_probes", "lab_rule_miss", "read_cpu_file",
           "apply_cpu_rows"]

GROUP_RULES = ("auto", "file", "dir", "none", "regex:PATTERN", "gap:SECONDS")
#: fewer steady-state values than this: the CI falls back to the iid formula (and says so)
MIN_BATCH_N = 2 * stats.DEFAULT_BATCHES
#: a rate needs at least this many messages and calls in the steady window
MIN_RATE_MESSAGES = 30
MIN_RATE_CALLS = 5


@dataclass
class Group:
    """One run's inputs (paths) and its label."""

    label: str
    paths: list[str]


def _label(p: Path) -> str:
    name = p.name
    for suf in (".gz", ".xz", ".bz2", ".zst", ".pcapng", ".pcap", ".log", ".csv", ".parquet", ".txt"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    return name or str(p)


def _walk(p: Path) -> list[tuple[Path, str]]:
    """(path, kind) of every run directory and file under ``p`` (kind from :func:`sipperf.ingest.sniff`)."""
    from sipperf.ingest import sniff

    try:
        kind = sniff(p)
    except Exception as e:  # an unreadable entry: let the loader report it
        return [(p, f"error: {e}")]
    if kind != "dir":
        return [(p, kind)]
    out: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(p):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rp = Path(root)
        for d in list(dirs):
            try:
                k = sniff(rp / d)
            except Exception as e:
                k = f"error: {e}"
            if k != "dir":
                out.append((rp / d, k))
                dirs.remove(d)
        for f in sorted(files):
            if not f.startswith("."):
                try:
                    out.append((rp / f, sniff(rp / f)))
                except Exception as e:
                    out.append((rp / f, f"error: {e}"))
    return out


def group_inputs(paths, group_by: str = "auto") -> tuple[list[Group], list[dict]]:
    """Split the inputs into runs.  Returns (groups, ignored) where ``ignored`` lists files of
    unknown format found in directories, and inputs that repeat one given before (the same file,
    or the same bytes), with their reason; they are not runs."""
    from sipperf.ingest.paths import display_path

    paths = [Path(p) for p in paths]
    rule = group_by or "auto"
    if rule == "none" or rule.startswith("gap:"):
        return [Group("all inputs" if len(paths) > 1 else _label(paths[0]), [str(p) for p in paths])], []
    items: list[tuple[Path, str]] = []
    ignored = []
    for p in paths:
        if not os.path.lexists(p):
            items.append((p, "missing"))
            continue
        found = _walk(p)
        if len(found) == 1 and found[0][0] == p:
            items.extend(found)   # given directly: read (and its error reported) even if unknown
            continue
        ignored += [{"path": display_path(q), "reason": "unknown format"} for q, k in found if k == "unknown"]
        items.extend((q, k) for q, k in found if k != "unknown")
    from sipperf.ingest.paths import unique_inputs
    items, repeated = unique_inputs(items)  # the same file (or bytes) twice is one run, read once
    ignored += [{"path": d["path"], "reason": f"{d['why']} as {d['same_as']}: read once"} for d in repeated]
    # a TLS key log is no run: its secrets go with every run (tshark uses those that match)
    keylogs = [str(p) for p, k in items if k == "tls_keylog"]
    items = [(p, k) for p, k in items if k != "tls_keylog"]
    groups: dict[str, list[str]] = {}
    if rule in ("auto", "file"):
        from sipperf.ingest.paths import capture_sets, set_label

        for p, kind in capture_sets(items):   # a ring buffer's files (dumpcap -b) are one run
            if kind == "pcap-set":
                groups.setdefault(_unique(groups, set_label(p)[1], p[0]), []).extend(str(q) for q in p)
            else:
                groups.setdefault(_unique(groups, _label(p), p), []).append(str(p))
    elif rule == "dir":
        by: dict[str, list[str]] = {}
        for p, k in items:
            by.setdefault(str(p if k in ("lab", "sim") else p.parent), []).append(str(p))
        for k, v in by.items():
            groups[_unique(groups, Path(k).name or k, Path(k))] = v
    elif rule.startswith("regex:"):
        try:
            pat = re.compile(rule[len("regex:"):])
        except re.error as e:
            raise ValueError(f"--group-by {rule!r}: not a regular expression ({e})") from None
        for p, _ in items:
            m = pat.search(str(p))
            key = (m.group(1) if m.groups() and m.group(1) is not None else m.group(0)) if m else _label(p)
            groups.setdefault(key, []).append(str(p))
    else:
        raise ValueError(f"--group-by {rule!r}: use one of {', '.join(GROUP_RULES)}")
    return [Group(k, v + keylogs) for k, v in groups.items()], ignored


def _unique(groups: dict, label: str, p: Path) -> str:
    if label not in groups:
        return label
    alt = f"{p.parent.name}/{label}"
    i = 2
    while alt in groups:
        alt = f"{p.parent.name}/{label}#{i}"
        i += 1
    return alt


def parse_gap(group_by: str) -> float | None:
    if not group_by or not group_by.startswith("gap:"):
        return None
    try:
        v = float(group_by[4:])
    except ValueError:
        raise ValueError(f"--group-by {group_by!r}: gap:SECONDS needs a number of seconds") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"--group-by {group_by!r}: the gap must be a positive number of seconds")
    return v


def split_timeline(tl: pd.DataFrame, label: str, gap_s: float | None,
                   by_run_id: bool = True) -> list[tuple[str, pd.DataFrame]]:
    """Split one group's timeline: by ``run_id`` when it holds several (``by_run_id``: the rules
    that read one input per run), or (``gap_s``) wherever no message arrives for ``gap_s``
    seconds (a call's messages stay with the run of its first)."""
    parts: list[tuple[str, pd.DataFrame]] = []
    ids = tl["run_id"].astype("string").fillna("") if "run_id" in tl.columns else pd.Series([""] * len(tl))
    uniq = list(dict.fromkeys(ids.tolist()))
    if len(uniq) > 1 and gap_s is None and by_run_id:
        for u in uniq:
            parts.append((f"{label}/{u}" if label != u else u, tl[(ids == u).to_numpy()].reset_index(drop=True)))
    else:
        parts.append((label, tl))
    if gap_s is None:
        return parts
    out = []
    for lab, d in parts:
        t = first_instant(d)
        call_t = pd.Series(t).groupby(d["call_id"].astype("string").to_numpy()).transform("min").to_numpy()
        order = np.sort(np.unique(call_t[np.isfinite(call_t)]))
        if order.size < 2:
            out.append((lab, d))
            continue
        cuts = order[1:][np.diff(order) > gap_s * 1e9]
        seg = np.searchsorted(cuts, call_t, side="right")
        n = int(cuts.size) + 1
        for i in range(n):
            m = seg == i
            if m.any():
                out.append((f"{lab} part {i + 1}" if n > 1 else lab, d[m].reset_index(drop=True)))
    return out


def run_meta(paths: list[str]) -> dict[str, Any]:
    """What a lab or sim run directory says about its configuration: offered rate, workers
    (threads c), cores m, processors p, socket capacity (packets), arrivals."""
    metas = [_one_meta(p) for p in paths]
    metas = [m for m in metas if m]
    out: dict[str, Any] = {}
    mixed = []
    for k in sorted({k for m in metas for k in m}):
        vals = {json.dumps(m.get(k), sort_keys=True, default=str) for m in metas}
        if len(vals) == 1 and len([m for m in metas if k in m]) == len(metas):
            out[k] = metas[0][k]
        elif k in ("threads", "cores", "processors", "k_pkts", "offered_cps"):
            mixed.append(k)
    if mixed:
        out["mixed"] = mixed
    return out


def _one_meta(p) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in [p]:
        mp = Path(p) / "meta.json"
        if not mp.is_file():
            continue
        try:
            m = json.loads(mp.read_text(errors="replace"))
        except (OSError, ValueError):
            continue
        if not isinstance(m, dict):
            continue
        if m.get("source") == "sim":
            par = m.get("params") or {}
            w, k = par.get("workload") or {}, par.get("kernel") or {}
            cores = k.get("cores")
            per = k.get("cores_per_socket") or cores
            out.update({"source": "sim", "offered_cps": w.get("rate_cps"), "threads": k.get("threads"),
                        "cores": cores, "processors": (math.ceil(cores / per) if cores and per else None),
                        "k_pkts": k.get("rcvbuf_pkts"), "arrivals": w.get("arrivals"), "synthetic": True})
        elif m.get("source") == "lab":
            cfg = m.get("config") or {}
            cpu = m.get("cpu") or {}
            out.update({"source": "lab", "offered_cps": cfg.get("rate_cps"), "threads": cfg.get("workers"),
                        "cores": cpu.get("count") if isinstance(cpu, dict) else None,
                        "arrivals": cfg.get("arrivals"), "sched": cfg.get("sched")})
            sk = str(((m.get("proxy") or {}).get("socket")) or "")
            mm = re.search(r"rb(\d+)", sk)
            if mm:
                out["rcvbuf_bytes"] = int(mm.group(1))
        # CPU accounting of the load window (sipperf lab: all the proxy's processes, from /proc)
        for key, name in (("proxy_cpu", "proxy"), ("generator_cpu", "generator")):
            share = cpu_share_of(m.get(key))
            if share is not None:
                out[f"{name}_cpu_share"] = share
                out[f"{name}_cpu_source"] = f"meta.json {key}"
    return out


@dataclass
class RunMeasure:
    """What one run measured (for the report) and its :class:`~sipperf.fit.RunInput` (for the fit)."""

    label: str
    n_messages: int
    vantage: str
    has_sojourn: bool
    tracepoints: bool
    duration_s: float
    warmup_n: int
    warmup_s: float
    warmup_capped: bool
    steady_n: int
    window_s: float
    lam_pps: float
    lam_cps: float
    calls: int
    ca2: float
    ca2_sd: float
    ca2_msgs: float
    pdr: float
    pdr_ci95: float
    dropped: int
    retransmissions: int
    k_pkts_data: float | None
    fit_input: RunInput
    #: the messages the drop rate rests on (the steady window's relayed + dropped)
    pdr_n: int = 0
    #: does the time in the proxy grow through the run (:func:`queue_growth`)? None: too short to tell
    queue_growing: bool | None = None
    queue_trend: dict[str, Any] = field(default_factory=dict)
    #: CPU-seconds per second of all the proxy's processes (and the load generator's) over the load
    cpu_share: float | None = None
    cpu_source: str = ""
    generator_cpu_share: float | None = None
    #: which proxy the run measured (its socket in a capture, else the input's format): runs of
    #: different proxies should not be fitted together
    proxy_id: str = ""
    series: dict[str, Any] = field(default_factory=dict)
    #: the kernel's counters over the run (``--cpu`` file columns of ``sipperf collect``)
    kernel: dict[str, float] = field(default_factory=dict)
    components: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    #: the call rate the load generator was asked for (``--cpu`` file's rate_cps), beside ``lam_cps``
    offered_cps: float | None = None
    #: the CPUs the proxy's processes may run on (``--cpu`` file's cpus; None unknown)
    cpus: int | None = None
    #: the transport the proxy's messages came over ("udp", "tcp", "tls", "ws", "wss"; "" unknown)
    transport: str = ""
    #: what ``pdr`` counts: "drops" (datagrams, UDP) or "failed calls" (attempts that failed or
    #: missed the setup deadline, over a stream transport, where nothing is dropped)
    loss_kind: str = "drops"
    #: how the calls ended (:func:`sipperf.calls.setup_outcomes`), over the whole run
    setup: dict[str, Any] = field(default_factory=dict)

    #: TCP's own overload signals in the capture (:func:`tcp_signals`): zero windows and resets
    #: the proxy sent and its peers sent, retransmitted segments ({} when none or not TCP)
    tcp: dict[str, Any] = field(default_factory=dict)
    #: TLS connections in the capture that could not be decrypted (``client``, ``server``,
    #: ``handshake_in_capture``): their messages are missing from everything the run shows
    tls_unread: list = field(default_factory=list)

    #: the load reached the proxy short of the rate offered (under 90 %) while the proxy's own CPU
    #: was full: the proxy, not the generator, held it back (set from the --cpu file)
    held_back: bool = False

    @property
    def pushed_back(self) -> bool:
        """Did the proxy fall behind so that its callers had to wait: a zero window advertised (its
        receive buffer full), or the offered load held back with its CPU full?"""
        return bool(self.tcp.get("zero_window_proxy")) or self.held_back

    @property
    def failed_fraction(self) -> float:
        """The share of decided call attempts that failed or missed the setup deadline, each
        connection the proxy reset, and each new TLS connection whose handshake it did not answer
        within the deadline, counted as one more failed attempt; an attempt on a connection whose
        handshake it answered later than the deadline counts as failed (:func:`_connection_losses`)."""
        extra, late = _connection_losses(self.setup)
        n = (self.setup.get("attempts") or 0) + extra
        return min(self.setup.get("failed", 0) + extra + late, n) / n if n else float("nan")


def tls_hello_outcomes(hello: dict, deadline_s: float) -> dict:
    """How the new TLS connections to the proxy fared against a setup deadline, from the
    ingest's ``hello_waits`` of its endpoint (``waits_ms``: ClientHello to ServerHello per
    answered connection; ``unanswered_ms``: ClientHello to the capture's end per unanswered one).
    ``tls_late``: answered after the deadline; ``tls_unanswered``: not answered although the
    capture went on for the deadline or longer; ``tls_hello_p50_ms``/``tls_hello_p99_ms`` of the
    answered ones (NaN if none)."""
    dl_ms = 1e3 * deadline_s
    waits = np.asarray(hello.get("waits_ms") or [], float)
    left = np.asarray(hello.get("unanswered_ms") or [], float)
    return {"tls_late": int((waits > dl_ms).sum()), "tls_unanswered": int((left >= dl_ms).sum()),
            "tls_hello_p50_ms": float(np.percentile(waits, 50)) if waits.size else float("nan"),
            "tls_hello_p99_ms": float(np.percentile(waits, 99)) if waits.size else float("nan")}


def _connection_losses(setup: dict) -> tuple[int, int]:
    """(attempts the capture's calls do not hold, attempts on the capture's calls that failed
    before their INVITE was sent): a connection the proxy reset, or a new TLS connection whose
    handshake it left unanswered past the deadline, is an attempt lost before any SIP; one
    connection can be both (unanswered, then reset when its caller gave up), so the larger of the
    two counts is taken, a lower bound.  A handshake answered past the deadline delayed the call
    on it past the deadline: the caller waited for it before its INVITE could be sent."""
    return (max(int(setup.get("reset_connections") or 0), int(setup.get("tls_unanswered") or 0)),
            int(setup.get("tls_late") or 0))


def tcp_signals(sig: dict[str, Any] | None, tl: pd.DataFrame, proxy_id: str) -> dict[str, Any]:
    """The capture's TCP overload signals (``details["transports"]["tcp_signals"]`` of the
    ingest) split by who sent them: the proxy (its listening endpoint ``proxy_id``, and any
    other port on its host that is not one of its peers -- the connections it opens to the next
    hop) or its peers (every endpoint the timeline's messages came from or went to).  A zero
    window the proxy sends says its receive buffer is full: it reads slower than its callers
    write, TCP's form of the drops a UDP socket counts.  {} when the capture has none."""
    if not sig:
        return {}
    peers = set()
    for c in ("src", "dst"):
        if c in tl.columns:
            peers |= set(tl[c].dropna().astype(str).unique())
    peers.discard(proxy_id)
    # the proxy's other ports are told from its peers' only when the peers are known (a streamed
    # reading keeps no endpoints): otherwise every client on the proxy's host -- a load generator
    # on loopback -- would be taken for the proxy; then only its listening endpoint is its own
    host = proxy_id.rsplit(":", 1)[0] if proxy_id and peers else ""
    out = {"zero_window_proxy": 0, "zero_window_peers": 0, "resets_proxy": 0, "resets_peers": 0,
           "retransmissions": int(sig.get("retransmissions", 0)), "proxy_first_s": float("nan"),
           "proxy_last_s": float("nan"), "senders_not_listed": int(sig.get("not_listed", 0))}
    for e in sig.get("senders", []):
        ep = str(e["endpoint"])
        mine = ep == proxy_id or (ep not in peers and bool(host) and ep.rsplit(":", 1)[0] == host)
        who = "proxy" if mine else "peers"
        out[f"zero_window_{who}"] += int(e["zero_window"])
        out[f"resets_{who}"] += int(e["resets"])
        if mine and e["zero_window"]:
            f, la = float(e["first_s"]), float(e["last_s"])
            out["proxy_first_s"] = f if not math.isfinite(out["proxy_first_s"]) else min(out["proxy_first_s"], f)
            out["proxy_last_s"] = la if not math.isfinite(out["proxy_last_s"]) else max(out["proxy_last_s"], la)
    return out


def _pct_txt(x: float) -> str:
    return f"{100 * x:.2g} %" if 100 * x < 10 else f"{100 * x:.0f} %"


def _arr(tl: pd.DataFrame, c: str) -> np.ndarray:
    return tl[c].to_numpy(dtype="float64", na_value=np.nan)


def _mean_se(x: np.ndarray) -> tuple[float, float, str]:
    """Mean and its standard error: batch means (30 batches) when there are enough values, else
    the iid formula (``how`` says which)."""
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), "none"
    if x.size >= MIN_BATCH_N:
        ci = stats.batch_means_ci(x)
        from scipy import stats as st
        return ci.mean, ci.half_width / float(st.t.ppf(0.975, ci.batches - 1)), "batch means"
    if x.size == 1:
        return float(x[0]), float("nan"), "one value"
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)), "iid (too few values for batch means)"


def initial_invites(tl: pd.DataFrame) -> pd.Series:
    """Arrival instant (ns) of the first INVITE of each call (Call-ID)."""
    inv = tl[(tl["msg_type"] == "INVITE").fillna(False).to_numpy(bool)]
    if not len(inv):
        return pd.Series(dtype="float64")
    t = first_instant(inv)
    return pd.Series(t).groupby(inv["call_id"].astype("string").to_numpy()).min().dropna().sort_values()


def queue_at_drops(tl: pd.DataFrame) -> float | None:
    """Median number of messages in the socket queue (t_stack <= t < t_sockq) when a message was
    dropped: what the data say about the queue's capacity K (packets).  None without drops or
    without tracepoints."""
    d = tl["dropped"].fillna(False).to_numpy(bool)
    if not d.any():
        return None
    ts, tq = _arr(tl, "t_stack"), _arr(tl, "t_sockq")
    ok = np.isfinite(ts) & np.isfinite(tq)
    if ok.sum() < 10:
        return None
    t_drop = first_instant(tl)[d]
    t_drop = t_drop[np.isfinite(t_drop)]
    if not t_drop.size:
        return None
    a, b = np.sort(ts[ok]), np.sort(tq[ok])
    q = np.searchsorted(a, t_drop, side="right") - np.searchsorted(b, t_drop, side="right")
    return float(np.median(q))


def cpu_share_of(rec: Any) -> float | None:
    """CPU-seconds per second from a ``meta.json`` CPU record (``{"cpu_s", "window_s", ...}``, what
    ``sipperf lab`` writes as ``proxy_cpu`` and ``generator_cpu``); None when absent or unusable."""
    if not isinstance(rec, dict):
        return None
    try:
        cpu_s, win = float(rec.get("cpu_s")), float(rec.get("window_s"))
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(cpu_s) and math.isfinite(win) and cpu_s >= 0 and win > 0):
        return None
    return cpu_s / win


#: the queue-growth check averages the time in the proxy over bins of this many seconds
GROWTH_BIN_S = 5.0


def queue_growth(t_s: np.ndarray, soj_us: np.ndarray, bin_s: float = GROWTH_BIN_S) -> dict[str, Any]:
    """Does the time in the proxy grow through the run?  The sojourns (in arrival order, ``t_s``
    seconds since the run's start) are averaged over consecutive bins of ``bin_s`` seconds (a run
    shorter than four bins is cut into four equal ones, each needing 10 messages).  Growing: the
    last quarter of the bins averages at least 1.5 times the first quarter and the bin means rise
    with time (least-squares slope, one-sided p < 0.05).  ``growing`` is None when the run is too
    short to tell; the dict also holds the bin width, the first and last quarter's means (µs),
    their ratio and the slope's p-value."""
    from scipy import stats as st

    t = np.asarray(t_s, dtype=float)
    v = np.asarray(soj_us, dtype=float)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    out: dict[str, Any] = {"growing": None, "bin_s": float("nan"), "bins": 0}
    if t.size < 40:
        return out
    span = float(t.max() - t.min())
    if span <= 0:
        return out
    width = bin_s if span >= 4 * bin_s else span / 4
    k = np.minimum(((t - t.min()) / width).astype(int), max(int(span / width), 1) - 1 if span >= 4 * bin_s else 3)
    nb = int(k.max()) + 1
    cnt = np.bincount(k, minlength=nb)
    means = np.bincount(k, weights=v, minlength=nb) / np.maximum(cnt, 1)
    good = cnt >= 10
    if good.sum() < 4:
        return out
    mids = (np.arange(nb) + 0.5) * width
    m, x = means[good], mids[good]
    q = max(1, m.size // 4)
    first, last = float(m[:q].mean()), float(m[-q:].mean())
    lr = st.linregress(x, m)
    p_one = float(lr.pvalue / 2) if lr.slope > 0 else 1.0
    ratio = last / first if first > 0 else float("inf")
    out.update({"growing": bool(ratio >= 1.5 and p_one < 0.05), "bin_s": float(width), "bins": int(m.size),
                "first_us": first, "last_us": last, "ratio": float(ratio), "p": p_one})
    return out


#: transports on which the proxy drops nothing a capture could count: the knee reads failed calls
STREAM_TRANSPORTS = ("tcp", "tls", "ws", "wss", "sctp")


def measure(label: str, tl: pd.DataFrame, meta: dict[str, Any] | None = None) -> RunMeasure:
    """The numbers of one run (see the module docstring)."""
    from sipperf.calls import caller_side, setup_outcomes

    meta = meta or {}
    warnings: list[str] = []
    if meta.get("mixed"):
        warnings.append("this run pools inputs whose configurations differ (" + ", ".join(meta["mixed"])
                        + "): those are taken as unknown; its statistics mix the configurations")
    tl = caller_side(tl).reset_index(drop=True)
    vantage = "proxy"
    if "vantage" in tl.columns and tl["vantage"].notna().any():
        vantage = str(tl["vantage"].dropna().iloc[0])
    t_arr, t_dep = _arr(tl, "t_arr"), _arr(tl, "t_dep")
    dropped = tl["dropped"].fillna(False).to_numpy(bool)
    disp = tl["disposition"].astype("string").fillna("") if "disposition" in tl.columns else None
    relayed = np.isfinite(t_arr) & np.isfinite(t_dep) & ~dropped
    if disp is not None:
        relayed &= (disp == "relayed").to_numpy(bool) | (disp == "").to_numpy(bool)
    has_soj = vantage != "endpoint" and relayed.sum() >= 2
    t0 = np.nanmin(first_instant(tl)) if len(tl) else np.nan
    t_last = np.nanmax(np.where(np.isfinite(t_dep), t_dep, first_instant(tl))) if len(tl) else np.nan
    duration = float((t_last - t0) / 1e9) if np.isfinite(t0) and np.isfinite(t_last) else 0.0
    inv = initial_invites(tl)
    # steady window: MSER-5 on the sojourn series in arrival order; cool-down after the last INVITE
    order = np.argsort(np.where(relayed, t_arr, np.inf), kind="stable")[: int(relayed.sum())]
    soj_us = (t_dep[order] - t_arr[order]) / 1e3
    t_end = float(inv.iloc[-1]) if len(inv) >= 2 else (float(np.nanmax(t_arr)) if np.isfinite(t_arr).any() else t_last)
    warm_n, capped = 0, False
    t_start = t0
    if has_soj and soj_us.size >= 20:
        pre = soj_us[t_arr[order] <= t_end]
        warm_n = stats.mser5(pre)
        k = pre.size // 5
        capped = k >= 4 and warm_n >= 5 * (k // 2)
        if warm_n < order.size:
            t_start = float(t_arr[order][warm_n])
    window_s = max((t_end - t_start) / 1e9, 0.0) if np.isfinite(t_end) and np.isfinite(t_start) else 0.0
    arrived = np.isfinite(t_arr)
    if disp is not None:
        arrived_fw = arrived & ((disp == "relayed") | (disp == "dropped") | (disp == "") |
                                (disp == "seen")).to_numpy(bool)
    else:
        arrived_fw = arrived
    in_win = arrived & (t_arr >= t_start) & (t_arr <= t_end)
    n_in = int(in_win.sum())
    inv_win = inv[(inv >= t_start) & (inv <= t_end)]
    if n_in >= MIN_RATE_MESSAGES and len(inv_win) >= MIN_RATE_CALLS and window_s > 0:
        lam_pps = n_in / window_s
        lam_cps = (len(inv_win) - 1) / ((inv_win.iloc[-1] - inv_win.iloc[0]) / 1e9)
    else:
        lam_pps = lam_cps = float("nan")
        warnings.append(f"too short to measure an arrival rate ({n_in} messages, {len(inv_win)} calls in a "
                        f"{window_s:.3g} s window; at least {MIN_RATE_MESSAGES} messages and {MIN_RATE_CALLS} "
                        "calls are needed): no utilisation, no queueing correction of the service time")
        if meta.get("offered_cps"):
            lam_cps = float(meta["offered_cps"])
    # arrivals: SCV of the calls' inter-arrival times (1 for Poisson); its sd is about 2/sqrt(n)
    ca2 = ca2_sd = float("nan")
    if len(inv_win) >= 10:
        g = np.diff(inv_win.to_numpy())
        if g.mean() > 0:
            ca2 = float(g.var() / g.mean() ** 2)
            ca2_sd = 2.0 / math.sqrt(g.size)
    ta = np.sort(t_arr[in_win])
    ca2_msgs = float(np.diff(ta).var() / np.diff(ta).mean() ** 2) if ta.size >= 10 and np.diff(ta).mean() > 0 else float("nan")
    if math.isfinite(ca2) and abs(ca2 - 1) > max(0.2, 3 * ca2_sd):
        kind = "burstier than Poisson" if ca2 > 1 else "more regular than Poisson"
        warnings.append(f"non-Poisson call arrivals: inter-arrival SCV c_a² = {ca2:.2f} "
                        f"(CV {math.sqrt(ca2):.2f}; Poisson gives 1 ± {2 * ca2_sd:.2f}): {kind}. "
                        "M/G/1 (eq. 4.2) assumes Poisson arrivals; its predicted wait is then "
                        + ("too low" if ca2 > 1 else "too high") + " (Kingman: W grows with (c_a² + c_s²)/2)")
    # drops from the first arrival to the last INVITE, with a batch-means CI on the 0/1 series in
    # arrival order: the warm-up cut shapes the means, never what the knee reads (a drop episode
    # early in a run is a drop episode)
    pdr = pdr_ci = float("nan")
    pdr_n = 0
    n_drop = int(dropped.sum())
    if vantage != "endpoint":
        sel = arrived_fw & (t_arr <= t_end)
        if disp is not None:
            sel &= ((disp == "relayed") | (disp == "dropped") | (disp == "")).to_numpy(bool)
        o = np.argsort(t_arr[sel], kind="stable")
        ind = dropped[sel][o].astype(float)
        pdr_n = int(ind.size)
        if ind.size:
            pdr = float(ind.mean())
            if ind.size >= MIN_BATCH_N:
                pdr_ci = stats.batch_means_ci(ind).half_width
            else:
                pdr_ci = 1.96 * math.sqrt(max(pdr * (1 - pdr), 1e-12) / ind.size)
    retrans = 0
    if "retrans" in tl.columns:
        retrans += int(tl["retrans"].fillna(False).astype(bool).sum())
    if disp is not None:
        retrans += int((disp == "absorbed: retransmission").sum())
    # Q and R per message in the window
    ts, tq = _arr(tl, "t_stack"), _arr(tl, "t_sockq")
    tp = relayed & np.isfinite(ts) & np.isfinite(tq)
    tracepoints = bool(has_soj and tp.sum() >= 0.9 * relayed.sum())
    steady = relayed & (t_arr >= t_start) & (t_arr <= t_end)
    o = np.argsort(t_arr[steady], kind="stable")
    types = tl["msg_type"].astype("string").to_numpy(object)[steady][o]
    if tracepoints:
        q = ((tq - ts)[steady][o]) / 1e3
        r = ((t_dep - tq)[steady][o]) / 1e3
        q_kind = "k_sockq"
    else:
        q = ((t_dep - t_arr)[steady][o]) / 1e3
        r = np.zeros_like(q)
        q_kind = "sojourn"
    q_mean, q_se, how = _mean_se(q) if has_soj else (float("nan"), float("nan"), "none")
    r_mean, r_se, _ = _mean_se(r) if tracepoints else (0.0, 0.0, "")
    by_q, by_qse, by_r, by_rse, share = {}, {}, {}, {}, {}
    if has_soj and q.size:
        for t in pd.unique(types):
            m = types == t
            if m.sum() < 2:
                continue
            by_q[t], by_qse[t], _ = _mean_se(q[m])
            if tracepoints:
                by_r[t], by_rse[t], _ = _mean_se(r[m])
            share[t] = float(m.mean())
    if has_soj and how.startswith("iid"):
        warnings.append(f"only {q.size} steady-state messages: the CIs use the iid formula, not batch means "
                        "(they are too narrow when waits are correlated)")
    if capped:
        warnings.append("no steady state found: MSER-5 cut the first half of the run (its maximum), so the "
                        "sojourn kept changing — the queue may be growing (ρ ≥ 1) or the run is too short")
    if n_drop:
        warnings.append(f"{n_drop} messages dropped at the proxy"
                        + (f" (PDR {100 * pdr:.2f} % ± {100 * pdr_ci:.2f} in the steady window)"
                           if math.isfinite(pdr) else ""))
    if retrans:
        warnings.append(f"{retrans} retransmissions seen: SIP timers fired (lost or late messages); "
                        "retransmissions add load the call rate does not show")
    kq = queue_at_drops(tl) if tracepoints else None
    trend: dict[str, Any] = {}
    if has_soj and order.size:
        keep = t_arr[order] <= t_end
        trend = queue_growth((t_arr[order][keep] - t0) / 1e9, soj_us[keep])
    growing = trend.get("growing")
    if growing:
        warnings.append(f"the time in the proxy grew through the run ({trend['bin_s']:.3g}-s means from "
                        f"{trend['first_us']:,.0f} to {trend['last_us']:,.0f} µs): the proxy fell behind "
                        "(ρ ≥ 1 or a stall) and its queue grew")
    cpu_share = meta.get("proxy_cpu_share")
    # how the calls ended (the whole run): over a stream transport the knee reads these
    transport = ""
    if "transport" in tl.columns and tl["transport"].notna().any():
        used = tl["transport"].dropna().astype(str).str.lower()
        other = sorted(set(used) - {"tcp"})
        # streams only (WebSocket or TLS callers, the next hop over TCP): the transport that is not
        # plain TCP names the run, as the streaming engine names it; otherwise the most used one
        transport = (other[0] if set(used) <= set(STREAM_TRANSPORTS) and len(other) == 1
                     else str(used.mode().iloc[0]))
    setup = setup_outcomes(tl) if vantage != "endpoint" and {"call_id", "cseq_method"} <= set(tl.columns) else {}
    loss_kind = "failed calls" if transport in STREAM_TRANSPORTS else "drops"
    if loss_kind == "failed calls" and setup.get("attempts"):
        # no datagram is dropped on a stream: the loss is the calls that failed or missed the deadline
        pdr_n = int(setup["attempts"])
        pdr = setup["failed"] / pdr_n
        pdr_ci = 1.96 * math.sqrt(max(pdr * (1 - pdr), 1e-12) / pdr_n)
    k_meta = meta.get("k_pkts")
    threads = meta.get("threads")
    fi = RunInput(
        run=label, lam_pps=lam_pps if math.isfinite(lam_pps) else 0.0, lam_cps=lam_cps, q_kind=q_kind,
        q_mean_us=q_mean, q_se_us=q_se if math.isfinite(q_se) else 0.0,
        q_var_us2=float(np.var(q)) if q.size > 1 else 0.0, q_by_type=by_q,
        q_se_by_type={k: (v if math.isfinite(v) else 0.0) for k, v in by_qse.items()},
        r_mean_us=r_mean if tracepoints else 0.0, r_se_us=r_se if tracepoints and math.isfinite(r_se) else 0.0,
        r_var_us2=float(np.var(r)) if tracepoints and r.size > 1 else 0.0, r_by_type=by_r,
        r_se_by_type={k: (v if math.isfinite(v) else 0.0) for k, v in by_rse.items()}, share_by_type=share,
        pdr=pdr, pdr_se=(pdr_ci / 1.96 if math.isfinite(pdr_ci) else 0.0), threads=threads,
        cores=meta.get("cores"), processors=meta.get("processors"),
        k_pkts=float(k_meta) if k_meta else (kq + (threads or 1) if kq is not None else None),
        steady=not capped, pdr_n=float(pdr_n) if pdr_n else None,
        cpu_share=float(cpu_share) if cpu_share is not None else None,
        cpu_source=str(meta.get("proxy_cpu_source") or "") if cpu_share is not None else "",
        queue_growing=growing)
    # series for the figures: sojourn (and K_sockq) in arrival order, thinned to <= 4000 points
    series: dict[str, Any] = {}
    if has_soj:
        step = max(1, order.size // 4000)
        series = {"t_s": ((t_arr[order] - t0) / 1e9)[::step], "sojourn_us": soj_us[::step],
                  "warmup_t_s": float((t_start - t0) / 1e9), "end_t_s": float((t_end - t0) / 1e9),
                  "warmup_n": warm_n}
        if tracepoints:
            series["k_sockq_us"] = ((tq - ts)[order] / 1e3)[::step]
    comp = components_table(tl[in_win].reset_index(drop=True) if has_soj else tl) if len(tl) else None
    proxy_id = listen = ""   # listen: the proxy's own endpoint (ip:port) in the capture
    if "proxy" in tl.columns and tl["proxy"].notna().any():
        proxy_id = listen = str(tl["proxy"].dropna().mode().iloc[0])
    elif meta.get("source"):
        proxy_id = f"{meta['source']} run"
    if transport in STREAM_TRANSPORTS and ":" in proxy_id:
        # over a stream the proxy reaches the next hop from ports of its own: its host names it
        proxy_id = f"{proxy_id.rsplit(':', 1)[0]} ({transport})"
    tcp = tcp_signals(meta.get("tcp_signals"), tl, listen)
    fi.pushed_back = bool(tcp.get("zero_window_proxy"))
    if tcp.get("zero_window_proxy"):
        warnings.append(f"the proxy advertised a zero TCP window {tcp['zero_window_proxy']:,} times (from "
                        f"{tcp['proxy_first_s']:.1f} to {tcp['proxy_last_s']:.1f} s into the capture): its receive "
                        "buffer was full and it told its callers to stop sending. Over TCP this is where overload "
                        "shows instead of drops: the backlog waits in the callers' send buffers, where the capture "
                        "cannot time it, so the sojourns here understate the delay the callers saw")
    if tcp.get("zero_window_peers"):
        warnings.append(f"the proxy's peers advertised a zero TCP window {tcp['zero_window_peers']:,} times: a "
                        "caller or the next hop could not read as fast as the proxy wrote")
    torn = int(tcp.get("resets_proxy") or 0) if loss_kind == "failed calls" else 0
    if torn:
        # a connection the proxy aborts takes the call on it (every call in flight, on a trunk) and
        # whatever never reached the SIP layer (a handshake, a request still being read): none of
        # that is a message in the capture, so each reset counts as one failed call -- a lower
        # bound on a trunk, about right for a connection per call
        setup["reset_connections"] = torn
    hello = (meta.get("tls_hello_waits") or {}).get(listen) if loss_kind == "failed calls" else None
    if hello:
        # a new TLS connection waits for the proxy's ServerHello before its INVITE can be sent: a
        # wait the setup delays (from the INVITE on the wire) do not hold
        dl_ms = 1e3 * float(setup.get("deadline_s") or 2.0)
        setup.update(tls_hello_outcomes(hello, dl_ms / 1e3))
        p99 = setup["tls_hello_p99_ms"]
        if setup["tls_late"] or setup["tls_unanswered"] or (math.isfinite(p99) and p99 > 0.1 * dl_ms):
            warnings.append(
                f"new TLS connections waited for the proxy's handshake reply (ClientHello to ServerHello: "
                f"median {setup['tls_hello_p50_ms']:,.0f} ms, p99 {p99:,.0f} ms; {setup['tls_late']:,} answered "
                f"after the {dl_ms / 1e3:g}-s deadline, {setup['tls_unanswered']:,} never): a caller's setup "
                "delay includes this wait, which the setup delays here (from the INVITE on the wire) do not; "
                "the late and unanswered ones count as failed")
    extra, late = _connection_losses(setup)
    if extra or late:
        pdr_n = int(setup.get("attempts") or 0) + extra
        pdr = min(int(setup.get("failed") or 0) + extra + late, pdr_n) / pdr_n
        pdr_ci = 1.96 * math.sqrt(max(pdr * (1 - pdr), 1e-12) / pdr_n)
        fi.pdr, fi.pdr_se, fi.pdr_n = pdr, pdr_ci / 1.96, float(pdr_n)
    if tcp.get("resets_proxy") or tcp.get("resets_peers"):
        warnings.append(f"{tcp.get('resets_proxy', 0) + tcp.get('resets_peers', 0):,} TCP resets "
                        f"({tcp.get('resets_proxy', 0):,} sent by the proxy): connections were torn down, "
                        "and what was in flight on them was lost"
                        + (f"; each connection the proxy reset counts as one failed call here ({_pct_txt(pdr)} "
                           "of the attempts failed with them), fewer than were lost if a connection carried "
                           "several calls" if torn else ""))
    if tcp.get("retransmissions") and transport in STREAM_TRANSPORTS:
        warnings.append(f"{tcp['retransmissions']:,} TCP segments were retransmitted (skipped in the "
                        "reading: their bytes were read once): segments were lost or acknowledged late")
    return RunMeasure(label=label, n_messages=len(tl), vantage=vantage, has_sojourn=has_soj, proxy_id=proxy_id,
                      tcp=tcp, tls_unread=list(meta.get("tls_unread") or []),
                      tracepoints=tracepoints, duration_s=duration, warmup_n=int(warm_n),
                      warmup_s=float((t_start - t0) / 1e9) if np.isfinite(t_start) and np.isfinite(t0) else 0.0,
                      warmup_capped=bool(capped), steady_n=int(q.size), window_s=window_s, lam_pps=lam_pps,
                      lam_cps=lam_cps, calls=int(len(inv)), ca2=ca2, ca2_sd=ca2_sd, ca2_msgs=ca2_msgs,
                      pdr=pdr, pdr_ci95=pdr_ci, dropped=n_drop, retransmissions=retrans, k_pkts_data=kq,
                      pdr_n=int(pdr_n), queue_growing=growing, queue_trend=trend,
                      transport=transport, loss_kind=loss_kind, setup=setup,
                      cpu_share=float(cpu_share) if cpu_share is not None else None,
                      cpu_source=str(meta.get("proxy_cpu_source") or "") if cpu_share is not None else "",
                      generator_cpu_share=meta.get("generator_cpu_share"),
                      fit_input=fi, series=series, components=comp, warnings=warnings)


#: components shown in the report (in this order), when the data have them
SHOWN = ("sojourn", "k_stack", "k_sockq", "k_copy", "t_sip", "k_snd", "k_rcv")


def components_table(tl: pd.DataFrame) -> pd.DataFrame:
    """Per message type and component: n, mean with its batch-means 95 % CI half-width (30
    batches, arrival order; iid below 60 values), median and p99, in µs.  The types are
    :func:`sipperf.calls.message_class`: the six call-flow types, then each other request method
    and each other response class (486-INVITE, 503-INVITE, ...) on its own row, not lumped."""
    from sipperf.calls import class_order, message_class
    from sipperf.components import derive_arrays

    arrays = derive_arrays(tl)
    order = np.argsort(first_instant(tl), kind="stable")
    types = message_class(tl).to_numpy(object)[order]
    present = class_order(pd.unique(types))
    rows = []
    for comp in SHOWN:
        v = arrays[comp][order] / 1e3
        if not np.isfinite(v).any():
            continue
        for t in present + ["ALL"]:
            x = v if t == "ALL" else v[types == t]
            x = x[np.isfinite(x)]
            if not x.size:
                continue
            mean, se, how = _mean_se(x)
            hw = (stats.batch_means_ci(x).half_width if how == "batch means"
                  else 1.96 * se if math.isfinite(se) else float("nan"))
            rows.append({"component": comp, "msg_type": t, "n": int(x.size), "mean_us": mean, "ci95_hw_us": hw,
                         "ci_method": how, "median_us": float(np.median(x)), "p99_us": float(np.percentile(x, 99))})
    return pd.DataFrame(rows, columns=["component", "msg_type", "n", "mean_us", "ci95_hw_us", "ci_method",
                                       "median_us", "p99_us"])


# ---- stored summaries: the lab's long recording (datasets/lab/long) --------------------------------

def is_summary_dataset(p) -> bool:
    """A directory of stored per-point summaries (``runs.csv`` + ``components.csv``, the lab's long
    recording: ``datasets/lab/README.md``) rather than per-message data."""
    p = Path(p)
    return p.is_dir() and (p / "runs.csv").is_file() and (p / "components.csv").is_file()


def summary_sockq_pkts(root) -> tuple[float | None, list[str]]:
    """What a summary dataset's kept timelines say about the socket queue's capacity (packets):
    the median over its ``runs/<id>/timeline.parquet`` windows with drops of
    :func:`queue_at_drops` (the messages waiting in the socket when one was dropped), and the
    runs it came from.  ``(None, [])`` when no kept window holds a drop.  A window holds only the
    messages of the calls it kept, so the count is a lower bound where other calls' messages
    shared the queue; the points share one socket set-up (``meta.json`` ``proxy.socket``)."""
    from sipperf.ingest.lab_runs.dataset import load_run
    from sipperf.timeline import IngestError

    vals, used = [], []
    for d in sorted(Path(root, "runs").glob("*/timeline.parquet")):
        try:
            tl, _ = load_run(d.parent)
        except (IngestError, OSError, ValueError):
            continue
        kq = queue_at_drops(tl)       # None without drops
        if kq is not None:
            vals.append(kq)
            used.append(d.parent.name)
    return (float(np.median(vals)) if vals else None), used


def _hist_var_us2(h: pd.DataFrame) -> float:
    """Variance (µs²) of one stored histogram group, each bin at its geometric centre."""
    h = h[np.isfinite(h["lo_us"]) & np.isfinite(h["hi_us"])]
    if not len(h):
        return float("nan")
    x = np.sqrt(h["lo_us"].to_numpy() * h["hi_us"].to_numpy())
    w = h["count"].to_numpy(dtype=float)
    m = float((w * x).sum() / w.sum())
    return float((w * (x - m) ** 2).sum() / w.sum())


def summary_measures(root, msgs_per_call: float = 6.0, fit_over: dict | None = None,
                     ) -> list[tuple[str, dict, "RunMeasure"]]:
    """One :class:`RunMeasure` per stored point of a summary dataset (:func:`is_summary_dataset`),
    from its ``runs.csv`` row and ``components.csv`` rows (and ``histograms.parquet`` for the
    variances, when present).  The message rate is the offered call rate × ``msgs_per_call``
    (the points store no per-message arrivals); everything else is the stored steady-state
    statistics.  Columns a point lacks are left unknown, never guessed.  ``fit_over`` sets
    fields of every point's :class:`~sipperf.fit.RunInput` (``threads``, ``k_pkts``, ...;
    None values are ignored): what the caller knows better than the stored rows."""
    from sipperf.ingest.lab_runs.dataset import load_components, load_histograms, load_points

    root = Path(root)
    pts = load_points(root)
    comp = load_components(root)
    for name, df, need in (("runs.csv", pts, ("run_id", "rate_cps")),
                           ("components.csv", comp, ("run_id", "msg_type", "component", "n", "mean_us"))):
        miss = [c for c in need if c not in df.columns]
        if miss:
            raise ValueError(f"{name} lacks the column(s) {', '.join(miss)}")
    if "series" in pts.columns and (pts["series"] == "workers").any():
        pts = pts[pts["series"] == "workers"]   # the rate sweeps; sched and overload points differ in set-up
    pts, traced_apart = _one_setup(root, pts)
    hist = None
    if (root / "histograms.parquet").is_file():
        try:
            hist = load_histograms(root)
        except Exception:  # noqa: BLE001 - an unreadable histogram file only costs the variances
            hist = None
    t_crit = 2.045  # t_{0.975, 29}: the stored CIs are batch means over 30 batches
    kq, kq_runs = summary_sockq_pkts(root)
    out = []
    for _, row in pts.iterrows():
        rid = str(row.get("run_id"))
        c = comp[comp["run_id"].astype(str) == rid]

        def stat(component, mtype="ALL", col="mean_us"):
            x = c[(c["component"] == component) & (c["msg_type"].astype(str) == mtype)]
            return float(x[col].iloc[0]) if len(x) and col in x else float("nan")

        types = [t for t in c["msg_type"].astype(str).unique() if t != "ALL"]
        n_all = stat("k_sockq", "ALL", "n")
        q_by = {t: stat("k_sockq", t) for t in types}
        q_se = {t: stat("k_sockq", t, "ci_hw_us") / t_crit for t in types}
        r_by = {t: stat("k_copy", t) + stat("t_sip", t) + stat("k_snd", t) for t in types}
        r_se = {t: math.sqrt(sum((stat(k, t, "ci_hw_us") / t_crit) ** 2 for k in ("k_copy", "t_sip", "k_snd")))
                for t in types}
        share = {t: stat("k_sockq", t, "n") / n_all for t in types} if n_all and n_all > 0 else {}
        tracepoints = math.isfinite(stat("k_sockq"))
        r_var = float("nan")
        if hist is not None and tracepoints:
            hv = [_hist_var_us2(hist[(hist["run_id"].astype(str) == rid) & (hist["msg_type"].astype(str) == "ALL")
                                     & (hist["component"] == k)]) for k in ("k_copy", "t_sip", "k_snd")]
            r_var = float(sum(hv)) if all(math.isfinite(v) for v in hv) else float("nan")
        rate = float(row.get("rate_cps", float("nan")))
        workers = row.get("workers")
        threads = int(workers) if pd.notna(workers) else None
        pdr = float(row["pdr"]) if "pdr" in row and pd.notna(row["pdr"]) else float("nan")
        pdr_hw = float(row["pdr_ci_hw"]) if "pdr_ci_hw" in row and pd.notna(row["pdr_ci_hw"]) else 0.0
        warnings = ["summary-only point: statistics as stored (no per-message data: no time series, ECDF or "
                    "ladders); the message rate is the offered call rate × 6"]
        if bool(row.get("machine_busy", False)) is True:
            warnings.append("recorded while other processes used the CPUs (machine_busy)")
        q_kind = "k_sockq" if tracepoints else "sojourn"
        qm = stat("k_sockq") if tracepoints else stat("sojourn")
        qhw = stat("k_sockq", col="ci_hw_us") if tracepoints else stat("sojourn", col="ci_hw_us")
        fi = RunInput(
            run=rid, lam_pps=rate * msgs_per_call if math.isfinite(rate) else 0.0, lam_cps=rate, q_kind=q_kind,
            q_mean_us=qm, q_se_us=qhw / t_crit if math.isfinite(qhw) else 0.0,
            q_var_us2=0.0, q_by_type={k: v for k, v in q_by.items() if math.isfinite(v)},
            q_se_by_type={k: v for k, v in q_se.items() if math.isfinite(v)},
            r_mean_us=(stat("k_copy") + stat("t_sip") + stat("k_snd")) if tracepoints else 0.0,
            r_se_us=math.sqrt(sum((stat(k, "ALL", "ci_hw_us") / t_crit) ** 2 for k in ("k_copy", "t_sip", "k_snd")))
            if tracepoints else 0.0,
            r_var_us2=r_var if math.isfinite(r_var) else 0.0,
            r_by_type={k: v for k, v in r_by.items() if math.isfinite(v)} if tracepoints else {},
            r_se_by_type={k: v for k, v in r_se.items() if math.isfinite(v)} if tracepoints else {},
            share_by_type=share, pdr=pdr, pdr_se=pdr_hw / 1.96, threads=threads, steady=True,
            k_pkts=kq + (threads or 1) if kq is not None else None,
            pdr_n=float(row["steady_msgs"]) if "steady_msgs" in row and pd.notna(row["steady_msgs"]) else None,
            probes=[] if traced_apart and str(row.get("tracer", "none")) != "none" else point_probes(root, row, threads),
            cpu_share=cpu_share_of({"cpu_s": row.get("proxy_cpu_s"), "window_s": row.get("proxy_cpu_window_s")}),
            cpu_source="runs.csv proxy_cpu_s / proxy_cpu_window_s")
        if fi.cpu_share is None:
            fi.cpu_source = ""
        if traced_apart and str(row.get("tracer", "none")) != "none":
            warnings.append("its rounds are not used for the knee: the recording searched the knee with the "
                            "tracer off (counters only), and a traced point is another set-up")
        if kq is not None:
            warnings.append(f"socket-queue capacity: {kq:.0f} packets waiting when a message was dropped "
                            f"(median over the kept timelines of {', '.join(kq_runs)}), plus the "
                            f"{threads or 1} in service")
        if tracepoints and not math.isfinite(r_var):
            warnings.append("no stored histograms: the service time's variance within a message type is taken "
                            "as 0 (only the spread between the types counts)")
        comps = c.rename(columns={"mean_us": "mean_us", "ci_hw_us": "ci95_hw_us", "p50_us": "median_us"})
        comps = comps[[x for x in ("component", "msg_type", "n", "mean_us", "ci95_hw_us", "median_us", "p99_us")
                       if x in comps.columns]].copy()
        comps["ci_method"] = "batch means (stored)"
        meas = RunMeasure(
            label=rid, n_messages=int(row.get("sojourn_n", 0) or 0), vantage="proxy", has_sojourn=math.isfinite(qm),
            tracepoints=tracepoints, duration_s=float(row.get("load_seconds", float("nan"))),
            warmup_n=int(row.get("warmup_msgs", 0) or 0), warmup_s=float(row.get("warmup_s", 0.0) or 0.0),
            warmup_capped=False, steady_n=int(n_all) if n_all and math.isfinite(n_all) else 0,
            window_s=float("nan"), lam_pps=fi.lam_pps, lam_cps=rate, calls=int(row.get("calls_offered", 0) or 0),
            ca2=float("nan"), ca2_sd=float("nan"), ca2_msgs=float("nan"), pdr=pdr, pdr_ci95=pdr_hw,
            dropped=int(row.get("steady_dropped", 0) or 0), retransmissions=int(row.get("uac_retransmissions", 0) or 0),
            k_pkts_data=kq, fit_input=fi, series={}, components=comps, warnings=warnings,
            pdr_n=int(fi.pdr_n or 0), cpu_share=fi.cpu_share, cpu_source=fi.cpu_source)
        for k, v in (fit_over or {}).items():
            if v is not None:
                setattr(fi, k, v)
        meta = {"source": "lab-summary", "threads": threads, "offered_cps": rate,
                "series": row.get("series"), "workers": threads}
        out.append((rid, meta, meas))
    return out


def _one_setup(root: Path, pts: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The points of one set-up, and whether the recording's knee probes are counters-only.

    A recording made under the lab protocol (:mod:`sipperf.lab.plan`) holds, beside each sweep, a
    twin of one point with the tracer switched the other way (``tracer_pair``): a different
    set-up, left out here (:func:`sipperf.lab.pairs.tracer_pairs` compares the two).  Its knee
    searches (``probes.csv`` with a ``setup`` column) ran counters-only, without the tracer, so the
    rounds of its traced points are not probes of the same proxy: the second value says so."""
    if "tracer" in pts.columns and "tracer_pair" in pts.columns:
        main = pts.loc[pts["tracer_pair"].isna(), "tracer"].dropna()
        if len(main) and main.nunique() == 1:
            pts = pts[pts["tracer"] == main.iloc[0]]
    apart = False
    f = Path(root) / "probes.csv"
    if f.is_file() and "tracer" in pts.columns:
        try:
            apart = "setup" in pd.read_csv(f, nrows=0).columns
        except (OSError, ValueError):
            apart = False
    return pts, apart


# ---- drop probes of a stored recording, the rule's error on the lab, CPU from the user ------------

def _point_meta(root: Path, rid: str) -> dict[str, Any]:
    """A stored point's compact meta (``point.json`` where the point keeps a timeline, else
    ``meta.json``); {} when neither is readable."""
    for name in ("point.json", "meta.json"):
        f = root / "runs" / rid / name
        if f.is_file():
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(d, dict) and "rounds" in d:
                return d
    return {}


def point_probes(root, row, threads: int | None) -> list:
    """The rounds of one stored point as drop probes (:class:`sipperf.fit.KneeProbe`): each
    round's socket drops over datagrams read + dropped (the kernel's counters, whole round), the
    design effect taken from the point's batch-means interval of its steady-window drop rate."""
    from sipperf.fit import KneeProbe

    rid = str(row.get("run_id"))
    rate = float(row.get("rate_cps", float("nan")))
    p, hw, n = (float(row.get(k, float("nan")) if pd.notna(row.get(k, float("nan"))) else float("nan"))
                for k in ("pdr", "pdr_ci_hw", "steady_msgs"))
    deff = None
    if 0 < p < 1 and hw > 0 and n > 0:
        deff = max(1.0, (hw / 1.96) ** 2 / (p * (1 - p) / n))
    out = []
    for k, rd in enumerate(_point_meta(Path(root), rid).get("rounds") or []):
        try:
            d, rr = float(rd.get("proxy_socket_drops")), float(rd.get("proxy_read"))
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(d) and math.isfinite(rr)) or d + rr <= 0 or rd.get("busy_during_run") \
                or rd.get("generator_bound"):       # the protocol: a flagged run is never a knee probe
            continue
        out.append(KneeProbe(f"{rid} round {k}", rate, d / (d + rr), d + rr, threads or 1, True, deff,
                             "round (socket counters)"))
    return out


def summary_probes(root) -> list:
    """The knee search's probes of a stored recording (``probes.csv``: workers, rate, datagrams
    read and dropped by the proxy's socket) as :class:`sipperf.fit.KneeProbe`; probes taken while
    the machine was busy or flagged generator-bound are left out, and in a protocol recording
    (a ``setup`` column) only the ``protocol`` set-up's probes are read (the others measure what
    a set-up does to the knee).  [] when the file is absent."""
    from sipperf.fit import KneeProbe

    f = Path(root) / "probes.csv"
    if not f.is_file():
        return []
    pr = pd.read_csv(f)
    need = ("workers", "rate_cps", "proxy_read", "proxy_socket_drops")
    if any(c not in pr.columns for c in need):
        raise ValueError(f"probes.csv lacks the column(s) {', '.join(c for c in need if c not in pr.columns)}")
    out = []
    for i, r in pr.iterrows():
        if bool(r.get("machine_busy", False)) is True or bool(r.get("generator_bound", False)) is True:
            continue
        if "setup" in pr.columns and r["setup"] != "protocol":
            continue
        n = float(r["proxy_read"]) + float(r["proxy_socket_drops"])
        if n > 0 and math.isfinite(n):
            out.append(KneeProbe(f"probe {i + 1} ({float(r['rate_cps']):,.0f} calls/s)", float(r["rate_cps"]),
                                 float(r["proxy_socket_drops"]) / n, n, int(r["workers"]), True, None,
                                 "knee-search probe (socket counters)"))
    return out


def lab_rule_miss(root=None) -> dict[str, Any] | None:
    """How far the capacity rule C_{1,m} = T_{1,m}·C_{1,1} (thesis eq. 7.1) missed on the lab's own
    worker series (default ``datasets/lab/protocol``): C_{1,1} taken as the one-worker knee, the
    rule's promise for the proxy's cores against the best knee any worker count reached
    (``ratio``; ``ratio_lo``/``ratio_hi`` with the knees' interval ends).  A recording with
    replicated knee searches (``knee_replicates.csv``, the protocol recording): each count's knee
    and interval of its ``protocol`` set-up (:func:`sipperf.lab.knees.estimates_from_replicates`),
    the cores the proxy was pinned to (``runs.csv`` ``proxy_cpus``).  Otherwise (e.g.
    ``datasets/lab/long``): knees by :func:`sipperf.fit.knee_from_probes` on each count's rounds
    and knee-search probes, the machine's cores from ``machine.json``.  None when the dataset or
    a knee is missing.  Cached."""
    from sipperf.thesis import datasets_dir

    root = Path(root) if root is not None else datasets_dir() / "lab" / "protocol"
    key = str(root.resolve())
    if key not in _RULE_CACHE:
        try:
            _RULE_CACHE[key] = _lab_rule_miss(root)
        except (OSError, ValueError, KeyError):
            _RULE_CACHE[key] = None
    return _RULE_CACHE[key]


def _lab_rule_miss(r: Path) -> dict[str, Any] | None:
    from sipperf.fit import knee_from_probes
    from sipperf.ingest.lab_runs.dataset import load_points
    from sipperf.models.capacity import threads_for_capacity

    if not (r / "runs.csv").is_file():
        return None
    pts = load_points(r)
    pts = pts[pts["series"] == "workers"] if "series" in pts.columns else pts
    knees = {}
    cores = 0
    if (r / "knee_replicates.csv").is_file():      # replicated searches (the protocol recording)
        from sipperf.lab.knees import estimates_from_replicates

        est = estimates_from_replicates(pd.read_csv(r / "knee_replicates.csv"))
        knees = {int(c): {"knee": e.knee_cps, "lo": e.low_cps, "hi": e.high_cps} for (setup, c), e in est.items()
                 if setup == "protocol" and e.knee_cps is not None and e.low_cps is not None}
        if "proxy_cpus" in pts.columns:
            cores = len({x.strip() for v in pts["proxy_cpus"].dropna().astype(str) for x in v.split(",") if x.strip()})
    else:
        extra = summary_probes(r)
        for c, g in pts.groupby("workers"):
            pr = [q for _, row in g.iterrows() for q in point_probes(r, row, int(c))]
            pr += [q for q in extra if int(q.threads) == int(c)]
            k = knee_from_probes(pr)
            if not k["censored"]:
                knees[int(c)] = k
    if 1 not in knees or len(knees) < 2:
        return None
    if cores < 1:
        try:
            cores = int(((json.loads((r / "machine.json").read_text()).get("machine") or {}).get("cpu") or {})
                        .get("count") or 0)
        except (OSError, ValueError, AttributeError, TypeError):
            cores = 0
    if cores < 1:
        return None
    t = threads_for_capacity(1, cores)
    best_c = max(knees, key=lambda c: knees[c]["knee"])
    one, best = knees[1]["knee"], knees[best_c]["knee"]
    return {"cores": cores, "threads": t, "one_cps": one, "best_cps": best, "best_workers": best_c,
            "promise_cps": t * one, "ratio": t * one / best,
            "ratio_lo": t * knees[1]["lo"] / knees[best_c]["hi"], "ratio_hi": t * knees[1]["hi"] / knees[best_c]["lo"],
            "knees": {c: {"knee": k["knee"], "lo": k["lo"], "hi": k["hi"]} for c, k in knees.items()},
            "source": f"datasets/lab/{r.name}"}


_RULE_CACHE: dict[str, Any] = {}


def _held_back(m) -> None:
    """A run whose load reached the proxy short of the offered rate while the proxy's CPU was full
    is past the knee, whatever its own calls show: the calls not yet sent waited in the callers
    (a stream's send buffer, a TLS handshake queued, a generator blocked on its socket), where no
    capture at the proxy sees them.  Its loss for the knee is then at least the share of the
    offered rate that did not get through (1 − reached/offered)."""
    from sipperf.fit import CPU_FULL

    if not (m.offered_cps and math.isfinite(m.lam_cps) and m.cpu_share is not None and math.isfinite(m.cpu_share)):
        return
    ncpu = min(m.fit_input.c, m.cpus) if m.cpus else m.fit_input.c
    if m.lam_cps < 0.9 * m.offered_cps and m.cpu_share >= CPU_FULL * ncpu:
        m.held_back = True
        m.fit_input.pushed_back = True
        short = 1.0 - m.lam_cps / m.offered_cps
        if not (math.isfinite(m.fit_input.pdr) and m.fit_input.pdr >= short):
            m.fit_input.pdr = short
        m.warnings.append(f"offered {m.offered_cps:,.0f} calls/s, {m.lam_cps:,.0f} reached the proxy, its CPU "
                          f"{100 * m.cpu_share / ncpu:.0f} % busy: the proxy held the load back (the rest waited "
                          "in its callers, unseen by the capture); the knee reads the run as past it")


def read_cpu_file(path) -> list[dict[str, Any]]:
    """The ``--cpu FILE`` of ``sipperf report`` / ``fit``: a CSV of the proxy's CPU accounting, one
    row per load level.  Columns (a header line): ``run`` (a run's label, optional) and/or
    ``rate_cps`` (calls per second; required where ``run`` is absent), and either ``cpu_s`` (CPU
    seconds, user + system, of all the proxy's processes) with ``window_s`` (the seconds they were
    counted over), or ``cpu_share`` (CPU-seconds per second); optional ``threads`` (workers) and
    ``cpus`` (the CPUs the proxy's processes may run on: utilisation is then per CPU they share).
    Returns one dict per row (``run``, ``rate_cps``, ``cpu_share``, ``threads``); an
    :class:`~sipperf.timeline.IngestError` naming the file and line on anything else."""
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    name = display_path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise IngestError(name, "--cpu", "no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise IngestError(name, "line 1", f"not a readable CSV ({e})") from None
    cols = {c.strip().lower(): c for c in df.columns}
    if "cpu_share" not in cols and not {"cpu_s", "window_s"} <= set(cols):
        raise IngestError(name, "line 1", "needs a column cpu_share, or cpu_s and window_s "
                                          f"(found: {', '.join(df.columns) or 'none'})")
    if "run" not in cols and "rate_cps" not in cols:
        raise IngestError(name, "line 1", "needs a column run or rate_cps")
    if not len(df):
        raise IngestError(name, "line 2", "no rows")

    def num(row, key, line, positive=False):
        raw = str(row[cols[key]]).strip() if key in cols else ""
        if raw == "":
            return None
        try:
            v = float(raw)
        except ValueError:
            raise IngestError(name, f"line {line}", f"{key} {raw!r} is not a number") from None
        if not math.isfinite(v) or v < 0 or (positive and v <= 0):
            raise IngestError(name, f"line {line}", f"{key} {raw!r} must be a {'positive' if positive else 'non-negative'} "
                                                   "finite number")
        return v

    out = []
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2
        run = str(row[cols["run"]]).strip() if "run" in cols else ""
        rate = num(row, "rate_cps", line, positive=True)
        share = num(row, "cpu_share", line)
        if share is None:
            cs, w = num(row, "cpu_s", line), num(row, "window_s", line, positive=True)
            if cs is None or w is None:
                raise IngestError(name, f"line {line}", "needs cpu_share, or cpu_s and window_s")
            share = cs / w
        th = num(row, "threads", line, positive=True)
        ncpu = num(row, "cpus", line, positive=True)
        if not run and rate is None:
            raise IngestError(name, f"line {line}", "needs a run label or a rate_cps")
        # the kernel's counters over the run, where the file has them (sipperf collect)
        kernel = {k: num(row, k, line) for k in KERNEL_COLUMNS if k in cols}
        out.append({"run": run or None, "rate_cps": rate, "cpu_share": share,
                    "threads": int(th) if th is not None else None, "line": line, "file": name,
                    "cpus": int(ncpu) if ncpu is not None else None,
                    "kernel": {k: v for k, v in kernel.items() if v is not None}})
    return out


#: the kernel counters a --cpu file may carry (sipperf collect's columns)
KERNEL_COLUMNS = ("socket_drops", "udp_in_datagrams", "udp_rcvbuf_errors", "udp6_rcvbuf_errors", "udp_in_errors",
                  "tcp_retrans_segs", "tcp_estab_resets", "tcp_listen_overflows", "tcp_listen_drops",
                  "tcp_backlog_drops", "tcp_rcvq_drops", "tcp_zero_window_drops", "tcp_to_zero_window_adv",
                  "tcp_timeouts")


def kernel_warnings(m: "RunMeasure") -> list[str]:
    """What the kernel's counters say that the capture cannot: datagrams the proxy's socket (or the
    host) dropped beyond the drops the capture's rule found, and TCP's push-back, which no capture
    rule counts as a drop."""
    k, out = m.kernel, []
    sock = k.get("socket_drops")
    host = (k.get("udp_rcvbuf_errors") or 0) + (k.get("udp6_rcvbuf_errors") or 0)
    lost = sock if sock is not None else host
    if lost and lost > (m.dropped or 0):
        out.append(f"the kernel dropped {lost:,.0f} datagrams at {'the proxy socket' if sock is not None else 'the host'}"
                   f" during this run, the capture's drop rule found {m.dropped:,d} in its steady window: the "
                   "others fell outside the window or were retransmissions the proxy would not have relayed")
    push = {c: k[c] for c in ("tcp_listen_overflows", "tcp_listen_drops", "tcp_backlog_drops", "tcp_rcvq_drops",
                              "tcp_zero_window_drops", "tcp_to_zero_window_adv") if k.get(c)}
    if push:
        out.append("TCP pushed back during this run (" + ", ".join(f"{c} {v:,.0f}" for c, v in push.items())
                   + "): over TCP an overloaded proxy makes its senders wait and time out, it drops nothing the "
                   "capture could count")
    return out


def apply_cpu_rows(rows: list[dict[str, Any]], measures: list["RunMeasure"],
                   left_out: list[str] | None = None) -> list[dict[str, Any]]:
    """Attach the ``--cpu`` rows naming a run to that run (they win over its ``meta.json``), and
    return the rows without a run name as extra points of the utilisation law (``rate_cps``,
    ``cpu_share``, ``threads``).  A row naming a run that was not given (``sipperf collect`` ran
    for more runs than are reported) is left out and its run's name appended to ``left_out``; when
    rows name runs and none of them is among the runs given, the labels do not match: an error
    naming the first such line."""
    from sipperf.timeline import IngestError

    by = {m.label: m for m in measures}
    named = [r for r in rows if r["run"] is not None]
    if named and measures and not any(r["run"] in by for r in named):
        r = named[0]
        raise IngestError(r["file"], f"line {r['line']}", f"run {r['run']!r} is not among the runs "
                          f"({', '.join(list(by)[:6])}{' …' if len(by) > 6 else ''}), nor is any run the file "
                          "names: label each row as the report names the run (the capture's file stem)")
    extra = []
    for r in rows:
        if r["run"] is not None:
            m = by.get(r["run"])
            if m is None:
                if left_out is not None:
                    left_out.append(r["run"])
                continue
            m.cpu_share = m.fit_input.cpu_share = float(r["cpu_share"])
            m.cpu_source = m.fit_input.cpu_source = f"--cpu {r['file']} line {r['line']}"
            if r.get("kernel"):
                m.kernel = dict(r["kernel"])
                m.warnings.extend(kernel_warnings(m))
            if r["rate_cps"] is not None and not math.isfinite(m.lam_cps):
                m.lam_cps = m.fit_input.lam_cps = float(r["rate_cps"])
            if r["rate_cps"] is not None:
                m.offered_cps = float(r["rate_cps"])       # what the load generator was asked for
            if r.get("cpus"):
                m.cpus = m.fit_input.cpus = int(r["cpus"])
            _held_back(m)
            continue
        extra.append({"run": f"{r['file']} line {r['line']}", "rate_cps": r["rate_cps"], "cpu_share": r["cpu_share"],
                      "threads": r["threads"]})
    return extra
