"""TMA formulas against values computed by hand from one made-up counter row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ContractError
from pond.features.tma import REQUIRED_EVENTS, partial_tma_metrics, pmu_features, tma_metrics

ROW = {
    "CPU_CLK_UNHALTED.THREAD": 1000.0,           # SLOTS = 4000
    "IDQ_UOPS_NOT_DELIVERED.CORE": 400.0,        # frontend 0.10
    "UOPS_RETIRED.RETIRE_SLOTS": 1200.0,         # retiring 0.30
    "UOPS_ISSUED.ANY": 1400.0,                   # bad spec (1400-1200+4*50)/4000 = 0.10
    "INT_MISC.RECOVERY_CYCLES_ANY": 50.0,
    "CYCLE_ACTIVITY.STALLS_MEM_ANY": 300.0,
    "CYCLE_ACTIVITY.STALLS_L1D_MISS": 250.0,
    "CYCLE_ACTIVITY.STALLS_L2_MISS": 220.0,
    "CYCLE_ACTIVITY.STALLS_L3_MISS": 200.0,
    "EXE_ACTIVITY.BOUND_ON_STORES": 20.0,
    "EXE_ACTIVITY.EXE_BOUND_0_PORTS": 40.0,
    "EXE_ACTIVITY.1_PORTS_UTIL": 30.0,
    "EXE_ACTIVITY.2_PORTS_UTIL": 100.0,          # x retiring 0.3 = 30
    "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD": 4.0,
    "OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD": 800.0,
    "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD": 250.0,
}


def test_hand_computed_values():
    m = tma_metrics(pd.DataFrame([ROW])).iloc[0]
    assert m.tma_frontend_bound == pytest.approx(0.10)
    assert m.tma_retiring == pytest.approx(0.30)
    assert m.tma_bad_speculation == pytest.approx(0.10)
    assert m.tma_backend_bound == pytest.approx(0.50)
    # (300 + 20) / (40 + 30 + 30 + 300 + 20) * 0.5 = 320 / 420 * 0.5
    assert m.tma_memory_bound == pytest.approx(320 / 420 * 0.5)
    assert m.tma_l1_bound == pytest.approx(0.05)
    assert m.tma_l2_bound == pytest.approx(0.03)
    assert m.tma_l3_bound == pytest.approx(0.02)
    assert m.tma_dram_bound == pytest.approx(0.20)
    assert m.tma_store_bound == pytest.approx(0.02)
    assert m.l3_miss_latency == pytest.approx(200.0)
    assert m.mlp == pytest.approx(3.2)


def test_run_length_does_not_matter():
    short = pd.DataFrame([ROW])
    long = short * 3600.0
    a = pmu_features(short, list(ROW)).to_numpy()
    b = pmu_features(long, list(ROW)).to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_zero_cycles_give_nan_not_inf():
    row = dict(ROW, **{"CPU_CLK_UNHALTED.THREAD": 0.0, "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD": 0.0})
    m = pmu_features(pd.DataFrame([row]), list(ROW))
    assert not np.isinf(m.to_numpy()).any()
    assert np.isnan(m["tma_dram_bound"].iloc[0]) and np.isnan(m["l3_miss_latency"].iloc[0])


def test_multiplexing_noise_is_clipped():
    row = dict(ROW, **{"CYCLE_ACTIVITY.STALLS_L2_MISS": 190.0})  # below STALLS_L3_MISS
    assert tma_metrics(pd.DataFrame([row])).tma_l3_bound.iloc[0] == 0.0


def test_missing_event_is_named():
    row = {k: v for k, v in ROW.items() if k != "CYCLE_ACTIVITY.STALLS_L3_MISS"}
    with pytest.raises(ContractError, match="CYCLE_ACTIVITY.STALLS_L3_MISS"):
        tma_metrics(pd.DataFrame([row]), "vm_counters")
    assert "CYCLE_ACTIVITY.STALLS_L3_MISS" in REQUIRED_EVENTS


def test_partial_counts_give_the_metrics_they_can_and_nan_for_the_rest():
    """The QoS monitor reads fewer events than TMA needs: each metric is the full formula's value where its events
    are counted, NaN where one is not."""
    full = tma_metrics(pd.DataFrame([ROW])).iloc[0]
    pd.testing.assert_series_equal(partial_tma_metrics(pd.DataFrame([ROW])).iloc[0], full)
    keep = ["CPU_CLK_UNHALTED.THREAD", "CYCLE_ACTIVITY.STALLS_L3_MISS", "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD",
            "OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD"]
    part = partial_tma_metrics(pd.DataFrame([{e: ROW[e] for e in keep}])).iloc[0]
    assert part.tma_dram_bound == full.tma_dram_bound == 0.2 and part.l3_miss_latency == full.l3_miss_latency == 200
    assert part.drop(["tma_dram_bound", "l3_miss_latency"]).isna().all()
