"""The TLS lab: Kamailio over UDP, TCP and TLS on one proxy, driven by small user agents that
write their TLS secrets, so its captures can be decrypted (issue 39).

    python -m sipperf.lab.tls OUT_DIR [--transport tls] [--calls N] [--cps R] [--new-connection]

writes ``OUT_DIR/capture.pcapng`` (dumpcap on loopback, both legs), ``OUT_DIR/keys_uac.txt`` and
``OUT_DIR/keys_uas.txt`` (the two agents' TLS secrets in the SSLKEYLOGFILE format: the caller's
leg and the callee's leg), ``OUT_DIR/sent.csv`` (every message as each agent wrote or read it,
with its time), ``OUT_DIR/proxy.log`` and ``OUT_DIR/run.json`` (the proxy's CPU seconds over the
calls, the machine's load).

The set-up:

* Kamailio 5.6 with the ``tls`` module (``kamailio-tls-modules``) listening on UDP, TCP and TLS
  (:data:`PORTS`), two UDP ``children`` and two ``tcp_children``, a self-signed RSA-2048
  certificate made with ``openssl`` at run time, a stateful relay with record-routing that
  sends each call on to the callee over the transport it came in on;
* the caller and the callee are Python (``ssl``, TLS 1.3, each writing its secrets with
  ``SSLContext.keylog_filename``); the caller places its calls one after another at about
  ``--cps`` calls/s, INVITE, 100 (from the proxy), 180, 200, ACK, BYE, 200, over one
  connection for all calls (as a trunk does) or, with ``--new-connection``, over a new TCP or
  TLS connection per call (as phones that do not keep theirs open);
* the proxy's CPU seconds are user + system of Kamailio and every process it forked
  (``/proc/PID/stat``), read just before the first call and just after the last;
* every process started here is stopped by its pid.

The committed capture ``tests/fixtures/tls/`` was made by this module; ``datasets/lab/tls/``
holds the series that ch. 10 reads.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

ADDR = "127.0.0.1"
#: the proxy's and the callee's port per transport
PORTS = {"udp": (5560, 5580), "tcp": (5562, 5582), "tls": (5561, 5581)}
MODULES = "/usr/lib/x86_64-linux-gnu/kamailio/modules/"

CFG = """#!KAMAILIO
debug=1
log_stderror=yes
children=2
auto_aliases=no
disable_tcp=no
enable_tls=yes
tcp_children=2
tcp_max_connections=4096
tls_max_connections=4096
open_files_limit=10000
listen=udp:{addr}:{udp_proxy}
listen=tcp:{addr}:{tcp_proxy}
listen=tls:{addr}:{tls_proxy}

mpath="{modules}"
loadmodule "tls.so"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "siputils.so"
loadmodule "textops.so"

modparam("tls", "certificate", "{cert}")
modparam("tls", "private_key", "{key}")
modparam("tls", "tls_method", "TLSv1.2+")
modparam("tls", "verify_certificate", 0)
modparam("tls", "require_certificate", 0)

