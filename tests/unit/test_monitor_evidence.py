"""The QoS monitor's flags as LI evidence (optimize.monitor): the lab's view of the monitor, tonight's rate from the
flags, and the solver keeping the more cautious of two predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.optimize.evidence import tonight
from pond.optimize.monitor import lab_recall, over_recall, recall
from pond.optimize.solver import NextNight, more_cautious


def _curves() -> pd.DataFrame:
    # 10 workloads, 4 sensitive; called at P(insensitive) >= threshold; the solver's "off" row first
    return pd.DataFrame({"threshold": [np.inf, 0.0, 0.25, 0.5, 0.75],
                         "called": [0, 10, 8, 5, 2], "errors": [0, 4, 3, 1, 0], "n": [10, 10, 10, 10, 10]})


def test_the_lab_recall_counts_workloads_the_monitor_would_flag():
    # qos 0.5 flags 1 - P(insensitive) >= 0.5: P <= 0.5. Those at P >= 0.5 (5 called, 1 sensitive) count as not
    # flagged (the boundary: cautious), so 3 of 4 sensitive are caught and 6 - 4 = 2 insensitive raise alarms
    assert lab_recall(_curves(), 0.5) == (3, 4, 2, 6)
    # qos 0.3 flags P <= 0.7: not flagged from the first threshold >= 0.7 on (0.75: 2 called, none sensitive)
    assert lab_recall(_curves(), 0.3) == (4, 4, 4, 6)
    # qos 0.2 flags P <= 0.8: no threshold keeps any workload unflagged, so every one is flagged
    assert lab_recall(_curves(), 0.2) == (4, 4, 6, 6)
    assert lab_recall(_curves().iloc[:1], 0.5) == (0, 0, 0, 0)
    assert recall(3, 4) == pytest.approx(3.5 / 5) and recall(0, 0) == 0.5


def test_tonight_from_the_flags_is_each_days_flag_rate_among_called_vms_over_the_recall():
    day = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    p = np.array([0.9, 0.8, 0.6, 0.2, 0.95, 0.7, 0.65, 0.1])
    flagged = np.array([0, 1, 0, 1, 0, 0, 1, 1], bool)
    out = over_recall(tonight(day, p, flagged.astype(float), np.array([0.5, 0.75, 0.99])), 0.8)
    # threshold 0.5: day 0 flags 1 of 3 called, day 1 flags 1 of 3; 0.75: 1 of 2, then 0 of 1; 0.99: none called
    rates = np.array([[1 / 3, 1 / 3], [1 / 2, 0.0]])
    np.testing.assert_allclose(out.center[:2], rates.mean(axis=1) / 0.8)
    s = rates.std(axis=1, ddof=1) * np.sqrt(1.5)
    np.testing.assert_allclose(out.scale[:2], s / 0.8)
    np.testing.assert_array_equal(out.df, [1.0, 1.0, 0.0])
    assert out.center[2] == 0.0 and out.scale[2] == 0.0     # never called: nothing to say, nothing charged


def test_the_solver_keeps_the_more_cautious_prediction_per_candidate():
    a = NextNight(np.array([0.1, 0.3]), np.array([0.0, 0.0]), np.array([5.0, 5.0]))
    b = NextNight(np.array([0.2, 0.2]), np.array([0.0, 0.5]), np.array([5.0, 5.0]))
    mean = more_cautious(a, b, None)
    np.testing.assert_allclose(mean.center, [0.2, 0.3])
    # at the 95% quantile b's spread makes it the more cautious on the second candidate too
    q = more_cautious(a, b, 0.95)
    np.testing.assert_allclose(q.center, [0.2, 0.2])
    np.testing.assert_allclose(q.scale, [0.0, 0.5])
    assert more_cautious(None, b, 0.95) is b and more_cautious(a, None, None) is a and more_cautious(None, None, 0.5) is None


def test_the_monitors_capacity_leaves_zNUMA_overpredictions_it_mitigates_out_of_the_bound():
    from pond.optimize.solver import error_rate, grid

    args = ([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0] * 3, [0.2] * 3], [[0.0] * 3, [0.03] * 3], None, 100, 0)
    plain, mitigated = grid(*args), grid(*args, spare=np.array([0.01, 0.002]))
    q = error_rate(np.array([60.0]), np.array([0.0]))[0]
    np.testing.assert_allclose(plain.mean, [[0.0, 0.03], [0.4 * q, 0.4 * q + 0.6 * 0.03]])
    # UM only: 3% overpredicted, 1% mitigated; LI at 40%: its calls' flags left 0.2%, so 1.8% - 0.2% stays
    np.testing.assert_allclose(mitigated.mean, [[0.0, 0.02], [0.4 * q, 0.4 * q + 0.6 * 0.03 - 0.002]])
    # a capacity larger than the overpredictions leaves none of them, and never a negative share
    np.testing.assert_allclose(grid(*args, spare=np.array([0.05, 0.05])).mean[:, 1], [0.0, 0.4 * q])


def test_the_capacity_left_is_a_days_whole_mitigations_less_the_li_calls_flags():
    from pond.core.params import Params
    from pond.optimize.tonight import MonitorEvidence

    p = Params(optimize={"confidence": None, "credit_mitigation": True})
    flags = NextNight(np.array([0.0, 0.01, 0.5]), np.zeros(3), np.full(3, 5.0))
    spare = MonitorEvidence(None, flags, {}).spare(p, np.array([0.0, 0.4, 0.4]), 350.0)
    # floor(1% x 350) = 3 VMs of 350 a day; the LI calls' flags spend 0.4 x 1% and 0.4 x 50% of the day's VMs
    np.testing.assert_allclose(spare, [3 / 350, 3 / 350 - 0.004, 0.0])
    np.testing.assert_allclose(MonitorEvidence(None, None, {}).spare(p, np.array([0.4]), 350.0), [3 / 350])
    assert MonitorEvidence(None, flags, {}).spare(Params(), np.zeros(3), 350.0) is not None  # credited by default
    uncredited = Params(optimize={"credit_mitigation": False})
    assert MonitorEvidence(None, flags, {}).spare(uncredited, np.zeros(3), 350.0) is None


def test_li_errors_the_monitor_model_catches_within_its_capacity_are_not_charged():
    """``caught``: the solver charges (1 - c) of each candidate's LI errors, c the monitor model's held-out recall
    (here its mean) times the share of the LI calls' flags within the day's capacity."""
    from pond.core.params import Params
    from pond.optimize.solver import error_rate, grid
    from pond.optimize.tonight import MonitorEvidence

    args = ([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0] * 3, [0.2] * 3], [[0.0] * 3, [0.03] * 3], None, 100, 0)
    q = error_rate(np.array([60.0]), np.array([0.0]))[0]
    credited = grid(*args, caught=np.array([0.0, 0.75]))
    np.testing.assert_allclose(credited.mean[1], [0.4 * q * 0.25, 0.4 * q * 0.25 + 0.6 * 0.03])
    np.testing.assert_allclose(grid(*args, caught=np.zeros(2)).mean, grid(*args).mean)

    p = Params(optimize={"confidence": None, "credit_caught_calls": True})
    flags = NextNight(np.array([0.0, 0.01, 0.5]), np.zeros(3), np.full(3, 5.0))
    seen = MonitorEvidence(None, flags, {}, (97, 100))
    c = seen.caught(p, np.array([0.0, 0.4, 0.4]), 350.0)
    rho = recall(97, 100)
    # capacity 3 of 350 VMs a day: the first two candidates' flags fit it (0 and 0.4%), the third's 20% do not
    np.testing.assert_allclose(c, [rho, rho, rho * (3 / 350) / 0.2])
    at95 = MonitorEvidence(None, flags, {}, (97, 100)).caught(Params(optimize={"credit_caught_calls": True}),
                                                              np.array([0.0]), 350.0)
    assert at95[0] < rho                                       # its lower bound at optimize.confidence
    assert MonitorEvidence(None, flags, {}, (97, 100)).caught(Params(), np.zeros(3), 350.0) is None   # off by default
    assert MonitorEvidence(None, flags, {}, None).caught(p, np.zeros(3), 350.0) is None   # the first-hour monitor
    off = Params(optimize={"confidence": None, "credit_caught_calls": True, "credit_mitigation": False})
    assert seen.caught(off, np.zeros(3), 350.0) is None
