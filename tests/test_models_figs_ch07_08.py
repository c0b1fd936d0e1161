"""The comparisons and highest stable loads of :mod:`sipperf.audit` (ch. 7–8) against the thesis's own tables."""
from __future__ import annotations

import numpy as np
import pytest

from sipperf import audit, thesis


@pytest.mark.parametrize("key,tid", list(audit.MEASURED_TABLES.items()))
def test_highest_stable_load_is_below_the_bold_column(key, tid):
    """The thesis sets in bold the first load whose PDR exceeds 1 %; the highest stable load is the
    other printed load of the same thread count (both are 200 calls/s apart)."""
    cores, mode = key
    hs = audit.highest_stable_load().set_index(["cores", "threads"])[mode]
    df = thesis.load_table(tid)
    pdr = df[df["quantity"] == "pdr"]
    for th, g in pdr.groupby("threads"):
        bold = g[g["bold"]]
        assert len(bold) == 1
        assert hs.loc[(cores, int(th))] == int(bold["cps"].iloc[0]) - 200


def test_rounded_pdr_cell_of_table_7_1():
    w = thesis.wide("7.1")
    row = w[(w["threads"] == 16) & (w["cps"] == 2600)].iloc[0]
    assert row["pdr"] == pytest.approx(0.0100)            # printed, rounded
    assert 3364 / 335899 > 0.01                           # the counts: 1.0015 %
    assert float(audit.pdr_from_counts(w[(w["threads"] == 16) & (w["cps"] == 2600)]).iloc[0]) == pytest.approx(
        3364 / 335899)


def test_comparison_from_counts_table_6_9():
    c = audit.comparison_from_counts("6.9").set_index("threads")
    # by hand from Tables 6.7 and 6.8 at 4 threads, 2800 calls/s
    b, e = 25563 / 495007, 25613 / 479114
    assert c.loc[4, "PDR baseline"] == pytest.approx(b)
    assert c.loc[4, "PDR enhanced"] == pytest.approx(e)
    assert c.loc[4, "PDR % lower, from counts"] == pytest.approx(100 * (b - e) / b)
    assert c.loc[4, "PDR % lower, from counts"] < 0        # enhanced worse, against the printed 19.82 %


def test_comparison_from_counts_agrees_with_printed_where_cells_are_consistent():
    """Where the comparison table repeats a measurement table's PDR, the recount rounds to it
    except at the cells the audit flags (printed PDR that disagrees with its own counts)."""
    flagged = {("6.9", 4)}  # Table 6.7: 0.0666 printed for 25563/495007
    for tid in audit.COMPARISON_SOURCES:
        printed = thesis.wide(tid).set_index("threads")
        counts = audit.comparison_from_counts(tid).set_index("threads")
        for th in counts.index:
            for mode in ("baseline", "enhanced"):
                v = counts.loc[th, f"PDR {mode}"]
                if np.isnan(v) or (tid, th) in flagged:
                    continue
                assert v == pytest.approx(printed.loc[th, f"pdr_{mode}"], abs=6e-4), (tid, th, mode)
