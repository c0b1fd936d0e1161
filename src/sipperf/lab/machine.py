"""The machine a lab run was taken on, and how busy it was (recorded in ``meta.json``).

Numbers measured on a shared or virtual machine are only comparable when the reader knows the
machine.  :func:`describe` records what can be seen from inside the guest: CPU model and flags,
frequency scaling (cpufreq governor, or that the guest has none), idle states (cpuidle driver,
governor, states), virtualisation (``systemd-detect-virt``, ``/sys/hypervisor``, the
``hypervisor`` CPU flag, the kernel's "Hypervisor detected" line), clock source, kernel,
preemption model, lockdown, the root's capabilities and the cgroup layout.

Load.  ``/proc/loadavg`` is a poor test right after a lab run (the run's own processes raised
it), so the idle test is a measurement: the fraction of CPU time spent by processes that are
*not* the lab's (:class:`LoadSampler` subtracts the CPU time of the lab's own pids from the
machine's busy time, sampled every second through the run), plus the CPU pressure stall
information (``/proc/pressure/cpu``, "some avg10") when the kernel has it.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: a run is "busy" when processes other than the lab's used more than this share of all CPUs
BUSY_FOREIGN_FRACTION = 0.10
#: ... or when the 10-s CPU pressure ("some", %) exceeded this before the run
BUSY_PSI_SOME_AVG10 = 20.0

CAP_NAMES = (
    "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
    "setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
    "ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
    "sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
    "lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
    "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
)


def _read(path: str | Path, default: str | None = None) -> str | None:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return default


def _run(argv: list[str], timeout: float = 10.0) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout or r.stderr).strip()


def cpu_info() -> dict:
    text = _read("/proc/cpuinfo", "") or ""
    first = text.split("\n\n", 1)[0]
    kv = {}
    for line in first.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            kv[k.strip()] = v.strip()
    flags = kv.get("flags", "").split()
    mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)]
    return {
        "model": kv.get("model name") or platform.processor(),
        "vendor": kv.get("vendor_id"), "family": kv.get("cpu family"), "model_number": kv.get("model"),
        "stepping": kv.get("stepping"), "microcode": kv.get("microcode"),
        "cache": kv.get("cache size"), "count": os.cpu_count(), "mhz": mhz,
        "flags_of_note": {f: f in flags for f in ("hypervisor", "constant_tsc", "nonstop_tsc",
                                                  "tsc_known_freq", "vmx", "svm", "ht")},
    }


def frequency() -> dict:
    """cpufreq (governor, limits) per CPU, or that the guest exposes none."""
    out: dict = {}
    base = Path("/sys/devices/system/cpu")
    for d in sorted(base.glob("cpu[0-9]*")):
        f = d / "cpufreq"
        if f.is_dir():
            out[d.name] = {k: _read(f / k) for k in ("scaling_governor", "scaling_driver",
                                                      "scaling_min_freq", "scaling_max_freq",
                                                      "scaling_cur_freq")}
    if not out:
        return {"cpufreq": "not exposed (no /sys/devices/system/cpu/cpu*/cpufreq: no frequency "
                           "driver here, so no governor to see or set; in a guest the host "
                           "decides the frequency)"}
    return {"cpufreq": out}


def idle_states() -> dict:
    base = Path("/sys/devices/system/cpu")
    out: dict = {"driver": _read(base / "cpuidle/current_driver"),
                 "governor": _read(base / "cpuidle/current_governor")
                 or _read(base / "cpuidle/current_governor_ro")}
    states = []
    for s in sorted((base / "cpu0/cpuidle").glob("state*")):
        states.append({k: _read(s / k) for k in ("name", "desc", "latency", "residency", "disable")})
    out["cpu0_states"] = states
    hp = Path("/sys/module/haltpoll/parameters")
    if hp.is_dir():
        out["haltpoll"] = {p.name: _read(p) for p in sorted(hp.iterdir())}
    return out


def virtualisation() -> dict:
    dmesg = _run(["dmesg"]) or ""
    hyp = re.search(r"Hypervisor detected:\s*(.+)", dmesg)
    return {
        "systemd_detect_virt": _run(["systemd-detect-virt"]),
        "systemd_detect_virt_vm": _run(["systemd-detect-virt", "--vm"]),
        "sys_hypervisor_type": _read("/sys/hypervisor/type"),
        "cpuinfo_hypervisor_flag": cpu_info()["flags_of_note"]["hypervisor"],
        "kernel_hypervisor_detected": hyp.group(1).strip() if hyp else None,
        "dmi_product": _read("/sys/class/dmi/id/product_name"),
        "dmi_vendor": _read("/sys/class/dmi/id/sys_vendor"),
        "kernel_cmdline": _read("/proc/cmdline"),
    }


def lockdown() -> dict:
    dmesg = _run(["dmesg"]) or ""
    line = re.search(r"Kernel is locked down[^\n]*", dmesg)
    return {"securityfs": _read("/sys/kernel/security/lockdown"),
            "dmesg": line.group(0) if line else None}


def capabilities() -> dict:
    """Effective capabilities of this process, and which of the known ones it lacks."""
    st = _read("/proc/self/status", "") or ""
    m = re.search(r"^CapEff:\s*([0-9a-f]+)", st, re.M)
    if not m:
        return {}
    eff = int(m.group(1), 16)
    return {"CapEff": m.group(1),
            "missing": [n for i, n in enumerate(CAP_NAMES) if not eff >> i & 1]}


def cgroups() -> dict:
    """Where the cpu controller lives: cgroup v2 (``cpu.weight``) or v1 (``cpu.shares``)."""
    mounts = _read("/proc/mounts", "") or ""
    v2 = [l.split()[1] for l in mounts.splitlines() if l.split()[2:3] == ["cgroup2"]]
    v1cpu = [l.split()[1] for l in mounts.splitlines()
             if l.split()[2:3] == ["cgroup"] and "cpu" in l.split()[3].split(",")]
    out: dict = {"v2_mounts": v2, "v1_cpu_mounts": v1cpu, "self": _read("/proc/self/cgroup")}
    for m in v2:
        out.setdefault("v2_controllers", {})[m] = _read(Path(m) / "cgroup.controllers")
    return out


def describe() -> dict:
    """Everything :mod:`sipperf.lab.machine` can see about this machine (see module doc)."""
    mem = re.search(r"MemTotal:\s*(\d+)", _read("/proc/meminfo", "") or "")
    return {
        "cpu": cpu_info(), "frequency": frequency(), "idle": idle_states(),
        "virtualisation": virtualisation(),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "kernel": {"release": platform.release(), "version": platform.version(),
                   "preempt_dynamic": "PREEMPT_DYNAMIC" in platform.version(),
                   "psi": Path("/proc/pressure/cpu").exists()},
        "lockdown": lockdown(), "capabilities": capabilities(), "cgroups": cgroups(),
        "mem_total_kb": int(mem.group(1)) if mem else None,
    }


def machine_info() -> dict:
    """What ``sipperf info`` prints: the versions of sipperf, Python, NumPy and pandas, the
    kernel, the CPU count, where the lab's tools are (tshark, kamailio, sipp, bpftrace,
    chromium; None when absent), whether tracefs is there and whether we are root."""
    import sys

    import numpy
    import pandas

    from sipperf import __version__

    tools = {t: shutil.which(t) for t in ("tshark", "kamailio", "sipp", "bpftrace", "chromium")}
    return {
        "sipperf": __version__,
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "pandas": pandas.__version__,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "tools": tools,
        "tracefs": os.path.isdir("/sys/kernel/tracing/events"),
        "root": hasattr(os, "geteuid") and os.geteuid() == 0,
    }


# ---- load -------------------------------------------------------------------------------------

def _cpu_jiffies() -> dict[str, int]:
    """Jiffies over all CPUs: ``tasks`` (user + nice + system: what processes' utime/stime
    add up to), ``irq`` (irq + softirq: not charged to any process; on loopback mostly the
    lab's own packets), ``steal`` (time the hypervisor gave to other guests), ``total``."""
    f = (_read("/proc/stat", "") or "").splitlines()[0].split()[1:9]
    v = [int(x) for x in f]
    return {"tasks": v[0] + v[1] + v[2], "irq": v[5] + v[6], "steal": v[7], "total": sum(v)}


def _pid_jiffies(pid: int) -> int:
    """utime + stime of ``pid`` plus its reaped children (cutime + cstime), 0 if gone."""
    s = _read(f"/proc/{pid}/stat")
    if not s:
        return 0
    f = s.rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])


