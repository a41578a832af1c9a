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


def test_caught_li_errors_are_not_charged_beyond_the_flags_or_the_capacity():
    """``credit``: the capacity is shared by all the monitor flags, in proportion, and a caught LI error is not
    charged; never more caught than its recall allows or than it flagged, never more mitigated than the capacity."""
    from pond.optimize.solver import Credit, error_rate, grid

    # LI off / on at 40% of VMs (60 lab workloads called, none sensitive); UM off / on at 3% OP
    args = ([0.0, 0.5], [0.0, 0.4], [0, 60], [0, 0], [[0.0] * 3, [0.2] * 3], [[0.0] * 3, [0.03] * 3], None, 100, 0)
    q = error_rate(np.array([60.0]), np.array([0.0]))[0]                 # 0.5 / 61
    flags_bind = Credit(0.05, 0.9, np.array([0.0, 0.006]), np.array([0.0, 0.01]))
    # the capacity holds every flag: the caught errors are the flags (0.6% < 0.9 x q), every OP is mitigated
    np.testing.assert_allclose(grid(*args, credit=flags_bind).mean[1], [0.4 * q - 0.4 * 0.006] * 2)
    recall_binds = Credit(0.05, 0.9, np.array([0.0, 0.05]), np.array([0.0, 0.05]))
    np.testing.assert_allclose(grid(*args, credit=recall_binds).mean[1], [0.4 * q * 0.1] * 2)
    # a capacity of 1.1%: 0.4% of VMs flagged among the calls and 0.6 x 3% zNUMAs ask for 2.2%, half is mitigated
    half = Credit(0.011, 0.9, np.array([0.0, 0.006]), np.array([0.0, 0.01]))
    np.testing.assert_allclose(grid(*args, credit=half).mean[1, 1], 0.4 * q - 0.5 * 0.4 * 0.006 + 0.5 * 0.6 * 0.03)
    assert half.caught_share(1, 0.4, q, 0.03) == pytest.approx(0.5 * 0.006 / q)
    # qos.touches: judged: the monitor moves only the touches it judges to suffer; every OP is charged, and the
    # capacity it may ask for still halves what the calls' flags get
    judged = Credit(0.011, 0.9, np.array([0.0, 0.006]), np.array([0.0, 0.01]), touches_mitigated=False)
    np.testing.assert_allclose(grid(*args, credit=judged).mean[1, 1], 0.4 * q - 0.5 * 0.4 * 0.006 + 0.6 * 0.03)
    np.testing.assert_allclose(grid(*args, credit=judged).mean[0, 1], 0.03)

    rng = np.random.default_rng(3)
    li, qs, op = rng.random((50, 1)), rng.random((50, 1)) * 0.2, rng.random((1, 7)) * 0.1
    credit = Credit(0.01, 0.8, rng.random(50) * 0.05, rng.random(50) * 0.05 + 0.05)
    left = credit.left(li, qs, op)
    assert (left >= li * qs * (1 - 0.8) - 1e-12).all()                          # no more than its recall
    assert (left >= li * qs + (1 - li) * op - 0.01 - 1e-12).all()               # no more than the capacity
    assert (left <= li * qs + (1 - li) * op + 1e-12).all()


def test_the_credit_is_the_monitor_models_recall_and_its_flags_within_a_days_capacity():
    from pond.core.params import Params
    from pond.optimize.tonight import MonitorEvidence

    p = Params(optimize={"confidence": None, "credit_caught_calls": True})
    flags = NextNight(np.array([0.0, 0.01, 0.5]), np.array([0.0, 0.002, 0.01]), np.full(3, 5.0))
    # per LI candidate, (caught, errors) among the lab's LI errors at it: none at the last
    seen = MonitorEvidence(None, flags, {}, (np.array([97.0, 9.5, 0.0]), np.array([100.0, 10.0, 0.0])))
    c = seen.credit(p, 350.0)
    assert c.cap == pytest.approx(3 / 350)
    np.testing.assert_allclose(c.recall, [recall(97, 100), 10 / 11, 0.5])      # Jeffreys means; no error: the prior
    np.testing.assert_allclose(c.flags_lo, flags.mean)
    np.testing.assert_allclose(c.flags_hi, flags.mean)
    at95 = seen.credit(Params(optimize={"credit_caught_calls": True}), 350.0)
    assert (at95.recall < c.recall).all()                                    # its lower bound at optimize.confidence
    assert at95.recall[2] < 0.1 and 0.6 < at95.recall[1] < at95.recall[0]  # no LI error judged: next to no credit
    assert (at95.flags_lo <= flags.mean).all() and (at95.flags_hi >= flags.mean).all()
    assert (at95.flags_lo[1:] < at95.flags_hi[1:]).all()
    assert seen.credit(Params(optimize={"credit_caught_calls": False}), 350.0) is None   # the operator's switch
    assert seen.credit(Params(), 350.0) is not None                                    # on by default
    assert MonitorEvidence(None, flags, {}, None).credit(p, 350.0) is None             # the first-hour monitor
    off = Params(optimize={"confidence": None, "credit_caught_calls": True, "credit_mitigation": False})
    assert seen.credit(off, 350.0) is None


