"""Counters under an allocation (the lab's spill runs): they come from the slowdown's mechanisms, not from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.features.tma import tma_metrics
from pond.telemetry.fleet.lab import event_rates
from pond.telemetry.fleet.pool_counters import MECHANISMS, REMOTE, access_share, mechanisms, on_pool, pool_rates


def _workload(**over: float) -> pd.DataFrame:
    """One hand-made workload's latent behaviour (``lab.draw_latent``'s columns)."""
    row = {"workload_id": "hand/one", "workload_class": "spark", "footprint_gb": 8.0, "d": 0.2, "h": 0.1, "c": 1.5,
           "w": 0.02, "q": 0.6, "u": 0.3, "mlp": 3.0, "bwq": 1.3, "cold": 0.2, "g": 1.0, "eta": 0.0, "fp": 0.05,
           "kern": 0.05}
    row.update(over)
    return pd.DataFrame([row])


def _rates(lat: pd.DataFrame) -> pd.DataFrame:
    return event_rates(lat, np.random.default_rng(0))


def test_nothing_on_the_pool_counts_as_local():
    lat = _workload()
    local = _rates(lat)
    pd.testing.assert_frame_equal(pool_rates(lat, local, 2.22, 0.0), local)
    # the cold part of the footprint spilled first: no access reaches the pool yet
    pd.testing.assert_frame_equal(pool_rates(lat, local, 2.22, 15.0), local)


def test_a_memory_bound_run_on_the_pool_shows_longer_misses_more_stalls_and_remote_misses():
    lat = _workload()
    local = _rates(lat)
    pool = pool_rates(lat, local, 2.22, 100.0)
    before, after = tma_metrics(local), tma_metrics(pool)
    a = access_share(lat, 100.0)[0]
    assert a == 1.0
    stretch = 1 + 1.22 * (1 + 1.3 * 0.3 ** 2 * 1.22)
    assert after.l3_miss_latency[0] == pytest.approx(before.l3_miss_latency[0] * stretch, rel=1e-9)
    assert after.tma_dram_bound[0] > before.tma_dram_bound[0] + 0.1
    assert after.tma_retiring[0] < before.tma_retiring[0]
    misses = pool[REMOTE][0] + pool["MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM"][0]
    assert pool[REMOTE][0] / misses == pytest.approx(1.0)
    half = pool_rates(lat, local, 2.22, 60.0)
    assert before.l3_miss_latency[0] < tma_metrics(half).l3_miss_latency[0] < after.l3_miss_latency[0]


def test_a_workload_without_dram_traffic_runs_the_same_on_the_pool():
    lat = _workload(d=0.0, h=0.0, w=0.0, u=0.0)
    local = _rates(lat)
    pool = pool_rates(lat, local, 2.22, 100.0)
    pd.testing.assert_frame_equal(pool.drop(columns=[REMOTE, "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM",
                                                     "OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP",
                                                     "UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.WR"]),
                                  local.drop(columns=[REMOTE, "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM",
                                                      "OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP",
                                                      "UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.WR"]))


def test_no_counter_encodes_the_slowdown_no_mechanism_explains():
    """``eta`` (the slowdown's part no counter explains) moves the truth, never the counters."""
    a, b = _workload(eta=0.0), _workload(eta=0.4)
    local = _rates(a)
    pd.testing.assert_frame_equal(pool_rates(a, local, 1.82, 75.0), pool_rates(b, local, 1.82, 75.0))


def test_a_vm_s_counts_on_the_pool_are_its_own_counts_changed_as_its_workload_s_rates_change():
    """The VM's own cycles and noise carry over; an unknown workload and an event the mechanisms do not know are
    left as counted."""
    hand = pd.concat([_workload(), _workload(workload_id="hand/two", d=0.0, h=0.0, w=0.0, u=0.0)], ignore_index=True)
    local = _rates(hand)
    mech = mechanisms(hand, local)
    assert list(mech.columns[:len(MECHANISMS) + 1]) == ["workload_id", *MECHANISMS] and "eta" not in mech.columns
    noise = np.exp(np.random.default_rng(3).normal(0.0, 0.1, local.shape))
    counts = local * 1e10 * noise
    counts["VENDOR.ONLY_EVENT"] = [5.0, 7.0]
    got = on_pool(counts, mech, 2.22, 100.0)
    want = pool_rates(hand, local, 2.22, 100.0) * 1e10 * noise
    pd.testing.assert_frame_equal(got[list(local.columns)], want, rtol=1e-9)
    assert got["VENDOR.ONLY_EVENT"].tolist() == [5.0, 7.0]
    unknown = on_pool(counts, mech.assign(**{c: np.nan for c in mech.columns if c != "workload_id"}), 2.22, 100.0)
    pd.testing.assert_frame_equal(unknown, counts)


def test_a_few_events_on_the_pool_read_as_they_do_among_all():
    """The monitor's 12 events alone move as they do among all 134: the rates under the pool come from all the
    workload's rates, not from the columns counted."""
    hand = pd.concat([_workload(), _workload(workload_id="hand/two", d=0.05, w=0.0)], ignore_index=True)
    local = _rates(hand)
    mech = mechanisms(hand, local)
    counts = local * 3e10
    few = [REMOTE, "CYCLE_ACTIVITY.STALLS_L3_MISS", "INST_RETIRED.ANY"]
    pd.testing.assert_frame_equal(on_pool(counts[few], mech, 1.82, 60.0), on_pool(counts, mech, 1.82, 60.0)[few])


def test_the_pool_stalls_are_the_dram_and_walk_stalls_times_the_remote_share_and_the_extra_latency():
    from pond.models.monitor_features import pool_stalls

    counts = pd.DataFrame({"CPU_CLK_UNHALTED.THREAD": [100.0, 100.0, 100.0, 0.0],
                           "CYCLE_ACTIVITY.STALLS_L3_MISS": [20.0, 20.0, 20.0, 20.0],
                           "DTLB_LOAD_MISSES.WALK_ACTIVE": [10.0, 10.0, 10.0, 10.0],
                           "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM": [0.0, 3.0, 0.0, 1.0],
                           REMOTE: [4.0, 1.0, 0.0, 1.0]})
    s = pool_stalls(counts, np.array([2.0, 2.0, 2.0, 2.0]))
    # all remote at twice the latency: half of the 30% stalled; a quarter remote: an eighth; no DRAM load: none
    assert s[:3].tolist() == pytest.approx([0.15, 0.0375, 0.0]) and np.isnan(s[3])      # no cycles counted
    assert pool_stalls(counts, np.ones(4))[:3].tolist() == [0.0, 0.0, 0.0]              # the pool as fast as DRAM
    assert np.isnan(pool_stalls(counts.drop(columns=[REMOTE]), np.full(4, 2.0))).all()  # an event not counted


def test_stalls_past_the_cycles_with_a_demand_miss_out_are_late_prefetches_and_all_of_them_the_pools():
    from pond.models.monitor_features import DEMAND_CYCLES, pool_stalls

    counts = pd.DataFrame({"CPU_CLK_UNHALTED.THREAD": [100.0] * 3, "CYCLE_ACTIVITY.STALLS_L3_MISS": [20.0] * 3,
                           "DTLB_LOAD_MISSES.WALK_ACTIVE": [0.0] * 3, "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM": [0.0] * 3,
                           REMOTE: [4.0] * 3, DEMAND_CYCLES: [30.0, 12.0, 0.0]})
    # all 20 while a demand miss is out: half of them at twice the latency; 12: 6, and the 8 past them in full
    assert pool_stalls(counts, np.full(3, 2.0)).tolist() == pytest.approx([0.10, 0.14, 0.20])
    assert pool_stalls(counts, np.ones(3)).tolist() == [0.0, 0.0, 0.0]       # the pool as fast as DRAM: none late


def test_the_pool_stalls_of_a_late_prefetch_workload_are_what_the_pool_adds():
    from pond.models.monitor_features import DEMAND_CYCLES, pool_stalls
    from pond.telemetry.fleet.pool_counters import extra_cycles

    lat = _workload(d=0.01, h=0.1, c=1.3, w=0.0, u=0.0, cold=0.0)     # late: 0.1 x (1.82 - 1.3) = 5.2% more cycles
    counts = pool_rates(lat, event_rates(lat, np.random.default_rng(1)), 1.82, 100.0) * 1e11
    extra = sum(v[0] for v in extra_cycles(lat, 1.82, access_share(lat, 100.0)).values())
    added = extra / (1.0 + extra)                                    # per cycle of the run on the pool
    assert pool_stalls(counts, np.array([1.82]))[0] == pytest.approx(added, rel=0.05)
    # read as demand misses' stalls, about (r - 1) / r of them: the estimate the monitor missed a workload with
    blind = pool_stalls(counts.drop(columns=[DEMAND_CYCLES]), np.array([1.82]))[0]
    assert blind < 0.6 * added