def _descendants(pids: set[int]) -> set[int]:
    out = set(pids)
    frontier = list(pids)
    while frontier:
        p = frontier.pop()
        for t in Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}/task").exists() else []:
            kids = _read(t / "children", "") or ""
            for k in kids.split():
                k = int(k)
                if k not in out:
                    out.add(k)
                    frontier.append(k)
    return out


def psi_cpu() -> dict | None:
    t = _read("/proc/pressure/cpu")
    if not t:
        return None
    out = {}
    for line in t.splitlines():
        kind, *kv = line.split()
        out[kind] = {k: float(v) for k, v in (x.split("=") for x in kv)}
    return out


def loadavg() -> list[float]:
    return [float(x) for x in (_read("/proc/loadavg", "0 0 0") or "0 0 0").split()[:3]]


def top_foreign(exclude: set[int], n: int = 6) -> list[dict]:
    """The processes (not in ``exclude``) using most CPU right now, from ps."""
    out = _run(["ps", "-eo", "pid,pcpu,comm", "--sort=-pcpu"]) or ""
    rows = []
    for line in out.splitlines()[1:]:
        f = line.split(None, 2)
        if len(f) == 3 and f[0].isdigit() and int(f[0]) not in exclude:
            rows.append({"pid": int(f[0]), "pcpu": float(f[1]), "comm": f[2]})
        if len(rows) >= n:
            break
    return rows


