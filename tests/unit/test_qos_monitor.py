"""The QoS monitor in the replay (evaluation.qos), on a hand-made day of 200 VMs: at 1%, it mitigates two."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.qos import summarize, watch

# v3 (created first) is called insensitive and is not, yet its counters look slowed: a false alarm that takes
# the first mitigation. v0 is a false positive the counters catch: mitigated second. v1, an overpredicted
# zNUMA, touches its zNUMA node and v2, another caught false positive, are flagged after the capacity (2) is
# spent: both stay slowed. v4's counters look fine (missed); v5 has no counters (not seen).
DAY = pd.DataFrame({
    "vm": ["v0", "v1", "v2", "v3", "v4", "v5"],
    "created": [2, 3, 4, 1, 5, 6],
    "li_called": [True, False, True, True, True, True],
    "pool_gb": [16.0, 4.0, 8.0, 32.0, 8.0, 8.0],
    "memory_gb": [16.0, 16.0, 8.0, 32.0, 8.0, 8.0],
    "false_positive": [True, False, True, False, True, True],
    "overpredicted": [False, True, False, False, False, False],
    "sensitive": [1.0, np.nan, 1.0, 0.0, 1.0, 1.0],
    "lab_truth": [True, True, True, True, True, True],
    "p_exceed": [0.9, np.nan, 0.8, 0.7, 0.3, np.nan],
})


def _day() -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rest = pd.DataFrame({"vm": [f"x{i}" for i in range(194)], "created": 10 + np.arange(194), "li_called": False,
                         "pool_gb": 0.0, "memory_gb": 8.0, "false_positive": False, "overpredicted": False,
                         "sensitive": np.nan, "lab_truth": True, "p_exceed": 0.99})   # all local: never watched
    day = pd.concat([DAY, rest], ignore_index=True)
    seen = day["p_exceed"].to_numpy(float) >= 0.5            # the monitor's flag at its threshold; NaN: not seen
    return day.drop(columns=["p_exceed", "created"]), seen, day["created"].to_numpy()


def test_capacity_is_spent_in_order_of_flags_and_the_rest_stays_slowed():
    out, p, created = _day()
    w = watch(out, p, created, max_share=0.01).set_index("vm")
    assert w.index[w.flagged].tolist() == ["v0", "v1", "v2", "v3"]
    assert w.index[w.mitigated].tolist() == ["v0", "v3"]
    assert w.index[w.false_alarm].tolist() == ["v3"]
    assert w.index[w.unmitigated].tolist() == ["v1", "v2", "v4", "v5"]
    assert w.mitigated_gb.sum() == 48.0                      # v0's 16 GB and v3's 32 back to local
    s = summarize(w.reset_index())
    assert s["mispredictions_unmitigated"] == pytest.approx(4 / 200)
    assert (s["mitigations"], s["false_alarms"], s["monitor_flags"]) == pytest.approx((2 / 200, 1 / 200, 4 / 200))
    assert (s["missed_by_monitor"], s["over_monitor_capacity"]) == pytest.approx((2 / 200, 2 / 200))
    assert s["mitigation_capacity_reached"] is True
    assert s["mitigated_gb_share"] == pytest.approx(48 / (88 + 194 * 8))
    assert s["false_alarm_gb_share"] == pytest.approx(32 / (88 + 194 * 8))


def test_with_room_every_flag_is_mitigated_and_a_pool_only_vm_without_truth_counts_the_lab_rate_unless_mitigated():
    out, p, created = _day()
    w = watch(out, p, created, max_share=0.05)            # room for 10
    assert w.vm[w.mitigated].tolist() == ["v0", "v1", "v2", "v3"]
    assert w.vm[w.unmitigated].tolist() == ["v4", "v5"]
    out.loc[[0, 4], "lab_truth"] = False                                  # v0 (mitigated) and v4 (missed) unknown
    out.loc[[0, 4], "false_positive"] = False
    w = watch(out, p, created, max_share=0.05)
    assert summarize(w, fp_estimate_rate=0.1)["mispredictions_unmitigated"] == pytest.approx((1 + 0.1) / 200)


def test_nothing_on_the_pool_nothing_watched():
    out, p, created = _day()
    out["pool_gb"] = 0.0
    w = watch(out, p, created, max_share=0.01)
    assert not w.flagged.any() and not w.mitigated.any()


def test_the_monitor_sees_a_vm_s_own_counters_summed_and_nothing_of_a_vm_without_them(small_raw):
    """An export that split one VM's first window into two rows gives the monitor the same features as one row;
    a VM with no counters is absent (not seen), and an id written as a number is matched as text."""
    from pond.features.history import own_features
    from pond.telemetry.io import read_tables

    counters = read_tables(small_raw, ["vm_counters"])["vm_counters"].head(2).reset_index(drop=True)
    a, b = counters.vm_id.tolist()
    events = [c for c in counters.columns if c != "vm_id"]
    halves = pd.concat([counters.iloc[[0]], counters.iloc[[0]]], ignore_index=True)
    halves[events] = halves[events] / 2
    split = pd.concat([halves, counters.iloc[[1]].assign(vm_id="007")], ignore_index=True)
    got = own_features(pd.Series([a, "007", "no-counters"]), split)
    want = own_features(pd.Series([a, b]), counters)
    assert got.index.tolist() == sorted([a, "007"])
    pd.testing.assert_series_equal(got.loc[a], want.loc[a], check_exact=False, rtol=1e-6)
    pd.testing.assert_series_equal(got.loc["007"].rename(b), want.loc[b], check_exact=False, rtol=1e-6)


def test_a_touched_znuma_the_monitor_judges_within_the_pdm_leaves_its_mitigation_to_a_slowed_call():
    """Pond §4.4: a zNUMA that touched its pool node is moved to local DRAM only if the monitor judges it to suffer.
    Room for 3: by creation v3, v0 and the touched zNUMA v1 take it, and the caught call v2 stays slowed; judged
    within the PDM, v1 is not flagged and v2 is mitigated. v1 still counts as an unmitigated overprediction."""
    out, p, created = _day()
    every = watch(out, p, created, max_share=0.015).set_index("vm")
    assert every.index[every.mitigated].tolist() == ["v0", "v1", "v3"]
    judged = np.ones(len(out), bool)
    judged[1] = False
    w = watch(out, p, created, max_share=0.015, touch_seen=judged).set_index("vm")
    assert w.index[w.flagged].tolist() == ["v0", "v2", "v3"]
    assert w.index[w.mitigated].tolist() == ["v0", "v2", "v3"]
    assert w.index[w.unmitigated].tolist() == ["v1", "v4", "v5"]
    assert watch(out, p, created, max_share=0.015, touch_seen=np.ones(len(out), bool)).equals(every.reset_index())
