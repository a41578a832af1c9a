"""The solver works in shares of VMs, bounds a night's mispredictions jointly, and lets zero lab
errors through; regret is measured against the hindsight-best pair."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pond.evaluation.regret import realized_grid
from pond.optimize.solver import best, error_draws, error_rate, grid, next_night, regret, spread


def test_hand_made_grid_means():
    # LI off / on (40% of VMs, 50% of GB; 30 lab workloads called, 0 errors); UM off / on (2 nights)
    g = grid(li_gb=[0.0, 0.5], li_vm=[0.0, 0.4], called=[0, 30], errors=[0, 0],
             um_nights=[[0, 0], [0.2, 0.4]], op_nights=[[0, 0], [0.01, 0.03]], level=None, samples=100, seed=0)
    assert g.pool == pytest.approx(np.array([[0.0, 0.3], [0.5, 0.5 + 0.5 * 0.3]]))
    q = 0.5 / 31
    assert g.mean == pytest.approx(np.array([[0.0, 0.02], [0.4 * q, 0.4 * q + 0.6 * 0.02]]))
    assert best(g.pool, g.mean, 0.02) == (1, 1)        # 0.0065 + 0.012 = 1.85% <= 2%
    assert best(g.pool, g.mean, 0.015) == (1, 0)       # UM's 1.2% no longer fits beside LI
    assert best(g.pool, g.mean, -0.1) is None


def test_a_pair_without_a_pool_share_is_infeasible_and_does_not_hide_the_others():
    pool = np.array([[0.0, 0.2, np.nan], [0.3, 0.4, 0.5]])
    bound = np.array([[0.0, 0.01, 0.01], [0.01, 0.01, 0.03]])
    assert best(pool, bound, 0.02) == (1, 1)
    assert best(np.full((2, 2), np.nan), np.zeros((2, 2)), 0.02) is None


def test_zero_lab_errors_give_a_bound_that_shrinks_with_the_evidence():
    u = np.random.default_rng(0).random(20000)
    q90 = np.quantile(error_draws(np.array([20, 60, 200]), np.zeros(3), u), 0.9, axis=1)
    assert q90[0] > q90[1] > q90[2] > 0
    assert q90[1] < 0.03                    # 60 workloads called, none wrong: under 3% at 90%
    # 40% of VMs called with that evidence costs about 1% of VMs: LI fits a 2% budget
    g = grid([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0]], [[0.0]], level=0.9, samples=4000, seed=1)
    assert g.bound[1, 0] < 0.02 and best(g.pool, g.bound, 0.02) == (1, 0)


def test_joint_bound_is_below_the_sum_of_separate_bounds_and_above_the_mean():
    op = np.array([[0.0] * 14, np.linspace(0.002, 0.02, 14)])
    g = grid([0.0, 0.4], [0.0, 0.35], [0, 50], [0, 1], [[0.0] * 14, [0.2] * 14], op, 0.9, 8000, 3)
    q = error_draws(np.array([50]), np.array([1]), np.random.default_rng(3).random(8000))
    pred = next_night(op)   # no days: the nights' mean and spread, one more night
    separate = 0.35 * np.quantile(q, 0.9) + 0.65 * (pred.center[1] + pred.scale[1] * stats.t.ppf(0.9, 13))
    assert g.mean[1, 1] < g.bound[1, 1] < separate
    assert error_rate(np.array([0, 10]), np.array([0, 1])) == pytest.approx([0.5, 1.5 / 11])


def test_a_drifting_op_is_predicted_for_tonight_not_bounded_by_the_past_nights():
    days = np.arange(-14.0, -4.0)                      # ten nights, the last one four days before tonight
    rising = 0.010 + 0.0005 * (days + 14)              # 1.0% ... 1.45%, no noise
    p = next_night(np.vstack([np.zeros(10), rising]), days)
    assert p.center == pytest.approx([0.0, 0.017]) and p.scale == pytest.approx([0.0, 0.0]) and p.df[1] == 8
    # every past night fits a 1.6% budget, tonight's line does not: UM is switched off
    g = grid([0.0], [0.0], [0], [0], [[0.0] * 10, [0.2] * 10], np.vstack([np.zeros(10), rising]), 0.95, 2000, 0, days)
    assert g.bound[0, 1] == pytest.approx(0.017) and best(g.pool, g.bound, 0.016) == (0, 0)
    noisy = rising + np.tile([0.001, -0.001], 5)
    p = next_night(noisy[None, :], days)
    x = days - days.mean()
    s = np.sqrt(((noisy - np.polyval(np.polyfit(days, noisy, 1), days)) ** 2).sum() / 8)
    assert p.center[0] == pytest.approx(np.polyval(np.polyfit(days, noisy, 1), 0.0))
    assert p.scale[0] == pytest.approx(s * np.sqrt(1 + 1 / 10 + days.mean() ** 2 / (x ** 2).sum()))


def test_a_falling_trend_never_promises_less_than_the_nights_spread():
    """A line through a trace's warm-up falls and would promise tonight too little: the nights' own
    mean and spread stay as the floor, at the level the solver bounds."""
    days = np.arange(-14.0, -4.0)
    falling = 0.020 - 0.0005 * (days + 14)             # 2.0% ... 1.55%: the line says 1.3% tonight
    p = next_night(falling[None, :], days, level=0.95)
    flat = np.std(falling, ddof=1) * np.sqrt(1 + 1 / 10)
    assert p.center == pytest.approx([falling.mean()]) and p.scale == pytest.approx([flat]) and p.df[0] == 9
    assert p.quantile(0.95) == pytest.approx([falling.mean() + flat * stats.t.ppf(0.95, 9)])
    assert next_night(falling[None, :], days).center == pytest.approx([falling.mean()])   # the mean, level None


def test_few_nights_widen_the_prediction():
    two = next_night(np.array([[0.01, 0.03]]), np.array([-6.0, -5.0]))     # too few for a line
    assert two.center == pytest.approx([0.02]) and two.df == 1
    assert two.scale == pytest.approx([np.std([0.01, 0.03], ddof=1) * np.sqrt(1.5)])
    one = next_night(np.array([[0.0], [0.01]]))                           # one night: no spread is known
    assert one.scale[0] == 0.0 and one.scale[1] == np.inf
    assert np.array_equal(one.draws(np.array([0.2, 0.8]))[1], [0.0, 1.0])
    assert np.array_equal(one.draws(np.array([0.2, 0.8]))[0], [0.0, 0.0])


def test_seeded():
    args = ([0.0, 0.5], [0.0, 0.4], [0, 30], [0, 2], [[0, 0], [0.2, 0.4]], [[0, 0], [0.01, 0.03]], 0.9, 500, 11)
    assert np.array_equal(grid(*args).bound, grid(*args).bound)


def test_regret_on_a_hand_made_night():
    # Four 10-GB VMs. A: history, p .9, insensitive; B: history, p .6, sensitive; C: no history, UM raw .5,
    # touches 3 GB; D: no truth, p .95, touches 9 GB, UM raw .5.
    night = pd.DataFrame({"memory_gb": [10.0] * 4, "has_history": [True, True, False, True],
                          "p_insensitive": [0.9, 0.6, np.nan, 0.95], "um_raw": [0.5, 0.5, 0.5, 0.5],
                          "sensitive": [0.0, 1.0, np.nan, np.nan], "touched_known_gb": [1.0, 2.0, 3.0, 9.0]})
    thresholds = np.array([np.inf, 0.8, 0.5])
    offsets = np.array([np.nan, 0.0])
    q = np.array([0.0, 0.1, 0.1])
    pool, mis = realized_grid(night, thresholds, offsets, q)
    # UM alone: 5 GB zNUMA each; D touches 9 > 5 local: 1 OP of 4
    assert pool[0] == pytest.approx([0.0, 0.5]) and mis[0] == pytest.approx([0.0, 0.25])
    # t .8 calls A and D (D without truth: 0.1); with UM, B and C get zNUMAs, neither overpredicted
    assert pool[1] == pytest.approx([0.5, 0.75]) and mis[1] == pytest.approx([0.025, 0.025])
    # t .5 also calls B (sensitive): 1 FP + 0.1
    assert pool[2] == pytest.approx([0.75, 0.875]) and mis[2] == pytest.approx([0.275, 0.275])
    r = regret(pool, mis, budget=0.03, chosen=(0, 1))    # the policy ran UM only
    assert r["hindsight_pool"] == pytest.approx(0.75) and r["chosen_pool"] == pytest.approx(0.5)
    assert r["regret"] == pytest.approx(0.25) and (r["hindsight_li_index"], r["hindsight_um_index"]) == (1, 1)


def test_called_shares_are_the_thresholds_by_vms_matrix():
    """optimize's fleet LI shares by score order equal the matrix the stage used to build: ties at a
    threshold count as called, an unknown VM or a NaN score never, an infinite threshold calls none."""
    from pond.optimize.solver import called_shares

    rng = np.random.default_rng(9)
    p = np.round(rng.random(5_000), 2)                    # many ties, some exactly at a threshold
    p[rng.random(5_000) < 0.05] = np.nan
    known = rng.random(5_000) < 0.7
    mem = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0, 56.0, 448.0], 5_000)
    thresholds = np.r_[np.round(np.linspace(0, 1, 41), 3), np.inf]
    with np.errstate(invalid="ignore"):
        called = known[None, :] & (p[None, :] >= thresholds[:, None])
    vms, gb = called_shares(p, known, mem, thresholds)
    assert vms.tolist() == called.mean(axis=1).tolist()
    assert gb.tolist() == ((called @ mem) / mem.sum()).tolist()
    assert vms[-1] == gb[-1] == 0.0 and vms[0] == (known & ~np.isnan(p)).mean()


def test_realized_grid_is_the_thresholds_by_vms_matrix():
    """The regret replay sums in score order; it equals the called-VMs matrix it replaced: ties at a
    threshold called, a VM without history or score never, an infinite threshold none."""
    from pond.models.decision import PolicyKnobs, decide

    rng = np.random.default_rng(4)
    n = 3_000
    night = pd.DataFrame({"memory_gb": rng.choice([2.0, 8.0, 32.0, 448.0], n), "has_history": rng.random(n) < 0.8,
                          "p_insensitive": np.where(rng.random(n) < 0.05, np.nan, np.round(rng.random(n), 2)),
                          "um_raw": rng.random(n), "sensitive": rng.choice([0.0, 1.0, np.nan], n),
                          "touched_known_gb": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 40)})
    thresholds, offsets = np.r_[np.inf, np.round(np.arange(0.3, 1.0, 0.01), 2)], np.array([np.nan, 0.0, 0.1])
    q = np.linspace(0.0, 0.05, len(thresholds))
    pool, mis = realized_grid(night, thresholds, offsets, q)
    mem, p, sens = night.memory_gb.to_numpy(), night.p_insensitive.to_numpy(), night.sensitive.to_numpy()
    with np.errstate(invalid="ignore"):
        called = night.has_history.to_numpy()[None, :] & (p[None, :] >= thresholds[:, None])
    for j, off in enumerate(offsets):
        if np.isnan(off):
            z, o = np.zeros(n), np.zeros(n, bool)
        else:
            d = decide(mem, np.zeros(n, bool), np.full(n, np.nan), night.um_raw.to_numpy(), PolicyKnobs(None, off))
            z = d["pool_gb"]
            with np.errstate(invalid="ignore"):
                o = (z > 0) & (night.touched_known_gb.to_numpy() > d["local_gb"] + 1e-9)
        want_pool = (np.where(called, mem, 0.0).sum(1) + np.where(called, 0.0, z).sum(1)) / mem.sum()
        want_mis = (((sens == 1) & called).sum(1) + q * (np.isnan(sens) & called).sum(1) + (~called & o).sum(1)) / n
        assert pool[:, j] == pytest.approx(want_pool, rel=1e-12) and mis[:, j] == pytest.approx(want_mis, rel=1e-12)
    assert called[1:].any(axis=1).all() and not called[0].any()


def test_the_fleets_measured_days_only_ever_make_the_lab_bound_more_cautious():
    # the lab: 60 workloads called, none wrong; the fleet's days at the threshold: 1%, 3%, 2%, 4% of VMs wrong
    lab = grid([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0]], [[0.0]], level=0.95, samples=4000, seed=1)
    days = spread(np.array([[np.nan] * 4, [0.01, 0.03, 0.02, 0.04]]))
    both = grid([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0]], [[0.0]], level=0.95, samples=4000, seed=1,
                li_next=days)
    assert both.mean[1, 0] == pytest.approx(0.4 * 0.025) and both.bound[1, 0] > lab.bound[1, 0]
    assert both.bound[1, 0] == pytest.approx(0.4 * days.quantile(0.95)[1], rel=0.02)
    assert both.bound[0, 0] == lab.bound[0, 0] == 0.0
    # days that say less than the lab's counts leave the bound as the lab's
    calm = spread(np.array([[np.nan] * 4, [0.0, 0.0, 0.0, 0.0]]))
    assert grid([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0]], [[0.0]], level=0.95, samples=4000, seed=1,
                li_next=calm).bound[1, 0] == lab.bound[1, 0]


def test_a_threshold_the_lab_never_calls_is_charged_the_prior_not_zero():
    """A lab whose workloads are all sensitive calls none of them insensitive at any threshold the fleet's
    VMs pass; charging those thresholds 0% error enabled LI on 77% of the VMs with a bound of 0."""
    g = grid([0.0, 0.8], [0.0, 0.77], [0, 0], [0, 0], [[0.0]], [[0.0]], level=0.95, samples=4000, seed=0)
    assert g.mean[1, 0] == pytest.approx(0.77 * 0.5) and g.bound[1, 0] > 0.7
    assert best(g.pool, g.bound, 0.02) == (0, 0)                  # LI off, not 80% of memory on the pool
    assert error_draws(np.array([0]), np.array([0]), np.array([0.5]))[0, 0] == pytest.approx(0.5)


def test_error_draws_of_candidates_that_share_their_counts_are_drawn_once_and_the_same():
    """Each row is the Jeffreys posterior's quantiles at the shared uniforms, whichever row repeats another's counts."""
    called, errors = np.array([40, 10, 40, 0, 10]), np.array([2, 0, 2, 0, 1])
    u = np.random.default_rng(5).random(300)
    q = error_draws(called, errors, u)
    want = stats.beta.ppf(u[None, :], errors[:, None] + 0.5, (called - errors)[:, None] + 0.5)
    assert q.shape == (5, 300) and np.array_equal(q, want) and np.array_equal(q[0], q[2])
    assert error_draws(np.array([], int), np.array([], int), u).shape == (0, 300)
