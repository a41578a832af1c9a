"""The reachable yardstick (evaluation.regret, reported by the backtest stage): the best fixed pair among the LI
thresholds the lab's own counts admit."""

from __future__ import annotations

import numpy as np

from pond.evaluation.regret import admitted, best_admitted, best_fixed


def test_a_threshold_is_admitted_when_its_calls_alone_fit_the_budget_at_the_labs_rate():
    li_vm = np.array([0.0, 0.3, 0.5])                 # LI off, then two thresholds
    called, errors = np.array([0, 50, 80]), np.array([0, 0, 5])
    # Jeffreys means 0.5 / 51 and 5.5 / 81: 0.3 x 0.0098 = 0.29% fits 2%, 0.5 x 0.0679 = 3.4% does not
    np.testing.assert_array_equal(admitted(li_vm, called, errors, None, 0.02), [True, True, False])
    # the 95% quantile of Beta(0.5, 50.5) is above its mean: stricter, never looser (LI off always fits)
    assert admitted(li_vm, called, errors, 0.95, 0.005).tolist() == [True, False, False]
    assert admitted(li_vm, called, errors, None, 0.005).tolist() == [True, True, False]


def test_the_restricted_yardstick_keeps_only_admitted_thresholds_and_the_budget_on_every_night():
    # 3 thresholds (off, t1, t2) x 2 UM candidates (off, j1), two nights
    pools = [np.array([[0.0, 0.2], [0.3, 0.45], [0.5, 0.6]]), np.array([[0.0, 0.2], [0.3, 0.40], [0.5, 0.6]])]
    left = [np.array([[0.0, 0.01], [0.005, 0.015], [0.01, 0.019]]),
            np.array([[0.0, 0.01], [0.005, 0.025], [0.01, 0.019]])]
    # unrestricted: (t2, j1) keeps 2% on both nights at the most pool (0.6)
    assert best_fixed(pools, left, 0.02) == (2, 1)
    # t2 not admitted: (t1, j1) breaks the budget on night 2 (2.5%), so (t1, off) at 0.30 beats (off, j1) at 0.20
    assert best_admitted(pools, left, np.array([True, True, False]), 0.02) == (1, 0)
    assert best_admitted(pools, left, np.array([True, False, False]), 0.02) == (0, 1)


def test_the_backtest_reports_both_yardsticks_per_night():
    """``with_fixed_regret``: each night's regret against the best fixed pair and against the best admitted one,
    the threshold admitted only where the lab admits it on every night."""
    import pandas as pd

    from pond.evaluation.backtest import with_fixed_regret

    pools = [np.array([[0.0, 0.2], [0.3, 0.45], [0.5, 0.6]]), np.array([[0.0, 0.2], [0.3, 0.40], [0.5, 0.6]])]
    left = [np.array([[0.0, 0.01], [0.005, 0.015], [0.01, 0.019]]),
            np.array([[0.0, 0.01], [0.005, 0.025], [0.01, 0.019]])]
    nights = pd.DataFrame({"budget": [0.02, 0.02], "chosen_pool": [0.25, 0.35]})
    admits = [np.array([True, True, True]), np.array([True, True, False])]   # t2 ruled out on night 2
    out, fixed, best = with_fixed_regret(nights, list(zip(pools, left)), admits)
    assert (fixed, best) == ((2, 1), (1, 0))
    np.testing.assert_allclose(out.regret_fixed, [0.35, 0.25])
    np.testing.assert_allclose(out.regret_admitted, [0.05, -0.05])
    assert out.admitted_thresholds.tolist() == [1, 1]
