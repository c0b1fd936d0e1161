"""Record the transport series into this directory (issue 39, item 3, in part): one Kamailio,
driven by SIPp over UDP and over TCP past its knee, replicated, and read by ``sipperf report``.

    sudo .venv/bin/python datasets/lab/transport/record.py [--reps 3] [--rates 400,800,...] [--seconds 6]

The connection series (``datasets/lab/connections``) is the same recorder with
``--transports tcp,tcp-tn --out datasets/lab/connections``: one TCP connection for all calls
against a new connection per call (SIPp ``-t tn``), on the same proxy.  The worker series
(``datasets/lab/tcp_children``) is ``--transports tcp --workers 1,2,4 --out
datasets/lab/tcp_children``: Kamailio's ``tcp_children`` varied, one connection for all calls.
The TLS series (``datasets/lab/tls_load``) is ``--transports tcp,tls`` (one connection for all
calls) and ``--transports tcp-tn,tls-tn`` (a new connection per call): the same proxy behind a
TLS listener, SIPp's TCP carried over TLS by stunnel on the load CPU (``tests/lab2/driver.py``),
the captures decrypted by the report with stunnel's key log.
The WebSocket series (``datasets/lab/ws_load``) is ``--transports tcp,ws`` (one TCP connection
for all calls against the caller's calls spread over 100 WebSocket connections that stay open)
and ``--transports tcp-tn,ws-tn`` (a new connection per call, a WebSocket upgrade each): the
proxy's websocket module on its TCP listener, SIPp's TCP carried by ``tests/lab2/wsbridge.py``
on the load CPU, the callee reached over TCP.

The set-up is the second lab's (``tests/lab2``: its own Kamailio configuration with 2 workers,
``children`` over UDP or ``tcp_children`` over TCP, a stateful relay; its own SIPp scenarios with
one call in ten answered 486, constant-rate arrivals; over TCP one connection each way, as a
trunk, and a caller that fails a call with no response within 2 s), with Kamailio pinned to CPU 0
and both SIPp instances and dumpcap to CPU 1 (the measurement protocol: the generator never
shares the proxy's CPU; its own CPU is recorded per run).

Per replication the two transports alternate in order; within a transport the proxy is started
once and the rates are offered from the lightest up.  Each series (one replication, one
transport) is then given to ``sipperf report --threads 2 --cpu`` as an engineer would give it,
and its captures are deleted (they stay out of git).  Written here:

* ``runs.csv``: one row per run: what SIPp counted (calls started, successful, failed,
  retransmissions), the kernel's drop counter at the proxy's socket, the proxy's and the calling
  SIPp's CPU seconds, and what the report read of the run (rate, drops, failed calls, setup p99,
  utilisation);
* ``knees.csv``: one row per series: the report's knee, the kind of loss it rests on, and its
  interval.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from lab2.driver import Lab2Config, SecondLab, missing_tools, port_free  # noqa: E402

from sipperf.lab.sipp import read_stats  # noqa: E402

SIPPERF = str(Path(sys.executable).with_name("sipperf"))
RATES = (400, 800, 1200, 1600, 2000, 2400)
WORKERS = 2
RUN_COLUMNS = ("rep", "transport", "label", "offered_cps", "seconds", "sipp_started", "sipp_successful",
               "sipp_failed", "sipp_failed_unexpected", "sipp_failed_timeout", "sipp_retransmissions", "kernel_drops", "kernel_pdr", "proxy_cpu_s", "window_s",
               "uac_cpu_s", "load_before", "report_rate_cps", "report_loss_kind", "report_pdr_percent",
               "report_failed_percent", "report_srd_p99_ms", "report_utilisation", "report_cpu_share", "workers",
               "tunnel_cpu_s", "tls_key", "tls_resume", "report_tls_full", "report_tls_resumed",
               "report_tls_hello_p99_ms", "report_tls_late", "proxy_queue_full")
KNEE_COLUMNS = ("rep", "transport", "loss_kind", "knee_lo_cps", "knee_hi_cps", "censored", "located", "runs",
                "workers", "tls_key", "tls_resume")


def series(rep: int, transport: str, rates, seconds: float, tmp: Path, workers: int = WORKERS,
           tag: str = "", tls_key: str = "rsa:2048", tls_resume: bool = False) -> tuple[list[dict], dict]:
    """One replication of one transport with ``workers`` Kamailio workers (over TLS, a proxy
    certificate with ``tls_key``, and with ``tls_resume`` a caller that resumes its session on each
    new connection); ``tag`` goes into the run labels (``-c4`` when several worker counts are
    recorded, the key when several keys are, ``-res`` for resumed sessions)."""
    cfg = Lab2Config(transport=transport, proxy_port=5660, uas_port=5680, uac_port=5661, workers=workers,
                     seconds=seconds, timeout_s=40.0, proxy_cpus="0", load_cpus="1", tls_key=tls_key,
                     tls_resume=tls_resume)
    busy = [p for p in {cfg.proxy_port, cfg.uas_port, cfg.uac_port, cfg.sipp_uas_port, cfg.sipp_target_port}
            if not port_free(p)]
    if busy:
        raise SystemExit(f"ports {busy} are in use on 127.0.0.1")
    out = tmp / f"{transport}{tag}-{rep}"
    rows, runs = [], []
    with SecondLab(cfg, out) as lab:
        for rate in rates:
            r = lab.run(f"{transport}{rep}{tag}-r{int(rate):04d}", rate)
            if r.proxy_faults:
                # a crashed worker is not a measurement of the proxy: nothing of the series is written
                raise SystemExit(f"{r.label}: Kamailio logged {r.proxy_faults} CRITICAL/ALERT lines during the "
                                 f"run, the first: {r.fault!r} (see {out / 'proxy.log'}); the series is not recorded")
            st = read_stats(out, f"{r.label}_uac_stats.csv")
            runs.append(r)
            rows.append({"rep": rep, "transport": transport, "label": r.label, "offered_cps": rate,
                         "seconds": seconds, "sipp_started": st.get("OutgoingCall(C)"),
                         "sipp_successful": st.get("SuccessfulCall(C)"), "sipp_failed": st.get("FailedCall(C)"),
                         # a response out of the scenario's order (a 180 after its 200), a response
                         # not received within the scenario's timeout: two causes SIPp counts apart
                         "sipp_failed_unexpected": st.get("FailedUnexpectedMessage(C)"),
                         "sipp_failed_timeout": st.get("FailedTimeoutOnRecv(C)"),
                         "sipp_retransmissions": st.get("Retransmissions(C)"),
                         "kernel_drops": r.socket_drops if transport == "udp" else "",
                         "kernel_pdr": round(r.kernel_pdr, 6) if transport == "udp" else "",
                         "proxy_cpu_s": round(r.cpu_s, 3), "window_s": round(r.window_s, 3),
                         "uac_cpu_s": round(r.uac_cpu_s, 2), "load_before": r.loadavg, "workers": workers,
                         "tunnel_cpu_s": round(r.tunnel_cpu_s, 2) if cfg.over_tls or cfg.over_ws else "",
                         "tls_key": tls_key if cfg.over_tls else "",
                         "tls_resume": ("yes" if tls_resume else "no") if cfg.over_tls else "",
                         "proxy_queue_full": r.queue_full})
            print({k: rows[-1][k] for k in ("label", "sipp_started", "sipp_failed", "kernel_drops", "proxy_cpu_s",
                                            "uac_cpu_s")}, flush=True)
    return rows, read_series(out, rows, rep, transport, workers, tls_key if cfg.over_tls else "",
                             rows[0]["tls_resume"] if rows else "")


def read_series(out: Path, rows: list[dict], rep: int, transport: str, workers: int, tls_key: str = "",
                tls_resume: str = "") -> dict:
    """Give one series' captures (``out/<label>.pcapng``; over TLS with ``out/keys.txt``) to
    ``sipperf report`` as an engineer would, with the proxy's CPU seconds and the offered rate per
    run (``cpu.csv``); fill the rows' ``report_*`` columns and return the series' knee."""
    cpu = out / "cpu.csv"
    with open(cpu, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "rate_cps", "cpu_s", "window_s", "threads", "cpus"])
        w.writerows([r["label"], r["offered_cps"], r["proxy_cpu_s"], r["window_s"], workers, 1] for r in rows)
    rep_dir = out / "report"
    # over TLS the secrets of every connection of the series go with its captures (stunnel's key log)
    keys = [str(out / "keys.txt")] if transport.startswith("tls") else []
    caps = [str(out / f"{r['label']}.pcapng") for r in rows]
    p = subprocess.run([SIPPERF, "report", *caps, *keys, "--threads", str(workers),
                        "--cpu", str(cpu), "--out", str(rep_dir)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"sipperf report failed on {transport} replication {rep}:\n{p.stderr[-3000:]}")
    import pandas as pd

    table = pd.read_csv(rep_dir / "runs.csv").set_index("run")
    for row in rows:
        t = table.loc[row["label"]]
        row.update({"report_rate_cps": round(float(t["rate_cps"]), 1), "report_loss_kind": t["loss_kind"],
                    "report_pdr_percent": t["pdr_percent"], "report_failed_percent": round(float(t["failed_percent"]), 3),
                    "report_srd_p99_ms": t.get("srd_p99_ms"), "report_utilisation": round(float(t.get("utilisation", float("nan"))), 4),
                    "report_cpu_share": round(float(t["cpu_share"]), 4),
                    "report_tls_full": _count(t.get("tls_full_handshakes")),
                    "report_tls_resumed": _count(t.get("tls_resumed_handshakes")),
                    "report_tls_hello_p99_ms": _ms(t.get("tls_hello_p99_ms")),
                    "report_tls_late": _count(_sum(t.get("tls_handshakes_late"), t.get("tls_handshakes_unanswered")))})
    rj = json.loads((rep_dir / "report.json").read_text())
    if rj.get("fit_error"):
        print(f"the report's model fit failed on {transport} replication {rep}: {rj['fit_error']}", flush=True)
    n = rj["verdict"]["numbers"]
    lo, hi = n.get("knee_measured_ci95") or (None, None)
    knee = {"rep": rep, "transport": transport, "loss_kind": n.get("loss_kind", ""), "knee_lo_cps": lo,
            "knee_hi_cps": hi if hi is not None else "inf", "censored": n.get("knee_measured_censored", ""),
            "located": n.get("knee_located"), "runs": len(rows), "workers": workers, "tls_key": tls_key,
            "tls_resume": tls_resume}
    print(knee, flush=True)
    return knee


def _count(v) -> int | str:
    """A count from the report's table, or "" where it has none (no TLS)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ""
    return int(f) if f == f else ""


