"""simulate.buy_days: auto buys DRAM on whole weeks only once the window holds a week to buy and a week to judge,
and the replay says how much the fleet grew between the two."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.replay import bought_ahead, buy_days_for, peak_growth

DAY = 86400


@pytest.mark.parametrize("days, bought", [(1, 0), (7, 0), (13, 0), (14, 7), (27, 7), (28, 14), (41, 14), (42, 21),
                                          (75, 35)])
def test_auto_buys_on_whole_weeks_up_to_half_the_window(days, bought, capsys):
    window = (5 * DAY, (5 + days) * DAY + 3600)            # an hour past the last whole day: still `days` days
    assert buy_days_for(window, "auto") == bought
    assert ("buys DRAM ahead" in capsys.readouterr().out) == (bought == 0)
    assert bought == 0 or (bought % 7 == 0 and bought <= days - bought)     # judged on at least as many days


@pytest.mark.parametrize("days", [0, 3, 7, 30])
def test_a_number_is_taken_as_given(days):
    assert buy_days_for((0, 10 * DAY), days) == days


def test_the_windows_auto_gives_split_the_measured_window():
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    window = (2 * DAY, 23 * DAY)                            # 21 days: a week bought, two judged
    bought, judged, label = bought_ahead(window, "window", "auto", t0)
    assert bought == (2 * DAY, 9 * DAY) and judged == (9 * DAY, 23 * DAY)
    assert label == "window; DRAM bought on its first 7 days, judged from 2026-01-10 00:00"
    assert bought_ahead((2 * DAY, 12 * DAY), "window", "auto", t0) == ((2 * DAY, 12 * DAY), (2 * DAY, 12 * DAY),
                                                                        "window")


def test_peak_growth_compares_the_alive_memory_peaks_of_the_two_spans():
    """A VM alive across the cut counts in both spans; one arriving as another leaves does not stack."""
    h = 3600
    start = np.array([0, 10 * h, 30 * h, 40 * h, 40 * h])
    end = np.array([100 * h, 20 * h, 40 * h, 60 * h, 45 * h])
    mem = np.array([100.0, 50.0, 20.0, 20.0, 30.0])
    bought, judged = (5 * h, 35 * h), (35 * h, 70 * h)
    # bought: 100 + 50 (10-20 h), then 100 + 20; judged: 100 + 20 until 40 h, then 100 + 20 + 30 (the one ending
    # at 40 h has left): 150 against 150
    assert peak_growth(start, end, mem, bought, judged) == pytest.approx(0.0)
    assert peak_growth(start, end, mem, (25 * h, 35 * h), judged) == pytest.approx(150 / 120 - 1)
    assert peak_growth(start, end, mem, judged, (70 * h, 80 * h)) == pytest.approx(100 / 150 - 1)


def test_auto_counts_the_days_vms_arrive_on_not_the_days_old_ones_take_to_leave(capsys):
    """Four VMs created on a trace's first two days and gone a month later: nothing arrives to judge DRAM on."""
    window = (0, 30 * DAY)
    assert buy_days_for(window, "auto", last_arrival=DAY + 3600) == 0
    assert "arrivals span 2 days" in capsys.readouterr().out          # the first and the second day
    assert buy_days_for(window, "auto", last_arrival=30 * DAY - 59) == 14 == buy_days_for(window, "auto")
    assert buy_days_for(window, "auto", last_arrival=13 * DAY + 5) == 7              # 14 days of arrivals
    assert buy_days_for(window, "auto", last_arrival=13 * DAY - 5) == 0
    assert buy_days_for(window, 3, last_arrival=DAY) == 3                  # a number is taken as given