def test_the_recall_credited_at_a_threshold_is_the_monitors_among_the_lab_s_li_errors_there():
    """``band_recall``: per LI threshold, the workloads called out of fold yet sensitive, each counted once with its
    share of runs the monitor flags; a workload the monitor was not judged on is left out, never counted caught."""
    from pond.optimize.monitor import band_recall
    from pond.optimize.solver import Credit

    scores = pd.DataFrame({"workload_id": ["a", "b", "c", "d", "e", "f"],
                           "p_insensitive": [0.9, 0.7, 0.5, 0.3, 0.8, 0.99], "insensitive": [0, 0, 0, 1, 1, 0]})
    shares = pd.Series({"a": 1.0, "b": 0.5, "c": 0.0, "d": 1.0, "e": 1.0})         # f: no run all on the pool
    caught, errors = band_recall(scores, shares, np.array([0.0, 0.6, 0.8, 0.95]))
    assert caught.tolist() == [1.5, 1.5, 1.0, 0.0] and errors.tolist() == [3, 2, 1, 0]
    assert band_recall(None, shares, np.array([0.5])) is None and band_recall(scores, None, np.array([0.5])) is None

    # the credit reads each candidate's own recall: one that catches nothing leaves its errors charged in full
    li, q, op = np.array([[0.4], [0.4]]), np.array([[0.02], [0.02]]), np.array([[0.0]])
    left = Credit(0.05, np.array([0.0, 1.0]), np.array([0.05, 0.05]), np.array([0.05, 0.05])).left(li, q, op)
    np.testing.assert_allclose(left[:, 0], [0.4 * 0.02, 0.0])


def test_the_recall_near_each_threshold_is_among_the_lab_s_li_errors_nearest_it():
    """``nearest_counts``: per LI threshold, (caught, errors) among the lab's LI errors called at it, at least the
    ``at_least`` with the highest out-of-fold scores; where the lab has no judged LI error, None (the recall over
    every run stands). Dividing the flags by it weighs them more where the errors near the threshold are missed."""
    from pond.optimize.monitor import nearest_counts

    scores = pd.DataFrame({"workload_id": ["a", "b", "c", "d", "e", "f"],
                           "p_insensitive": [0.9, 0.7, 0.5, 0.3, 0.8, 0.99], "insensitive": [0, 0, 0, 1, 1, 0]})
    shares = pd.Series({"a": 0.0, "b": 1.0, "c": 0.5, "d": 1.0, "e": 1.0})         # f: not judged, left out
    # errors by score: a 0.9 (missed), b 0.7 (caught), c 0.5 (half); at 0.0 all three, at 0.6 a and b,
    # at 0.8 and 0.95 fewer than two are called: the two nearest, a and b
    caught, n = nearest_counts(scores, shares, np.array([0.0, 0.6, 0.8, 0.95]), at_least=2)
    assert caught.tolist() == [1.5, 1.0, 1.0, 1.0] and n.tolist() == [3, 2, 2, 2]
    assert [x.tolist() for x in nearest_counts(scores, shares, np.array([0.95]), at_least=1)] == [[0.0], [1.0]]
    assert [x.tolist() for x in nearest_counts(scores, shares, np.array([0.5]), at_least=10)] == [[1.5], [3.0]]
    assert nearest_counts(scores.assign(insensitive=1), shares, np.array([0.5]), 2) is None
    assert nearest_counts(None, shares, np.array([0.5]), 2) is None
    # per threshold, the flags over that recall
    flags = NextNight(np.array([0.01, 0.01]), np.array([0.002, 0.002]), np.array([3.0, 3.0]))
    out = over_recall(flags, np.array([0.5, 0.25]))
    np.testing.assert_allclose(out.center, [0.02, 0.04])
    np.testing.assert_allclose(out.scale, [0.004, 0.008])