def _ms(v) -> float | str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ""
    return round(f, 1) if f == f else ""


def _sum(*vs):
    """The sum of the counts that are numbers, or None if none is."""
    got = [float(v) for v in vs if v is not None and str(v) != "" and float(v) == float(v)]
    return sum(got) if got else None


def reread(out: Path, keep: Path) -> None:
    """Read the series of ``out/runs.csv`` again from their kept captures (``--keep`` of the
    recording), with the report as it is now, and write ``runs.csv`` and ``knees.csv`` anew."""
    import pandas as pd

    runs = pd.read_csv(out / "runs.csv", keep_default_na=False).to_dict("records")
    by_dir: dict[Path, list[dict]] = {}
    for r in runs:
        found = list(keep.glob(f"*/{r['label']}.pcapng"))
        if len(found) != 1:
            raise SystemExit(f"{r['label']}: {len(found)} kept captures under {keep}")
        by_dir.setdefault(found[0].parent, []).append(r)
    knees = [read_series(d, rows, int(rows[0]["rep"]), rows[0]["transport"], int(rows[0]["workers"]),
                         str(rows[0].get("tls_key") or ""), str(rows[0].get("tls_resume") or ""))
             for d, rows in by_dir.items()]
    write(out, runs, knees)


def write(out: Path, runs: list[dict], knees: list[dict]) -> None:
    for name, cols, rows in (("runs.csv", RUN_COLUMNS, runs), ("knees.csv", KNEE_COLUMNS, knees)):
        with open(out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rates", default=",".join(map(str, RATES)), help="offered calls/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=6.0, help="load per run")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--keep", type=Path, default=None, help="keep the captures and reports there")
    ap.add_argument("--transports", default="udp,tcp",
                    help="udp, tcp, tcp-tn, tls, tls-tn, ws, ws-tn (comma-separated)")
    ap.add_argument("--tls-keys", default="rsa:2048",
                    help="over TLS: the proxy certificate's keys (rsa:BITS, ec:CURVE), comma-separated")
    ap.add_argument("--tls-resume", default="no",
                    help="over TLS: no (a full handshake per connection), yes (the caller resumes its session), "
                         "or no,yes (both, alternating)")
    ap.add_argument("--workers", default=str(WORKERS),
                    help="Kamailio worker counts (children / tcp_children), comma-separated")
    ap.add_argument("--reread", type=Path, default=None, metavar="KEEP",
                    help="record nothing: read the series in --out/runs.csv again from the captures kept in KEEP")
    a = ap.parse_args(argv)
    if a.reread is not None:
        reread(a.out, a.reread)
        return 0
    tls = any(t.startswith("tls") for t in a.transports.split(","))
    ws = any(t.startswith("ws") for t in a.transports.split(","))
    if missing_tools(tls, ws):
        print(f"missing: {', '.join(missing_tools(tls, ws))}", file=sys.stderr)
        return 2
    rates = [float(x) for x in a.rates.split(",")]
    runs, knees = [], []
    order = a.transports.split(",")
    counts = [int(x) for x in a.workers.split(",")]
    keys = a.tls_keys.split(",")
    resumes = [x == "yes" for x in a.tls_resume.split(",")]
    # every (transport, workers, key, resumption) cell once per replication, the order reversed
    # every other one
    cells = [(t, c, k, r) for t in order for c in counts for k in (keys if t.startswith("tls") else keys[:1])
             for r in (resumes if t.startswith("tls") else [False])]
    with tempfile.TemporaryDirectory(prefix="sipperf-transport-") as tmp:
        for rep in range(1, a.reps + 1):
            for transport, c, key, res in (cells if rep % 2 else cells[::-1]):
                tls_cell = transport.startswith("tls")
                tag = (f"-c{c}" if len(counts) > 1 else "") + (
                    "-" + key.replace(":", "") if len(keys) > 1 and tls_cell else "") + (
                    "-res" if res and tls_cell else "")
                r, k = series(rep, transport, rates, a.seconds, a.keep or Path(tmp), workers=c, tag=tag,
                              tls_key=key, tls_resume=res)
                runs += r
                knees.append(k)
    write(a.out, runs, knees)
    return 0


if __name__ == "__main__":
    sys.exit(main())
