"""`sipperf model ...` prints JSON that agrees with an independent computation."""
from __future__ import annotations

import json
import math

import pytest

from sipperf.cli import main


def _run(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    return rc, (json.loads(out) if out.strip() else None)


def test_mmck_json(capsys):
    rc, d = _run(capsys, ["model", "mmck", "--c", "2", "--K", "10", "--lam", "1.8", "--service-us", "1000000"])
    assert rc == 0
    a, c, K = 1.8, 2, 10
    p = [a ** n / math.factorial(n) if n <= c else a ** c / 2 * (a / c) ** (n - c) for n in range(K + 1)]
    assert d["p_block"] == pytest.approx(p[-1] / sum(p), rel=1e-12)
    assert d["W_us"] == pytest.approx(d["W"] * 1e6)


def test_mg1_json_and_unstable(capsys):
    rc, d = _run(capsys, ["model", "mg1", "--lam", "500", "1500", "--service-us", "1000", "--scv", "1"])
    assert rc == 0
    assert d["stable"] == [True, False]
    assert d["W_s"][0] == pytest.approx(0.5 * 1e-3 / 0.5)  # M/M/1: rho/(mu - lam)
    assert d["W_s"][1] == "inf"
    rc, d = _run(capsys, ["model", "mg1", "--thesis", "--lam", "600", "--t-sip-us", "102.1"])
    assert d["alpha"] == 3.0 and d["ex_us"] == pytest.approx(133.39, abs=0.01)


def test_mgck_and_capacity_json(capsys):
    rc, d = _run(capsys, ["model", "mgck", "--c", "2", "--K", "10", "--lam", "1.8", "--service-us", "1e6",
                          "--scv", "1"])
    rc2, m = _run(capsys, ["model", "mmck", "--c", "2", "--K", "10", "--lam", "1.8", "--service-us", "1e6"])
    assert d["p_block"] == pytest.approx(m["p_block"], rel=1e-12)
    rc, d = _run(capsys, ["model", "capacity", "--p", "2", "--c", "6", "--subscribers", "300000"])
    assert d["capacity_cps"] == 6000 and d["traffic"]["calls_per_s"] == pytest.approx(166.667, rel=1e-4)


def test_bad_parameters_exit_2(capsys):
    assert main(["model", "mmck", "--c", "4", "--K", "2", "--lam", "1", "--service-us", "1"]) == 2
    assert "K must be" in capsys.readouterr().err


def test_mmck_target_pdr(capsys):
    rc, d = _run(capsys, ["model", "mmck", "--c", "1", "--K", "1", "--lam", "1", "--service-us", "1e6",
                          "--target-pdr", "0.05"])
    assert d["max_lam_for_target"] == pytest.approx(0.05 / 0.95, rel=1e-7)  # Erlang B(1, a) = a/(1+a)
