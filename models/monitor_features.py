"""The monitor's inputs, as training and serving build them: the LI model's features of the counts (event rates,
TMA metrics) and the allocation they were counted under. Kept apart from the training code so that the service,
whose install has no scikit-learn, builds them with the same function."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.features.tma import pmu_features

POOL_SHARE = "alloc:pool_share"          # share of the memory on the pool, 0-1 (a lab run: its spilled share)
LATENCY_RATIO = "alloc:latency_ratio"    # the pool's latency over local DRAM's
ALLOCATION = (POOL_SHARE, LATENCY_RATIO)


def monitor_features(counts: pd.DataFrame, events: list[str], pool_share: np.ndarray | pd.Series,
                     latency_ratio: np.ndarray | pd.Series, table: str = "spill_counters") -> pd.DataFrame:
    """The LI model's features of these counts (event rates, TMA) and the allocation they were counted under."""
    f = pmu_features(counts, events, table)
    f[POOL_SHARE] = np.asarray(pool_share, dtype=np.float32)
    f[LATENCY_RATIO] = np.asarray(latency_ratio, dtype=np.float32)
    return f
