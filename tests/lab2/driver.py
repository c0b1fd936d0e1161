"""The second lab (issue 21, item 8): a proxy set-up built apart from ``sipperf.lab``, to check
``sipperf report`` on a lab it never saw.

What differs from the project's own lab (``src/sipperf/lab``): its own Kamailio configuration
(``kamailio.cfg`` here: 2 UDP workers, a stateful relay with tm's retransmission timers, other
ports), its own SIPp scenarios (``uac.xml``, ``uas.xml``: retransmissions on, one call in ten
answered 486 Busy Here by SIPp's statistical branch), SIPp's constant-rate arrivals, nothing
pinned and nothing reniced, no tracer, and a capture filtered on the proxy's port. Every process
it starts is stopped by its pid (its own process group, made at start).

What it measures per run, independently of ``sipperf``:

* the kernel's drop counter of the proxy's socket (``/proc/net/udp``, the ``drops`` column of
  the socket bound to the proxy's port), before and after;
* the datagrams that reached the proxy's port (counted in the capture with dpkt: the capture
  point is before the socket, so it sees the datagrams the socket then drops);
* the offered call rate as it reached the proxy (distinct INVITE Call-IDs over the span of their
  first arrivals, from the same dpkt pass);
* the proxy's CPU seconds (user + system of Kamailio and every process it forked,
  ``/proc/PID/stat``) over the load window.

Used by ``tests/test_lab_second.py`` and ``bench/lab_second.py``.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADDR = "127.0.0.1"
TOOLS = ("kamailio", "sipp", "dumpcap")
#: needed over TLS only
TLS_TOOLS = ("stunnel", "openssl", "gcc")
#: a Kamailio log line that says the proxy itself failed during a run
FAULT = re.compile(r"\b(CRITICAL|ALERT):")
#: a CRITICAL line that is overload, not a fault: the TCP main process found a queue of
#: connections to hand to its workers full ("send2child(): tcp child N ... queue full, K requests
#: queued", "send_fd_queue_add(): queue full: 128, extending to 256"); it queues them and carries
#: on, so these are counted apart, as the overload signal they are
QUEUE_FULL = re.compile(r"\[core/tcp_main\.c:\d+\]: \w+\(\):.*queue full")


@dataclass(frozen=True)
class Lab2Config:
    proxy_port: int = 5260
    uas_port: int = 5280
    uac_port: int = 5261
    workers: int = 2            #: Kamailio's UDP workers (``children``), written into the config
    busy_chance: float = 0.1    #: share of INVITEs the callee answers 486
    seconds: float = 6.0        #: load per run
    timeout_s: float = 40.0     #: a run that has not ended by then is stopped
    #: "udp", or "tcp": Kamailio's ``tcp_children`` workers (``workers`` of them) on a TCP listener,
    #: SIPp over one TCP connection each way (``-t t1``, as a trunk), no retransmissions (TCP is
    #: reliable: SIPp and the proxy's tm do not retransmit over it); or "tcp-tn": the same proxy,
    #: but the caller opens a new TCP connection for every call and closes it at the call's end
    #: (SIPp ``-t tn``, as phones without connection reuse); the proxy keeps one to the callee.
    #: "tls" and "tls-tn": the same over TLS: SIPp 3.6 has no TLS, so each SIPp speaks TCP to a
    #: stunnel beside it (on the load CPUs) that carries its connections over TLS 1.3 to the proxy
    #: and from it (a full handshake per connection: no session resumption); the capture holds
    #: the TLS legs only, and stunnel writes their secrets to ``keys.txt`` (``keylog.c``)
    #: "ws" and "ws-tn": SIP over WebSocket (RFC 7118) from the caller, over TCP to the callee:
    #: Kamailio's websocket module on its TCP listener, and SIPp's TCP carried by ``wsbridge.py``
    #: on the load CPUs; with "ws", SIPp's one connection becomes ``ws_clients`` WebSocket
    #: connections that stay open (browser-like clients, each call on one), with "ws-tn" each call
    #: opens its own WebSocket (HTTP upgrade included) and closes it at its end
    transport: str = "udp"
    #: over "ws": the WebSocket connections the caller's calls are spread over
    ws_clients: int = 100
    #: over TCP: the caller's wait for each response of the INVITE (s) before it fails the call
    setup_deadline_s: float = 2.0
    #: over TLS: the proxy certificate's key, "rsa:BITS" or "ec:CURVE" (made with openssl at start)
    tls_key: str = "rsa:2048"
    #: over TLS: the caller's stunnel resumes its last session on each new connection (TLS 1.3
    #: with a session ticket from the proxy: no certificate, no signature); False: a full
    #: handshake per connection
    tls_resume: bool = False
    #: over TLS: the highest version the caller's stunnel offers ("TLSv1.2" or "TLSv1.3")
    tls_version: str = "TLSv1.3"
    #: CPUs (a ``taskset -c`` list) for Kamailio, and for SIPp and dumpcap; None: not pinned
    proxy_cpus: str | None = None
    load_cpus: str | None = None


    @property
    def over_tcp(self) -> bool:
        return self.transport in ("tcp", "tcp-tn", "tls", "tls-tn", "ws", "ws-tn")

    @property
    def over_ws(self) -> bool:
        return self.transport in ("ws", "ws-tn")

    @property
    def over_tls(self) -> bool:
        return self.transport in ("tls", "tls-tn")

    @property
    def new_connection_per_call(self) -> bool:
        return self.transport.endswith("-tn")

    @property
    def sipp_uas_port(self) -> int:
        """The callee SIPp's own port: ``uas_port`` itself, or over TLS the port its stunnel
        hands the proxy's connections on to (``uas_port`` is then that stunnel's)."""
        return self.uas_port + 1000 if self.over_tls else self.uas_port

    @property
    def sipp_target_port(self) -> int:
        """Where the caller SIPp sends: the proxy, or over TLS its stunnel's plain-TCP side, over
        WebSocket its bridge."""
        return self.proxy_port + 1000 if self.over_tls or self.over_ws else self.proxy_port


@dataclass
class Lab2Run:
    label: str
    nominal_cps: float
    capture: Path
    rate_cps: float             #: distinct INVITEs reaching the proxy per second (capture)
    arrivals: int               #: datagrams to the proxy's port (capture)
    socket_drops: int           #: the proxy socket's kernel drop counter, delta over the run
    kernel_pdr: float           #: socket_drops / arrivals
    cpu_s: float                #: the proxy's CPU seconds over the window
    window_s: float             #: the load window (s)
    calls: int                  #: calls SIPp started
    completed: int              #: calls whose BYE the proxy answered 200 to the caller (capture)
    busy: int                   #: calls the proxy answered 486 to the caller (capture)
    loadavg: float              #: 1-minute load before the run
    uac_cpu_s: float = float("nan")   #: the calling SIPp's CPU seconds (last read before it exited)
    tunnel_cpu_s: float = float("nan")   #: over TLS: stunnel's (WebSocket: the bridge's) CPU seconds over the window
    #: Kamailio's CRITICAL and ALERT log lines written during the run (a worker that crashed, a
    #: double free): a run with any is not a measurement of the proxy, and ``fault`` is the first
    proxy_faults: int = 0
    #: Kamailio's "queue full" lines of its TCP main process during the run (``QUEUE_FULL``):
    #: connections it could not hand to a busy worker at once
    queue_full: int = 0
    fault: str = ""

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.window_s

    def row(self) -> dict:
        d = asdict(self)
        d["capture"] = str(self.capture)
        d["cpu_share"] = self.cpu_share
        return d


#: Kamailio's websocket module (Debian's kamailio-websocket-modules), for the "ws" transports
WS_MODULE = Path("/usr/lib/x86_64-linux-gnu/kamailio/modules/websocket.so")


def missing_tools(tls: bool = False, ws: bool = False) -> list[str]:
    out = [t for t in TOOLS + (TLS_TOOLS if tls else ()) if not shutil.which(t)]
    return out + (["kamailio-websocket-modules"] if ws and not WS_MODULE.exists() else [])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((ADDR, port))
        except OSError:
            return False
    return True


def _render(name: str, out: Path, values: dict) -> Path:
    text = (HERE / name).read_text()
    for k, v in values.items():
        text = text.replace(f"@@{k}@@", str(v))
    assert "@@" not in text, f"{name}: a placeholder is left"
    p = out / name
    p.write_text(text)
    return p


def _raise_exit(signum, frame):
    raise SystemExit(f"stopped by signal {signum}")


def _stop(proc: subprocess.Popen, sig=signal.SIGTERM, wait_s: float = 10.0) -> None:
    """Stop a process this module started, and its group, by its pid."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)          # its own group (start_new_session): only what it started
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=wait_s)


