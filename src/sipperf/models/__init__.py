"""Queueing models of the SIP proxy (thesis ch. 4–7), one module per family.

* :mod:`.mg1` — M/G/1 with the six-message service mixture and interrupt overhead α (ch. 4)
* :mod:`.mmck` — exact, stable M/M/c/K (eq. 5.3/5.4), Erlang B/C
* :mod:`.overhead` — thread overhead β (eq. 5.6) and E[X_c] (eq. 5.5)
* :mod:`.birth_death` — finite birth–death queues (balance equations), one core vs c slow servers
* :mod:`.kingman` — G/G/1: Lindley recursion, Kingman's bound and approximation (ch. 5)
* :mod:`.operational` — utilisation, Little's and service-demand laws, PASTA check on measured intervals
* :mod:`.mgck` — two-moment M/G/c/K correction (validated by :mod:`.mgck_sim`)
* :mod:`.scheduler` — CFS baseline/enhanced recipes (ch. 6–7) and the EEVDF mapping
* :mod:`.capacity` — C_{p,m} = T_{p,m}·C_{1,1} (eq. 7.1; m cores, p processors), traffic model, servers
  needed, max-rate search
* :mod:`.tcp` — TCP connection memory and sustainable rates of seed ``tcp`` (ch. 10)
* :mod:`.process_models` — CPU cost and latencies of the process-model prototypes, seed ``process_models`` (ch. 10)
* :mod:`.tails` — delay distributions: M/M/1 and M/M/c sojourn tails, the M/G/1 wait by inverting the
  Pollaczek–Khinchine transform, Cramér–Lundberg and Kingman's heavy-traffic exponential (percentiles)
* :mod:`.priority` — priority M/G/1: Cobham's formula, preemptive resume, the conservation law
* :mod:`.networks` — networks of queues: asymptotic (operational) bounds, open Jackson networks and
  their product form, exact mean value analysis of closed networks
"""
from sipperf.models.birth_death import BirthDeathResult, birth_death, slow_server_rates, work_conserving_rates
from sipperf.models.kingman import implied_ca2, kingman_bound, kingman_wait, lindley_waits
from sipperf.models.capacity import (
    TrafficLoad, capacity, max_rate, servers_needed, threads_for_capacity, traffic_requests_per_s,
)
from sipperf.models.mg1 import (
    ALPHA_BREAKPOINTS, MESSAGE_TYPES, TABLE_4_3, MG1Result, ServiceMix, ThesisMG1Result, alpha, mg1_wait,
    mixture_moments, pps_from_cps, thesis_implied_inputs, thesis_mg1,
)
from sipperf.models.mgck import MGcKResult, effective_capacity, mgck
from sipperf.models.mgck_sim import SimResult, simulate_mgck
from sipperf.models.mmck import MMcKResult, MMcResult, erlang_b, erlang_c, mmc, mmck
from sipperf.models.operational import (
    DemandFit, busy_at, busy_fraction, demand_with_background, interarrival_scv, merge_intervals,
    saturation_throughput, service_demand, time_average_count,
)
from sipperf.models.overhead import BETA_COEFFS, beta, service_time_c, thesis_drop_probability
from sipperf.models.scheduler import (
    CfsRecipe, KnobMapping, baseline_recipe, eevdf_mapping, enhanced_recipe, min_granularity_ns,
)
from sipperf.models.tails import (
    CramerLundberg, GammaMix, atom_exp_quantile, atom_exp_sf, cramer_lundberg, kingman_wait_quantile,
    kingman_wait_sf, mg1_quantile, mg1_sojourn_sf, mg1_wait_lst, mg1_wait_sf, mm1_sojourn_quantile,
    mm1_sojourn_sf, mmc_sojourn_quantile, mmc_sojourn_sf, mmc_wait_quantile, mmc_wait_sf,
)
from sipperf.models.priority import PriorityResult, conservation_rhs, priority_mg1
from sipperf.models.networks import (
    JacksonResult, MVAResult, NetworkBounds, jackson, jackson_pmf, mva, network_bounds, traffic_rates,
)

__all__ = [
    "ALPHA_BREAKPOINTS", "MESSAGE_TYPES", "TABLE_4_3", "MG1Result", "ServiceMix", "ThesisMG1Result", "alpha",
    "mg1_wait", "mixture_moments", "pps_from_cps", "thesis_implied_inputs", "thesis_mg1",
    "MMcKResult", "MMcResult", "erlang_b", "erlang_c", "mmc", "mmck",
    "BETA_COEFFS", "beta", "service_time_c", "thesis_drop_probability",
    "MGcKResult", "effective_capacity", "mgck", "SimResult", "simulate_mgck",
    "CfsRecipe", "KnobMapping", "baseline_recipe", "eevdf_mapping", "enhanced_recipe", "min_granularity_ns",
    "TrafficLoad", "capacity", "max_rate", "servers_needed", "threads_for_capacity", "traffic_requests_per_s",
    "BirthDeathResult", "birth_death", "slow_server_rates", "work_conserving_rates",
    "implied_ca2", "kingman_bound", "kingman_wait", "lindley_waits",
    "DemandFit", "busy_at", "busy_fraction", "demand_with_background", "interarrival_scv", "merge_intervals",
    "saturation_throughput", "service_demand", "time_average_count",
    "GammaMix", "CramerLundberg", "mm1_sojourn_sf", "mm1_sojourn_quantile", "mmc_wait_sf", "mmc_wait_quantile",
    "mmc_sojourn_sf", "mmc_sojourn_quantile", "atom_exp_sf", "atom_exp_quantile", "mg1_wait_lst", "mg1_wait_sf",
    "mg1_sojourn_sf", "mg1_quantile", "cramer_lundberg", "kingman_wait_sf", "kingman_wait_quantile",
    "PriorityResult", "priority_mg1", "conservation_rhs",
    "JacksonResult", "MVAResult", "NetworkBounds", "traffic_rates", "jackson", "jackson_pmf", "mva",
    "network_bounds",
]
