"""CFS "server mode" recipes of thesis ch. 6–7 and their mapping to today's EEVDF knobs.

Baseline (§6.3.1 single core, after IBM's CFS tuning note; §7.4.1 multi-core adds two knobs):
``sched_latency_ns`` = 1 000 000, ``sched_min_granularity_ns`` = 100 000,
``sched_wakeup_granularity_ns`` = 25 000; multi-core: ``sched_migration_cost`` = 5 000 000,
``sched_tunable_scaling`` = logarithmic.

Enhanced (§6.3.2 single core, §7.4.2 multi-core; paper_ch7 §III):

* ``sched_latency_ns`` = 800 000 × ncpus (800 000 on one core, "independent of threads");
* ``sched_min_granularity_ns`` ≈ the measured mean T_sip at the onset of overload, never below
  the kernel minimum 100 000.  The thesis lists the values used but not a rounding rule; the
  rule here — *T_sip at the highest load whose PDR ≤ 1 % (last stable point), rounded to the
  nearest 50 µs, floor 100 µs* — reproduces 18 of the 19 values of §6.3.2/§7.4.2 from the
  T_sip printed in Tables 6.2, 7.2, 7.5 and 7.8 (the exception: 1 core, 8 threads, where the
  thesis used 250 000 and the rule gives 200 000; see :data:`THESIS_MIN_GRANULARITY_NS`);
* ``sched_wakeup_granularity_ns`` = 0;
* ``sched_migration_cost`` = 0 when all cores sit on one processor (2- and 4-core systems),
  500 000 when they span processors (6-core system on two quad-core Xeons); not set on 1 core;
* ``sched_tunable_scaling`` = 0 ("none"): the four values above are used as given.

Kernel interface: up to Linux 5.12 these are ``/proc/sys/kernel/sched_*``; from 5.13 they moved
to debugfs ``/sys/kernel/debug/sched/*`` (``latency_ns``, ``min_granularity_ns``,
``wakeup_granularity_ns``, ``migration_cost_ns``, ``tunable_scaling``).  Linux 6.6 replaced
CFS's pick/preemption logic by EEVDF: ``min_granularity_ns`` was renamed ``base_slice_ns``
(commit e4ec3318a17f), while ``latency_ns`` and ``wakeup_granularity_ns`` no longer exist — see
:func:`eevdf_mapping`.  (Checked by listing ``/sys/kernel/debug/sched`` on a 6.18 kernel:
base_slice_ns, migration_cost_ns, nr_migrate, tunable_scaling, preempt, features, ... and no
latency_ns / min_granularity_ns / wakeup_granularity_ns.)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from sipperf.models._guard import count, finite

__all__ = [
    "CfsRecipe", "baseline_recipe", "enhanced_recipe", "min_granularity_ns", "eevdf_mapping",
    "THESIS_MIN_GRANULARITY_NS", "MIN_GRANULARITY_FLOOR_NS",
]

Mode = Literal["baseline", "enhanced"]
Scaling = Literal["none", "log", "linear"]

#: Kernel minimum for sched_min_granularity_ns (thesis §7.4.2).
MIN_GRANULARITY_FLOOR_NS = 100_000
#: Values the thesis used, keyed by (ncpus, threads): §6.3.2 (1 core) and §7.4.2 (2/4/6 cores).
THESIS_MIN_GRANULARITY_NS: dict[tuple[int, int], int] = {
    (1, 2): 100_000, (1, 4): 150_000, (1, 6): 200_000, (1, 8): 250_000, (1, 16): 400_000,
    (2, 2): 100_000, (2, 4): 100_000, (2, 6): 100_000, (2, 8): 150_000, (2, 16): 200_000,
    (4, 2): 100_000, (4, 4): 100_000, (4, 6): 100_000, (4, 8): 100_000, (4, 16): 200_000,
    (6, 4): 100_000, (6, 6): 100_000, (6, 8): 100_000, (6, 16): 200_000,
}
_SCALING_CODE = {"none": 0, "log": 1, "linear": 2}


@dataclass(frozen=True)
class CfsRecipe:
    """One CFS configuration (all times in ns).  ``None`` means "not set by the recipe"
    (leave the kernel default)."""

    mode: Mode
    ncpus: int
    nprocessors: int
    threads: int | None
    sched_latency_ns: int
    sched_min_granularity_ns: int
    sched_wakeup_granularity_ns: int
    sched_migration_cost_ns: int | None
    sched_tunable_scaling: Scaling | None
    source: str

    def as_dict(self) -> dict:
        return asdict(self)

    def sysctl(self, debugfs: bool = True) -> dict[str, int]:
        """Knob path -> value: debugfs (Linux 5.13–6.5) or /proc/sys/kernel (≤ 5.12)."""
        vals = {"latency_ns": self.sched_latency_ns, "min_granularity_ns": self.sched_min_granularity_ns,
                "wakeup_granularity_ns": self.sched_wakeup_granularity_ns,
                "migration_cost_ns": self.sched_migration_cost_ns,
                "tunable_scaling": None if self.sched_tunable_scaling is None
                else _SCALING_CODE[self.sched_tunable_scaling]}
        out = {}
        for k, v in vals.items():
            if v is None:
                continue
            if debugfs:
                out[f"/sys/kernel/debug/sched/{k}"] = v
            else:
                name = "sched_migration_cost_ns" if k == "migration_cost_ns" else f"sched_{k}"
                out[f"/proc/sys/kernel/{name}"] = v
        return out


def _check(ncpus: int, nprocessors: int, threads: int | None) -> None:
    count("ncpus", ncpus)
    count("nprocessors", nprocessors)
    if threads is not None:
        count("threads", threads)
    if ncpus < 1 or nprocessors < 1 or nprocessors > ncpus:
        raise ValueError("need ncpus >= 1 and 1 <= nprocessors <= ncpus")
    if threads is not None and threads < 1:
        raise ValueError("threads must be >= 1")


def baseline_recipe(ncpus: int = 1, nprocessors: int = 1, threads: int | None = None) -> CfsRecipe:
    """The thesis's *baseline* "server" mode: §6.3.1 (1 core) / §7.4.1 (multi-core)."""
    _check(ncpus, nprocessors, threads)
    multi = ncpus > 1
    return CfsRecipe(
        mode="baseline", ncpus=ncpus, nprocessors=nprocessors, threads=threads,
        sched_latency_ns=1_000_000, sched_min_granularity_ns=100_000, sched_wakeup_granularity_ns=25_000,
        sched_migration_cost_ns=5_000_000 if multi else None,
        sched_tunable_scaling="log" if multi else None,
        source="thesis §7.4.1 (baseline multi-core server mode)" if multi
        else "thesis §6.3.1 (baseline server mode)")