def _descendants(pid: int) -> list[int]:
    """pid and every process below it (from /proc/*/stat's parent field)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
                parent[int(d.name)] = int(f[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, pp in parent.items() if pp == p)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of pid and its descendants (/proc/PID/stat fields 14, 15)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in _descendants(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def socket_drops(port: int) -> int:
    """The kernel's drop counter of the UDP socket bound to 127.0.0.1:port (/proc/net/udp)."""
    want = f"0100007F:{port:04X}"
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        f = line.split()
        if f[1] == want:
            return int(f[-1])
    raise RuntimeError(f"no UDP socket bound to {ADDR}:{port}")


def tcp_listening(port: int) -> None:
    """Raise unless a TCP socket listens on 127.0.0.1:port (/proc/net/tcp, state 0A)."""
    want = f"0100007F:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[1] == want and f[3] == "0A":
            return
    raise RuntimeError(f"no TCP socket listening on {ADDR}:{port}")


def count_capture(path: Path, port: int, uac_port: int) -> tuple[int, float, int, int]:
    """(datagrams to ``port``, distinct INVITEs per second reaching it, 200 OKs to BYE and 486s
    the proxy sent to the caller) from a capture, read with dpkt (not sipperf)."""
    import dpkt

    arrivals, first, bye_ok, busy = 0, {}, set(), set()
    with open(path, "rb") as fh:
        for ts, buf in dpkt.pcapng.Reader(fh):
            if len(buf) < 28:
                continue
            # loopback captures are Ethernet-framed on Linux (DLT_EN10MB on "lo")
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.udp.UDP):
                continue
            udp = ip.data
            if udp.sport == port and udp.dport == uac_port:
                data = bytes(udp.data)
                i = data.find(b"\r\nCall-ID:")
                cid = data[i + 10:data.find(b"\r\n", i + 2)].strip() if i >= 0 else b""
                if data.startswith(b"SIP/2.0 200") and b" BYE\r\n" in data:
                    bye_ok.add(cid)
                elif data.startswith(b"SIP/2.0 486"):
                    busy.add(cid)
                continue
            if udp.dport != port:
                continue
            arrivals += 1
            data = bytes(udp.data)
            if data.startswith(b"INVITE "):
                i = data.find(b"\r\nCall-ID:")
                if i >= 0:
                    cid = data[i + 10:data.find(b"\r\n", i + 2)].strip()
                    first.setdefault(cid, ts)
    t = sorted(first.values())
    rate = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else float("nan")
    return arrivals, rate, len(bye_ok), len(busy)


