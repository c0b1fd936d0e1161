"""Queueing models of the SIP proxy (thesis ch. 4–7), one module per family.

* :mod:`.mg1` — M/G/1 with the six-message service mixture and interrupt overhead α (ch. 4)
* :mod:`.mmck` — exact, stable M/M/c/K (eq. 5.3/5.4), Erlang B/C
* :mod:`.overhead` — thread overhead β (eq. 5.6) and E[X_c] (eq. 5.5)
* :mod:`.mgck` — two-moment M/G/c/K correction (validated by :mod:`.mgck_sim`)
* :mod:`.scheduler` — CFS baseline/enhanced recipes (ch. 6–7) and the EEVDF mapping
* :mod:`.capacity` — C_{p,c} = T_{p,c}·C_{1,1} (eq. 7.1), traffic model, max-rate search
"""
from sipperf.models.capacity import TrafficLoad, capacity, max_rate, threads_for_capacity, traffic_requests_per_s
from sipperf.models.mg1 import (
    ALPHA_BREAKPOINTS, MESSAGE_TYPES, TABLE_4_3, MG1Result, ServiceMix, ThesisMG1Result, alpha, mg1_wait,
    mixture_moments, pps_from_cps, thesis_implied_inputs, thesis_mg1,
)
from sipperf.models.mgck import MGcKResult, effective_capacity, mgck
from sipperf.models.mgck_sim import SimResult, simulate_mgck
from sipperf.models.mmck import MMcKResult, MMcResult, erlang_b, erlang_c, mmc, mmck
from sipperf.models.overhead import BETA_COEFFS, beta, service_time_c, thesis_drop_probability
from sipperf.models.scheduler import (
    CfsRecipe, KnobMapping, baseline_recipe, eevdf_mapping, enhanced_recipe, min_granularity_ns,
)

__all__ = [
    "ALPHA_BREAKPOINTS", "MESSAGE_TYPES", "TABLE_4_3", "MG1Result", "ServiceMix", "ThesisMG1Result", "alpha",
    "mg1_wait", "mixture_moments", "pps_from_cps", "thesis_implied_inputs", "thesis_mg1",
    "MMcKResult", "MMcResult", "erlang_b", "erlang_c", "mmc", "mmck",
    "BETA_COEFFS", "beta", "service_time_c", "thesis_drop_probability",
    "MGcKResult", "effective_capacity", "mgck", "SimResult", "simulate_mgck",
    "CfsRecipe", "KnobMapping", "baseline_recipe", "eevdf_mapping", "enhanced_recipe", "min_granularity_ns",
    "TrafficLoad", "capacity", "max_rate", "threads_for_capacity", "traffic_requests_per_s",
]
