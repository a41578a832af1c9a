"""Stage `features`: lab features, per-VM features and the online snapshot the service loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from core.engine import run_all, session
from core.params import Params
from core.progress import Steps
from features.build import empty_inputs, lab_features, request_shapes, snapshot, summary, vm_features
from features.partitioned import partitioned_features
from features.tma import require_events
from telemetry.contract import WORKLOADS, event_columns
from telemetry.io import COUNTERS, ROW_GROUP, AtomicDir, counters_source, read_tables, sha256_file, table_columns, write_json

def run(params: Params, raw_dir: Path, out_dir: Path, metrics_path: Path) -> dict[str, Any]:
    p = params.features
    step = Steps("features", 4 if params.engine.backend == "local" else 3)
    step("reading the workloads and vms tables")
    tables = read_tables(raw_dir, ["workloads", "vms"])
    workloads, vms = tables["workloads"], tables["vms"]
    require_events(workloads, "workloads")
    events = event_columns(workloads, WORKLOADS)
    counters = counters_source(raw_dir)
    columns = table_columns(counters) if isinstance(counters, Path) else list(counters.columns)
    require_events(pd.DataFrame(columns=columns), COUNTERS)
    e = params.engine
    if e.backend == "local":
        step(f"features of {len(vms):,} VMs: customer untouched percentiles and workload history as of each "
             "VM's creation")
        vm_feats = vm_features(vms, counters, p)
        step(f"the snapshot as of {p.snapshot_time.date()} (what the service loads)")
        cust, hist = snapshot(vms, counters, events, p)
    else:
        step(f"features of {len(vms):,} VMs and the snapshot as of {p.snapshot_time.date()}, on Dask in "
             f"{e.partitions} customer partitions")
        with session(e) as client:
            vm_feats, cust, hist = partitioned_features(lambda fn, tasks: run_all(client, fn, tasks), vms,
                                                        counters, events, p, e.partitions)
    step("writing")
    with AtomicDir(out_dir) as tmp:
        lab_features(workloads).to_parquet(tmp / "workload_features.parquet", index=False)
        vm_feats.to_parquet(tmp / "vm_features.parquet", index=False, row_group_size=ROW_GROUP)
        (tmp / "snapshot").mkdir()
        cust.to_parquet(tmp / "snapshot" / "customer_percentiles.parquet", index=False)
        hist.to_parquet(tmp / "snapshot" / "workload_history.parquet", index=False)
        request_shapes(vms, p).to_parquet(tmp / "snapshot" / "request_shapes.parquet", index=False)
        manifest = {"as_of": p.as_of, "snapshot_time": p.snapshot_time.isoformat(),
                    "window_days": p.window_days, "percentiles": list(p.percentiles),
                    "history_days": p.history_days, "counter_delay_s": p.counter_delay_s,
                    "request_shapes": p.request_shapes,
                    "events": events,
                    # what the service checks before it serves the snapshot (file mode has no bundle.json)
                    "files": {f.name: sha256_file(f) for f in sorted((tmp / "snapshot").glob("*.parquet"))}}
        (tmp / "snapshot" / "manifest.json").write_text(json.dumps(manifest, indent=2))
    metrics = summary(vm_feats, cust, hist, p.customer_columns)
    write_json(metrics_path, metrics)
    print(f"features: {metrics}")
    print(f"features: {metrics['vm_type_parsed_share']:.1%} of VMs have a vm_type in a known naming scheme "
          "(azure, aws, gcp); the others get missing family and generation")
    for name, why in empty_inputs(vm_feats, p.customer_columns).items():
        print(f"features: warning: input '{name}' is empty for every VM: {why}. The models treat it as missing.")
    return metrics
