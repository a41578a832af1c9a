"""The monitor's inputs, as training and serving build them: the LI model's features of the counts (event rates,
TMA metrics) and the allocation they were counted under. Kept apart from the training code so that the service,
whose install has no scikit-learn, builds them with the same function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pond.features.tma import CLKS, REQUIRED_EVENTS, TMA_COLUMNS, event_rates, partial_tma_metrics, rate_name

POOL_SHARE = "alloc:pool_share"          # share of the memory on the pool, 0-1 (a lab run: its spilled share)
LATENCY_RATIO = "alloc:latency_ratio"    # the pool's latency over local DRAM's
ALLOCATION = (POOL_SHARE, LATENCY_RATIO)


def tma_columns_from(events: Sequence[str]) -> list[str]:
    """The TMA metrics these events give on their own: those whose formula reads no other event."""
    have = set(events)
    ones = pd.DataFrame([{e: 1.0 if e in have else np.nan for e in REQUIRED_EVENTS}])
    row = partial_tma_metrics(ones).iloc[0]
    return [c for c in TMA_COLUMNS if np.isfinite(row[c])]


def monitor_feature_names(events: Sequence[str]) -> list[str]:
    """The model's inputs, in order, when it reads ``events``: each one's rate per cycle, the TMA metrics they give,
    the allocation. With every event the lab counts, these are the LI model's features and the allocation."""
    return [*(rate_name(e) for e in events if e != CLKS), *tma_columns_from(events), *ALLOCATION]


def monitor_events(wanted: Sequence[str] | None, recorded: Sequence[str]) -> tuple[list[str], list[str]]:
    """The events the monitor reads, in the order the lab records them, and those of ``wanted``
    (``train_monitor.events``; None: every recorded event) that the lab does not count: a lab that counts other
    events trains on those it has, never fails the night. The cycle count is always read: every rate is per cycle."""
    if wanted is None:
        return list(recorded), []
    have = set(recorded)
    read = [e for e in recorded if e == CLKS or e in set(wanted)]
    return read, [e for e in wanted if e not in have]


def monitor_features(counts: pd.DataFrame, events: Sequence[str], pool_share: np.ndarray | pd.Series,
                     latency_ratio: np.ndarray | pd.Series) -> pd.DataFrame:
    """The rates of ``events``, the TMA metrics (NaN where they read an event the counts lack: a model that reads
    fewer events selects only the metrics they give) and the allocation the counts were counted under."""
    f = pd.concat([event_rates(counts, [e for e in events if e != CLKS]), partial_tma_metrics(counts)], axis=1)
    f = f.astype(np.float32)
    f[POOL_SHARE] = np.asarray(pool_share, dtype=np.float32)
    f[LATENCY_RATIO] = np.asarray(latency_ratio, dtype=np.float32)
    return f
