"""The replay's QoS monitor (``optimize.monitor.monitor_flags``): an insensitive call is flagged from its own
counters under the pool, by the monitor's model, and nothing of the slowdown truth reaches the flag."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from pond.core.params import QosParams
from pond.models.inference import Models
from pond.models.monitor_runtime import MonitorModel
from pond.models.policy import read_policy
from pond.optimize import monitor as flags_module
from pond.optimize.monitor import FIRST_HOUR, POOL_COUNTERS, monitor_flags, monitor_scores
from pond.telemetry.contract import POOL_FILE, TRUTH_FILE, VM_POOL_COUNTERS, event_columns
from pond.telemetry.fleet.lab import event_rates
from pond.telemetry.fleet.pool_counters import mechanisms
from pond.telemetry.io import read_tables
from tests.unit.test_pool_counters import _workload


@pytest.fixture(scope="module")
def night(small_bundle):
    policy = read_policy(small_bundle / "policy.json")
    models = Models.from_policy(policy, small_bundle / "li", small_bundle / "um")
    monitor = MonitorModel.load(small_bundle / "monitor")
    assert monitor is not None
    return policy, models, monitor


def test_a_vm_whose_pool_raises_its_miss_latency_is_flagged_and_one_that_runs_the_same_is_not(night, tmp_path):
    _policy, models, monitor = night
    hand = pd.concat([_workload(workload_id="w/bound", d=0.28, h=0.2, c=1.3, u=0.5, cold=0.0),
                      _workload(workload_id="w/compute", d=0.0, h=0.0, w=0.0, u=0.0)], ignore_index=True)
    local = event_rates(hand, np.random.default_rng(1))
    mechanisms(hand, local).to_parquet(tmp_path / POOL_FILE, index=False)
    counts = (local * 1e11).assign(vm_id=["vm-a", "vm-b"])
    counts.to_parquet(tmp_path / "vm_counters.parquet", index=False)
    vms = pd.DataFrame({"vm_id": ["vm-a", "vm-b", "vm-c"], "workload_id": ["w/bound", "w/compute", "w/bound"]})
    f = monitor_flags(vms, tmp_path, 2.22, models, QosParams(), monitor)
    assert f.source == POOL_COUNTERS
    assert f.seen_slowed.tolist() == [True, False, False]       # vm-c has no counters: not seen
    assert f.p_exceed[0] >= monitor.threshold(2.22) > f.p_exceed[1] and np.isnan(f.p_exceed[2])



def test_a_vm_scores_by_the_share_of_its_footprint_on_the_pool(night, tmp_path):
    """``pool_scores`` with ``spilled_pct`` (a zNUMA that touched past its local node): the bound workload's
    counters with nothing on the pool read as its local ones and are not flagged; all of it there, they are."""
    from pond.optimize.monitor import pool_scores

    _policy, _models, monitor = night
    hand = _workload(workload_id="w/bound", d=0.28, h=0.2, c=1.3, u=0.5, cold=0.0)
    local = event_rates(hand, np.random.default_rng(1))
    mechanisms(hand, local).to_parquet(tmp_path / POOL_FILE, index=False)
    (local * 1e11).assign(vm_id=["vm-a"]).to_parquet(tmp_path / "vm_counters.parquet", index=False)
    vms = pd.DataFrame({"vm_id": ["vm-a"] * 3, "workload_id": ["w/bound"] * 3})
    p = pool_scores(vms, tmp_path, 2.22, monitor, np.array([0.0, 50.0, 100.0]))
    assert p is not None and p[0] < monitor.threshold(2.22) <= p[2]
    assert p[2] == pytest.approx(pool_scores(vms, tmp_path, 2.22, monitor)[0])


def test_a_touch_is_judged_from_the_least_spill_the_monitor_flags(night, tmp_path):
    """``touch_spill_pct``: the bound workload is flagged from some spilled share on (and not 5 points below it),
    the compute-bound one at none, and a VM without counters at any (every touch flagged, as without the model)."""
    from pond.optimize.monitor import pool_scores, touch_spill_pct

    _policy, _models, monitor = night
    hand = pd.concat([_workload(workload_id="w/bound", d=0.28, h=0.2, c=1.3, u=0.5, cold=0.0),
                      _workload(workload_id="w/compute", d=0.0, h=0.0, w=0.0, u=0.0)], ignore_index=True)
    local = event_rates(hand, np.random.default_rng(1))
    mechanisms(hand, local).to_parquet(tmp_path / POOL_FILE, index=False)
    (local * 1e11).assign(vm_id=["vm-a", "vm-b"]).to_parquet(tmp_path / "vm_counters.parquet", index=False)
    vms = pd.DataFrame({"vm_id": ["vm-a", "vm-b", "vm-c"], "workload_id": ["w/bound", "w/compute", "w/bound"]})
    least = touch_spill_pct(vms, tmp_path, 2.22, monitor)
    assert least is not None and 5.0 <= least[0] <= 100.0 and least[0] % 5 == 0
    assert least[1] == np.inf and least[2] == 0.0
    at = pool_scores(vms.iloc[[0, 0]], tmp_path, 2.22, monitor, np.array([least[0] - 5.0, least[0]]))
    assert at[0] < monitor.threshold(2.22) <= at[1]

def test_the_flags_read_counters_and_never_the_truth(night, small_raw, tmp_path, monkeypatch):
    """The same flags on a copy of the data without any slowdown truth (population truth, lab slowdowns) and with
    the VMs' untouched memory erased; the only tables read are the counters and the pool's mechanisms."""
    policy, models, monitor = night
    vms = read_tables(small_raw, ["vms"])["vms"].iloc[::7].reset_index(drop=True)
    a = monitor_flags(vms, small_raw, policy.latency_ratio, models, QosParams(), monitor)
    assert a.source == POOL_COUNTERS and 0 < a.seen_slowed.sum() < len(vms)
    bare = tmp_path / "raw"
    shutil.copytree(small_raw, bare)
    for name in (TRUTH_FILE, "slowdowns.parquet", "vm_slowdowns.parquet"):
        (bare / name).unlink(missing_ok=True)
    read = []
    real = flags_module.read_raw
    monkeypatch.setattr(flags_module, "read_raw", lambda path, table=None: read.append(table) or real(path, table))
    b = monitor_flags(vms.assign(untouched_fraction=np.nan, untouched_so_far=np.nan), bare, policy.latency_ratio,
                      models, QosParams(), monitor)
    np.testing.assert_array_equal(a.p_exceed, b.p_exceed)
    np.testing.assert_array_equal(a.seen_slowed, b.seen_slowed)
    assert read == ["population_pool"]


def test_without_the_pool_s_mechanisms_the_monitor_is_the_li_model_on_first_hour_counters(night, small_raw,
                                                                                         tmp_path):
    policy, models, monitor = night
    vms = read_tables(small_raw, ["vms"])["vms"].iloc[::11].reset_index(drop=True)
    bare = tmp_path / "raw"
    shutil.copytree(small_raw, bare)
    (bare / POOL_FILE).unlink()
    qos = QosParams(threshold=0.4)
    f = monitor_flags(vms, bare, policy.latency_ratio, models, qos, monitor)
    want = monitor_scores(models, vms, bare)
    assert f.source == FIRST_HOUR
    np.testing.assert_array_equal(f.p_exceed, want)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(f.seen_slowed, want >= 0.4)
    assert monitor_flags(vms, small_raw, policy.latency_ratio, models, qos, None).source == FIRST_HOUR


def test_a_provider_s_recorded_pool_counters_are_scored_where_the_data_hold_them(night, small_raw, tmp_path):
    """Without the pool's mechanisms and without vms.workload_id (a provider's export), the VMs the hypervisor
    counted on a pool (``vm_pool_counters``) are scored by the monitor model on those counts; the rest by the LI
    model on their first-hour counters. A row measured before its VM's creation is not that VM's; ``until`` keeps
    the rows measured by then (what tonight's evidence may read)."""
    from pond.optimize.monitor import RECORDED, recorded_scores
    from pond.telemetry.fleet.pool_counters import recorded_on_pool
    from pond.telemetry.io import read_raw

    policy, models, monitor = night
    tables = read_tables(small_raw)
    rows = recorded_on_pool(tables, read_raw(small_raw / POOL_FILE), policy.latency_ratio)
    bare = tmp_path / "raw"
    shutil.copytree(small_raw, bare)
    (bare / POOL_FILE).unlink()
    rows.iloc[:-1].to_parquet(bare / "vm_pool_counters.parquet", index=False)     # the last VM: never counted there
    last = rows.vm_id.iloc[-1]
    vms = tables["vms"][tables["vms"].vm_id.isin(rows.vm_id)].drop(columns="workload_id").reset_index(drop=True)
    f = monitor_flags(vms, bare, policy.latency_ratio, models, QosParams(), monitor)
    assert f.source == RECORDED
    p = recorded_scores(vms, bare, policy.latency_ratio, monitor)
    counted = (vms.vm_id != last).to_numpy()
    assert np.isfinite(p[counted]).all() and np.isnan(p[~counted]).all()
    np.testing.assert_array_equal(f.seen_slowed[counted], p[counted] >= monitor.threshold(policy.latency_ratio))
    first = monitor_scores(models, vms, bare)
    np.testing.assert_array_equal(f.p_exceed[~counted], first[~counted])
    early = rows.iloc[:-1].assign(measured_at=vms.set_index("vm_id").created_at.reindex(rows.vm_id.iloc[:-1]).to_numpy()
                                  - pd.Timedelta(minutes=1))
    early.to_parquet(bare / "vm_pool_counters.parquet", index=False)
    assert np.isnan(recorded_scores(vms, bare, policy.latency_ratio, monitor)).all()
    rows.to_parquet(bare / "vm_pool_counters.parquet", index=False)
    cut = rows.measured_at.sort_values().iloc[len(rows) // 2]
    kept = recorded_scores(vms, bare, policy.latency_ratio, monitor, until=cut)
    by_vm = rows.set_index("vm_id").measured_at.reindex(vms.vm_id).to_numpy()
    assert (np.isfinite(kept) == (by_vm <= cut)).all()
    # the hypervisor counted only the monitor's events: the same scores; it missed one of them: the VMs fall back to
    # their first-hour counters, and the night runs
    every = recorded_scores(vms, bare, policy.latency_ratio, monitor)
    assert monitor.events and len(monitor.events) < len(event_columns(rows, VM_POOL_COUNTERS))
    rows[[*rows.columns[:4], *monitor.events]].to_parquet(bare / "vm_pool_counters.parquet", index=False)
    np.testing.assert_array_equal(recorded_scores(vms, bare, policy.latency_ratio, monitor), every)
    rows[[*rows.columns[:4], *monitor.events[1:]]].to_parquet(bare / "vm_pool_counters.parquet", index=False)
    assert recorded_scores(vms, bare, policy.latency_ratio, monitor) is None
    assert monitor_flags(vms, bare, policy.latency_ratio, models, QosParams(), monitor).source == FIRST_HOUR
