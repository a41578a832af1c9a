"""The features stage by customer partitions, for the dask engine.

Every feature of a VM is computed from VMs of its own customer: the customer percentiles group by
``customer_id`` and the workload history by (customer_id, vm_type, region). So the fleet splits by
a hash of the customer into partitions that need nothing from each other, and each partition runs
the local functions (``features.build``) unchanged: the same no-leakage rules, the same values.

Workers read the raw tables and write the VM features themselves (``features.shuffle``): the
stage's own process holds the snapshot (what the service loads), the metrics' facts and one row
group of the output at a time, never the fleet. `backtest` needs a snapshot per night: one split,
then each partition's task computes every night's (``partitioned_snapshots``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from pond.core.params import FeatureParams
from pond.features.build import facts, merge_facts, shape_counts, snapshot, top_shapes, vm_features
from pond.features.history import KEY
from pond.features.shuffle import (
    ROW,
    Split,
    Unit,
    merge_in_order,
    read_partition,
    require_unique_ids,
    split,
    units,
    upload,
)
from pond.telemetry.storage import Location, absolute, read_parquet, write_parquet

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


def _split_fleet(run: Runner, raw_dir: Location, counters: pd.DataFrame | Location, first_events: date,
                 partitions: int, scratch: Location) -> tuple[list[Split], list[int], int]:
    """The fleet split by customer into ``scratch`` by the workers: each task's counts, the partitions
    written (none for a fleet without VMs) and the bytes copied to a scratch URL."""
    # the workers run in working directories of their own: `dvc repro` passes relative paths
    raw_dir = absolute(raw_dir)
    counters = counters if isinstance(counters, pd.DataFrame) else absolute(counters)
    plan: list[Unit]
    plan, copied = upload(units(raw_dir, counters, first_events), scratch)
    splits: list[Split] = run(split, [(u, scratch, partitions) for u in plan])
    return splits, sorted({k for s in splits for k in s.vms}), copied


def _counters(scratch: Location, k: int, events: list[str]) -> pd.DataFrame:
    return read_partition(scratch, "counters", k, pd.DataFrame({"vm_id": pd.Series(dtype="string"),
                                                               **{e: pd.Series(dtype="float64") for e in events}}))


def _task(scratch: Location, k: int, feats_out: Location, events: list[str], p: FeatureParams) -> dict[str, Any]:
    from pond.core.progress import silenced
    empty_ids = pd.DataFrame({"vm_id": pd.Series(dtype="string")})
    vms = read_partition(scratch, "vms", k, pd.DataFrame())
    require_unique_ids(scratch, k)
    has = read_partition(scratch, "has_counters", k, empty_ids)
    counters = _counters(scratch, k, events)
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
    scratch = absolute(scratch)
    splits, parts, copied = _split_fleet(run, raw_dir, counters, first_events_day(p), partitions, scratch)
    if not parts:
        return None
    results = run(_task, [(scratch, k, scratch / f"features-{k:05d}.parquet", events, p) for k in parts])
    merge_in_order([(scratch / f"features-{k:05d}.parquet", r["rows"]) for k, r in zip(parts, results)],
                   out, row_group)
    cust, hist = _joined([(r["customers"], r["history"]) for r in results])
    return Partitioned(customers=cust, history=hist, request_shapes=top_shapes([r["shapes"] for r in results], p),
                       facts=merge_facts([r["facts"] for r in results]),
                       stray_counters=sum(s.stray_counters for s in splits), uploaded_bytes=copied)


def _joined(parts: list[tuple[pd.DataFrame, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The partitions' snapshots as one, in the local engine's row order."""
    cust = pd.concat([c for c, _ in parts], ignore_index=True)
    hist = pd.concat([h for _, h in parts], ignore_index=True)
    return (cust.sort_values("customer_id", kind="stable").reset_index(drop=True),
            hist.sort_values(list(KEY), kind="stable", na_position="last").reset_index(drop=True))


@dataclass(frozen=True)
class NightParts:
    """One night's snapshot as the partitions wrote it to the scratch folder: (customers, history) each."""
    files: tuple[tuple[Location, Location], ...]

    def read(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The night's snapshot, equal to the local engine's ``snapshot``."""
        return _joined([(read_parquet(c), read_parquet(h)) for c, h in self.files])


def _night_files(scratch: Location, i: int, k: int) -> tuple[Location, Location]:
    folder = scratch / "snapshots" / f"n{i:04d}"
    return folder / f"customers-{k:05d}.parquet", folder / f"history-{k:05d}.parquet"


def _snapshots_task(scratch: Location, k: int, events: list[str], nights: list[FeatureParams]) -> None:
    from pond.core.progress import silenced
    vms = read_partition(scratch, "vms", k, pd.DataFrame())
    require_unique_ids(scratch, k)
    vms = vms.drop(columns=ROW)
    counters = _counters(scratch, k, events)
    for i, p in enumerate(nights):
        with silenced():
            cust, hist = snapshot(vms, counters, events, p)
        c, h = _night_files(scratch, i, k)
        c.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(cust, c)
        write_parquet(hist, h)


def partitioned_snapshots(run: Runner, raw_dir: Location, counters: pd.DataFrame | Location, events: list[str],
                          nights: list[FeatureParams], partitions: int, scratch: Location) -> list[NightParts] | None:
    """``snapshot`` of the fleet in ``raw_dir`` as of each of ``nights`` (`backtest`'s), computed on the
    workers from one split by customer and left in ``scratch``, so that the caller holds one night's at a
    time (at 10M VMs, 7 nights' held at once took 2.7 GiB); None when the fleet has no VM."""
    scratch = absolute(scratch)
    _, parts, _ = _split_fleet(run, raw_dir, counters, min(first_events_day(p) for p in nights), partitions, scratch)
    if not parts:
        return None
    run(_snapshots_task, [(scratch, k, events, nights) for k in parts])
    return [NightParts(tuple(_night_files(scratch, i, k) for k in parts)) for i in range(len(nights))]