@dataclass
class LoadSampler:
    """Samples the machine every ``interval_s`` in a thread: total CPU busy and the busy time of
    the lab's own processes (``lab_pids()`` and their descendants; this Python process always
    included), so the *foreign* share (other people's work) is known through the run."""

    lab_pids: callable = lambda: set()
    interval_s: float = 1.0
    samples: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _lab_jiffies(self) -> tuple[int, set[int]]:
        pids = _descendants({os.getpid(), *self.lab_pids()})
        return sum(_pid_jiffies(p) for p in pids), pids

    def _begin(self) -> None:
        self._j0 = _cpu_jiffies()
        _, pids = self._lab_jiffies()
        self._seen = {p: _pid_jiffies(p) for p in pids}
        self._last = time.monotonic()

    def _sample(self) -> None:
        j1 = _cpu_jiffies()
        _, pids = self._lab_jiffies()
        # per-pid deltas, so that processes starting/exiting between samples are counted once
        now = {p: _pid_jiffies(p) for p in pids}
        lab = sum(max(0, now[p] - self._seen.get(p, 0)) for p in now)
        self._seen.update(now)
        d = {k: j1[k] - self._j0[k] for k in j1}
        if d["total"] <= 0:
            return
        tasks = d["tasks"] / d["total"]
        lab_f = min(lab / d["total"], tasks)
        ps = psi_cpu()
        self.samples.append({"t": round(time.time(), 3),
                             "busy": round((d["tasks"] + d["irq"] + d["steal"]) / d["total"], 4),
                             "lab": round(lab_f, 4), "foreign": round(max(tasks - lab_f, 0.0), 4),
                             "irq": round(d["irq"] / d["total"], 4),
                             "steal": round(d["steal"] / d["total"], 4),
                             "loadavg1": loadavg()[0],
                             "psi_some_avg10": ps["some"]["avg10"] if ps else None})
        self._j0 = j1
        self._last = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> "LoadSampler":
        self._begin()
        self._thread = threading.Thread(target=self._loop, name="sipperf-load-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        """Stop sampling; the time since the last sample becomes one more sample (if >= 0.1 s)."""
        if not self._stop.is_set():
            self._stop.set()
            if self._thread:
                self._thread.join(timeout=5)
            if time.monotonic() - self._last >= 0.1:
                self._sample()
        return self.summary()

    def summary(self) -> dict:
        return summarize_samples(self.samples)


def summarize_samples(samples: list[dict]) -> dict:
    """Mean/max of busy, lab and foreign CPU shares over the samples and the busy verdict."""
    if not samples:
        return {"n": 0, "busy": None}
    out: dict = {"n": len(samples)}
    for k in ("busy", "lab", "foreign", "irq", "steal", "loadavg1"):
        v = [s[k] for s in samples if s.get(k) is not None]
        out[f"{k}_mean"] = round(sum(v) / len(v), 4) if v else None
        out[f"{k}_max"] = round(max(v), 4) if v else None
    out["busy"] = bool((out["foreign_mean"] or 0) > BUSY_FOREIGN_FRACTION
                       or (out["steal_mean"] or 0) > BUSY_FOREIGN_FRACTION)
    out["threshold_foreign"] = BUSY_FOREIGN_FRACTION
    out["what"] = ("shares of all CPUs: busy = everything; lab = the lab's processes (incl. busy "
                   "loops it started); foreign = other processes; irq = irq + softirq (charged to "
                   "no process; on loopback mostly the lab's packets); steal = taken by the host")
    return out


def idle_check(seconds: float = 3.0, exclude: set[int] | None = None) -> dict:
    """Measure, before a run, whether the machine is idle enough: the share of all CPUs busy
    with other processes over ``seconds`` and the CPU pressure.  Returns a dict with ``busy``."""
    s = LoadSampler(lab_pids=lambda: set(exclude or ()), interval_s=min(1.0, seconds))
    s.start()
    time.sleep(seconds)
    summ = s.stop()
    ps = psi_cpu()
    psi10 = ps["some"]["avg10"] if ps else None
    busy = bool(summ.get("busy")) or (psi10 is not None and psi10 > BUSY_PSI_SOME_AVG10
                                       and (summ.get("foreign_mean") or 0) > BUSY_FOREIGN_FRACTION / 2)
    why = []
    if (summ.get("foreign_mean") or 0) > BUSY_FOREIGN_FRACTION:
        why.append(f"other processes used {100 * summ['foreign_mean']:.0f} % of the CPUs "
                   f"(limit {100 * BUSY_FOREIGN_FRACTION:.0f} %)")
    if (summ.get("steal_mean") or 0) > BUSY_FOREIGN_FRACTION:
        why.append(f"the hypervisor took {100 * summ['steal_mean']:.0f} % of the CPUs (steal)")
    if psi10 is not None and psi10 > BUSY_PSI_SOME_AVG10:
        why.append(f"CPU pressure some avg10 {psi10:.0f} % (limit {BUSY_PSI_SOME_AVG10:.0f} %)")
    return {"busy": busy, "why": "; ".join(why), "seconds": seconds, "samples": summ,
            "loadavg": loadavg(), "psi_cpu": ps, "top": top_foreign(set(exclude or ()) | {os.getpid()}),
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
