"""`import`: real telemetry (contract dir, perf stat runs, Azure vmtable) into data/raw."""

from __future__ import annotations

from pathlib import Path

from telemetry.importers import import_sources
from telemetry.io import write_tables


def run(out_dir: Path, contract_dir: Path | None, perf_dir: Path | None, perf_meta: Path | None,
        azure_vmtable: Path | None) -> dict[str, int]:
    tables = import_sources(contract_dir, perf_dir, perf_meta, azure_vmtable)
    write_tables(out_dir, tables)
    counts = {k: len(v) for k, v in tables.items()}
    print(f"import: wrote {counts} to {out_dir}")
    return counts
