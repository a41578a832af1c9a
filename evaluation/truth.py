"""Where the slowdown truth of fleet VMs comes from, for evaluation only.

The built-in fleet writes the noise-free slowdowns of its whole workload population
(``population_truth.parquet`` beside the contract tables): VMs mostly run workloads the lab
never measured, and only this file can say whether they were sensitive. A provider has no such
file; its ``vms.workload_id`` (optional) may name lab workloads, whose lab runs are then the truth.
No training stage reads this module.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pond.evaluation.combined import spill_table
from pond.optimize.evidence import full_pool_slowdowns, measured_before_created
from pond.telemetry.contract import TRUTH_FILE
from pond.telemetry.io import read_optional, read_raw, read_tables
from pond.telemetry.storage import Location, location


def truth_table(raw_dir: Location | str, ratio: float) -> tuple[pd.DataFrame, str]:
    """(slowdown per workload and spilled share at ``ratio``, its source: population or lab)."""
    path = location(raw_dir) / TRUTH_FILE
    if path.exists():
        return spill_table(read_raw(path, "population_truth"), ratio), "population"
    return spill_table(read_tables(raw_dir, ["slowdowns"])["slowdowns"], ratio), "lab"


def measured_truths(raw_dir: Location | str, ratios: Sequence[float], vms: pd.DataFrame
                    ) -> dict[float, pd.Series | None]:
    """Per ratio, the fleet VMs' own full-pool slowdowns by ``vm_id`` (``vm_slowdowns``, optional, read once):
    the truth of a VM the workload table says nothing of. None where the data set has no such table. A row
    measured before its VM in ``vms`` was created is not that VM's (``measured_before_created``): left out."""
    reports = read_optional(raw_dir, "vm_slowdowns")
    if reports is None:
        return {r: None for r in ratios}
    own = reports[~measured_before_created(reports, vms.set_index("vm_id").created_at)]
    return {r: full_pool_slowdowns(own, r) for r in ratios}


def measured_truth(raw_dir: Location | str, ratio: float, vms: pd.DataFrame) -> pd.Series | None:
    """``measured_truths`` at one ratio."""
    return measured_truths(raw_dir, [ratio], vms)[ratio]
