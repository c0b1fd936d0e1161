"""Every public model function refuses nonsense (issue 12 item 4).

For each public function of sipperf.models (thesis-model modules mg1, mmck, overhead, mgck,
mgck_sim, scheduler, capacity; and tails, priority, networks) a valid call is written down by hand; hypothesis then poisons one
numeric argument at a time with NaN, +inf or -inf (as a scalar or inside an array) and the call
must raise ValueError naming that argument — never return NaN, inf or a plausible wrong number.
The β floor of the ch. 5 drop model is checked against the thesis's own β = 1 for one thread.
"""
from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sipperf.models as M

#: name -> (function, valid kwargs, names of the numeric kwargs to poison)
SPECS = {
    "alpha": (M.alpha, dict(lam_pps=[600.0, 1200.0]), ["lam_pps"]),
    "alpha (breakpoints)": (M.alpha, dict(lam_pps=900.0, breakpoints=([0.0, 1000.0], [1.0, 2.0])), ["breakpoints"]),
    "mixture_moments": (M.mixture_moments, dict(mix=[1e-4, 2e-4], sds_s=[1e-5, 1e-5], weights=[0.5, 0.5]),
                        ["mix", "sds_s", "weights"]),
    "mg1_wait": (M.mg1_wait, dict(lam_pps=1000.0, ex_s=1e-4, ex2_s2=2e-8), ["lam_pps", "ex_s", "ex2_s2"]),
    "thesis_mg1": (M.thesis_mg1, dict(lam_pps=[600.0, 1200.0], t_sip_us=100.0, t_sip_sd_us=5.0, k_copy_us=2.0,
                                      k_sockq_base_us=7.9, k_snd_us=5.6),
                   ["lam_pps", "t_sip_us", "t_sip_sd_us", "k_copy_us", "k_sockq_base_us", "k_snd_us"]),
    "thesis_implied_inputs": (M.thesis_implied_inputs, dict(lam_pps=1200.0, ex_us=150.0, w_us=20.0, alpha_=3.0,
                                   k_sockq_base_us=7.9, k_snd_us=5.6, k_copy_us=2.0),
                              ["lam_pps", "ex_us", "alpha_", "k_sockq_base_us", "k_snd_us", "k_copy_us"]),
    "pps_from_cps": (M.pps_from_cps, dict(lam_cps=[100.0, 200.0], messages_per_call=6),
                     ["lam_cps", "messages_per_call"]),
    "mmck": (M.mmck, dict(lam=900.0, mu=1000.0, c=2, K=20), ["lam", "mu", "c", "K"]),
    "mmc": (M.mmc, dict(lam=900.0, mu=1000.0, c=2), ["lam", "mu", "c"]),
    "erlang_b": (M.erlang_b, dict(c=3, a=2.0), ["c", "a"]),
    "erlang_c": (M.erlang_c, dict(c=3, a=2.0), ["c", "a"]),
    "beta": (M.beta, dict(lam_pps=12000.0, c=4, clip_min=1.0), ["lam_pps", "c", "clip_min"]),
    "service_time_c": (M.service_time_c, dict(x1=65e-6, c=4, beta_=1.3), ["x1", "c", "beta_"]),
    "thesis_drop_probability": (M.thesis_drop_probability, dict(lam_pps=12000.0, c=4, x1_us=65.16, K=200),
                                ["lam_pps", "c", "x1_us", "K"]),
    "thesis_drop_probability (beta_)": (M.thesis_drop_probability,
                                        dict(lam_pps=12000.0, c=4, x1_us=65.16, beta_=1.3), ["beta_"]),
    "effective_capacity": (M.effective_capacity, dict(c=2, K=20, scv=0.5), ["c", "K", "scv"]),
    "mgck": (M.mgck, dict(lam=1.5, mean_s=1.0, scv=0.5, c=2, K=20), ["lam", "mean_s", "scv", "c", "K"]),
    "simulate_mgck": (M.simulate_mgck, dict(lam=1.5, mean_s=1.0, scv=0.5, c=2, K=20, n=200),
                      ["lam", "mean_s", "scv", "c", "K", "n"]),
    "baseline_recipe": (M.baseline_recipe, dict(ncpus=2, nprocessors=1, threads=4), ["ncpus", "nprocessors", "threads"]),
    "enhanced_recipe": (M.enhanced_recipe, dict(ncpus=2, nprocessors=1, threads=4, t_sip_s=130e-6),
                        ["ncpus", "nprocessors", "threads", "t_sip_s"]),
    "min_granularity_ns": (M.min_granularity_ns, dict(t_sip_s=130e-6, step_ns=50_000), ["t_sip_s", "step_ns"]),
    "threads_for_capacity": (M.threads_for_capacity, dict(p=1, m=4), ["p", "m"]),
    "capacity": (M.capacity, dict(p=1, m=4, c11=1000.0), ["p", "m", "c11"]),
    "traffic_requests_per_s": (M.traffic_requests_per_s,
                               dict(subscribers=3e5, erlang_per_sub=0.1, holding_s=180.0, reg_interval_s=3600.0),
                               ["subscribers", "erlang_per_sub", "holding_s", "reg_interval_s"]),
    "servers_needed": (M.servers_needed, dict(subscribers=[3e5, 2e7], p=1, m=2, c11_cps=1000.0, headroom=0.8,
                                              erlang_per_sub=0.1, holding_s=180.0, reg_interval_s=3600.0,
                                              messages_per_call=6),
                       ["subscribers", "p", "m", "c11_cps", "headroom", "erlang_per_sub", "holding_s",
                        "reg_interval_s", "messages_per_call"]),
    "max_rate": (M.max_rate, dict(model_fn=lambda x: x / 1000.0, target_pdr=0.01, lo=0.0, hi=100.0),
                 ["target_pdr", "lo", "hi"]),
    # delay distributions (tails.py) and priority queues (priority.py)
    "GammaMix": (M.GammaMix, dict(weights=[0.5, 0.5], means_s=[1e-4, 3e-4], scvs=[0.5, 1.0]),
                 ["weights", "means_s", "scvs"]),
    "GammaMix.from_samples": (M.GammaMix.from_samples, dict(x_s=[1e-4, 2e-4, 5e-4], groups=2), ["x_s"]),
    "mm1_sojourn_sf": (M.mm1_sojourn_sf, dict(t_s=[1e-4, 1e-3], lam=5000.0, mu=1e4), ["t_s", "lam", "mu"]),
    "mm1_sojourn_quantile": (M.mm1_sojourn_quantile, dict(q=[0.5, 0.99], lam=5000.0, mu=1e4), ["q", "lam", "mu"]),
    "mmc_wait_sf": (M.mmc_wait_sf, dict(t_s=[0.0, 1e-3], lam=1.5e4, mu=1e4, c=2), ["t_s", "lam", "mu", "c"]),
    "mmc_wait_quantile": (M.mmc_wait_quantile, dict(q=[0.5, 0.99], lam=1.5e4, mu=1e4, c=2), ["q", "lam", "mu", "c"]),
    "mmc_sojourn_sf": (M.mmc_sojourn_sf, dict(t_s=[0.0, 1e-3], lam=1.5e4, mu=1e4, c=2), ["t_s", "lam", "mu", "c"]),
    "mmc_sojourn_quantile": (M.mmc_sojourn_quantile, dict(q=[0.5, 0.99], lam=1.5e4, mu=1e4, c=2),
                             ["q", "lam", "mu", "c"]),
    "atom_exp_sf": (M.atom_exp_sf, dict(t_s=[0.0, 1e-3], p_wait=0.5, mean_wait_s=1e-4),
                    ["t_s", "p_wait", "mean_wait_s"]),
    "atom_exp_quantile": (M.atom_exp_quantile, dict(q=[0.5, 0.99], p_wait=0.5, mean_wait_s=1e-4),
                          ["q", "p_wait", "mean_wait_s"]),
    "mg1_wait_lst": (M.mg1_wait_lst, dict(s=[0.0, 1e3], lam=5000.0, mix=M.GammaMix.exponential(1e-4)), ["s", "lam"]),
    "mg1_wait_sf": (M.mg1_wait_sf, dict(t_s=[1e-4, 1e-3], lam=5000.0, mix=M.GammaMix.exponential(1e-4)),
                    ["t_s", "lam"]),
    "mg1_sojourn_sf": (M.mg1_sojourn_sf, dict(t_s=[1e-4, 1e-3], lam=5000.0, mix=M.GammaMix.exponential(1e-4)),
                       ["t_s", "lam"]),
    "mg1_quantile": (M.mg1_quantile, dict(q=[0.5, 0.99], lam=5000.0, mix=M.GammaMix.exponential(1e-4)), ["q", "lam"]),
    "cramer_lundberg": (M.cramer_lundberg, dict(lam=[2000.0, 5000.0], mix=M.GammaMix.exponential(1e-4)), ["lam"]),
    "kingman_wait_sf": (M.kingman_wait_sf, dict(t_s=[0.0, 1e-3], lam_pps=5000.0, ex_s=1e-4, ca2=2.0, cs2=0.5),
                        ["t_s", "lam_pps", "ex_s", "ca2", "cs2"]),
    "kingman_wait_quantile": (M.kingman_wait_quantile, dict(q=[0.5, 0.99], lam_pps=5000.0, ex_s=1e-4, ca2=2.0,
                                                            cs2=0.5), ["q", "lam_pps", "ex_s", "ca2", "cs2"]),
    "priority_mg1": (M.priority_mg1, dict(lam_pps=[2000.0, 3000.0], ex_s=[1e-4, 1e-4], ex2_s2=[2e-8, 2e-8]),
                     ["lam_pps", "ex_s", "ex2_s2"]),
    "conservation_rhs": (M.conservation_rhs, dict(lam_pps=[2000.0, 3000.0], ex_s=[1e-4, 1e-4], ex2_s2=[2e-8, 2e-8]),
                         ["lam_pps", "ex_s", "ex2_s2"]),
    # networks of queues (networks.py)
    "traffic_rates": (M.traffic_rates, dict(lam_ext_pps=[10.0, 0.0], routing=[[0.0, 0.5], [0.1, 0.0]]),
                      ["lam_ext_pps", "routing"]),
    "jackson": (M.jackson, dict(lam_ext_pps=[10.0, 0.0], mu=[40.0, 30.0], routing=[[0.0, 0.5], [0.1, 0.0]], c=[1, 2]),
                ["lam_ext_pps", "mu", "routing", "c"]),
    "jackson_pmf": (M.jackson_pmf, dict(n=[[0, 1], [2, 0]], lam_pps=[10.0, 5.0], mu=[40.0, 30.0], c=[1, 2]),
                    ["n", "lam_pps", "mu", "c"]),
    "mva": (M.mva, dict(demands_s=[0.01, 0.02], population=5, think_s=0.1, servers=[1, 2]),
            ["demands_s", "population", "think_s", "servers"]),
    "network_bounds": (M.network_bounds, dict(demands_s=[0.01, 0.02], think_s=0.1, population=[1, 10]),
                       ["demands_s", "think_s", "population"]),
}
#: not model functions: they take a recipe object (eevdf_mapping) or are classes/constants
NOT_NUMERIC = {"eevdf_mapping"}
MY_MODULES = {"sipperf.models.mg1", "sipperf.models.mmck", "sipperf.models.overhead", "sipperf.models.mgck",
              "sipperf.models.mgck_sim", "sipperf.models.scheduler", "sipperf.models.capacity",
              "sipperf.models.tails", "sipperf.models.priority", "sipperf.models.networks"}
