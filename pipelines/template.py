"""`pond template DIR`: a complete telemetry directory in the contract's format, to start from.

It is the built-in fleet written as a provider's export would be (CSV, no lab ``workload_id`` on
the VMs), sized so that `pond import` of it and `dvc repro` run in minutes: a user replaces its
rows with their own, table by table, and keeps every column name. The optional ``vm_slowdowns``
(slowdowns measured on fleet VMs) and ``vm_pool_counters`` (counters of VMs while on a pool, here a fifth of the VMs
all on the pool an hour after creation) are in it too: delete them where no such measurements exist.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pond.core.params import FleetParams, Params
from pond.telemetry.atomic import AtomicDir, refuse_to_replace
from pond.telemetry.contract import OPTIONAL_TABLES, POOL_FILE, TABLES
from pond.telemetry.fleet import generate
from pond.telemetry.fleet.pool_counters import recorded_on_pool
from pond.telemetry.io import read_raw, read_tables

TEMPLATE_INTERNAL_SHARE = 0.2   # the optional vm_slowdowns table is shown too, with a fifth of customers internal


def _nothing(name: str) -> bool:
    """A template is a start: a folder that already holds tables holds the user's rows, which it would replace."""
    return False


def run(params: Params, out_dir: Path, days: int, vms_per_day: float) -> dict[str, int]:
    refuse_to_replace(out_dir, _nothing)     # before the work, not after it
    fleet = FleetParams(**{**params.generate.fleet.model_dump(), "n_days": days, "vms_per_day": vms_per_day,
                           "n_customers": max(20, int(vms_per_day // 2)),
                           "internal_share": params.generate.fleet.internal_share or TEMPLATE_INTERNAL_SHARE})
    with tempfile.TemporaryDirectory(prefix="pond-template-") as tmp:
        generate(params.generate.lab, fleet, Path(tmp) / "raw", params.generate.variant)
        tables = read_tables(Path(tmp) / "raw", [t for t in (*TABLES, *OPTIONAL_TABLES) if t != "vm_pool_counters"])
        tables["vm_pool_counters"] = recorded_on_pool(tables, read_raw(Path(tmp) / "raw" / POOL_FILE),
                                                      params.optimize.latency_ratio)
    tables["vms"] = tables["vms"].drop(columns=["workload_id"])   # a provider's VMs carry no lab workload
    with AtomicDir(out_dir, _nothing) as dst:
        for name, df in tables.items():
            df.to_csv(dst / f"{name}.csv", index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
    counts = {k: len(v) for k, v in tables.items()}
    print(f"template: wrote {counts} to {out_dir} as CSV ({days} days of VMs from {fleet.start})")
    return counts
