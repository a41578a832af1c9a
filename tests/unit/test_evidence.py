"""The fleet's measured slowdowns (vm_slowdowns) as LI evidence: which rows count, and the counts per threshold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.optimize.evidence import (
    daily_rates,
    key_counts,
    key_labels,
    measured_before_created,
    report_labels,
    report_summary,
    tonight,
)


def _reports() -> pd.DataFrame:
    t = pd.Timestamp("2026-01-08 10:00", tz="UTC")
    return pd.DataFrame({
        "vm_id": ["a", "a", "b", "c", "c", "d", "e"],
        "latency_ratio": [1.82, 1.82, 1.82, 1.82, 2.22, 1.82, 1.82],
        "spilled_pct": [100.0, 100.0, 100.0, 100.0, 100.0, 50.0, 100.0],
        "slowdown_pct": [4.0, 7.0, 5.0, 9.0, 20.0, 30.0, 1.0],
        "measured_at": [t, t, t, t, t, t, t + pd.Timedelta(days=1)],
    })


def test_a_vm_is_sensitive_when_its_mean_full_pool_slowdown_exceeds_the_pdm():
    sensitive, stats = report_labels(_reports(), "2026-01-08", 1.82, 5.0)
    # a: mean 5.5 > 5; b: 5.0 is within the PDM (the lab's rule: insensitive iff <= PDM); c: its 2.22 row is
    # another ratio; d: spilled 50% says nothing of a VM entirely on pool; e: measured the next day
    assert sensitive.to_dict() == {"a": True, "b": False, "c": True}
    assert stats == {"rows": 7, "rows_measured_after_as_of": 1, "rows_measured_before_created": 0,
                     "rows_other_ratio_or_spill": 2, "vms_measured": 3}


def test_a_row_measured_before_its_vm_was_created_is_another_vms_and_is_left_out():
    # b's only row predates b (a reused id, or a wrong clock); a's second row predates a; c is not in the table
    created = pd.Series(pd.to_datetime(["2026-01-08 09:00", "2026-01-08 11:00", "2026-01-09 00:00"], utc=True),
                        index=["a", "b", "zz"])
    reports = _reports()
    reports.loc[1, "measured_at"] = pd.Timestamp("2026-01-08 08:00", tz="UTC")
    assert measured_before_created(reports, created).tolist() == [False, True, True, False, False, False, False]
    sensitive, stats = report_labels(reports, "2026-01-08", 1.82, 5.0, created)
    # a is judged by its remaining row alone (4.0, within the PDM); b has no row left; c keeps both
    assert sensitive.to_dict() == {"a": False, "c": True}
    assert stats == {"rows": 7, "rows_measured_after_as_of": 1, "rows_measured_before_created": 2,
                     "rows_other_ratio_or_spill": 2, "vms_measured": 2}
    assert measured_before_created(reports.iloc[:0], created).tolist() == []


def test_a_report_measured_by_the_end_of_the_next_day_counts_only_from_then():
    sensitive, _ = report_labels(_reports(), "2026-01-09", 1.82, 5.0)
    assert sensitive.to_dict() == {"a": True, "b": False, "c": True, "e": False}


def test_each_history_key_is_one_label_its_share_of_sensitive_vms():
    keys = pd.DataFrame({"customer_id": ["x", "x", "x", "y"], "vm_type": ["s", "s", "s", "s"],
                         "region": ["r", "r", "r", "r"]})
    out = key_labels(keys, np.array([0.9, 0.9, 0.9, 0.4]), np.array([True, False, False, True]))
    assert out.customer_id.tolist() == ["x", "y"]
    assert out.p.tolist() == [0.9, 0.4] and np.allclose(out.sensitive, [1 / 3, 1.0])


def test_counts_per_threshold_are_the_keys_at_or_above_it():
    p = np.array([0.2, 0.9, 0.5, 0.9, 0.7])
    s = np.array([1.0, 0.0, 0.5, 0.25, 1.0])
    called, errors = key_counts(p, s, np.array([np.inf, 0.95, 0.9, 0.6, 0.5, 0.0]))
    assert called.tolist() == [0, 0, 2, 3, 4, 5]
    assert errors.tolist() == [0.0, 0.0, 0.25, 1.25, 1.75, 2.75]
    # no labelled key: nothing added to the lab's counts
    none = key_counts(np.array([]), np.array([]), np.array([np.inf, 0.5]))
    assert [c.tolist() for c in none] == [[0.0, 0.0], [0.0, 0.0]]


def test_daily_rates_weigh_each_vm_and_say_nothing_of_a_day_without_calls():
    day = np.array(["d1", "d1", "d1", "d2", "d2", "d3"])
    p = np.array([0.9, 0.9, 0.3, 0.8, 0.95, 0.2])
    s = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    rates = daily_rates(day, p, s, np.array([np.inf, 0.85, 0.5, 0.0]))
    assert np.isnan(rates[0]).all()                              # LI off: nothing called on any day
    assert rates[1, :2].tolist() == [0.5, 0.0] and np.isnan(rates[1, 2])
    assert rates[2, :2].tolist() == [0.5, 0.0] and np.isnan(rates[2, 2])
    assert np.allclose(rates[3], [2 / 3, 0.0, 1.0])


def test_tonight_is_the_days_spread_and_more_cautious_than_a_day_alone():
    day = np.repeat(np.arange(4), 2)
    p = np.full(8, 0.9)
    s = np.array([0, 0, 1, 0, 0, 0, 1, 1], float)          # days: 0, 0.5, 0, 1
    t = tonight(day, p, s, np.array([np.inf, 0.5]))
    rates = np.array([0.0, 0.5, 0.0, 1.0])
    assert t.center.tolist() == [0.0, rates.mean()]
    assert t.scale[1] == pytest.approx(rates.std(ddof=1) * np.sqrt(1 + 1 / 4)) and t.df.tolist() == [0.0, 3.0]
    assert t.quantile(0.95)[1] > rates.mean() and t.quantile(0.95)[0] == 0.0


def test_reports_of_no_vm_in_the_window_say_nothing_and_do_not_fail():
    # a provider's reports may all name VMs this export does not hold, or be measured after as_of
    t = tonight(np.array([], dtype="datetime64[ns]"), np.array([]), np.array([]), np.array([np.inf, 0.5]))
    assert t.center.tolist() == [0.0, 0.0] and t.scale.tolist() == [0.0, 0.0] and t.df.tolist() == [0.0, 0.0]


def test_the_summary_says_what_was_used_and_each_reason_for_what_was_not():
    stats = {"rows": 1200, "rows_measured_after_as_of": 3, "rows_measured_before_created": 0,
             "rows_other_ratio_or_spill": 40, "vms_measured": 300, "vms_not_in_window": 12,
             "vms_without_history": 0, "vms_used": 288, "keys": 95, "days": 28}
    assert report_summary(stats) == ("vm_slowdowns: 1,200 rows, 288 measured VMs used as 95 history keys over 28 days; "
                                     "left out: 3 rows measured after as_of, 40 rows at another ratio or spill, "
                                     "12 VMs outside the report window or the vms table")
    assert report_summary({"rows": 5, "rows_measured_after_as_of": 5, "vms_measured": 0}) == \
        "vm_slowdowns: 5 rows, 0 measured VMs used as 0 history keys over 0 days; left out: 5 rows measured after as_of"
