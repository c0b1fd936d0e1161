"""Calibration and validation of the simulation model: not the model itself (that is :mod:`sipperf.sim.model`).

* :mod:`.calibrate`, :mod:`.fit_waits` -- the model's constants fitted on the thesis's tables;
* :mod:`.fit_lab` -- the model fitted on the lab's recordings;
* :mod:`.twin_check` -- the fast twin checked against the SimPy model;
* :mod:`.validate` -- the model checked against M/M/c/K where both apply;
* :mod:`.overload_lab` -- the lab's overload runs read for the overload chapter.
"""
