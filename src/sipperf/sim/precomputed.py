"""The stored simulation results of ``datasets/precomputed`` (synthetic model output).

Sweeps, validation, calibration, the twin check and the overload runs take minutes to hours, so
their commands (``python -m sipperf.sim.sweep``, ``python -m sipperf.sim.calibration.<name>``, ...;
each file's ``.provenance.md`` note names the command that made it) write CSV files, and the
book reads those files instead of simulating at build time.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["PRECOMPUTED", "load_precomputed"]

#: the directory of the stored results
PRECOMPUTED = Path(__file__).resolve().parents[3] / "datasets" / "precomputed"


def load_precomputed(name: str) -> pd.DataFrame:
    """``datasets/precomputed/sim_<name>.csv`` (``sweep``, ``validation``, ``calibration``,
    ``calibration.theta_fit``, ``twin_check``, ``overload``, ...)."""
    return pd.read_csv(PRECOMPUTED / f"sim_{name}.csv")
