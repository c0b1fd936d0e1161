"""sipperf.fit against independent references: Pollaczek-Khinchine and M/M/1/K written out here,
planted curves, the thesis's own Tables 5.2-5.6 (beta), its eq. 5.6 and its C_{1,1} = 1000 cps
(Tables 7.2/7.5/7.8)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from sipperf import fit
from sipperf.thesis import wide


def pk_q(lam_pps, r, rv, b, bv, cov, a):
    """Q = W + a*b by hand (µs): W = lam E[X^2] / (2 (1 - lam E[X]))."""
    ex = r + a * b
    var = rv + a * a * bv + 2 * a * cov
    lam = lam_pps * 1e-6  # per µs
    rho = lam * ex
    return lam * (var + ex * ex) / (2 * (1 - rho)) + a * b


def test_mg1_q_is_pollaczek_khinchine():
    m = fit.Moments(100.0, 400.0, 8.0, 4.0, 1.5)
    for lam, a in ((500.0, 1.0), (3000.0, 3.2), (6000.0, 0.5)):
        assert fit.mg1_q_us(lam, m, a) == pytest.approx(pk_q(lam, 100, 400, 8, 4, 1.5, a), rel=1e-12)
    assert math.isinf(fit.mg1_q_us(20000.0, m, 1.0))  # rho >= 1


def test_solve_alpha_inverts_the_model():
    m = fit.Moments(120.0, 300.0, 9.0, 2.0, 0.0)
    for a in (0.3, 1.0, 3.7, 8.0):
        q = pk_q(2400.0, 120, 300, 9, 2, 0, a)
        assert fit.solve_alpha(q, 2400.0, m) == pytest.approx(a, rel=1e-8)
    # below what the model gives with no socket-queue service at all: no alpha
    assert math.isnan(fit.solve_alpha(0.5 * pk_q(2400.0, 120, 300, 9, 2, 0, 0.0), 2400.0, m))
    assert math.isnan(fit.solve_alpha(50.0, 2400.0, fit.Moments(120.0, 0.0, 0.0, 0.0)))  # no B


def test_solve_base_takes_out_the_light_load_wait():
    # tracepoints: Q_t = W + B_t, B per type planted, R per type
    b_t = {"INVITE": 9.0, "180": 7.0, "ACK": 6.0}
    r_t = {"INVITE": 150.0, "180": 90.0, "ACK": 80.0}
    share = {k: 1 / 3 for k in b_t}
    bm = np.mean(list(b_t.values()))
    bv = np.var(list(b_t.values()))
    rm = np.mean(list(r_t.values()))
    rv_between = np.var(list(r_t.values()))
    rv = rv_between + 50.0
    cov = np.mean([(b_t[k] - bm) * (r_t[k] - rm) for k in b_t])
    lam = 900.0
    q = pk_q(lam, rm, rv, bm, bv, cov, 1.0)
    w = q - bm
    run = fit.RunInput("light", lam, lam / 6, "k_sockq", q, q_by_type={k: v + w for k, v in b_t.items()},
                       r_mean_us=rm, r_var_us2=rv, r_by_type=r_t, share_by_type=share)
    base = fit.solve_base(run)
    assert base.b_mean_us == pytest.approx(bm, rel=1e-7)
    for k in b_t:
        assert base.b_by_type[k] == pytest.approx(b_t[k], rel=1e-6)
    # black box (sojourn only): the whole service time, variance from the sojourn
    ex, v = 130.0, 900.0
    q2 = pk_q(lam, 0, 0, ex, v, 0, 1.0)
    base2 = fit.solve_base(fit.RunInput("s", lam, lam / 6, "sojourn", q2, q_var_us2=v))
    assert base2.b_mean_us == pytest.approx(ex, rel=1e-7)


@pytest.mark.parametrize("family,knots,values", [
    ("linear", (100.0, 3000.0), (1.0, 1.0 + 2900 / 400)),
    ("plateau", (100.0, 1200.0, 3000.0), (1.0, 1.0 + 1100 / 300, 1.0 + 1100 / 300)),
    ("two-slope", (100.0, 1500.0, 3000.0), (1.0, 3.8, 2.0)),
])
def test_alpha_curve_recovers_a_planted_curve(family, knots, values):
    lam = np.array([300.0, 600.0, 900.0, 1200.0, 1500.0, 1800.0, 2400.0, 3000.0])
    truth = np.interp(lam, knots, values)
    c = fit.fit_alpha_curve(lam, truth, 100.0)
    assert c.family == family
    assert c(lam) == pytest.approx(truth, abs=1e-9)
    assert float(c(5000.0)) == pytest.approx(values[-1])   # held beyond the highest fitted rate
    assert float(c(50.0)) == pytest.approx(1.0)


def _thesis_beta_rows():
    for t in ("5.2", "5.3", "5.4", "5.5", "5.6"):
        for _, r in wide(t).iterrows():
            yield t, r


def test_solve_beta_reproduces_the_thesis_tables():
    """Inverting the printed model drop probability (Tables 5.2-5.6: M/M/c/K, K = 200,
    E[X_c] = beta*c*E[X_1]) gives back the beta the printed E[X] implies (E[X] / (c E[X_1]))."""
    n = 0
    for t, r in _thesis_beta_rows():
        c = int(r["threads"])
        if not r["drop_prob_model"] > 0:
            continue
        b = fit.solve_beta(r["drop_prob_model"], r["lam_pps"], r["c_ex1_us"] / c, c, 200)
        assert b == pytest.approx(r["ex_us"] / r["c_ex1_us"], rel=3e-3), (t, r["cps"])
        n += 1
    assert n >= 12
    assert math.isnan(fit.solve_beta(0.0, 12000.0, 65.0, 2, 200))


def test_beta_plane_recovers_eq_5_6():
    """Eq. 5.6 was fitted to the last column of Tables 5.2-5.6: least squares on those five
    (c, lambda, beta) gives back 0.174 c + 0.923e-4 lambda - 0.60."""
    pts = []
    for t in ("5.2", "5.3", "5.4", "5.5", "5.6"):
        last = wide(t).sort_values("cps").iloc[-1]
        pts.append((last["threads"], last["lam_pps"], last["beta"]))
    p = fit.fit_beta_plane(*zip(*pts))
    assert p.fixed == ()
    assert p.c_coef == pytest.approx(0.174, rel=0.01)
    assert p.lam_coef == pytest.approx(0.923e-4, rel=0.01)
    assert p.const == pytest.approx(-0.60, rel=0.01)
    # one thread count only: beta = b*lambda + d, c not identified
    q = fit.fit_beta_plane([4, 4, 4], [1000, 2000, 3000], [1.1, 1.3, 1.5])
    assert q.fixed == ("c",) and q.lam_coef == pytest.approx(2e-4)
    assert fit.fit_beta_plane([], [], []) is None


def test_knee_measured_interpolates_and_censors():
    k = fit.knee_measured([300, 100, 200], [0.02, 0.0, 0.005])
    assert k == {"knee": pytest.approx(200 + (0.01 - 0.005) / 0.015 * 100), "censored": ""}
    assert fit.knee_measured([100, 200], [0.0, 0.001])["censored"] == "above"
    assert fit.knee_measured([100, 200], [0.05, 0.2])["censored"] == "below"


def test_knee_model_is_the_mm1k_knee():
    """Constant E[X]: the highest rate whose M/M/1/K loss is <= 1 %, with the loss written out
    here: p_K = (1 - rho) rho^K / (1 - rho^(K+1))."""
    ex_us, K = 150.0, 20

    def p_k(lam_cps):
        rho = lam_cps * 6 * ex_us * 1e-6
        return (1 - rho) * rho ** K / (1 - rho ** (K + 1)) if abs(rho - 1) > 1e-12 else 1 / (K + 1)

    truth = brentq(lambda x: p_k(x) - 0.01, 100.0, 5000.0, xtol=1e-9)
    got = fit.knee_model(lambda lam: ex_us, 1, K, None, msgs_per_call=6.0)
    assert got == pytest.approx(truth, rel=1e-5)


def test_c11_from_the_thesis_capacity_tables():
    """The thesis sets C_{1,1} = 1000 cps (§7.6); the best loads at <= 1 % drops of its three
    multi-core machines (Tables 7.2, 7.5, 7.8) fitted to C = T_{p,m} C_{1,1} give it back."""
    knees, ps, ms = [], [], []
    for tid, m, p in (("7.2", 2, 1), ("7.5", 4, 1), ("7.8", 6, 2)):
        w = wide(tid)
        knees.append(float(w[w["pdr"] <= 0.01]["cps"].max()))
        ps.append(p)
        ms.append(m)
    assert fit.fit_c11(knees, ps, ms) == pytest.approx(1000.0, rel=0.02)


def _sweep(b_us=8.0, r_us=110.0, rates=(5, 100, 300, 500), alpha=lambda lam: 1 + lam / 600):
    """Runs whose Q follow M/G/1 exactly with a known alpha(lambda) (a planted answer)."""
    out = []
    for cps in rates:
        lam = 6.0 * cps
        a = float(alpha(lam))
        q = pk_q(lam, r_us, 100.0, b_us, 0.5, 0.0, a)
        out.append(fit.RunInput(f"r{cps}", lam, cps, "k_sockq", q, q_se_us=0.01 * q,
                                q_by_type={"ALL": q}, r_mean_us=r_us, r_se_us=0.5, r_var_us2=100.0,
                                r_by_type={"ALL": r_us}, share_by_type={"ALL": 1.0}, pdr=0.0, pdr_se=0.0))
    return out


def test_fit_all_recovers_planted_constants():
    runs = _sweep()
    f = fit.fit_all(runs, n_boot=40)
    lam0 = runs[0].lam_pps
    a0 = 1 + lam0 / 600
    # the baseline is the lightest run: alpha is relative to it, B absorbs alpha(lam0)
    assert f.base.b_mean_us == pytest.approx(8.0 * a0, rel=1e-4)
    for r in runs[1:]:
        assert f.alpha_curve(r.lam_pps) * f.base.b_mean_us == pytest.approx(8.0 * (1 + r.lam_pps / 600), rel=1e-3)
    svc = f.constants["service_demand_us"]
    assert svc["value"] == pytest.approx(110 + 8 * a0, rel=1e-4)
    lo, hi = svc["ci95"]
    assert lo < svc["value"] < hi
    assert svc["runs"] == ["r5"]
    # every run is predicted (in-sample) exactly: a linear alpha is the planted one
    assert all(abs(d["w_err_pct"]) < 0.1 for d in f.per_run if d["run"] != "r5")
    # no drops measured: the knee is the model's, and so is C_{1,1}
    k = f.knees[0]
    assert k["measured_censored"] == "above" and k["model_cps"] > 500
    assert f.constants["c11_cps"]["value"] == pytest.approx(k["model_cps"])
    assert any("β is not fitted" in n for n in f.notes)


def test_fit_all_degrades():
    # no run with a proxy: nothing to fit, said in words
    f = fit.fit_all([fit.RunInput("ep", 100.0, 10.0, "sojourn", float("nan"))], n_boot=5)
    assert not f.constants and "cannot be estimated" in f.notes[0]
    # one run only: alpha not identified, the knee from the model with the service time as measured
    f1 = fit.fit_all(_sweep(rates=(100,)), n_boot=5)
    assert not f1.constants["alpha"]["identified"]
    assert math.isfinite(f1.knees[0]["model_cps"])


def test_drop_probability_needs_a_positive_service_time():
    """A zero service time (a light-load sojourn read as all waiting) is refused by name, not
    divided by: the fit then states no drop prediction for the run."""
    from sipperf.fit import drop_probability

    for bad in (0.0, -5.0, float("nan")):
        with pytest.raises(ValueError, match="positive service time"):
            drop_probability(6000.0, bad, 1, 200.0)
    assert 0 < drop_probability(6000.0, 150.0, 1, 200.0) < 1


def test_a_heavy_tailed_sojourn_is_not_read_as_a_vanishing_service_time():
    """Sojourn only, its spread from a few very long messages (a TLS handshake per call): the
    sojourn's variance alone makes an M/G/1 wait above the mean sojourn, so the root is B -> 0.
    That is refused as a reading (B = 0, said in the note), not returned as a tiny service time."""
    lam, q, v = 1695.0, 2180.0, 1.0e7          # messages/s, µs, µs² (a TLS-per-call run, 2 workers)
    run = fit.RunInput("tls-tn", lam, lam / 6, "sojourn", q, q_var_us2=v, threads=2)
    base = fit.solve_base(run)
    assert base.b_mean_us == 0.0 and "cannot be split" in base.note
    # the same mean with a modest spread still gives a positive reading
    ok = fit.RunInput("tcp", lam, lam / 6, "sojourn", q, q_var_us2=1.0e5, threads=2)
    assert fit.solve_base(ok).b_mean_us > 100.0
