"""Stage `features`: lab features, per-VM features and the online snapshot the service loads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from pond.core.cluster import run_all, session
from pond.core.params import FeatureParams, Params
from pond.core.progress import Steps
from pond.features import partitioned
from pond.features.build import empty_inputs, facts, lab_features, request_shapes, snapshot, summary, vm_features
from pond.features.shuffle import scratch_folder
from pond.features.tma import require_events
from pond.telemetry.atomic import AtomicDir, sha256_file, write_json
from pond.telemetry.contract import WORKLOADS, event_columns
from pond.telemetry.io import COUNTERS, ROW_GROUP, counters_source, read_tables, table_columns
from pond.telemetry.storage import Location, remove_tree


def _local(raw_dir: Location, counters: pd.DataFrame | Location, events: list[str], p: FeatureParams, vm_file: Path,
           step: Callable[[str], None]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The fleet in this process: writes ``vm_file``; returns the snapshot's tables and the facts."""
    vms = read_tables(raw_dir, ["vms"])["vms"]
    step(f"features of {len(vms):,} VMs: customer untouched percentiles and workload history as of each "
         "VM's creation")
    vm_feats = vm_features(vms, counters, p)
    step(f"the snapshot as of {p.snapshot_time.date()} (what the service loads)")
    cust, hist = snapshot(vms, counters, events, p)
    vm_feats.to_parquet(vm_file, index=False, row_group_size=ROW_GROUP)
    return cust, hist, request_shapes(vms, p), facts(vm_feats, p.customer_columns)


def _dask(params: Params, raw_dir: Location, counters: pd.DataFrame | Location, events: list[str], tmp: Path,
          vm_file: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """``_local``'s answer from the workers (features.partitioned), through a scratch folder."""
    p, e = params.features, params.engine
    scratch = scratch_folder(tmp, "features")
    try:
        with session(e) as client:
            done = partitioned.partitioned_features(lambda fn, tasks: run_all(client, fn, tasks), raw_dir,
                                                    counters, events, p, e.partitions, scratch, vm_file, ROW_GROUP)
    finally:
        remove_tree(scratch)
    if done is not None and done.uploaded_bytes:
        print(f"features: copied {done.uploaded_bytes / 2**30:.2f} GiB of raw tables to {scratch} for the workers "
              "(a scratch URL: they cannot see this machine's disk; give --raw as a URL to read them in place)")
    if done is None:   # no VM: the local answer, empty tables of the right columns
        return _local(raw_dir, counters, events, p, vm_file, lambda _: None)
    if done.stray_counters:
        print(f"features: warning: {done.stray_counters:,} vm_counters rows are in no creation-day folder of "
              "their VM (or their VM is unknown) and were not used; the partitioned layout keeps a VM's "
              "counters under its creation day (pond import --partitioned writes it so)")
    return done.customers, done.history, done.request_shapes, done.facts


def run(params: Params, raw_dir: Location, out_dir: Path, metrics_path: Path) -> dict[str, Any]:
    p, e = params.features, params.engine
    step = Steps("features", 4 if e.backend == "local" else 3)
    step("reading the workloads" + (" and vms tables" if e.backend == "local" else " table"))
    workloads = read_tables(raw_dir, ["workloads"])["workloads"]
    require_events(workloads, "workloads")
    events = event_columns(workloads, WORKLOADS)
    counters = counters_source(raw_dir)
    columns = list(counters.columns) if isinstance(counters, pd.DataFrame) else table_columns(counters)
    require_events(pd.DataFrame(columns=columns), COUNTERS)
    with AtomicDir(out_dir) as tmp:
        (tmp / "snapshot").mkdir()
        vm_file = tmp / "vm_features.parquet"
        if e.backend == "local":
            cust, hist, shapes, stats = _local(raw_dir, counters, events, p, vm_file, step)
        else:
            step(f"features and the snapshot as of {p.snapshot_time.date()}, on Dask in {e.partitions} customer "
                 "partitions (the workers read the tables and write the VM features)")
            cust, hist, shapes, stats = _dask(params, raw_dir, counters, events, tmp, vm_file)
        step("writing")
        lab_features(workloads).to_parquet(tmp / "workload_features.parquet", index=False)
        cust.to_parquet(tmp / "snapshot" / "customer_percentiles.parquet", index=False)
        hist.to_parquet(tmp / "snapshot" / "workload_history.parquet", index=False)
        shapes.to_parquet(tmp / "snapshot" / "request_shapes.parquet", index=False)
        manifest = {"as_of": p.as_of, "snapshot_time": p.snapshot_time.isoformat(),
                    "window_days": p.window_days, "percentiles": list(p.percentiles),
                    "history_days": p.history_days, "counter_delay_s": p.counter_delay_s,
                    "request_shapes": p.request_shapes,
                    "events": events,
                    # what the service checks before it serves the snapshot (file mode has no bundle.json)
                    "files": {f.name: sha256_file(f) for f in sorted((tmp / "snapshot").glob("*.parquet"))}}
        (tmp / "snapshot" / "manifest.json").write_text(json.dumps(manifest, indent=2))
    metrics = summary(stats, cust, hist, p.customer_columns)
    write_json(metrics_path, metrics)
    print(f"features: {metrics}")
    print(f"features: {metrics['vm_type_parsed_share']:.1%} of VMs have a vm_type in a known naming scheme "
          "(azure, aws, gcp); the others get missing family and generation")
    for name, why in empty_inputs(stats, p.customer_columns).items():
        print(f"features: warning: input '{name}' is empty for every VM: {why}. The models treat it as missing.")
    return metrics
