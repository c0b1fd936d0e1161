"""Scheduler knobs: find what this kernel lets us change, change it for a run, put it back.

Three kinds of knob, each restored after the run (``finally``), with a restore log on disk so
that a run killed by SIGKILL or a power cut is repaired by the next start (or by
``sipperf lab restore``):

* **files** -- ``/proc/sys/kernel/sched_*`` and ``/sys/kernel/debug/sched/*``: the old value is
  read and logged, the new one written and read back; on exit the old value is written back and
  read back again.  A file whose old value cannot be read is never written (it could not be
  restored): only ``open(O_WRONLY)`` is tried, to record whether the kernel would accept a write.
* **cgroups** -- a child cgroup of the cpu controller (v2 ``cpu.weight`` when the cpu controller
  is on the unified hierarchy, else v1 ``cpu.shares`` = weight x 1024 / 100); the proxy's pids are
  moved in; on exit any pid still inside is moved back to the parent and the cgroup removed.
* **per-process** attributes of the processes the lab starts (scheduling policy and priority,
  nice, the EEVDF slice request ``sched_attr.sched_runtime``, CPU affinity), set with
  ``sched_setattr(2)`` and read back with ``sched_getattr(2)``; they end with the processes.

:func:`probe` tests every knob (read, write a different value, read back, restore, read back)
and returns the table that ``datasets/lab/long/knobs.json`` stores and ``docs/lab.md`` explains.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROC_SCHED = Path("/proc/sys/kernel")
DEBUGFS_SCHED = Path("/sys/kernel/debug/sched")
RESTORE_LOG = Path(os.environ.get("SIPPERF_LAB_RESTORE_LOG", "/var/tmp/sipperf-lab-restore.jsonl"))
CGROUP_PREFIX = "sipperf-lab-"

POLICIES = {"other": 0, "fifo": 1, "rr": 2, "batch": 3, "idle": 5, "deadline": 6}
POLICY_NAMES = {v: k for k, v in POLICIES.items()}

#: a different, harmless value for each known /proc/sys/kernel/sched_* file (others: same value)
TEST_VALUES = {
    "sched_autogroup_enabled": lambda v: "0" if v.strip() == "1" else "1",
    "sched_cfs_bandwidth_slice_us": lambda v: str(max(1000, int(v) - 1000)),
    "sched_deadline_period_max_us": lambda v: str(int(v) - 1),
    "sched_deadline_period_min_us": lambda v: str(int(v) + 1),
    "sched_rr_timeslice_ms": lambda v: "50" if int(v) != 50 else "100",
    "sched_rt_period_us": lambda v: str(int(v) - 1),
    # raising is accepted; lowering below the default was refused here (EINVAL, see EXTRA_TESTS)
    "sched_rt_runtime_us": lambda v: str(min(int(v) + 10000, 1000000)) if int(v) >= 0 else "950000",
}

#: further values tried on a knob (each restored at once): what a tuning may want to write
EXTRA_TESTS = {
    "sched_rt_runtime_us": ("-1", "940000"),     # RT throttling off; a lower RT share
}

#: the CFS tunables seed 000 (ch. 6 and 7) set, and where they went (Linux history, see docs/lab.md)
THESIS_KNOBS = {
    "sched_latency_ns": ("latency_ns", "moved to debugfs in 5.13; removed in 6.6 when EEVDF "
                         "replaced CFS's pick (no period: each task has a slice and a virtual deadline)"),
    "sched_min_granularity_ns": ("base_slice_ns", "moved to debugfs in 5.13; renamed base_slice_ns in "
                                 "6.6 (EEVDF's default slice); per task: sched_attr.sched_runtime (6.12)"),
    "sched_wakeup_granularity_ns": ("wakeup_granularity_ns", "moved to debugfs in 5.13; removed in 6.6 "
                                    "(EEVDF preempts on wakeup by virtual deadline, no granularity)"),
    "sched_migration_cost_ns": ("migration_cost_ns", "moved to debugfs in 5.13 (same meaning)"),
    "sched_tunable_scaling": ("tunable_scaling", "moved to debugfs in 5.13 (scales base_slice_ns)"),
    "sched_nr_migrate": ("nr_migrate", "moved to debugfs in 5.13"),
    "sched_child_runs_first": (None, "stayed a sysctl after 5.13, absent from this kernel (gone "
                               "with CFS's fork placement; EEVDF places new tasks by lag)"),
}

# ---- sched_setattr / sched_getattr -------------------------------------------------------------

_SYS_SETATTR, _SYS_GETATTR = 314, 315          # x86_64
_ATTR = struct.Struct("IIQiIQQQII")            # struct sched_attr, SCHED_ATTR_SIZE_VER1 (56 bytes)
_libc = ctypes.CDLL(None, use_errno=True)


def sched_getattr(pid: int) -> dict:
    buf = ctypes.create_string_buffer(_ATTR.size)
    if _libc.syscall(_SYS_GETATTR, pid, buf, _ATTR.size, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    size, pol, flags, nice, prio, runtime, deadline, period, umin, umax = _ATTR.unpack(buf.raw)
    return {"policy": POLICY_NAMES.get(pol, str(pol)), "flags": flags, "nice": nice,
            "priority": prio, "runtime_ns": runtime, "deadline_ns": deadline, "period_ns": period}


def sched_setattr(pid: int, policy: str, *, nice: int = 0, priority: int = 0, runtime_ns: int = 0,
                  deadline_ns: int = 0, period_ns: int = 0) -> None:
    """``sched_setattr(2)`` on one thread.  For SCHED_OTHER/BATCH ``runtime_ns`` is the EEVDF
    slice request (Linux >= 6.12; clamped by the kernel to 0.1-100 ms; 0 = the default slice)."""
    buf = _ATTR.pack(_ATTR.size, POLICIES[policy], 0, nice, priority, runtime_ns, deadline_ns,
                     period_ns, 0, 0)
    if _libc.syscall(_SYS_SETATTR, pid, ctypes.c_char_p(buf), 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def threads_of(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def slice_of(pid: int) -> int | None:
    """``se.slice`` (ns) from /proc/<pid>/sched (Linux >= 6.13), None when absent."""
    try:
        for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
            if line.startswith("se.slice"):
                return int(line.split(":")[1])
    except (OSError, ValueError):
        pass
    return None


# ---- the restore log ---------------------------------------------------------------------------

class RestoreLog:
    """Append-only JSON lines: every change before it is made, every restore after it is done."""

    def __init__(self, path: Path = RESTORE_LOG):
        self.path = Path(path)

    def _append(self, rec: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def record(self, rec: dict) -> str:
        rid = f"{os.getpid()}-{time.monotonic_ns()}"
        self._append({"id": rid, "pid": os.getpid(), "start": _start_time(os.getpid()),
                      "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **rec})
        return rid

    def done(self, rid: str, result: dict) -> None:
        self._append({"done": rid, **result})

    def pending(self) -> list[dict]:
        if not self.path.exists():
            return []
        recs, done = [], set()
        for line in self.path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "done" in r:
                done.add(r["done"])
            else:
                recs.append(r)
        return [r for r in recs if r["id"] not in done]


def write_file(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def read_file(path: Path) -> str:
    return Path(path).read_text().strip()


def _restore_one(rec: dict) -> dict:
    kind = rec["kind"]
    if kind == "file":
        p = Path(rec["path"])
        try:
            write_file(p, rec["old"])
            back = read_file(p)
            return {"restored": back == str(rec["old"]).strip(), "value": back}
        except OSError as e:
            return {"restored": False, "error": e.strerror}
    if kind == "cgroup":
        return remove_cgroup(Path(rec["path"]), Path(rec["parent"]))
    if kind == "netns":     # a network namespace made by sipperf.lab.netns: delete it
        from sipperf.lab.netns import delete_namespace
        return delete_namespace(rec["path"])
    return {"restored": False, "error": f"unknown kind {kind!r}"}


def _start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of ``pid``: with the pid, identifies a process."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_alive(rec: dict) -> bool:
    pid = rec.get("pid")
    return bool(pid) and _start_time(pid) is not None and _start_time(pid) == rec.get("start")


def restore_pending(log: RestoreLog | None = None) -> list[dict]:
    """Restore every change the log holds without a matching restore, made by a process that no
    longer runs (an interrupted run); changes of a live run are left to that run."""
    log = log or RestoreLog()
    out = []
    for rec in reversed([r for r in log.pending() if not _owner_alive(r)]):
        res = _restore_one(rec)
        log.done(rec["id"], res)
        out.append({**rec, **res})
    return out


# ---- cgroups -----------------------------------------------------------------------------------

def cpu_cgroup_root() -> tuple[Path | None, str]:
    """(directory under which a child cgroup with a cpu weight can be made, "v2" or "v1")."""
    mounts = Path("/proc/mounts").read_text().splitlines()
    for line in mounts:
        f = line.split()
        if f[2] == "cgroup2":
            root = Path(f[1])
            ctl = (root / "cgroup.controllers")
            if ctl.exists() and "cpu" in ctl.read_text().split():
                sub = (root / "cgroup.subtree_control")
                if sub.exists() and "cpu" in sub.read_text().split():
                    return root, "v2"
    for line in mounts:
        f = line.split()
        if f[2] == "cgroup" and "cpu" in f[3].split(","):
            return Path(f[1]), "v1"
    return None, "none"


def remove_cgroup(path: Path, parent: Path) -> dict:
    """Move every pid still in ``path`` to ``parent`` and remove ``path``."""
    moved = []
    try:
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                write_file(parent / "cgroup.procs", pid)
                moved.append(int(pid))
            except OSError:
                pass
    except OSError:
        pass
    for _ in range(50):
        try:
            path.rmdir()
            return {"restored": True, "moved_back": moved}
        except FileNotFoundError:
            return {"restored": True, "moved_back": moved}
        except OSError:
            time.sleep(0.05)
    return {"restored": False, "moved_back": moved, "error": f"could not remove {path}"}


# ---- a tuning: what one run changes ------------------------------------------------------------

@dataclass
class Tuning:
    """The scheduler settings of one run (stored in meta.json ``tuning``)."""

    name: str = "default"
    policy: str = "other"                 #: other, batch, idle, fifo, rr (the proxy's processes)
    priority: int = 0                     #: fifo/rr priority
    nice: int = 0
    slice_us: int | None = None           #: EEVDF slice request (sched_attr.sched_runtime), other/batch
    cpus: list[int] | None = None         #: the proxy's CPU affinity
    cgroup_weight: int | None = None      #: cgroup cpu weight of the proxy (v2 1..10000, 100 = default)
    files: dict[str, str] = field(default_factory=dict)   #: knob file (absolute path) -> value
    note: str = ""

    @property
    def is_default(self) -> bool:
        return (self.policy == "other" and self.nice == 0 and self.slice_us is None and
                self.cpus is None and self.cgroup_weight is None and not self.files)

    def validate(self) -> None:
        if self.policy not in POLICIES or self.policy == "deadline":
            raise ValueError(f"policy must be one of other, batch, idle, fifo, rr; not {self.policy!r}")
        if self.policy in ("fifo", "rr") and not (1 <= self.priority <= 99):
            raise ValueError("fifo/rr need a priority in 1..99")
        if self.slice_us is not None and self.policy not in ("other", "batch"):
            raise ValueError("a slice request applies to SCHED_OTHER/SCHED_BATCH only")
        if not (-20 <= self.nice <= 19):
            raise ValueError("nice must be in -20..19")
        for p in self.files:
            if not (p.startswith(str(PROC_SCHED) + "/sched_") or p.startswith(str(DEBUGFS_SCHED) + "/")):
                raise ValueError(f"only /proc/sys/kernel/sched_* and {DEBUGFS_SCHED}/* knobs, not {p}")


class TuningSession:
    """Apply a :class:`Tuning` (files before the proxy starts, process attributes after) and put
    everything back on exit, whatever happened.  ``record`` is what meta.json stores."""

    def __init__(self, tuning: Tuning, log: RestoreLog | None = None):
        tuning.validate()
        self.t = tuning
        self.log = log or RestoreLog()
        self.record: dict = {"tuning": asdict(tuning), "files": [], "processes": [], "cgroup": None}
        self._undo: list[tuple[str, dict]] = []

    def __enter__(self) -> "TuningSession":
        try:
            for path, value in self.t.files.items():
                self._set_file(Path(path), str(value))
        except BaseException:
            self.restore()
            raise
        return self

    def _set_file(self, p: Path, value: str) -> None:
        old = read_file(p)                       # never write what cannot be restored
        rid = self.log.record({"kind": "file", "path": str(p), "old": old, "new": value})
        self._undo.append((rid, {"kind": "file", "path": str(p), "old": old}))
        write_file(p, value)
        back = read_file(p)
        self.record["files"].append({"path": str(p), "old": old, "new": value, "read_back": back,
                                     "applied": back == value})
        if back != value:
            raise RuntimeError(f"{p}: wrote {value!r}, read back {back!r}")

    def apply_processes(self, pids: list[int]) -> None:
        """Policy, nice, slice and affinity on every thread of ``pids``; cgroup weight."""
        t = self.t
        if t.cgroup_weight is not None:
            self._cgroup(pids, t.cgroup_weight)
        for pid in pids:
            for tid in threads_of(pid):
                rec: dict = {"pid": pid, "tid": tid}
                try:
                    if not (t.policy == "other" and t.nice == 0 and t.slice_us is None):
                        sched_setattr(tid, t.policy, nice=t.nice if t.policy in ("other", "batch", "idle") else 0,
                                      priority=t.priority if t.policy in ("fifo", "rr") else 0,
                                      runtime_ns=int(t.slice_us * 1000) if t.slice_us else 0)
                    if t.cpus is not None:
                        os.sched_setaffinity(tid, t.cpus)
                    rec["attr"] = sched_getattr(tid)
                    rec["slice_ns"] = slice_of(tid)
                    rec["affinity"] = sorted(os.sched_getaffinity(tid))
                except OSError as e:
                    rec["error"] = e.strerror
                self.record["processes"].append(rec)
        errs = [r for r in self.record["processes"] if "error" in r]
        if errs:
            raise RuntimeError(f"tuning {t.name}: could not set {len(errs)} threads: {errs[0]['error']}")
        bad = [r for r in self.record["processes"] if r["attr"]["policy"] != t.policy]
        if bad:
            raise RuntimeError(f"tuning {t.name}: policy did not stick on {len(bad)} threads")

    def _cgroup(self, pids: list[int], weight: int) -> None:
        root, ver = cpu_cgroup_root()
        if root is None:
            raise RuntimeError("no cgroup cpu controller mounted")
        path = root / f"{CGROUP_PREFIX}{os.getpid()}-{time.monotonic_ns() % 10**9}"
        rid = self.log.record({"kind": "cgroup", "path": str(path), "parent": str(root)})
        self._undo.append((rid, {"kind": "cgroup", "path": str(path), "parent": str(root)}))
        path.mkdir()
        if ver == "v2":
            knob, value = "cpu.weight", str(weight)
        else:
            knob, value = "cpu.shares", str(max(2, round(weight * 1024 / 100)))
        write_file(path / knob, value)
        moved = []
        for pid in pids:
            write_file(path / "cgroup.procs", str(pid))
            moved.append(pid)
        inside = [int(x) for x in (path / "cgroup.procs").read_text().split()]
        self.record["cgroup"] = {"version": ver, "path": str(path), "knob": knob, "value": value,
                                 "read_back": read_file(path / knob), "pids": moved,
                                 "pids_inside": inside, "weight_v2_equivalent": weight}

    def restore(self) -> list[dict]:
        out = []
        while self._undo:
            rid, rec = self._undo.pop()
            res = _restore_one(rec)
            self.log.done(rid, res)
            out.append({**rec, **res})
        self.record.setdefault("restored", []).extend(out)
        return out

    def __exit__(self, *exc) -> None:
        self.restore()


# ---- the probe ---------------------------------------------------------------------------------

def _errno_name(e: OSError) -> str:
    return f"{errno.errorcode.get(e.errno, e.errno)} ({e.strerror})"


def probe_file(p: Path, log: RestoreLog, new_value=None) -> dict:
    """Read; write a different value (or the same one); read back; restore; read back."""
    row: dict = {"knob": p.name, "path": str(p), "exists": p.exists()}
    if not row["exists"]:
        return row
    try:
        old = read_file(p)
        row.update(readable=True, value=old[:200])
    except OSError as e:
        row.update(readable=False, read_error=_errno_name(e))
        try:                                       # never write a value we cannot restore
            fd = os.open(p, os.O_WRONLY)
            os.close(fd)
            row.update(open_for_write=True, writable=None,
                       note="opens for writing, not written: its value cannot be read back")
        except OSError as e2:
            row.update(open_for_write=False, writable=False, write_error=_errno_name(e2))
        return row
    if not os.access(p, os.W_OK) or not (p.stat().st_mode & 0o222):
        row.update(writable=False, write_error="file mode has no write permission")
        return row
    test = new_value(old) if callable(new_value) else old
    rid = log.record({"kind": "file", "path": str(p), "old": old, "new": test})
    try:
        write_file(p, test)
        back = read_file(p)
        row.update(writable=True, test_value=test, read_back=back, took_effect=back == test)
    except OSError as e:
        row.update(writable=False, test_value=test, write_error=_errno_name(e))
        back = read_file(p)
        log.done(rid, {"restored": back == old, "value": back, "note": "write refused"})
        row.update(restored=back == old, value_after=back[:200])
        return row
    res = _restore_one({"kind": "file", "path": str(p), "old": old})
    log.done(rid, res)
    row.update(restored=res.get("restored"), value_after=res.get("value"))
    return row


def _probe_task_attrs() -> list[dict]:
    """Set each per-process attribute on a throw-away child (sleep), read it back."""
    rows = []
    child = subprocess.Popen(["sleep", "30"])
    try:
        pid = child.pid
        base = sched_getattr(pid)
        cases = [
            ("nice -10", dict(policy="other", nice=-10)),
            ("SCHED_BATCH", dict(policy="batch")),
            ("SCHED_IDLE", dict(policy="idle")),
            ("SCHED_FIFO 50", dict(policy="fifo", priority=50)),
            ("SCHED_RR 50", dict(policy="rr", priority=50)),
            ("SCHED_DEADLINE 1/10 ms", dict(policy="deadline", runtime_ns=1_000_000,
                                            deadline_ns=10_000_000, period_ns=10_000_000)),
            ("EEVDF slice 0.1 ms (sched_runtime)", dict(policy="other", runtime_ns=100_000)),
            ("EEVDF slice 10 ms (sched_runtime)", dict(policy="other", runtime_ns=10_000_000)),
            ("EEVDF slice 0.05 ms (below the clamp)", dict(policy="other", runtime_ns=50_000)),
        ]
        for name, kw in cases:
            row: dict = {"knob": name, "kind": "per-process (sched_setattr)", "exists": True}
            try:
                sched_setattr(pid, **kw)
                got = sched_getattr(pid)
                row.update(writable=True, read_back=got, slice_ns=slice_of(pid))
            except OSError as e:
                row.update(writable=False, write_error=_errno_name(e))
            try:
                sched_setattr(pid, "other", nice=0)
                row["restored"] = sched_getattr(pid)["policy"] == "other"
            except OSError as e:
                row["restored"] = False
                row["restore_error"] = _errno_name(e)
            rows.append(row)
        try:
            os.sched_setaffinity(pid, {0})
            aff = sorted(os.sched_getaffinity(pid))
            os.sched_setaffinity(pid, set(range(os.cpu_count() or 1)))
            rows.append({"knob": "CPU affinity (taskset)", "kind": "per-process", "exists": True,
                         "writable": aff == [0], "read_back": aff, "restored": True})
        except OSError as e:
            rows.append({"knob": "CPU affinity (taskset)", "kind": "per-process", "exists": True,
                         "writable": False, "write_error": _errno_name(e)})
        rows.insert(0, {"knob": "default attributes of a new process", "kind": "per-process",
                        "exists": True, "value": base, "slice_ns": slice_of(pid)})
    finally:
        child.kill()
        child.wait()
    return rows


def _probe_cgroup(log: RestoreLog) -> list[dict]:
    rows = []
    root, ver = cpu_cgroup_root()
    v2_cpu = False
    for line in Path("/proc/mounts").read_text().splitlines():
        f = line.split()
        if f[2] == "cgroup2":
            ctl = Path(f[1]) / "cgroup.controllers"
            v2_cpu = ctl.exists() and "cpu" in ctl.read_text().split()
            rows.append({"knob": "cgroup v2 cpu.weight", "kind": "cgroup", "path": f[1],
                         "exists": v2_cpu, "controllers": ctl.read_text().strip() if ctl.exists() else None,
                         "note": None if v2_cpu else "the cpu controller is not on the v2 hierarchy "
                                                      "(it is bound to a v1 hierarchy here)"})
    if root is None:
        rows.append({"knob": "cgroup cpu weight", "kind": "cgroup", "exists": False})
        return rows
    child = subprocess.Popen(["sleep", "30"])
    try:
        with TuningSession(Tuning(name="probe", cgroup_weight=1000), log) as ts:
            ts._cgroup([child.pid], 1000)
            rec = ts.record["cgroup"]
            cg_line = Path(f"/proc/{child.pid}/cgroup").read_text()
        row = {"knob": f"cgroup {ver} {rec['knob']}", "kind": "cgroup", "path": rec["path"],
               "exists": True, "writable": rec["read_back"] == rec["value"], "test_value": rec["value"],
               "read_back": rec["read_back"], "pid_moved": child.pid in rec["pids_inside"],
               "proc_cgroup": [l for l in cg_line.splitlines() if CGROUP_PREFIX in l],
               "restored": all(r.get("restored") for r in ts.record["restored"]),
               "removed": not Path(rec["path"]).exists()}
    except (OSError, RuntimeError) as e:
        row = {"knob": f"cgroup {ver} cpu weight", "kind": "cgroup", "exists": True, "writable": False,
               "write_error": str(e)}
    finally:
        child.kill()
        child.wait()
    rows.append(row)
    return rows


_KAM_CFG = """#!KAMAILIO
debug=1
log_stderror=yes
{line}
listen=udp:127.0.0.1:5199
disable_tcp=yes
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "sl.so"
request_route {{ sl_send_reply("200","ok"); }}
"""


def _probe_kamailio() -> list[dict]:
    """Which worker-layout parameters Kamailio's config parser accepts (``kamailio -c``)."""
    exe = shutil.which("kamailio")
    if not exe:
        return [{"knob": "kamailio", "exists": False}]
    rows = []
    cases = [("children", "children=4", "UDP receiver processes sharing one socket"),
             ("socket_workers", "socket_workers=2", "workers of the next listen socket only"),
             ("async_workers", "async_workers=2", "a pool for async_task_route() (async module)"),
             ("reuse_port", "reuse_port=yes", "SO_REUSEPORT on UDP listen sockets"),
             ("tcp_reuse_port", "tcp_reuse_port=yes", "SO_REUSEPORT on TCP sockets"),
             ("udp_receiver_mode", "udp_receiver_mode=1", "one reader handing datagrams to workers")]
    with tempfile.TemporaryDirectory() as d:
        for name, line, what in cases:
            cfg = Path(d) / "k.cfg"
            cfg.write_text(_KAM_CFG.format(line=line))
            r = subprocess.run([exe, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=20)
            err = [l.strip() for l in (r.stdout + r.stderr).splitlines() if "error" in l.lower()]
            rows.append({"knob": f"kamailio {name}", "kind": "kamailio core parameter", "what": what,
                         "exists": r.returncode == 0, "config_line": line,
                         "parser": "accepted" if r.returncode == 0 else (err[0][-160:] if err else "rejected")})
        # two listen lines on one udp address:port: one socket or two?
        cfg = Path(d) / "k2.cfg"
        cfg.write_text(_KAM_CFG.format(line="socket_workers=1\nlisten=udp:127.0.0.1:5199\nsocket_workers=1"))
        r = subprocess.run([exe, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=20)
        n = (r.stdout + r.stderr).count("udp: 127.0.0.1:5199")
        rows.append({"knob": "kamailio: two listen= lines on the same UDP address:port",
                     "kind": "kamailio worker layout", "exists": r.returncode == 0,
                     "sockets_listed": n,
                     "note": "merged into one socket (no SO_REUSEPORT for UDP in this version)" if n == 1
                     else "listed twice"})
    return rows


def probe(log: RestoreLog | None = None, kamailio: bool = True) -> dict:
    """Test every scheduler knob this machine exposes (see module doc); nothing stays changed."""
    log = log or RestoreLog()
    restore_pending(log)
    out: dict = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "root": os.geteuid() == 0,
                 "kernel": os.uname().release, "proc_sys": [], "debugfs": [], "thesis": [],
                 "per_process": [], "cgroup": [], "kamailio": []}
    for p in sorted(PROC_SCHED.glob("sched_*")):
        out["proc_sys"].append(probe_file(p, log, TEST_VALUES.get(p.name)))
        for v in EXTRA_TESTS.get(p.name, ()):
            row = probe_file(p, log, lambda old, v=v: v)
            row["knob"] = f"{p.name} = {v}"
            out.setdefault("proc_sys_extra", []).append(row)
    mounted = DEBUGFS_SCHED.is_dir()
    if not mounted and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
        mounted = DEBUGFS_SCHED.is_dir()
        out["debugfs_mounted_by_probe"] = mounted
    out["debugfs_present"] = mounted
    if mounted:
        for p in sorted(DEBUGFS_SCHED.rglob("*")):
            if p.is_file():
                row = probe_file(p, log)
                row["knob"] = str(p.relative_to(DEBUGFS_SCHED))
                out["debugfs"].append(row)
    for old, (new, why) in THESIS_KNOBS.items():
        dbg = DEBUGFS_SCHED / new if new else None
        dbg_row = next((r for r in out["debugfs"] if dbg and r["path"] == str(dbg)), None)
        out["thesis"].append({
            "knob": old, "in_proc_sys": (PROC_SCHED / old).exists(),
            "debugfs_name": new, "in_debugfs": bool(dbg and dbg.exists()),
            "debugfs_readable": dbg_row.get("readable") if dbg_row else None,
            "debugfs_writable": dbg_row.get("writable") if dbg_row else None,
            "debugfs_error": (dbg_row.get("write_error") or dbg_row.get("read_error")) if dbg_row else None,
            "history": why})
    if os.geteuid() == 0:
        out["per_process"] = _probe_task_attrs()
        out["cgroup"] = _probe_cgroup(log)
    if kamailio:
        out["kamailio"] = _probe_kamailio()
    out["tools"] = {t: bool(shutil.which(t)) for t in ("chrt", "taskset", "renice")}
    out["pending_after"] = len(log.pending())
    return out


def writable(table: dict, path: str, value: str | None = None) -> bool:
    """Whether :func:`probe` found ``path`` writable and restorable (with ``value``, when the
    probe tried that very value)."""
    rows = [r for g in ("proc_sys", "proc_sys_extra", "debugfs") for r in table.get(g, [])
            if r.get("path") == path]
    if value is not None:
        exact = [r for r in rows if r.get("test_value") == value]
        if exact:
            rows = exact
    return any(bool(r.get("writable")) and bool(r.get("restored", False)) for r in rows[-1:]) if rows else False