request_route {{
	if (!mf_process_maxfwd_header("20")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
	if (has_totag()) {{
		if (loose_route()) {{ t_relay(); exit; }}
		if (is_method("ACK")) {{ if (t_check_trans()) {{ t_relay(); }} exit; }}
		sl_send_reply("404", "No Such Dialog");
		exit;
	}}
	t_check_trans();
	if (is_method("INVITE")) {{ record_route(); }}
	if (proto == UDP) {{ $du = "sip:{addr}:{udp_uas}"; }}
	else if (proto == TCP) {{ $du = "sip:{addr}:{tcp_uas};transport=tcp"; }}
	else {{ $du = "sip:{addr}:{tls_uas};transport=tls"; }}
	if (!t_relay()) {{ sl_reply_error(); }}
}}
"""


class Wire:
    """One stream connection (TCP or TLS) carrying SIP: whole messages in and out, each logged
    with its time."""

    def __init__(self, sock, who: str, log: list):
        self.sock, self.who, self.log, self.buf = sock, who, log, b""

    def send(self, text: str) -> None:
        data = text.replace("\n", "\r\n").encode()
        self.log.append((time.time_ns(), self.who, "out", _first_line(data), _header(data, "Call-ID")))
        self.sock.sendall(data)

    def recv(self) -> bytes | None:
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        n = int(_header(head, "Content-Length") or 0)
        while len(rest) < n:
            rest += self.sock.recv(65536)
        msg, self.buf = head + b"\r\n\r\n" + rest[:n], rest[n:]
        self.log.append((time.time_ns(), self.who, "in", _first_line(msg), _header(msg, "Call-ID")))
        return msg


class Datagrams(Wire):
    """The same over UDP: one message per datagram, to one peer (the proxy)."""

    def __init__(self, sock: socket.socket, who: str, log: list, peer=None):
        super().__init__(sock, who, log)
        self.peer = peer

    def send(self, text: str) -> None:
        data = text.replace("\n", "\r\n").encode()
        self.log.append((time.time_ns(), self.who, "out", _first_line(data), _header(data, "Call-ID")))
        self.sock.sendto(data, self.peer)

    def recv(self) -> bytes | None:
        try:
            msg, self.peer = self.sock.recvfrom(65536)
        except socket.timeout:
            return None
        self.log.append((time.time_ns(), self.who, "in", _first_line(msg), _header(msg, "Call-ID")))
        return msg


def _first_line(data: bytes) -> str:
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def _header(data: bytes, name: str) -> str | None:
    for line in data.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name.lower().encode():
            return v.strip().decode(errors="replace")
    return None


def _headers(msg: bytes, name: str) -> list[str]:
    return [line.partition(b":")[2].strip().decode() for line in msg.split(b"\r\n")[1:]
            if line.partition(b":")[0].strip().lower() == name.lower().encode()]


def _reply(req: bytes, code: str, to_tag: str, contact: str | None) -> str:
    keep = [line.decode() for line in req.split(b"\r\n")[1:]
            if line.partition(b":")[0].strip().lower() in (b"via", b"from", b"call-id", b"cseq", b"record-route")]
    lines = [f"SIP/2.0 {code}"]
    for h in keep:
        if h.lower().startswith("to:"):
            continue
        lines.append(h)
    to = _header(req, "To") or ""
    lines.append(f"To: {to}" + ("" if ";tag=" in to else f";tag={to_tag}"))
    if contact:
        lines.append(f"Contact: <{contact}>")
    lines += ["Content-Length: 0", "", ""]
    return "\n".join(lines)


def callee(transport: str, server: ssl.SSLContext, listener: socket.socket, log: list,
           stop: threading.Event) -> None:
    """The callee: answers each INVITE 180 then 200 and each BYE 200, at once."""
    listener.settimeout(0.5)
    if transport == "udp":
        w = Datagrams(listener, "uas", log)
        while not stop.is_set():
            try:
                _answer(w, transport)
            except OSError:
                return
        return
    while not stop.is_set():
        try:
            raw, _ = listener.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        raw.settimeout(None)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle wait between 180 and 200
        sock = server.wrap_socket(raw, server_side=True) if transport == "tls" else raw
        threading.Thread(target=_serve, args=(sock, transport, log), daemon=True).start()


def _answer(w: Wire, transport: str) -> bool:
    m = w.recv()
    if m is None:
        return transport == "udp"  # a datagram socket's timeout: go on
    contact = f"sip:uas@{ADDR}:{PORTS[transport][1]}" + ("" if transport == "udp" else f";transport={transport}")
    line = _first_line(m)
    tag = "b" + (_header(m, "Call-ID") or "x")[:12]
    if line.startswith("INVITE"):
        w.send(_reply(m, "180 Ringing", tag, contact))
        w.send(_reply(m, "200 OK", tag, contact))
    elif line.startswith("BYE"):
        w.send(_reply(m, "200 OK", tag, None))
    return True


def _serve(sock, transport: str, log: list) -> None:
    w = Wire(sock, "uas", log)
    try:
        while _answer(w, transport):
            pass
    except (OSError, ssl.SSLError):
        pass
    finally:
        sock.close()


def _connect(transport: str, client: ssl.SSLContext, log: list) -> tuple[Wire, int]:
    proxy = (ADDR, PORTS[transport][0])
    if transport == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((ADDR, 0))
        sock.settimeout(5.0)
        return Datagrams(sock, "uac", log, proxy), sock.getsockname()[1]
    raw = socket.create_connection(proxy)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)      # no Nagle wait between ACK and BYE
    sock = client.wrap_socket(raw, server_hostname="proxy") if transport == "tls" else raw
    return Wire(sock, "uac", log), sock.getsockname()[1]


def caller(transport: str, client: ssl.SSLContext, calls: int, cps: float, log: list,
           new_connection: bool = False) -> None:
    """The caller: ``calls`` calls one after another at about ``cps`` calls/s."""
    via = transport.upper()
    tp = "" if transport == "udp" else f";transport={transport}"
    w, port = _connect(transport, client, log)
    gap = 1.0 / cps
    t_start = time.monotonic()
    for i in range(calls):
        if new_connection and i:
            w.sock.close()
            w, port = _connect(transport, client, log)
        cid, branch = f"{transport}-call-{i}@{ADDR}", f"z9hG4bK-{i}"
        common = (f"From: <sip:uac@{ADDR}>;tag=a{i}\nCall-ID: {cid}\nMax-Forwards: 70\n"
                  f"Contact: <sip:uac@{ADDR}:{port}{tp}>\n")
        w.send(f"INVITE sip:uas@{ADDR}:{PORTS[transport][1]}{tp} SIP/2.0\n"
               f"Via: SIP/2.0/{via} {ADDR}:{port};branch={branch};rport\n{common}"
               f"To: <sip:uas@{ADDR}>\nCSeq: 1 INVITE\nContent-Length: 0\n\n")
        ok = None
        while ok is None:
            m = w.recv()
            if m is None:
                raise RuntimeError(f"call {i}: no answer from the proxy")
            if _first_line(m).startswith("SIP/2.0 200"):
                ok = m
        to = _header(ok, "To")
        target = (_header(ok, "Contact") or "").strip("<>")
        route = "".join(f"Route: {r}\n" for r in _headers(ok, "Record-Route"))
        for method, cseq, br in (("ACK", 1, f"{branch}-ack"), ("BYE", 2, f"{branch}-bye")):
            w.send(f"{method} {target} SIP/2.0\nVia: SIP/2.0/{via} {ADDR}:{port};branch={br};rport\n"
                   f"{route}{common}To: {to}\nCSeq: {cseq} {method}\nContent-Length: 0\n\n")
        while True:
            m = w.recv()
            if m is None:
                raise RuntimeError(f"call {i}: no answer to BYE")
            if _first_line(m).startswith("SIP/2.0 200") and "BYE" in (_header(m, "CSeq") or ""):
                break
        time.sleep(max(0.0, t_start + (i + 1) * gap - time.monotonic()))
    w.sock.close()


def _stop(p: subprocess.Popen) -> None:
    """Stop ``p`` by its pid and wait until every process it forked has gone too (a worker
    that outlives its parent would still hold the proxy's ports for the next run)."""
    from sipperf.lab.procs import reap
    kids = _tree(p.pid)[1:] if p.poll() is None else []
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    reap(kids, 5.0)


def missing() -> list[str]:
    out = [t for t in ("kamailio", "dumpcap", "openssl") if shutil.which(t) is None]
    if not Path(MODULES, "tls.so").exists():
        out.append("kamailio-tls-modules")
    return out


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (Kamailio forks its workers)."""
    from sipperf.lab.procs import children_of
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo.extend(children_of(p))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every process below it (``/proc/PID/stat``)."""
    from sipperf.lab.cpuacct import proc_cpu_s
    return sum(sum(t) for p in _tree(pid) if (t := proc_cpu_s(p)) is not None)


def _configure(out: Path) -> tuple[Path, Path]:
    """A self-signed certificate made now, and the proxy's configuration, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cert, key = out / "proxy_cert.pem", out / "proxy_key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=proxy"], check=True, capture_output=True)
    ports = {f"{t}_{w}": PORTS[t][k] for t in PORTS for k, w in enumerate(("proxy", "uas"))}
    (out / "kamailio.cfg").write_text(CFG.format(addr=ADDR, modules=MODULES, cert=cert, key=key, **ports))
    return cert, key


def _start_proxy(out: Path, log_fh, shm_mb: int, pkg_mb: int, proxy_cpu: int | None = None,
                 tls_probe: bool = False) -> subprocess.Popen:
    """Kamailio on ``out/kamailio.cfg`` (pinned to ``proxy_cpu`` if given), once its ports are
    free and it accepts on its TCP port (and, with ``tls_probe``, completes a TLS handshake on its
    TLS port: left out while a capture runs, whose key logs would not hold the probe's secrets);
    ``shm_mb``/``pkg_mb``: its shared and per-process memory (``-m``/``-M``)."""
    deadline = time.monotonic() + 15
    from sipperf.lab.netutil import listening
    while busy := [p for p in (PORTS[t][0] for t in PORTS) if listening(p)]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the lab's proxy ports are taken by another process: {busy}")
        time.sleep(0.2)
    pin = [] if proxy_cpu is None else ["taskset", "-c", str(proxy_cpu)]
    kam = subprocess.Popen([*pin, "kamailio", "-f", str(out / "kamailio.cfg"), "-DD", "-E", "-m", str(shm_mb),
                            "-M", str(pkg_mb)], stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True)
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname, probe.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection((ADDR, PORTS["tcp"][0]), timeout=0.5).close()
            if tls_probe:
                with probe.wrap_socket(socket.create_connection((ADDR, PORTS["tls"][0]), timeout=2),
                                       server_hostname="proxy"):
                    pass
            return kam
        except OSError:   # ssl.SSLError is an OSError
            if time.monotonic() > deadline or kam.poll() is not None:
                _stop(kam)
                raise RuntimeError("kamailio did not listen: " + (out / "proxy.log").read_text()[-1500:])
            time.sleep(0.2)


def record(out: Path, calls: int = 40, cps: float = 20.0, transport: str = "tls",
           new_connection: bool = False, capture: bool = True, proxy_cpu: int | None = None,
           idle_s: float = 0.0) -> Path:
    """One run of the TLS lab (see the module doc); returns the capture's path.  ``proxy_cpu``:
    pin Kamailio there (``taskset``); ``idle_s``: first measure the proxy's CPU while no call
    runs (its timers), for that long."""
    if transport not in PORTS:
        raise ValueError(f"transport must be one of {', '.join(PORTS)}")
    cert, key = _configure(out)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    server.keylog_filename = str(out / "keys_uas.txt")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    client.keylog_filename = str(out / "keys_uac.txt")
    if transport == "udp":
        listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((ADDR, PORTS[transport][1]))
    if transport != "udp":
        listener.listen(64)
    log: list = []
    stop = threading.Event()
    cap = out / "capture.pcapng"
    procs = []
    log_fh = open(out / "proxy.log", "w")
    agent = threading.Thread(target=callee, args=(transport, server, listener, log, stop), daemon=True)
    run: dict = {"transport": transport, "new_connection": new_connection, "calls": calls, "cps": cps}
    try:
        if capture:
            proto = "udp" if transport == "udp" else "tcp"
            procs.append(subprocess.Popen(
                ["dumpcap", "-q", "-i", "lo", "-f", f"{proto} port {PORTS[transport][0]} or {proto} port "
                 f"{PORTS[transport][1]}", "-w", str(cap)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
        agent.start()
        kam = _start_proxy(out, log_fh, 64, 64, proxy_cpu)
        procs.append(kam)
        time.sleep(1.0)
        if idle_s > 0:
            c0, t0 = cpu_seconds(kam.pid), time.monotonic()
            time.sleep(idle_s)
            run["idle_cpu_s"], run["idle_seconds"] = cpu_seconds(kam.pid) - c0, time.monotonic() - t0
        run["load_before"] = list(os.getloadavg())
        c0, t0 = cpu_seconds(kam.pid), time.monotonic()
        caller(transport, client, calls, cps, log, new_connection)
        run["proxy_cpu_s"], run["seconds"] = cpu_seconds(kam.pid) - c0, time.monotonic() - t0
        run["load_after"] = list(os.getloadavg())
        time.sleep(1.0)
    finally:
        stop.set()
        if agent.is_alive():
            agent.join(5)
        for p in reversed(procs):
            _stop(p)
        listener.close()
        log_fh.close()
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    with open(out / "sent.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["t_ns", "agent", "direction", "first_line", "call_id"])
        wr.writerows(sorted(log))
    return cap


def slab_bytes() -> int:
    """Bytes in the kernel's slab caches (``/proc/slabinfo``: active objects × object size)."""
    total = 0
    for line in Path("/proc/slabinfo").read_text().splitlines()[2:]:
        f = line.split()
        total += int(f[1]) * int(f[3])
    return total


def pss_bytes(pid: int) -> int:
    """Proportional set size of ``pid`` and every process below it (``smaps_rollup``): shared
    pages are split between the processes that map them, so the sum is the memory they hold."""
    total = 0
    for p in _tree(pid):
        try:
            lines = Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) * 1024 for line in lines if line.startswith("Pss:"))
    return total


def hold(out: Path, transport: str = "tls", connections: int = 2000, settle_s: float = 3.0) -> dict:
    """The memory idle connections hold: open ``connections`` TCP or TLS connections to the proxy
    (the TLS handshake completed, nothing else sent), and read the kernel's slab caches and the
    proxy's memory (PSS) before and after; both ends of each loopback connection are this host's,
    so the kernel's bytes are per connection, two sockets.  The connections the proxy no longer
    holds when the memory is read (``ss``) are ``connections_lost``, with the tls module's
    double-free warnings (``double_frees``) beside them.  Writes ``out/memory.json``."""
    import resource
    if transport not in ("tcp", "tls"):
        raise ValueError("hold() needs a stream transport: tcp or tls")
    cert, key = _configure(out)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, connections + 256)), hard))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    socks: list = []
    log_fh = open(out / "proxy.log", "w")
    res: dict = {"transport": transport, "connections": connections}
    kam = None
    try:
        kam = _start_proxy(out, log_fh, 1024, 16, tls_probe=transport == "tls")
        time.sleep(settle_s)
        slab0, pss0 = slab_bytes(), pss_bytes(kam.pid)
        failed = 0
        for _ in range(connections):
            for attempt in range(3):   # a refused handshake is counted and tried again, twice
                raw = socket.create_connection((ADDR, PORTS[transport][0]))
                try:
                    socks.append(client.wrap_socket(raw, server_hostname="proxy") if transport == "tls" else raw)
                    break
                except OSError as e:
                    raw.close()
                    failed += 1
                    if attempt == 2:
                        raise RuntimeError(f"the proxy refused 3 handshakes in a row after {len(socks)} "
                                           f"connections ({e}); its log: {out / 'proxy.log'}") from e
                    time.sleep(0.1)
        res["handshakes_failed"] = failed
        time.sleep(settle_s)
        slab1, pss1 = slab_bytes(), pss_bytes(kam.pid)
        est = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{PORTS[transport][0]} )"],
                             capture_output=True, text=True).stdout.splitlines()
        res.update({"proxy_side_sockets": len(est), "connections_lost": connections - len(est),
                    "slab_bytes_before": slab0, "slab_bytes_after": slab1,
                    "proxy_pss_before": pss0, "proxy_pss_after": pss1,
                    "kernel_bytes_per_connection": (slab1 - slab0) / connections,
                    "proxy_bytes_per_connection": (pss1 - pss0) / connections,
                    "load": list(os.getloadavg())})
    finally:
        for sk in socks:
            sk.close()
        if kam is not None:
            _stop(kam)
        log_fh.close()
    # Kamailio 5.6's tls module now and then frees a pointer twice (its log says so); a connection
    # it then closes is counted in connections_lost, not hidden
    res["double_frees"] = (out / "proxy.log").read_text(errors="replace").count("freeing already freed")
    (out / "memory.json").write_text(json.dumps(res, indent=1) + "\n")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--transport", choices=tuple(PORTS), default="tls")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--cps", type=float, default=20.0)
    ap.add_argument("--new-connection", action="store_true", help="a new TCP/TLS connection per call")
    a = ap.parse_args(argv)
    if missing():
        print("missing: " + ", ".join(missing()), file=sys.stderr)
        return 2
    print(record(a.out, a.calls, a.cps, a.transport, a.new_connection))
    return 0


if __name__ == "__main__":
    sys.exit(main())
