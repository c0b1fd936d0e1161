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
    guard: str = "none"           #: "none", "ratelimit" or "pike": 503 + Retry-After over guard_cps
    guard_cps: float = 0.0        #: initial INVITEs per second the guard lets through
    retry_after_s: int = 5
    absorb_early: bool = False    #: absorb request retransmissions before the guard (overload runs)


GUARDS = ("none", "ratelimit", "pike")

_REJECT = ('\t\tappend_to_reply("Retry-After: {ra}\\r\\n");\n'
           '\t\tsl_send_reply("503", "{why}");\n\t\texit;\n')


# Kamailio's default-config idiom: a retransmitted request of a known transaction is answered
# by tm (last reply re-sent) and goes no further, so the guard counts each INVITE once.
_ABSORB = ('\tif (!is_method("ACK")) {\n\t\tif (t_precheck_trans()) {\n\t\t\tt_check_trans();\n'
           '\t\t\texit;\n\t\t}\n\t\tt_check_trans();\n\t}\n')


def _guard_parts(cfg: ProxyConfig) -> dict[str, str]:
    """Modules, parameters and script lines of the overload guard (empty when none)."""
    if cfg.guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, not {cfg.guard!r}")
    absorb = _ABSORB if cfg.absorb_early or cfg.guard != "none" else ""
    if cfg.guard == "none":
        return {"GUARD_MODULES": "", "GUARD_PARAMS": "", "GUARD": absorb.rstrip("\n")}
    limit = int(round(cfg.guard_cps))
    if limit < 1:
        raise ValueError("a guard needs guard_cps >= 1 (initial INVITEs per second let through)")
    if cfg.guard == "ratelimit":
        # TAILDROP on a queue of INVITEs: at most `limit` per 1-s timer interval
        return {"GUARD_MODULES": 'loadmodule "ratelimit.so"\n',
                "GUARD_PARAMS": ('modparam("ratelimit", "timer_interval", 1)\n'
                                 'modparam("ratelimit", "queue", "0:INVITE")\n'
                                 f'modparam("ratelimit", "pipe", "0:TAILDROP:{limit}")\n'),
                "GUARD": (absorb + "\tif (is_method(\"INVITE\") && !rl_check()) {\n"
                          + _REJECT.format(ra=cfg.retry_after_s, why="Rate Limited") + "\t}")}
    # pike: requests per source address per sampling unit (1 s); over it, the source is blocked
    return {"GUARD_MODULES": 'loadmodule "pike.so"\n',
            "GUARD_PARAMS": ('modparam("pike", "sampling_time_unit", 1)\n'
                             f'modparam("pike", "reqs_density_per_unit", {limit})\n'
                             'modparam("pike", "remove_latency", 2)\n'),
            "GUARD": (absorb + "\tif (is_method(\"INVITE\") && !pike_check_req()) {\n"
                      + _REJECT.format(ra=cfg.retry_after_s, why="Overloaded") + "\t}")}


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
    exe = binary()
    if not exe:
        raise RuntimeError("kamailio not found (apt-get install kamailio)")
    cfg_path = Path(run_dir) / "kamailio.cfg"
    cfg_path.write_text(render_config(cfg, run_dir))
    argv = [*(prefix or []), exe, "-f", str(cfg_path), "-DD", "-E",
            "-m", str(cfg.shm_mb), "-M", str(cfg.pkg_mb),
            "-P", str(Path(run_dir) / "kamailio.pid")]
    proc = group.start("kamailio", argv, log="proxy.log")
    if not wait_udp_bound(cfg.addr, cfg.port, timeout_s=15):
        group.stop(proc)
        tail = (Path(run_dir) / "proxy.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"kamailio did not bind udp {cfg.addr}:{cfg.port}:\n{tail}")
    # wait for the forked processes (receivers, timers, ctl) to appear
    expected = cfg.workers + 3
    deadline = time.monotonic() + 5
    while len(children_of(proc.pid)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.refresh_children()
    return proc


def pids(proc: Proc) -> list[int]:
    """The main pid and every forked Kamailio process."""
    return [proc.pid, *proc.refresh_children()]


def process_table(run_dir: Path, timeout_s: float = 5.0) -> list[dict]:
    """``kamcmd core.psx`` over the ctl socket: [{"pid", "desc"}]; [] when unavailable."""
    import subprocess

    exe = shutil.which("kamcmd")
    sock = Path(run_dir).resolve() / "kamailio_ctl.sock"
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


def statistics(run_dir: Path, timeout_s: float = 10.0) -> dict[str, int]:
    """``kamcmd stats.get_statistics all`` (core, sl, tmx counters) as {group:name: value}."""
    import subprocess

    exe = shutil.which("kamcmd")
    sock = Path(run_dir).resolve() / "kamailio_ctl.sock"
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
