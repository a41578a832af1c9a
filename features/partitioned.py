"""The features stage by customer partitions, for the dask engine.

Every feature of a VM is computed from VMs of its own customer: the customer percentiles group by
``customer_id`` and the workload history by (customer_id, vm_type, region). So the fleet splits by
a hash of the customer into partitions that need nothing from each other, and each partition runs
the local functions (``features.build``) unchanged: the same no-leakage rules, the same values.

Workers read the raw tables and write the VM features themselves (``features.shuffle``): the
stage's own process holds the snapshot (what the service loads), the metrics' facts and one row
group of the output at a time, never the fleet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from core.params import FeatureParams
from features.build import facts, merge_facts, shape_counts, snapshot, top_shapes, vm_features
from features.history import KEY
from features.shuffle import ROW, Split, Unit, merge_in_order, read_partition, require_unique_ids, split, units, upload
from telemetry.storage import Location, absolute, write_parquet

Runner = Callable[[Callable, list[tuple]], list]


@dataclass
class Partitioned:
    """What the partitions add up to; the VM features are already in their file."""
    customers: pd.DataFrame
    history: pd.DataFrame
    request_shapes: pd.DataFrame
    facts: dict[str, Any]
    stray_counters: int
    uploaded_bytes: int = 0       # raw files copied to a scratch URL for the workers


def first_events_day(p: FeatureParams) -> date:
    """The earliest creation day whose counters the snapshot's history can use (with a day's margin)."""
    return p.snapshot_time.date() - timedelta(days=p.history_days + p.counter_delay_s // 86_400 + 2)


def _task(scratch: Location, k: int, feats_out: Location, events: list[str], p: FeatureParams) -> dict[str, Any]:
    from core.progress import silenced
    empty_ids = pd.DataFrame({"vm_id": pd.Series(dtype="string")})
    vms = read_partition(scratch, "vms", k, pd.DataFrame())
    require_unique_ids(scratch, k)
    has = read_partition(scratch, "has_counters", k, empty_ids)
    counters = read_partition(scratch, "counters", k,
                              pd.DataFrame({"vm_id": pd.Series(dtype="string"),
                                            **{e: pd.Series(dtype="float64") for e in events}}))
    rows = vms.pop(ROW).to_numpy()
    with silenced():
        feats = vm_features(vms, has, p)
        cust, hist = snapshot(vms, counters, events, p)
    feats = feats.iloc[pd.Index(feats["vm_id"]).get_indexer(vms["vm_id"])].reset_index(drop=True)
    write_parquet(feats, feats_out, row_group_size=65_536)
    return {"rows": rows, "customers": cust, "history": hist, "shapes": shape_counts(vms, p),
            "facts": facts(feats, p.customer_columns)}


def partitioned_features(run: Runner, raw_dir: Location, counters: pd.DataFrame | Location, events: list[str],
                         p: FeatureParams, partitions: int, scratch: Location, out: Path,
                         row_group: int) -> Partitioned | None:
    """Write the VM features of the fleet in ``raw_dir`` to ``out`` (the local engine's table, row for
    row) and return the rest of the stage's output; None when the fleet has no VM. ``scratch``: where
    the workers exchange files (a path they all see, or a storage URL)."""
    # the workers run in working directories of their own: `dvc repro` passes relative paths
    raw_dir, scratch = absolute(raw_dir), absolute(scratch)
    counters = counters if isinstance(counters, pd.DataFrame) else absolute(counters)
    plan: list[Unit]
    plan, copied = upload(units(raw_dir, counters, first_events_day(p)), scratch)
    splits: list[Split] = run(split, [(u, scratch, partitions) for u in plan])
    parts = sorted({k for s in splits for k in s.vms})
    if not parts:
        return None
    results = run(_task, [(scratch, k, scratch / f"features-{k:05d}.parquet", events, p) for k in parts])
    merge_in_order([(scratch / f"features-{k:05d}.parquet", r["rows"]) for k, r in zip(parts, results)],
                   out, row_group)
    cust = pd.concat([r["customers"] for r in results], ignore_index=True)
    hist = pd.concat([r["history"] for r in results], ignore_index=True)
    return Partitioned(
        customers=cust.sort_values("customer_id", kind="stable").reset_index(drop=True),
        history=hist.sort_values(list(KEY), kind="stable", na_position="last").reset_index(drop=True),
        request_shapes=top_shapes([r["shapes"] for r in results], p),
        facts=merge_facts([r["facts"] for r in results]),
        stray_counters=sum(s.stray_counters for s in splits), uploaded_bytes=copied)
