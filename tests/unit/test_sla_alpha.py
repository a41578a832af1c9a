"""SLA-alpha mitigation (evaluation.sla_alpha): the GB given back, worked out by hand from a spill curve."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.sla_alpha import GRID, keep_on_pool_pct, nearest_curves, sla_alpha, summarize

LEVELS = [0.0, 25.0, 50.0, 100.0]
# slowdown (%) by spilled share of touched memory
CURVES = pd.DataFrame([[0.0, 2.0, 4.0, 12.0], [0.0, 10.0, 20.0, 40.0], [0.0, 30.0, 40.0, 50.0]],
                      index=["mild", "steep", "worse"], columns=LEVELS)
LAB = pd.DataFrame({"a": [1.0, 10.0], "b": [0.0, 5.0]}, index=["mild", "steep"])   # the lab has no "worse"


def test_the_curve_is_that_of_the_nearest_lab_workloads():
    own = pd.DataFrame({"a": [2.0, 9.0, np.nan], "b": [0.5, 4.0, np.nan]})
    c = nearest_curves(own, LAB, CURVES, k=1)
    np.testing.assert_allclose(c[0], np.interp(GRID, LEVELS, CURVES.loc["mild"]))
    np.testing.assert_allclose(c[1], np.interp(GRID, LEVELS, CURVES.loc["steep"]))
    assert np.isnan(c[2]).all()                                      # no counters: no curve
    both = nearest_curves(own.iloc[:1], LAB, CURVES, k=2)[0]
    np.testing.assert_allclose(both, np.interp(GRID, LEVELS, CURVES.loc[["mild", "steep"]].mean()))


def test_the_share_kept_on_the_pool_is_the_last_within_the_pdm():
    c = nearest_curves(pd.DataFrame({"a": [2.0, 9.0], "b": [0.5, 4.0]}), LAB, CURVES, k=1)
    # mild: 4 + 8 (x - 50) / 50 <= 5 up to x = 56.25, on a half-point grid 56.0; steep: 10 x / 25 <= 5 up to 12.5
    np.testing.assert_allclose(keep_on_pool_pct(c, 5.0), [56.0, 12.5])
    dip = np.interp(GRID, [0, 10, 20, 100], [0, 9, 1, 1])[None, :]   # past 5 at 5.6%, back under later
    assert keep_on_pool_pct(dip, 5.0)[0] == 5.5
    assert keep_on_pool_pct(np.full((1, len(GRID)), 6.0), 5.0)[0] == 0.0
    assert np.isnan(keep_on_pool_pct(np.full((1, len(GRID)), np.nan), 5.0)[0])


def _watched() -> pd.DataFrame:
    return pd.DataFrame({
        "memory_gb": [64.0, 32.0, 16.0, 8.0], "pool_gb": [64.0, 32.0, 4.0, 8.0],
        "li_called": [True, True, False, True], "mitigated": [True, True, True, False],
        "touched_known_gb": [48.0, np.nan, 16.0, 8.0], "unmitigated": [False, False, False, True],
        "lab_truth": [True, True, True, True]})


def test_sla_alpha_gives_back_the_gb_worked_out_by_hand_and_the_truth_judges_it():
    keep = np.array([56.0, 12.5, 50.0, 10.0])
    out = sla_alpha(_watched(), keep, CURVES, pd.Series(["mild", "worse", "mild", "mild"]), 5.0)
    # VM 0 keeps 56% of 64 GB = 35.84 GB on the pool and gets 28.16 GB back; it touches 48 GB, so
    # 48 - 28.16 = 19.84 GB spill (41.33% of 48), where "mild" slows 2 + 2 x 16.33 / 25 = 3.31% <= 5: within
    # VM 1 keeps 12.5% of 32 = 4 GB, gets 28 back; its touch is unknown, so all 32 GB: 4 GB spill (12.5%), where
    # its real workload ("worse", not in the lab) slows 15%: still slowed
    # VM 2 is a zNUMA caught touching its node: all of its 4 GB comes back; VM 3 was not mitigated
    np.testing.assert_allclose(out.alpha_gb, [28.16, 28.0, 4.0, 0.0])
    assert out.alpha_slowed.tolist() == [False, True, False, False]
    s = summarize(out.assign(lab_truth=True))
    assert s["sla_alpha_gb_share"] == pytest.approx(60.16 / 120.0)
    assert s["mispredictions_unmitigated_sla_alpha"] == pytest.approx(2 / 4)    # VM 3 missed, VM 1 still slowed


def test_without_a_curve_sla_alpha_gives_back_everything_as_all_local_does():
    out = sla_alpha(_watched(), np.full(4, np.nan), CURVES, pd.Series(["mild"] * 4), 5.0)
    np.testing.assert_allclose(out.alpha_gb, [64.0, 32.0, 4.0, 0.0])
    assert not out.alpha_slowed.any()