def _listening_or_stop(proc: subprocess.Popen, ports, name: str, err: Path, wait_s: float = 10.0):
    """``proc`` once a TCP socket listens on each of ``ports``; if it exits or ``wait_s`` passes
    first, it is stopped and the error names it with the end of its ``err`` file."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            for port in ports:
                tcp_listening(port)
            return proc
        except RuntimeError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                raise RuntimeError(f"{name} did not start: {err.read_text()[-2000:]}")
            time.sleep(0.1)


def _pin(cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus] if cpus else []


class SecondLab:
    """Kamailio and the SIPp callee, started once; :meth:`run` offers one rate."""

    def __init__(self, cfg: Lab2Config, out: Path):
        self.cfg, self.out = cfg, Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.proxy = self.uas = self.tunnel = None

    def __enter__(self) -> "SecondLab":
        c = self.cfg
        # a SIGTERM (a timeout, a CI runner stopping the job) unwinds through __exit__, which
        # stops what was started; the previous handler is put back there
        self._old_term = signal.signal(signal.SIGTERM, _raise_exit)
        kcfg = _render("kamailio.cfg", self.out, {"PROXY_PORT": c.proxy_port, "UAS_PORT": c.uas_port})
        text = kcfg.read_text().replace("children=2", f"children={c.workers}")
        if c.over_tcp:
            text = (text.replace("disable_tcp=yes", f"disable_tcp=no\ntcp_children={c.workers}\n"
                                 "tcp_connection_lifetime=3605\ntcp_max_connections=65536")
                    .replace(f"listen=udp:{ADDR}:{c.proxy_port}", f"listen=tcp:{ADDR}:{c.proxy_port}")
                    .replace(f'$du = "sip:{ADDR}:{c.uas_port}";', f'$du = "sip:{ADDR}:{c.uas_port};transport=tcp";'))
            assert f"listen=tcp:{ADDR}:{c.proxy_port}" in text and "transport=tcp" in text
        if c.over_tls:
            text = self._tls_config(text)
        if c.over_ws:
            text = self._ws_config(text)
        kcfg.write_text(text)
        uas = _render("uas.xml", self.out, {"BUSY_CHANCE": c.busy_chance})
        uac = _render("uac.xml", self.out, {})
        if c.over_tcp:                        # in-dialog requests must come back over TCP
            for sc in (uas, uac):
                sc.write_text(sc.read_text().replace("[local_port]>", "[local_port];transport=tcp>"))
            if c.over_ws:                     # the caller is a WebSocket client (RFC 7118 §5)
                uac.write_text(uac.read_text().replace("SIP/2.0/[transport]", "SIP/2.0/WS")
                               .replace("[local_port];transport=tcp>", "[local_port];transport=ws>"))
            # no retransmission timer runs over TCP: the caller gives up on a call that has no answer
            # within the setup deadline (each wait for a response of the INVITE), and counts it failed
            ms = int(round(1000 * c.setup_deadline_s))
            text = uac.read_text()
            for code in ("100", "180", "486", "200"):
                text = text.replace(f'<recv response="{code}"', f'<recv response="{code}" timeout="{ms}"', 1)
            uac.write_text(text)
        self.tunnel = self._start_stunnel() if c.over_tls else self._start_bridge() if c.over_ws else None
        self.proxy = subprocess.Popen(
            [*_pin(c.proxy_cpus), "kamailio", "-f", str(kcfg), "-DD", "-E", "-m", "1024", "-M", "32",
             "-P", str(self.out / "kamailio.pid")],
            stdout=open(self.out / "proxy.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.uas = subprocess.Popen(
            [*_pin(c.load_cpus), "sipp", "-sf", str(uas), "-i", ADDR, "-p", str(c.sipp_uas_port), "-nostdin", "-buff_size", "8388608",
             *self._sipp_transport()],
            stdout=subprocess.DEVNULL, stderr=open(self.out / "uas.log", "w"), start_new_session=True,
            cwd=self.out)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket_drops(c.proxy_port) if not c.over_tcp else tcp_listening(c.proxy_port)
                break
            except RuntimeError:
                if self.proxy.poll() is not None:
                    raise RuntimeError(f"kamailio exited: {(self.out / 'proxy.log').read_text()[-2000:]}")
                time.sleep(0.2)
        else:
            raise RuntimeError("kamailio did not bind its port within 10 s")
        time.sleep(1.0)
        return self

    def _tls_config(self, text: str) -> str:
        """The TCP configuration turned to TLS: a TLS listener instead of the TCP one, the tls
        module with a self-signed certificate made here, every request to the callee (in-dialog
        ones too: its Contact says TCP) sent to the callee's stunnel over TLS."""
        c, out = self.cfg, self.out
        cert, key = out / "cert.pem", out / "key.pem"
        kind, _, size = c.tls_key.partition(":")
        newkey = (["-newkey", c.tls_key] if kind == "rsa" else
                  ["-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{size}"] if kind == "ec" else None)
        if newkey is None:
            raise ValueError(f"tls_key {c.tls_key!r}: use rsa:BITS or ec:CURVE")
        subprocess.run(["openssl", "req", "-x509", *newkey, "-nodes", "-days", "2", "-subj",
                        f"/CN={ADDR}", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        tls_du = f'$du = "sip:{ADDR}:{c.uas_port};transport=tls";'
        text = (text.replace(f"listen=tcp:{ADDR}:{c.proxy_port}",
                             f"enable_tls=yes\ntls_max_connections=65536\nlisten=tls:{ADDR}:{c.proxy_port}")
                .replace(f'$du = "sip:{ADDR}:{c.uas_port};transport=tcp";', tls_du)
                .replace('loadmodule "tm.so"', 'loadmodule "tls.so"\nloadmodule "tm.so"')
                .replace("\t\tif (loose_route()) {\n", f"\t\tif (loose_route()) {{\n\t\t\t{tls_du}\n"))
        text += "\n".join(['', f'modparam("tls", "certificate", "{cert}")', f'modparam("tls", "private_key", "{key}")',
                           'modparam("tls", "tls_method", "TLSv1.2+")', 'modparam("tls", "verify_certificate", 0)',
                           'modparam("tls", "require_certificate", 0)', ''])
        assert text.count(tls_du) == 2 and f"listen=tls:{ADDR}:{c.proxy_port}" in text
        return text

    def _start_stunnel(self) -> subprocess.Popen:
        """stunnel on the load CPUs: the caller's plain-TCP connections (``sipp_target_port``) carried
        over TLS to the proxy, one TLS connection per TCP one, a full handshake each; and the proxy's
        TLS connections to the callee (``uas_port``) handed on in plain TCP to the callee SIPp. Its
        TLS secrets go to ``keys.txt`` through ``keylog.c``, preloaded."""
        c, out = self.cfg, self.out
        shim = out / "keylog.so"
        if not shim.exists():
            subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(HERE / "keylog.c"), "-ldl", "-lpthread"],
                           check=True, capture_output=True)
        conf = out / "stunnel.conf"
        conf.write_text("\n".join([
            "foreground = yes", "pid =", f"output = {out / 'stunnel.log'}", "debug = 3",
            "socket = l:TCP_NODELAY=1", "socket = r:TCP_NODELAY=1",
            "[caller]", "client = yes", f"accept = {ADDR}:{c.sipp_target_port}", f"connect = {ADDR}:{c.proxy_port}",
            f"sessionResume = {'yes' if c.tls_resume else 'no'}", "verifyChain = no",
            f"sslVersionMin = {c.tls_version}", f"sslVersionMax = {c.tls_version}",
            "[callee]", f"accept = {ADDR}:{c.uas_port}", f"connect = {ADDR}:{c.sipp_uas_port}",
            f"cert = {out / 'cert.pem'}", f"key = {out / 'key.pem'}", ""]))
        env = dict(os.environ, LD_PRELOAD=str(shim), SSLKEYLOGFILE=str(out / "keys.txt"))
        proc = subprocess.Popen([*_pin(c.load_cpus), "stunnel", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                stderr=open(out / "stunnel.err", "w"), start_new_session=True)
        return _listening_or_stop(proc, (c.sipp_target_port, c.uas_port), "stunnel", out / "stunnel.err")

    def _ws_config(self, text: str) -> str:
        """The TCP configuration with a WebSocket listener: the websocket module on the TCP port,
        its HTTP upgrade answered in xhttp's event route, a WebSocket request's reply sent back on
        its connection (``force_rport``); the callee is reached over TCP as before."""
        text = (text.replace("tcp_children=", "tcp_accept_no_cl=yes\ntcp_children=", 1)
                .replace('loadmodule "tm.so"', 'loadmodule "xhttp.so"\nloadmodule "websocket.so"\nloadmodule "tm.so"', 1)
                .replace("request_route {\n", 'request_route {\n\tif ($pr == "ws") {\n\t\tforce_rport();\n\t}\n', 1))
        text += "\n".join(['', 'modparam("websocket", "keepalive_mechanism", 0)',
                           'event_route[xhttp:request] {',
                           '\tif ($hdr(Upgrade) =~ "websocket" && $hdr(Connection) =~ "Upgrade" && $rm =~ "GET") {',
                           '\t\tif (ws_handle_handshake()) {', '\t\t\texit;', '\t\t}', '\t}',
                           '\txhttp_reply("404", "Not Found", "", "");', '}', ''])
        assert "websocket.so" in text and "force_rport" in text and "tcp_accept_no_cl" in text
        return text

    def _start_bridge(self) -> subprocess.Popen:
        """``wsbridge.py`` on the load CPUs: the caller's TCP (``sipp_target_port``) carried over
        WebSocket to the proxy's port."""
        import sys
        c, out = self.cfg, self.out
        clients = 1 if c.new_connection_per_call else c.ws_clients
        proc = subprocess.Popen([*_pin(c.load_cpus), sys.executable, str(HERE / "wsbridge.py"), "--listen",
                                 str(c.sipp_target_port), "--connect", f"{ADDR}:{c.proxy_port}", "--clients",
                                 str(clients), "--log", str(out / "wsbridge.log")],
                                stdout=subprocess.DEVNULL, stderr=open(out / "wsbridge.err", "w"),
                                start_new_session=True)
        return _listening_or_stop(proc, (c.sipp_target_port,), "wsbridge", out / "wsbridge.err")

    def _sipp_transport(self, caller: bool = False) -> list[str]:
        if not self.cfg.over_tcp:
            return []
        if caller and self.cfg.new_connection_per_call:
            # a socket per call in progress; SIPp refuses to start if its cap exceeds the fd limit
            return ["-t", "tn", "-max_reconnect", "0", "-max_socket", "16000"]
        return ["-t", "t1", "-max_reconnect", "0"]

    def _drops(self) -> int:
        return socket_drops(self.cfg.proxy_port) if not self.cfg.over_tcp else 0

    def __exit__(self, *exc) -> None:
        try:
            for p in (self.uas, self.proxy, self.tunnel):
                if p is not None:
                    _stop(p)
        finally:
            signal.signal(signal.SIGTERM, self._old_term)

    def run(self, label: str, rate_cps: float, collect_out: Path | None = None) -> Lab2Run:
        """Offer ``rate_cps`` for the configured seconds. With ``collect_out``, ``sipperf collect``
        runs beside the load as an engineer would run it (its own process, stopped by its pid
        after the load) and appends the run's row there; SIPp's own counters go to
        ``<label>_uac_stats.csv`` either way."""
        c = self.cfg
        calls = max(int(round(rate_cps * c.seconds)), 1)
        cap = self.out / f"{label}.pcapng"
        if c.over_tls and self.tunnel is not None:
            # a TLS 1.3 connection can be decrypted only with its handshake in the capture (the
            # key log is matched by the handshake's client random): stunnel starts again, which
            # closes the proxy's connection to the callee, so every connection opens in this run
            _stop(self.tunnel)
            self.tunnel = self._start_stunnel()
            time.sleep(0.5)
        load1 = float(Path("/proc/loadavg").read_text().split()[0])
        log_at = (self.out / "proxy.log").stat().st_size
        # over TCP the proxy reaches the callee from an ephemeral port of its own: a filter on the
        # proxy's port alone would keep only the caller's leg
        filt = (f"udp port {c.proxy_port}" if not c.over_tcp
                else f"tcp port {c.proxy_port} or tcp port {c.uas_port}")
        dump = subprocess.Popen([*_pin(c.load_cpus), "dumpcap", "-q", "-i", "lo", "-f", filt, "-B", "128",
                                 "-w", str(cap)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.monotonic() + 10
        while not cap.exists() and time.monotonic() < deadline:   # dumpcap writes its header first
            time.sleep(0.05)
        time.sleep(0.5)
        coll = None
        if collect_out is not None:
            import sys
            coll = subprocess.Popen(
                [str(Path(sys.executable).with_name("sipperf")), "collect", "--pid", str(self.proxy.pid),
                 "--port", str(c.proxy_port), "--seconds", f"{c.timeout_s + 20:g}", "--run", label,
                 "--rate-cps", f"{rate_cps:g}", "--threads", str(c.workers), "--out", str(collect_out),
                 "--samples", str(Path(collect_out).with_name(f"{label}_samples.csv"))],
                stdout=subprocess.DEVNULL, stderr=open(self.out / f"{label}_collect.log", "w"),
                start_new_session=True)
            log, deadline = self.out / f"{label}_collect.log", time.monotonic() + 20
            while "start the load" not in log.read_text() and time.monotonic() < deadline:   # its first sample
                if coll.poll() is not None:
                    raise RuntimeError(f"sipperf collect exited: {log.read_text()[-2000:]}")
                time.sleep(0.02)
        tun0 = cpu_seconds(self.tunnel.pid) if self.tunnel is not None else float("nan")
        d0, cpu0, t0 = self._drops(), cpu_seconds(self.proxy.pid), time.monotonic()
        uac = subprocess.Popen(
            [*_pin(c.load_cpus), "sipp", "-sf", str(self.out / "uac.xml"), "-i", ADDR, "-p", str(c.uac_port),
             f"{ADDR}:{c.sipp_target_port}", "-r", f"{rate_cps:g}", "-rp", "1000", "-m", str(calls), "-nostdin",
             "-buff_size", "8388608", "-timeout", f"{c.timeout_s:g}s",
             "-cid_str", "lab2-%u-%p@%s", "-trace_stat", "-stf", f"{label}_uac_stats.csv", "-fd", "1",
             *self._sipp_transport(caller=True)],
            stdout=subprocess.DEVNULL, stderr=open(self.out / f"{label}_uac.log", "w"),
            start_new_session=True, cwd=self.out)
        try:
            uac_cpu, end = float("nan"), time.monotonic() + c.timeout_s + 10
            while uac.poll() is None and time.monotonic() < end:
                uac_cpu = cpu_seconds(uac.pid)      # taskset execs SIPp in place: the same pid
                time.sleep(0.25)
            time.sleep(0.3)                                 # the last responses and ACKs
            t1, cpu1, d1 = time.monotonic(), cpu_seconds(self.proxy.pid), self._drops()
            tun1 = cpu_seconds(self.tunnel.pid) if self.tunnel is not None else float("nan")
        finally:
            _stop(uac)
            if coll is not None:
                _stop(coll)                                 # SIGTERM: collect writes its row and exits
            _stop(dump, signal.SIGINT)
        arrivals, rate, completed, busy = count_capture(cap, c.proxy_port, c.uac_port)
        drops = d1 - d0
        with open(self.out / "proxy.log", "rb") as f:
            f.seek(log_at)
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if FAULT.search(ln)]
        full = [ln for ln in lines if QUEUE_FULL.search(ln)]
        faults = [ln for ln in lines if not QUEUE_FULL.search(ln)]
        if self.proxy.poll() is not None:
            faults.append(f"kamailio exited with {self.proxy.returncode}")
        return Lab2Run(label=label, nominal_cps=rate_cps, capture=cap, rate_cps=rate, arrivals=arrivals,
                       socket_drops=drops, kernel_pdr=drops / arrivals if arrivals else float("nan"),
                       cpu_s=cpu1 - cpu0, window_s=t1 - t0, calls=calls, completed=completed, busy=busy,
                       loadavg=load1, uac_cpu_s=uac_cpu, tunnel_cpu_s=tun1 - tun0,
                       proxy_faults=len(faults), fault=faults[0].strip()[:300] if faults else "",
                       queue_full=len(full))


def _by_rate(runs: list[Lab2Run]) -> dict[float, tuple[float, float]]:
    """{offered rate: (mean measured rate, mean kernel PDR)} over the runs at each offered rate
    (replications pooled: one run near the knee can drop ten times what its twin drops)."""
    out: dict[float, list[Lab2Run]] = {}
    for r in runs:
        out.setdefault(r.nominal_cps, []).append(r)
    return {k: (sum(x.rate_cps for x in v) / len(v), sum(x.kernel_pdr for x in v) / len(v)) for k, v in out.items()}


def knee_by_bisection(lab: SecondLab, runs: list[Lab2Run], steps: int, target: float = 0.01,
                      prefix: str = "bisect") -> tuple[float, float, float, list[Lab2Run]]:
    """Narrow the bracket of ``target`` kernel drops by bisection on the offered rate, from the
    sweep's runs (replications pooled per rate). Returns (knee, low, high) in calls/s as they
    reached the proxy (the knee interpolated between the final bracketing rates), and the
    bisection's runs."""
    done: list[Lab2Run] = []
    for i in range(steps + 1):
        pts = _by_rate(runs + done)
        lo = max((k for k, (_, p) in pts.items() if p < target), default=None)
        hi = min((k for k, (_, p) in pts.items() if p >= target and (lo is None or k > lo)), default=None)
        if lo is None or hi is None or i == steps:
            break
        done.append(lab.run(f"{prefix}{i}-{0.5 * (lo + hi):.0f}", 0.5 * (lo + hi)))
    (ra, pa), (rb, pb) = pts[lo], pts[hi]
    return ra + (target - pa) / (pb - pa) * (rb - ra), ra, rb, done


#: offered rates (calls/s) of the sweep, climbed until the kernel drops ``past`` of arrivals
SWEEP_CPS = (300, 900, 1500, 2100, 2600, 3000, 3400, 3800, 4300, 4900, 5600, 6400, 7300, 8300)


@dataclass
class Sweep:
    runs: list[Lab2Run]          #: the sweep and its replications (what the report is given)
    bisection: list[Lab2Run]     #: the bisection's runs (not given to the report)
    knee_cps: float | None       #: the bisection's knee (None: the sweep never reached target)
    bracket: tuple[float, float] | None

    def cpu_csv(self, path: Path) -> Path:
        import pandas as pd

        pd.DataFrame({"run": [r.label for r in self.runs], "cpu_s": [r.cpu_s for r in self.runs],
                      "window_s": [r.window_s for r in self.runs]}).to_csv(path, index=False)
        return path


def sweep(lab: SecondLab, rates=SWEEP_CPS, target: float = 0.01, past: float = 0.03,
          steps: int = 4) -> Sweep:
    """Climb ``rates`` until the kernel drops ``past`` of arrivals; run the two rates that
    bracket ``target`` once more (replications); then bisect the bracket ``steps`` times."""
    runs, past_at = [], None
    for rate in rates:
        r = lab.run(f"r{rate:04d}", rate)
        runs.append(r)
        if len(runs) == 1 and r.completed + r.busy < 0.95 * r.calls:
            raise RuntimeError(f"the second lab does not work: at {rate} calls/s only {r.completed} of {r.calls} "
                               f"calls completed and {r.busy} were busy (see {lab.out})")
        if past_at is not None:
            break                      # one rate beyond the first past ``past``: clearly past the knee
        if r.kernel_pdr >= past:
            past_at = rate
    pts = _by_rate(runs)
    lo = max((k for k, (_, p) in pts.items() if p < target), default=None)
    hi = min((k for k, (_, p) in pts.items() if p >= target and (lo is None or k > lo)), default=None)
    if lo is None or hi is None:
        return Sweep(runs, [], None, None)
    # the two offered rates that bracket the knee, once more each: replications
    reps = [lab.run(f"r{x:04.0f}-b", x) for x in (lo, hi)]
    knee, k_lo, k_hi, bis = knee_by_bisection(lab, runs + reps, steps, target)
    return Sweep(runs + reps, bis, knee, (k_lo, k_hi))
