"""A SimPy model of the instrumented kernel path (thesis ch. 3-7) that writes the shared timeline.

* :mod:`.params` -- dataclasses, Table 4.3 inputs, alpha (eq. 4.4), beta (eq. 5.6), scheduler presets
* :mod:`.workload` -- SIPp-like call arrivals (Poisson / deterministic / file) and reaction times
* :mod:`.scheduler` -- CFS-like slices, wake-up preemption, migration, switch costs
* :mod:`.model` -- the model of chapter 9 in SimPy (NIC -> K_stack -> socket queue -> threads -> K_snd)
* :mod:`.fast_twin` -- the same model as a hand-written event loop, for sweeps and fits
* :mod:`.twin_check` -- the statistical check of the twin against the SimPy model
* :mod:`.run` -- ``simulate(params, seed) -> (timeline, stats)``
* :mod:`.validate`, :mod:`.calibrate`, :mod:`.sweep` -- theory check, thesis check, Dask sweeps
"""
from sipperf.sim.params import SimParams, make_params
from sipperf.sim.run import simulate

__all__ = ["SimParams", "make_params", "simulate"]
