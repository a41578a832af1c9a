"""The solver is exact: it matches brute force and scipy's MILP on random step curves."""

from __future__ import annotations

import numpy as np
import pytest

from optimize.solver import clopper_pearson_upper, solve, solve_brute_force, solve_milp


def _curves(rng, n_li=25, n_um=15):
    fp = np.r_[0.0, np.sort(rng.random(n_li - 1) * 0.1)]
    li = np.r_[0.0, np.sort(rng.random(n_li - 1) * 0.5)]
    op = np.r_[0.0, np.sort(rng.random(n_um - 1) * 0.2)]
    um = np.r_[0.0, rng.random(n_um - 1) * 0.5]  # noisy: not monotone in OP
    return li, fp, um, op


@pytest.mark.parametrize("seed", range(40))
def test_exact_against_brute_force_and_milp(seed):
    rng = np.random.default_rng(seed)
    li, fp, um, op = _curves(rng)
    h, budget = rng.uniform(0.5, 1.0), rng.choice([0.0, 0.005, 0.02, 0.05, 0.2])
    fast, brute = solve(li, fp, um, op, h, budget), solve_brute_force(li, fp, um, op, h, budget)
    assert fast.pool == pytest.approx(brute.pool, abs=1e-12)
    assert fast.mispredictions <= budget + 1e-9
    if seed < 15:  # MILP is the slow oracle
        assert solve_milp(li, fp, um, op, h, budget).pool == pytest.approx(brute.pool, abs=1e-9)


def test_hand_made_case():
    li, fp = np.array([0.0, 0.2, 0.4]), np.array([0.0, 0.01, 0.03])
    um, op = np.array([0.0, 0.1, 0.3]), np.array([0.0, 0.01, 0.04])
    # h = 1, budget 2%: (li .2, fp .01) leaves 1%/0.8 = 1.25% OP -> um .1: pool .2 + .8 * .1 = .28
    # (li 0) allows OP 2% -> um .1 only: .1; (li .4) costs 3% > budget.
    c = solve(li, fp, um, op, h=1.0, budget=0.02)
    assert (c.li_index, c.um_index) == (1, 1) and c.pool == pytest.approx(0.28)
    assert c.mispredictions == pytest.approx(0.01 + 0.8 * 0.01)
    assert not solve(li + 0.1, fp + 0.05, um, op + 0.05, 1.0, 0.02).feasible


def test_clopper_pearson():
    assert clopper_pearson_upper(np.array([0]), 100, 0.95)[0] == pytest.approx(1 - 0.05 ** (1 / 100))
    assert clopper_pearson_upper(np.array([10]), 10, 0.95)[0] == 1.0
    up = clopper_pearson_upper(np.array([4, 40]), np.array([100, 1000]), 0.95)
    assert (up > [0.04, 0.04]).all() and up[1] < up[0]  # more VMs, tighter bound
