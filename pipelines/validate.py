"""`pond validate DIR`: which commands a directory of telemetry can feed, before any stage runs.

Each contract table is read and checked on its own (so one bad table does not hide the state of
the others), then the references between the valid ones. The needs below are what the stages read
from ``data/raw`` (their ``read_tables`` calls and ``features.tma.require_events``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from core.errors import ContractError, PondError
from features.tma import require_events
from telemetry.contract import TABLES, validate_table, validate_tables
from telemetry.io import find_table, read_raw

NEEDS: dict[str, tuple[str, ...]] = {
    "dvc repro (the nightly pipeline: features, train_li, train_um, optimize, evaluate, backtest, simulate, register)":
        ("workloads", "slowdowns", "vms", "vm_counters"),
    "pond calibrate": ("workloads", "slowdowns", "vms"),
    "pond simulate --static-only (DRAM with static pools, no models)": ("vms",),
}
HOW = {
    "workloads": "the lab's workloads with their PMU event counts (perf stat; `pond import --perf-dir`)",
    "slowdowns": "the lab's slowdown per workload, latency ratio and spilled share",
    "vms": "one row per VM of the fleet (an Azure V2 vmtable: `pond import --azure-vmtable`)",
    "vm_counters": "each VM's PMU event counts over its first hour",
}


def check(directory: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(state per table: ok / missing / the error, problems per command: empty when it can run)."""
    state: dict[str, str] = {}
    valid: dict[str, pd.DataFrame] = {}
    for table in TABLES:
        path = find_table(Path(directory), table)
        if path is None:
            state[table] = "missing"
            continue
        try:
            df = validate_table(read_raw(path, table), table)
            if table in ("workloads", "vm_counters"):
                require_events(df, table)
            valid[table] = df
            state[table] = f"ok ({len(df):,} rows, {path.name})"
        except ContractError as exc:
            state[table] = f"invalid: {exc}"
    try:
        validate_tables(valid)
    except ContractError as exc:
        state[exc.table] = f"invalid: {exc}"
        valid.pop(exc.table, None)
    if "vms" in valid and valid["vms"]["untouched_fraction"].notna().sum() == 0:
        state["vms"] += "; no VM has untouched_fraction (train_um has no label)"
        valid.pop("vms")
    problems = {cmd: [f"{t} {'is missing' if state[t] == 'missing' else 'is not usable'}: {HOW[t]}"
                      for t in needs if t not in valid] for cmd, needs in NEEDS.items()}
    return state, problems


def report(state: dict[str, str], problems: dict[str, list[str]]) -> str:
    lines = ["tables:"] + [f"  {t:12s} {s}" for t, s in state.items()] + ["commands:"]
    for cmd, missing in problems.items():
        lines.append(f"  {'ready  ' if not missing else 'BLOCKED'} {cmd}")
        lines += [f"            - {m}" for m in missing]
    return "\n".join(lines)


def run(directory: Path) -> dict[str, list[str]]:
    if not Path(directory).is_dir():
        raise PondError(f"validate: {directory} is not a directory of contract tables (CSV or Parquet)")
    state, problems = check(directory)
    print(report(state, problems))
    return problems
