"""The built-in fleet: a lab and a VM fleet generated from one behaviour model (see lab.py, vms.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pond.core.progress import Steps
from pond.telemetry.atomic import AtomicDir, refuse_to_replace
from pond.telemetry.contract import POOL_FILE, TRUTH_FILE
from pond.telemetry.fleet.lab import Lab, LabParams, build_lab
from pond.telemetry.fleet.pool_counters import mechanisms
from pond.telemetry.fleet.vms import FleetParams, build_vm_slowdowns, build_vms, iter_counters
from pond.telemetry.io import holds_tables, vm_partitions, write_partitioned

__all__ = ["TRUTH_FILE", "FleetParams", "Lab", "LabParams", "build_lab", "build_vms", "generate"]




def generate(lab_params: LabParams, fleet_params: FleetParams, out_dir: Path | str,
             variant: str = "pond", partitioned: bool = False) -> dict[str, int]:
    """Write the four contract tables, the lab's ``spill_counters`` (``vm_slowdowns`` too with internal customers),
    the population's slowdown truth and how its counters respond to a pool (``POOL_FILE``) to ``out_dir`` (replaced
    whole); return row counts. ``partitioned``: vms and vm_counters as datasets partitioned by creation day and
    cluster (``telemetry.io.write_partitioned``)."""
    refuse_to_replace(Path(out_dir), holds_tables)   # before the work, not after it
    step = Steps("generate", 3)
    step(f"lab: {lab_params.population:,} workload behaviours, the lab's sample of them")
    lab = build_lab(lab_params, variant)
    step(f"fleet: {fleet_params.n_days} days of ~{fleet_params.vms_per_day:,.0f} VMs")
    vms = build_vms(lab, fleet_params, variant)
    step(f"writing {len(vms):,} VMs and their counters")
    with AtomicDir(out_dir, holds_tables) as tmp:
        lab.workloads.to_parquet(tmp / "workloads.parquet", index=False)
        lab.slowdowns.to_parquet(tmp / "slowdowns.parquet", index=False)
        lab.spill_counters.to_parquet(tmp / "spill_counters.parquet", index=False)
        lab.truth.to_parquet(tmp / TRUTH_FILE, index=False)
        mechanisms(lab.latent, lab.rates).to_parquet(tmp / POOL_FILE, index=False)
        public = vms.drop(columns=[c for c in vms.columns if c.startswith("_")])
        if partitioned:
            where = vm_partitions(public)
            write_partitioned(tmp / "vms", public, where)
        else:
            public.to_parquet(tmp / "vms.parquet", index=False)
        writer, n_counters, ids = None, 0, pd.Index(public["vm_id"])
        for k, part in enumerate(iter_counters(vms, lab, fleet_params)):
            table = pa.Table.from_pandas(part, preserve_index=False)
            if partitioned:
                write_partitioned(tmp / "vm_counters", table, where.of(part["vm_id"], ids), k)
            else:
                if writer is None:
                    writer = pq.ParquetWriter(tmp / "vm_counters.parquet", table.schema)
                writer.write_table(table)
            n_counters += len(part)
        if writer is not None:
            writer.close()
        reports = build_vm_slowdowns(vms, lab, fleet_params, lab_params)
        if reports is not None:
            reports.to_parquet(tmp / "vm_slowdowns.parquet", index=False)
    return {"workloads": len(lab.workloads), "slowdowns": len(lab.slowdowns), "spill_counters": len(lab.spill_counters),
            "vms": len(vms), "vm_counters": n_counters, "population": len(lab.latent),
            **({} if reports is None else {"vm_slowdowns": len(reports)})}
