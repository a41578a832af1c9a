"""`import`: real telemetry (contract dir, perf stat runs, Azure vmtable) into data/raw."""

from __future__ import annotations

from pathlib import Path

from pond.core.params import Params
from pond.telemetry.atomic import refuse_to_replace
from pond.telemetry.importers import import_sources
from pond.telemetry.io import holds_tables, read_tables, write_tables
from pond.telemetry.storage import Location


def run(out_dir: Path, contract_dir: Location | None, perf_dir: Location | None, perf_meta: Location | None,
        azure_vmtable: Location | None, partial: bool = False, params: Params | None = None,
        partitioned: bool = False, perf_vm_meta: Location | None = None) -> dict[str, int]:
    refuse_to_replace(out_dir, holds_tables)     # before the tables are read, not after
    existing = read_tables(out_dir, validate=False) if partial else None
    tables = import_sources(contract_dir, perf_dir, perf_meta, azure_vmtable, existing, perf_vm_meta)
    write_tables(out_dir, tables, partitioned)
    counts = {k: len(v) for k, v in tables.items()}
    print(f"import: wrote {counts} to {out_dir}")
    from pond.evaluation.readiness import check, report
    print(report(*check(out_dir, params)))
    return counts