def min_granularity_ns(t_sip_s: float, step_ns: int = 50_000, floor_ns: int = MIN_GRANULARITY_FLOOR_NS) -> int:
    """sched_min_granularity_ns from the mean T_sip at overload onset (s): nearest ``step_ns``,
    at least ``floor_ns`` (§6.3.2 item 2, §7.4.2)."""
    t_sip_s = float(finite("t_sip_s (seconds)", t_sip_s, gt=0))
    if t_sip_s > 1.0:
        raise ValueError(f"t_sip_s = {t_sip_s:g} s is not a per-message SIP time (seconds, e.g. 130e-6)")
    step_ns = count("step_ns", step_ns)
    floor_ns = count("floor_ns", floor_ns, ge=0)
    v = int(step_ns * int(t_sip_s * 1e9 / step_ns + 0.5))  # round half up
    return max(floor_ns, v)


def enhanced_recipe(ncpus: int, nprocessors: int, threads: int, t_sip_s: float, *,
                    step_ns: int = 50_000) -> CfsRecipe:
    """The thesis's *enhanced* "server" mode (§6.3.2, §7.4.2) for a machine and a measured T_sip.

    ncpus : cores available to the SPS threads; nprocessors : physical processors they span;
    threads : SPS worker threads; t_sip_s : mean SIP service time (s) at the onset of overload
    (the highest load with PDR ≤ 1 %).
    """
    _check(ncpus, nprocessors, threads)
    if ncpus == 1:
        mig: int | None = None
    else:
        mig = 0 if nprocessors == 1 else 500_000
    return CfsRecipe(
        mode="enhanced", ncpus=ncpus, nprocessors=nprocessors, threads=threads,
        sched_latency_ns=800_000 * ncpus,
        sched_min_granularity_ns=min_granularity_ns(t_sip_s, step_ns),
        sched_wakeup_granularity_ns=0,
        sched_migration_cost_ns=mig,
        sched_tunable_scaling="none" if ncpus > 1 else None,
        source="thesis §7.4.2 (enhanced multi-core server mode)" if ncpus > 1
        else "thesis §6.3.2 (enhanced server mode)")