def test_with_touches_judged_no_capacity_is_counted_on_for_zNUMA_overpredictions():
    from pond.core.params import Params
    from pond.optimize.tonight import MonitorEvidence

    flags = NextNight(np.array([0.0, 0.01]), np.array([0.0, 0.002]), np.full(2, 5.0))
    seen = MonitorEvidence(None, flags, {}, (np.array([9.0, 9.0]), np.array([10.0, 10.0])))
    every, judged = Params(), Params(qos={"touches": "judged"})
    assert (seen.spare(every, np.array([0.0, 0.4]), 350.0) > 0).all()
    np.testing.assert_array_equal(seen.spare(judged, np.array([0.0, 0.4]), 350.0), [0.0, 0.0])
    assert seen.credit(every, 350.0).touches_mitigated and not seen.credit(judged, 350.0).touches_mitigated


def test_without_the_lab_floor_the_monitors_watched_calls_stand_in_place_of_the_lab_s_counts():
    """``optimize.lab_floor: false``: per threshold the watched VMs called at it and their flags over the recall are
    the counts the solver charges; a threshold no watched VM reached keeps the lab's, and the first-hour monitor
    (no ``watched``) changes nothing."""
    from pond.optimize.evidence import key_counts
    from pond.optimize.solver import error_rate
    from pond.optimize.tonight import MonitorEvidence

    lab = _curves()
    p = np.array([0.9, 0.8, 0.6, 0.3, 0.2, 0.95])
    flagged = np.array([0, 1, 0, 1, 1, 0], float)
    watched = key_counts(p, flagged, lab.threshold.to_numpy())
    # inf: none called; 0.0: all 6, 3 flagged; 0.25: 5, 2; 0.5: 4, 1; 0.75: 3 (0.8, 0.9, 0.95), 1
    assert watched[0].tolist() == [0, 6, 5, 4, 3] and watched[1].tolist() == [0, 3, 2, 1, 1]
    divisor = np.full(5, 0.5)
    got = MonitorEvidence(None, None, {}, None, divisor, watched).in_place_of(lab)
    assert got.called.tolist() == [0, 6, 5, 4, 3]
    # flags over a recall of one half, never more errors than calls; the "off" row keeps the lab's
    assert got.errors.tolist() == [0, 6, 4, 2, 2]
    assert got.n.tolist() == lab.n.tolist()
    # the lab's 0 errors of 2 at 0.75 would charge less than the fleet's flags say: the floor is not a ceiling
    assert error_rate(got.called, got.errors)[4] > error_rate(lab.called, lab.errors)[4]
    pd.testing.assert_frame_equal(MonitorEvidence(None, None, {}).in_place_of(lab), lab)
    pd.testing.assert_frame_equal(MonitorEvidence(None, None, {}, None, None, watched).in_place_of(lab), lab)


def test_the_false_alarms_taken_off_are_the_monitors_among_the_lab_s_calls_within_the_pdm():
    """``false_alarm_counts``: per LI threshold, the workloads within the PDM called out of fold, each once with its
    share of runs flagged; ``false_alarm_rate``: the rate's Jeffreys mean, 0 where none was judged."""
    from pond.optimize.monitor import false_alarm_counts, false_alarm_rate

    scores = pd.DataFrame({"workload_id": ["a", "b", "c", "d", "e"],
                           "p_insensitive": [0.9, 0.7, 0.5, 0.3, 0.8], "insensitive": [1, 1, 1, 0, 1]})
    shares = pd.Series({"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.0})                   # e: not judged, left out
    flagged, called = false_alarm_counts(scores, shares, np.array([0.0, 0.6, 0.95]))
    assert flagged.tolist() == [1.5, 0.5, 0.0] and called.tolist() == [3, 2, 0]
    assert false_alarm_rate((flagged, called)).tolist() == pytest.approx([2.0 / 4.0, 1.0 / 3.0, 0.0])


def test_flags_less_the_false_alarms_over_recall_less_false_alarms_are_the_error_rate():
    """``over_recall``: f = rho e + phi (1 - e). A monitor at recall 0.8 and 2% false alarms flagging
    5.9% of the calls says 5% erring (4% caught, and alarms on 2% of the 95%); counted as errors, 7.4%; where phi reaches rho
    every flag is an error."""
    flags = NextNight(np.array([0.059, 0.059, 0.059, 0.01]), np.array([0.01] * 4), np.array([5.0] * 4))
    got = over_recall(flags, np.array([0.8, 0.8, 0.1, 0.8]), np.array([0.02, 0.0, 0.2, 0.02]))
    assert got.center.tolist() == pytest.approx([0.05, 0.059 / 0.8, 0.59, -0.01 / 0.78])
    assert got.scale.tolist() == pytest.approx([0.01 / 0.78, 0.01 / 0.8, 0.1, 0.01 / 0.78])
    assert got.mean[3] == 0.0                                   # fewer flags than false alarms: no evidence of errors
    assert over_recall(flags, 0.8).center.tolist() == pytest.approx(over_recall(flags, 0.8, 0.0).center.tolist())
