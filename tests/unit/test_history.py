"""Workload history counts only VMs whose counters existed before the VM's day began."""

from __future__ import annotations

import pandas as pd

from pond.features.history import history_counts, own_counts, workload_history
from pond.telemetry.events import lab_events

T = lambda s: pd.Timestamp(s, tz="UTC")
KEY = dict(customer_id="c", vm_type="Standard_D4s_v5", region="eastus")


def _fleet():
    vms = pd.DataFrame([
        dict(vm_id="a", created_at=T("2026-01-01 10:00"), **KEY),
        dict(vm_id="b", created_at=T("2026-01-01 23:30"), **KEY),   # counters ready 00:30 Jan 2
        dict(vm_id="c", created_at=T("2026-01-02 08:00"), **KEY),
        dict(vm_id="d", created_at=T("2026-01-03 08:00"), **KEY),
        dict(vm_id="e", created_at=T("2026-01-20 08:00"), **KEY),
        dict(vm_id="f", created_at=T("2026-01-03 08:00"), **dict(KEY, region="westus2")),
    ])
    events = list(lab_events())
    counters = pd.DataFrame({"vm_id": ["a", "b", "c", "d", "f"], **{e: [1e9, 2e9, 3e9, 4e9, 5e9] for e in events}})
    return vms, counters, events


def test_history_counts():
    vms, counters, _ = _fleet()
    h = history_counts(vms, counters, history_days=7, delay_s=3600).set_index("vm_id").history_vms
    assert h.to_dict() == {"a": 0, "b": 0, "c": 1, "d": 3, "e": 0, "f": 0}


def test_snapshot_history_sums_counts():
    vms, counters, events = _fleet()
    hist = workload_history(vms, counters, events, T("2026-01-03"), history_days=7, delay_s=3600)
    row = hist[hist.region == "eastus"].iloc[0]
    assert row.n_vms == 3  # a, b (ready 00:30 Jan 2), c
    assert row["rate:INST_RETIRED.ANY"] == 1.0
    assert (hist.region == "westus2").sum() == 0


def test_own_counts_of_a_few_events_are_those_columns_of_every_event_s_read(tmp_path):
    """The QoS monitor reads 12 events: a read of those (from a frame or a Parquet file) equals those columns of the
    read of all, in the order asked, summed per VM; an event the table does not count is left out, not an error."""
    _, counters, events = _fleet()
    counters = pd.concat([counters, counters.iloc[[0]]], ignore_index=True)     # "a" exported in two rows
    path = tmp_path / "vm_counters.parquet"
    counters.to_parquet(path)
    wanted = [events[3], events[0], "VENDOR.NOT_COUNTED", events[3]]
    for source in (counters, path):
        every = own_counts(pd.Series(["d", "a", "zz"]), source)
        few = own_counts(pd.Series(["d", "a", "zz"]), source, wanted)
        assert list(few.columns) == [events[3], events[0]] and list(few.index) == ["a", "d"]
        pd.testing.assert_frame_equal(few, every[[events[3], events[0]]])
        assert few.loc["a", events[0]] == 2e9