@dataclass(frozen=True)
class KnobMapping:
    """How one CFS knob of a recipe carries over to EEVDF (Linux ≥ 6.6)."""

    cfs_knob: str
    cfs_value: int | str | None
    eevdf_knob: str | None
    eevdf_value: int | str | None
    status: Literal["renamed", "kept", "gone"]
    note: str


def eevdf_mapping(recipe: CfsRecipe) -> list[KnobMapping]:
    """Map a recipe's CFS knobs to today's EEVDF scheduler (debugfs /sys/kernel/debug/sched/).

    * ``min_granularity_ns`` → ``base_slice_ns`` (renamed in 6.6).  In EEVDF the base slice is
      the request length that sets each task's virtual deadline; setting it ≈ T_sip keeps the
      thesis's intent (a worker finishes a packet before it can be preempted).  Per-task slices
      can also be requested with sched_setattr(sched_runtime) since 6.12.
    * ``latency_ns`` → gone: EEVDF has no scheduling period; latency follows from the slice and
      the lag-based eligibility.
    * ``wakeup_granularity_ns`` → gone: wake-up preemption is decided by eligibility and the
      earlier virtual deadline (RUN_TO_PARITY / PREEMPT_SHORT features), so "0" (always allow
      the woken worker to preempt) has no direct knob; the closest effect is a short slice.
    * ``migration_cost_ns`` → kept (load-balancer cache-hot threshold), same meaning and units.
    * ``tunable_scaling`` → kept; it now scales ``base_slice_ns`` by 1, 1 + log2(ncpus) or ncpus
      at boot/hotplug, so "none" (0) is still what the recipe wants for a literal value.
    """
    scaling = recipe.sched_tunable_scaling
    return [
        KnobMapping("sched_min_granularity_ns", recipe.sched_min_granularity_ns, "base_slice_ns",
                    recipe.sched_min_granularity_ns, "renamed",
                    "EEVDF request length/virtual deadline; keep ≈ T_sip at overload onset"),
        KnobMapping("sched_latency_ns", recipe.sched_latency_ns, None, None, "gone",
                    "no scheduling period in EEVDF (removed in 6.6)"),
        KnobMapping("sched_wakeup_granularity_ns", recipe.sched_wakeup_granularity_ns, None, None, "gone",
                    "wake-up preemption by eligibility + deadline (RUN_TO_PARITY, PREEMPT_SHORT)"),
        KnobMapping("sched_migration_cost_ns", recipe.sched_migration_cost_ns, "migration_cost_ns",
                    recipe.sched_migration_cost_ns, "kept", "load-balancer cache-hot threshold, unchanged"),
        KnobMapping("sched_tunable_scaling", scaling, "tunable_scaling",
                    None if scaling is None else _SCALING_CODE[scaling], "kept",
                    "now scales base_slice_ns only; 0 = none"),
    ]
