"""The features stage by customer partitions, for the dask engine.

Every feature of a VM is computed from VMs of its own customer: the customer percentiles group by
``customer_id`` and the workload history by (customer_id, vm_type, region). So the fleet splits by
a hash of the customer into partitions that need nothing from each other, and each partition runs
the local functions (``features.build``) unchanged: the same no-leakage rules, the same values.
The results are put back in the local engine's row order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from core.params import FeatureParams
from features.build import snapshot, vm_features
from features.history import KEY

Runner = Callable[[Callable, list[tuple]], list]


def customer_partition(customer_id: pd.Series, partitions: int) -> np.ndarray:
    """A stable partition number per row (the same customer, the same partition, on any machine)."""
    return (pd.util.hash_pandas_object(customer_id.astype("string"), index=False).to_numpy() % partitions).astype(np.int64)


def _split(vms: pd.DataFrame, counters: pd.DataFrame | Path, partitions: int
           ) -> list[tuple[pd.DataFrame, pd.DataFrame | Path]]:
    part = customer_partition(vms["customer_id"], partitions)
    out = []
    for k in np.unique(part):
        v = vms[part == k]
        c = counters if isinstance(counters, Path) else counters[counters["vm_id"].isin(v["vm_id"])]
        out.append((v, c))
    return out


def _task(vms: pd.DataFrame, counters: pd.DataFrame | Path, events: list[str], p: FeatureParams
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    from core.progress import silenced
    with silenced():
        return (vm_features(vms, counters, p), *snapshot(vms, counters, events, p))


def partitioned_features(run: Runner, vms: pd.DataFrame, counters: pd.DataFrame | Path, events: list[str],
                         p: FeatureParams, partitions: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(vm features, customer percentiles, workload history): what ``vm_features`` and ``snapshot``
    return for the whole fleet, computed one customer partition per task by ``run``."""
    results = run(_task, [(v, c, events, p) for v, c in _split(vms, counters, partitions)]) \
        or [_task(vms, counters, events, p)]   # no VM: the local answer, empty tables of the right columns
    feats = pd.concat([r[0] for r in results], ignore_index=True)
    feats = feats.iloc[pd.Index(feats["vm_id"]).get_indexer(vms["vm_id"])].reset_index(drop=True)
    cust = pd.concat([r[1] for r in results], ignore_index=True)
    cust = cust.sort_values("customer_id", kind="stable").reset_index(drop=True)
    hist = pd.concat([r[2] for r in results], ignore_index=True)
    hist = hist.sort_values(list(KEY), kind="stable", na_position="last").reset_index(drop=True)
    return feats, cust, hist
