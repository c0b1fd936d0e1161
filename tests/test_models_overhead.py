"""β(λ, c) (eq. 5.6) and E[X_c] = β·c·E[X_1] (eq. 5.5) against the thesis's Tables 5.2–5.6."""
from __future__ import annotations

import numpy as np
import pytest

from sipperf.models.overhead import beta, service_time_c, thesis_drop_probability

# (c, lambda pkt/s, beta printed) at the >= 1 % drop point, the last column of Tables 5.2-5.6
LAST_COLUMNS = [(2, 14400, 1.077), (4, 13200, 1.314), (6, 10800, 1.4408), (8, 9600, 1.678), (16, 6000, 2.737)]


@pytest.mark.parametrize("c,lam,printed", LAST_COLUMNS)
def test_eq_5_6_reproduces_the_fitted_point(c, lam, printed):
    assert float(beta(lam, c)) == pytest.approx(printed, abs=1e-3)


def test_beta_formula_and_vectorisation():
    lam = np.array([0.0, 10000.0])
    assert beta(lam, 1).tolist() == pytest.approx([0.174 - 0.60, 0.174 + 0.923 - 0.60])
    assert float(beta(0.0, 1, clip_min=1.0)) == 1.0
    assert beta(6000.0, np.array([2, 4])).shape == (2,)


# (beta printed, c*E[X_1] printed, E[X] printed) from Tables 5.2-5.6 where they agree to 0.5 %
EQ55 = [(1.158, 130.32, 151.0), (1.077, 130.32, 140.37), (1.314, 260.64, 342.57), (1.806, 393.66, 711.0),
        (1.598, 393.66, 629.0), (2.076, 536.08, 1113.0), (1.789, 536.08, 959.0), (3.298, 1008, 3325.0),
        (2.956, 1008, 2980.0), (2.737, 1008, 2758.0)]


@pytest.mark.parametrize("b,cx1,ex", EQ55)
def test_eq_5_5_matches_tables(b, cx1, ex):
    # service_time_c(x1, c, beta) with x1 = cx1 / c
    assert float(service_time_c(cx1 / 4.0, 4, b)) == pytest.approx(ex, rel=0.005)


def test_drop_model_end_to_end_table_5_2():
    # 2 threads, E[X_1] = 65.16 us (Table 5.1, 2000 cps), beta = eq. 5.6 at 14 400 pkt/s -> 0.0119
    r = thesis_drop_probability(14400.0, 2, 65.16)
    assert float(r.p_block) == pytest.approx(0.0119, rel=0.02)


@pytest.mark.parametrize("args", [(0.0, 2, -1.0), (1.0, 0, 1.0), (1.0, 2, 0.0), (1.0, 1.5, 1.0)])
def test_service_time_c_invalid(args):
    with pytest.raises(ValueError):
        service_time_c(*args)


def test_beta_invalid():
    with pytest.raises(ValueError):
        beta(-1.0, 2)
    with pytest.raises(ValueError):
        beta(1.0, 0)
