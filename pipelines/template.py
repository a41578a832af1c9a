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
import numpy as np
import pandas as pd

from pond.telemetry.contract import OPTIONAL_TABLES, POOL_FILE, TABLES
from pond.telemetry.fleet import generate
from pond.telemetry.fleet.pool_counters import on_pool
from pond.telemetry.io import read_raw, read_tables

TEMPLATE_INTERNAL_SHARE = 0.2   # the optional vm_slowdowns table is shown too, with a fifth of customers internal


POOL_SHARE_OF_VMS = 5   # every fifth VM with counters is shown counted on the pool (vm_pool_counters)


def on_the_pool(tables: dict[str, pd.DataFrame], mechanisms: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """``vm_pool_counters`` as a hypervisor would record them: every ``POOL_SHARE_OF_VMS``-th VM with counters, all
    of it on the pool at ``ratio``, its first-hour counts as they read there (``pool_counters.on_pool``), an hour
    after its creation; a VM deleted within the hour is left out."""
    vms = tables["vms"].set_index("vm_id")
    counts = tables["vm_counters"].iloc[::POOL_SHARE_OF_VMS].reset_index(drop=True)
    vm = vms.reindex(counts.vm_id)
    measured = vm.created_at + pd.Timedelta(hours=1)
    alive = (vm.deleted_at.isna() | (vm.deleted_at > measured)).to_numpy()
    counts, vm, measured = counts[alive].reset_index(drop=True), vm[alive], measured[alive]
    mech = mechanisms.set_index("workload_id").reindex(vm.workload_id.to_numpy()).reset_index(drop=True)
    events = [c for c in counts.columns if c != "vm_id"]
    under = on_pool(counts[events], mech, ratio, 100.0)
    keys = pd.DataFrame({"vm_id": counts.vm_id, "latency_ratio": ratio, "pool_gb": vm.memory_gb.to_numpy(float),
                         "measured_at": measured.to_numpy()})
    return pd.concat([keys, np.round(under)], axis=1)


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
        tables["vm_pool_counters"] = on_the_pool(tables, read_raw(Path(tmp) / "raw" / POOL_FILE),
                                                 params.optimize.latency_ratio)
    tables["vms"] = tables["vms"].drop(columns=["workload_id"])   # a provider's VMs carry no lab workload
    with AtomicDir(out_dir, _nothing) as dst:
        for name, df in tables.items():
            df.to_csv(dst / f"{name}.csv", index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
    counts = {k: len(v) for k, v in tables.items()}
    print(f"template: wrote {counts} to {out_dir} as CSV ({days} days of VMs from {fleet.start})")
    return counts
