"""The replay's own reach behind a verdict (``simulator.placement_reach``): how far leaving out a few VMs moves the
difference between two policies, on traces small enough to size in a second."""

from __future__ import annotations

import numpy as np
import pytest

from pond.simulator.placement_reach import Leaveout, kept, reach, saving
from pond.simulator.sizing import Question, Trace, fleet_sizing


def _trace(seed: int, n: int = 1500, servers: int = 16) -> Trace:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 100_000, n)
    end = start + rng.exponential(20_000, n).astype(int) + 60
    return Trace(start, end, np.zeros(n, np.int64), rng.integers(0, servers, n), rng.choice([2.0, 4.0, 8.0], n),
                 rng.choice([4.0, 8.0, 16.0, 32.0], n))


def _ask(t: Trace, policies: dict, q: Question, a: tuple[str, int], b: tuple[str, int], share: float = 0.05,
         draws: int = 3, seed: int = 0) -> float:
    return reach(fleet_sizing, t, policies, q, fleet_sizing(t, policies, q), a, b, Leaveout(share, draws, seed))


def test_the_mask_is_seeded_and_leaves_out_about_its_share():
    m = kept(100_000, 0.01, 7)
    assert np.array_equal(m, kept(100_000, 0.01, 7)) and not np.array_equal(m, kept(100_000, 0.01, 8))
    assert 0.009 < 1 - m.mean() < 0.011 and kept(50, 0.0, 1).all()


def test_nothing_left_out_or_no_draw_or_one_policy_twice_reaches_nothing():
    t = _trace(0)
    half = 0.5 * t.memory_gb
    q = Question(2, (8,), (30_000, 100_000), 32.0, 0.001, True)
    pair = (("half", 8), ("all_local", 0))
    assert _ask(t, {"half": half}, q, *pair, share=0.0) == 0.0
    assert _ask(t, {"half": half}, q, *pair, draws=0) == 0.0
    # the same split under two names: their difference is 0 on every trace the draws leave, so it never moves
    assert _ask(t, {"half": half, "twin": half.copy()}, q, ("half", 8), ("twin", 8)) == 0.0


def test_the_reach_is_the_largest_change_of_the_pair_s_difference_over_the_draws():
    t = _trace(1)
    policies = {"half": 0.5 * t.memory_gb, "tenth": 0.1 * t.memory_gb}
    q = Question(2, (8,), (30_000, 100_000), 32.0, 0.001, True)
    full = fleet_sizing(t, policies, q)
    every = saving(full, "half", 8) - saving(full, "tenth", 8)
    moved = []
    for d in range(3):
        keep = kept(len(t), 0.05, 10 + d)
        table = fleet_sizing(t.take(keep), {k: v[keep] for k, v in policies.items()}, q)
        moved.append(abs(saving(table, "half", 8) - saving(table, "tenth", 8) - every))
    got = reach(fleet_sizing, t, policies, q, full, ("half", 8), ("tenth", 8), Leaveout(0.05, 3, 10))
    assert got == pytest.approx(max(moved), abs=1e-5) and got > 0      # placed afresh, the first fit answers
    assert got == reach(fleet_sizing, t, policies, q, full, ("half", 8), ("tenth", 8), Leaveout(0.05, 3, 10))   # seeded


@pytest.mark.parametrize("seed", [2, 3])
def test_a_split_that_pools_nothing_has_no_difference_to_move(seed):
    """A check that needs no model: on one-server pools a split saves nothing on every trace a draw leaves, so its
    difference with all local moves by no more than whole GB round (0.5 points)."""
    t = _trace(seed)
    q = Question(2, (2,), (30_000, 100_000), 32.0, 0.001, True)
    assert _ask(t, {"half": 0.5 * t.memory_gb}, q, ("half", 2), ("all_local", 0)) <= 0.005
