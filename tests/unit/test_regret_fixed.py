"""The best pair fixed over every night (evaluation.regret.best_fixed), on grids worked out by hand."""

from __future__ import annotations

import numpy as np

from evaluation.regret import best_fixed

# Two nights, 2 LI thresholds x 2 UM targets. Night 1's best within 2% is (1, 0) at 30%, night 2's (1, 1) at 50%;
# only (0, 0) and (0, 1) keep 2% on both, and (0, 1) puts 22.5% on the pool on average.
POOL = [np.array([[0.10, 0.20], [0.30, 0.40]]), np.array([[0.10, 0.25], [0.35, 0.50]])]
MIS = [np.array([[0.00, 0.01], [0.01, 0.03]]), np.array([[0.00, 0.01], [0.03, 0.01]])]


def test_the_fixed_pair_keeps_the_budget_every_night_and_pools_the_most_on_average():
    assert best_fixed(POOL, MIS, 0.02) == (0, 1)
    assert best_fixed(POOL, MIS, 0.03) == (1, 1)          # a looser budget: the largest pair holds on both
    assert best_fixed(POOL[:1], MIS[:1], 0.02) == (1, 0)  # one night: the fixed pair is that night's best


def test_no_pair_holds_every_night():
    assert best_fixed(POOL, [m + 0.05 for m in MIS], 0.02) is None
    assert best_fixed([], [], 0.02) is None
