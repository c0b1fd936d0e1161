"""The proxy: render the Kamailio config template and start/identify its processes."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sipperf.lab.netutil import wait_udp_bound
from sipperf.lab.procs import ProcessGroup, Proc, children_of

TEMPLATE = Path(__file__).with_name("kamailio.cfg")


@dataclass
class ProxyConfig:
    """Knobs of the proxy under test."""

    workers: int = 1            #: UDP receiver processes (``children``)
    addr: str = "127.0.0.1"
    port: int = 5060
    uas_addr: str = "127.0.0.1"
    uas_port: int = 5080
    #: shared memory (MB) for transactions: with retransmission timers on, a transaction lives
    #: seconds after it completes; at 1,500 calls/s 128 MB ran out (tm new_t(): out of mem, the
    #: INVITE answered 500) while the CPU was far from busy, so the lab gives the proxy 2 GB
    shm_mb: int = 2048
    pkg_mb: int = 8
    retransmissions: bool = True  #: False: tm's retransmission timers beyond its final-response timer
    guard: str = "none"           #: one of GUARDS: 503 + Retry-After over guard_cps (GUARD_WHAT)
    guard_cps: float = 0.0        #: initial INVITEs per second the guard lets through
    retry_after_s: int = 5
    absorb_early: bool = False    #: absorb request retransmissions before the guard (overload runs)


GUARDS = ("none", "ratelimit", "ratelimit-all", "pike")

#: what each guard limits (``meta.json`` ``guard.what``).  ``ratelimit`` is the INVITE-only limit
#: (the name the recordings and the chapters use); ``ratelimit-all`` limits every request.
GUARD_WHAT = {
    "none": "no guard",
    "ratelimit": "INVITE-only limit: an initial INVITE (no To-tag) over guard_cps per 1-s interval "
                 "is answered 503 + Retry-After; in-dialog requests (ACK, BYE) and every response "
                 "pass (ratelimit pipe 0, TAILDROP)",
    "ratelimit-all": "all-request limit: every request counted, at most 3 x guard_cps per 1-s interval "
                     "(three requests per call: INVITE, ACK, BYE); a request over it is answered 503 + "
                     "Retry-After, an ACK over it (which cannot be answered) is dropped; responses pass "
                     "(ratelimit pipe 1, TAILDROP)",
    "pike": "per source address: an initial INVITE from an address that sent more than guard_cps "
            "initial INVITEs in the last 1-s unit is answered 503 + Retry-After (pike)",
}

#: requests per call the all-request limit counts (INVITE, ACK, BYE): its pipe is this x guard_cps
REQUESTS_PER_CALL = 3

_REJECT = ('\t\tappend_to_reply("Retry-After: {ra}\\r\\n");\n'
           '\t\tsl_send_reply("503", "{why}");\n\t\texit;\n')


# Kamailio's default-config idiom: a retransmitted request of a known transaction is answered
# by tm (last reply re-sent) and goes no further, so the guard counts each INVITE once.
_ABSORB = ('\tif (!is_method("ACK")) {\n\t\tif (t_precheck_trans()) {\n\t\t\tt_check_trans();\n'
           '\t\t\texit;\n\t\t}\n\t\tt_check_trans();\n\t}\n')

# ratelimit (Kamailio 5.6 README.ratelimit): pipes "id:algorithm:limit", TAILDROP counts the
# requests of each timer interval and rl_check fails once the count passes the limit; the pipe
# is named by an integer pseudo-variable
_RL_PARAMS = ('modparam("ratelimit", "timer_interval", 1)\n'
              'modparam("ratelimit", "pipe", "{pipe}:TAILDROP:{limit}")\n')


def _guard_parts(cfg: ProxyConfig) -> dict[str, str]:
    """Modules, parameters and script lines of the overload guard (empty when none).  GUARD sits
    after the in-dialog routing (initial requests only), GUARD_EARLY before it (every request)."""
    if cfg.guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, not {cfg.guard!r}")
    absorb = _ABSORB if cfg.absorb_early or cfg.guard != "none" else ""
    if cfg.guard == "none":
        return {"GUARD_MODULES": "", "GUARD_PARAMS": "", "GUARD_EARLY": "", "GUARD": absorb.rstrip("\n")}
    limit = int(round(cfg.guard_cps))
    if limit < 1:
        raise ValueError("a guard needs guard_cps >= 1 (initial INVITEs per second let through)")
    reject = _REJECT.format(ra=cfg.retry_after_s, why="Rate Limited")
    if cfg.guard == "ratelimit":
        # the INVITE-only limit: initial INVITEs through pipe 0; in-dialog requests never reach it
        return {"GUARD_MODULES": 'loadmodule "ratelimit.so"\n',
                "GUARD_PARAMS": _RL_PARAMS.format(pipe=0, limit=limit), "GUARD_EARLY": "",
                "GUARD": (absorb + '\tif (is_method("INVITE") && !has_totag()) {\n'
                          '\t\t$var(pipe) = 0;\n\t\tif (!rl_check("$var(pipe)")) {\n'
                          + reject.replace("\t\t", "\t\t\t") + "\t\t}\n\t}")}
    if cfg.guard == "ratelimit-all":
        # every request through pipe 1 (retransmissions absorbed first), before in-dialog routing
        return {"GUARD_MODULES": 'loadmodule "ratelimit.so"\n',
                "GUARD_PARAMS": _RL_PARAMS.format(pipe=1, limit=REQUESTS_PER_CALL * limit),
                "GUARD_EARLY": (absorb + '\t$var(pipe) = 1;\n\tif (!rl_check("$var(pipe)")) {\n'
                                '\t\tif (is_method("ACK")) {\n\t\t\tdrop;\n\t\t}\n'
                                + reject + "\t}").rstrip("\n"),
                "GUARD": ""}
    # pike: requests per source address per sampling unit (1 s); over it, the source is blocked
    return {"GUARD_MODULES": 'loadmodule "pike.so"\n',
            "GUARD_PARAMS": ('modparam("pike", "sampling_time_unit", 1)\n'
                             f'modparam("pike", "reqs_density_per_unit", {limit})\n'
                             'modparam("pike", "remove_latency", 2)\n'),
            "GUARD_EARLY": "",
            "GUARD": (absorb + "\tif (is_method(\"INVITE\") && !pike_check_req()) {\n"
                      + _REJECT.format(ra=cfg.retry_after_s, why="Overloaded") + "\t}")}


def guard_script(guard: str, guard_cps: float, retry_after_s: int = 5, absorb_early: bool = True) -> str:
    """The lines of ``kamailio.cfg`` that a guard adds, exactly as :func:`render_config` writes
    them, each block under a comment saying where in the file it sits (for the book: the script
    it prints is the one the lab ran).  Empty blocks are left out."""
    parts = _guard_parts(ProxyConfig(guard=guard, guard_cps=guard_cps, retry_after_s=retry_after_s,
                                     absorb_early=absorb_early))
    where = {"GUARD_MODULES": "# modules (after the lab's own loadmodule lines)",
             "GUARD_PARAMS": "# module parameters",
             "GUARD_EARLY": "# request_route, before the in-dialog routing: every request",
             "GUARD": "# request_route, after the in-dialog routing: initial requests only"}
    blocks = [f"{where[k]}\n{parts[k].rstrip(chr(10))}" for k in where if parts[k].strip()]
    return "\n\n".join(blocks).expandtabs(4)


def render_config(cfg: ProxyConfig, run_dir: Path) -> str:
    text = TEMPLATE.read_text()
    subs = {
        "CHILDREN": str(cfg.workers), "ADDR": cfg.addr, "PORT": str(cfg.port),
        "UAS_ADDR": cfg.uas_addr, "UAS_PORT": str(cfg.uas_port), "SHM_MB": str(cfg.shm_mb),
        "CTL": str(Path(run_dir).resolve() / "kamailio_ctl.sock"),
        # T1 = T2 = 60 s > fr_timer (5 s) and fr_inv_timer (30 s): no proxy retransmission
        "TM_RETR": ("" if cfg.retransmissions else
                    'modparam("tm", "retr_timer1", 60000)\nmodparam("tm", "retr_timer2", 60000)'),
        **_guard_parts(cfg),
    }
    for k, v in subs.items():
        text = text.replace(f"@@{k}@@", v)
    if "@@" in text:
        raise ValueError("kamailio.cfg template has an unfilled @@placeholder@@")
    return text


def binary() -> str | None:
    return shutil.which("kamailio")


def start(group: ProcessGroup, cfg: ProxyConfig, run_dir: Path,
          prefix: list[str] | None = None) -> Proc:
    """Start Kamailio in the foreground (-DD), logging to ``proxy.log``; wait until it listens."""
    return start_text(group, render_config(cfg, run_dir), run_dir, addr=cfg.addr, port=cfg.port,
                      workers=cfg.workers, shm_mb=cfg.shm_mb, pkg_mb=cfg.pkg_mb, prefix=prefix)


def start_text(group: ProcessGroup, text: str, run_dir: Path, *, addr: str, port: int, workers: int,
               shm_mb: int, pkg_mb: int, prefix: list[str] | None = None, name: str = "kamailio") -> Proc:
    """Start Kamailio with the rendered configuration ``text`` as ``<name>.cfg`` (process
    ``name``, log ``proxy.log`` for the one proxy, ``<name>.log`` otherwise) and wait until it
    listens on ``addr:port`` and its forked processes exist."""
    exe = binary()
    if not exe:
        raise RuntimeError("kamailio not found (apt-get install kamailio)")
    cfg_path = Path(run_dir) / f"{name}.cfg"
    cfg_path.write_text(text)
    log = "proxy.log" if name == "kamailio" else f"{name}.log"
    argv = [*(prefix or []), exe, "-f", str(cfg_path), "-DD", "-E",
            "-m", str(shm_mb), "-M", str(pkg_mb),
            "-P", str(Path(run_dir) / f"{name}.pid")]
    proc = group.start(name, argv, log=log)
    # read the socket table of the proxy's own network namespace (loopback or sipperf.lab.netns)
    if not wait_udp_bound(addr, port, timeout_s=15, pid=proc.pid):
        group.stop(proc)
        tail = (Path(run_dir) / log).read_text(errors="replace")[-2000:]
        raise RuntimeError(f"kamailio did not bind udp {addr}:{port}:\n{tail}")
    # wait for the forked processes (receivers, timers, ctl) to appear
    expected = workers + 3
    deadline = time.monotonic() + 5
    while len(children_of(proc.pid)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.refresh_children()
    return proc


def pids(proc: Proc) -> list[int]:
    """The main pid and every forked Kamailio process."""
    return [proc.pid, *proc.refresh_children()]


def process_table(run_dir: Path, timeout_s: float = 5.0, sock_name: str = "kamailio_ctl.sock") -> list[dict]:
    """``kamcmd core.psx`` over the ctl socket: [{"pid", "desc"}]; [] when unavailable."""
    import subprocess

    exe = shutil.which("kamcmd")
    sock = Path(run_dir).resolve() / sock_name
    if not exe or not sock.exists():
        return []
    try:
        out = subprocess.run([exe, "-s", f"unix:{sock}", "core.psx"], capture_output=True,
                             text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows, cur = [], {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            cur = {}
        elif line.startswith("}"):
            if "pid" in cur:
                rows.append(cur)
        elif ":" in line:
            k, v = line.split(":", 1)
            k, v = k.strip().lower(), v.strip()
            if k in ("idx", "pid"):
                cur[k] = int(v)
            elif k in ("desc", "dsc"):
                cur["desc"] = v
    return rows


def statistics(run_dir: Path, timeout_s: float = 10.0, sock_name: str = "kamailio_ctl.sock") -> dict[str, int]:
    """``kamcmd stats.get_statistics all`` (core, sl, tmx counters) as {group:name: value}."""
    import subprocess

    exe = shutil.which("kamcmd")
    sock = Path(run_dir).resolve() / sock_name
    if not exe or not sock.exists():
        return {}
    try:
        out = subprocess.run([exe, "-s", f"unix:{sock}", "stats.get_statistics", "all"],
                             capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    stats = {}
    for line in out.splitlines():
        line = line.strip().strip('"')
        if " = " in line:
            k, v = line.split(" = ", 1)
            try:
                stats[k.strip()] = int(v)
            except ValueError:
                pass
    return stats


def receiver_pids(table: list[dict]) -> list[int]:
    return [r["pid"] for r in table if "receiver" in r.get("desc", "").lower()]


def rpc(run_dir: Path, sock_name: str, *args: str, timeout_s: float = 10.0) -> str:
    """One ``kamcmd`` command over a ctl socket of ``run_dir``; raises RuntimeError on failure."""
    import subprocess

    exe = shutil.which("kamcmd")
    if not exe:
        raise RuntimeError("kamcmd not found")
    sock = Path(run_dir).resolve() / sock_name
    r = subprocess.run([exe, "-s", f"unix:{sock}", *args], capture_output=True, text=True, timeout=timeout_s)
    if r.returncode != 0 or "error" in r.stdout.lower()[:200]:
        raise RuntimeError(f"kamcmd {' '.join(args)}: {(r.stderr or r.stdout).strip()[:300]}")
    return r.stdout
