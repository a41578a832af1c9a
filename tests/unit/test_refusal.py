"""The service's memory of the monitor's flags, replayed (``evaluation.refusal``): exact refusals on hand-made
groups, and on random ones the rule itself, checked VM by VM."""

from __future__ import annotations

import numpy as np

from pond.evaluation.refusal import refused_calls

LAG, HOLD = 3600.0, 7200.0


def test_a_flag_refuses_its_group_from_the_lag_on_for_the_hold_and_arms_again_after():
    #            A: flag, call, refused, refused (its flag dropped), a flag again, not yet, refused
    group = np.array(["A"] * 7 + ["B", "B", "C", "C"] + ["D"] * 3, dtype=object)
    t = np.array([0, 1800, 3600, 7200, 10800, 12000, 15000,
                  0, 5000,                        # B: calls never flagged
                  0, 5000,                        # C: flagged, but no insensitive call (a zNUMA): not counted
                  0, 1800, 11000], float)         # D: two flags before the refusal starts: it ends 1800 s later
    called = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1], bool)
    flagged = np.array([1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0], bool)
    got = refused_calls(group, t, called, flagged, LAG, HOLD)
    assert got.tolist() == [False, False, True, True, False, False, True,
                            False, False, False, False, False, False, True]
    assert not refused_calls(group, t, called, flagged, LAG, 0.0).any()
    assert not refused_calls(group, t, called, np.zeros(len(t), bool), LAG, HOLD).any()
    order = np.random.default_rng(0).permutation(len(t))     # any row order: the same VMs
    assert (refused_calls(group[order], t[order], called[order], flagged[order], LAG, HOLD) == got[order]).all()


def test_a_vm_is_refused_exactly_when_a_flag_of_its_group_that_was_not_refused_reached_the_service_in_time():
    rng = np.random.default_rng(7)
    n = 600
    group = rng.integers(0, 12, n).astype(str).astype(object)
    t = np.sort(rng.uniform(0, 86400 * 3, n))
    called, flagged = rng.random(n) < 0.7, rng.random(n) < 0.2
    got = refused_calls(group, t, called, flagged, LAG, 6 * 3600.0)
    live = called & flagged & ~got                          # the flags the service received
    for i in range(n):
        f = live & (group == group[i])
        expected = bool(((t[f] + LAG <= t[i]) & (t[i] < t[f] + LAG + 6 * 3600.0)).any())
        assert got[i] == expected, i
    assert 0 < got.sum() < n
    # the flags come from the monitor, never from the truth: the refusals depend on nothing but these inputs
    assert (refused_calls(group, t, called, flagged, LAG, 6 * 3600.0) == got).all()