BAD = [math.nan, math.inf, -math.inf]


def test_every_public_model_function_has_a_spec():
    funcs = {n for n in M.__all__ if inspect.isfunction(getattr(M, n))
             and getattr(M, n).__module__ in MY_MODULES}
    covered = {f.__name__ for f, _, _ in SPECS.values()}
    assert funcs - NOT_NUMERIC <= covered, f"public model functions without a nonsense test: {funcs - covered}"
    for name, (f, kw, _) in SPECS.items():  # the valid calls really are valid
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f(**kw)


def _poison(value, bad, in_array: bool):
    if isinstance(value, tuple):  # alpha breakpoints: poison the first array
        return (_poison(value[0], bad, True), value[1])
    if isinstance(value, list) or in_array:
        arr = np.atleast_1d(np.asarray(value, dtype=float)).copy()
        arr[-1] = bad
        return arr
    return bad


CASES = [(name, arg) for name, (_, _, args) in SPECS.items() for arg in args]


@pytest.mark.parametrize("name,arg", CASES, ids=[f"{n}:{a}" for n, a in CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad=st.sampled_from(BAD), in_array=st.booleans())
def test_nan_and_inf_raise_value_error(name, arg, bad, in_array):
    f, kw, _ = SPECS[name]
    kw = dict(kw)
    kw[arg] = _poison(kw[arg], bad, in_array)
    with pytest.raises(ValueError) as ei:
        f(**kw)
    msg = str(ei.value)
    assert msg and "Traceback" not in msg


@settings(max_examples=40, deadline=None)
@given(lam=st.floats(0, 5e4), c=st.integers(1, 32), x1=st.floats(1.0, 500.0))
def test_drop_probability_is_a_probability_for_any_valid_input(lam, c, x1):
    r = M.thesis_drop_probability(lam, c, x1)
    p = float(r.p_block)
    assert 0.0 <= p <= 1.0 and np.isfinite(float(r.Wq))


def test_beta_floor_one_thread_is_the_thesis_beta_of_one():
    """Eq. 5.6 for one thread at 12 000 pkt/s gives 0.68; the thesis uses beta = 1 (Table 5.1)."""
    raw = 0.174 * 1 + 0.923e-4 * 12000 - 0.60
    assert float(M.beta(12000.0, 1)) == pytest.approx(raw) and raw == pytest.approx(0.6816)
    r = M.thesis_drop_probability(12000.0, 1, 65.16)
    ref = M.mmck(12000.0, 1e6 / 65.16, 1, 200)  # beta = 1: E[X_1] unchanged
    assert float(r.p_block) == pytest.approx(float(ref.p_block), rel=1e-12)
    assert float(r.mu) == pytest.approx(1e6 / 65.16)


def test_beta_floor_two_threads_low_rate():
    """c = 2, lambda = 6000: eq. 5.6 gives 0.30 (two threads 3x faster than one): floored to 1."""
    assert float(M.beta(6000.0, 2)) == pytest.approx(0.174 * 2 + 0.5538 - 0.60)
    r = M.thesis_drop_probability(6000.0, 2, 65.16)
    assert float(r.mu) == pytest.approx(1e6 / (2 * 65.16))
    with pytest.warns(UserWarning, match="beta < 1"):
        raw = M.thesis_drop_probability(6000.0, 2, 65.16, beta_floor=None)
    assert float(raw.mu) == pytest.approx(1e6 / (0.3018 * 2 * 65.16), rel=1e-3)
    # above the floor nothing changes: the fitted point of Table 5.2 (beta 1.077 at 14 400)
    hi = M.thesis_drop_probability(14400.0, 2, 65.16)
    assert float(hi.mu) == pytest.approx(1e6 / (float(M.beta(14400.0, 2)) * 2 * 65.16))


def test_beta_le_zero_without_floor_is_refused():
    # c = 1, lambda = 1000: eq. 5.6 gives 0.174 + 0.0923 - 0.6 < 0
    with pytest.raises(ValueError, match="beta must be > 0"), pytest.warns(UserWarning):
        M.thesis_drop_probability(1000.0, 1, 65.16, beta_floor=None)


def test_other_nonsense_is_refused():
    with pytest.raises(ValueError):
        M.min_granularity_ns(130.0)  # microseconds passed as seconds
    with pytest.raises(ValueError):
        M.capacity(2, 1)  # more processors than cores
    with pytest.raises(ValueError):
        M.baseline_recipe(2.5, 1)
    with pytest.raises(ValueError):
        M.max_rate(lambda x: math.nan, 0.01, 0.0, 10.0)
    with pytest.raises(ValueError):
        M.ServiceMix(np.array([[1e-4, math.inf]]))
    with pytest.raises(ValueError):
        M.pps_from_cps(100.0, messages_per_call=0)
