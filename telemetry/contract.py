"""The telemetry contract (DESIGN.md) as code: table schemas and their validation.

Outside tools write these tables, so names are fixed; validation is strict and vectorized, and
every rejection names the table, the column and the first offending rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from core.errors import ContractError
from telemetry import request

Kind = Literal["id", "str", "float", "int", "timestamp"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    nullable: bool = False
    optional: bool = False      # the column may be absent: it is then added, all null


@dataclass(frozen=True)
class Schema:
    table: str
    columns: tuple[Column, ...]
    key: str | None
    has_events: bool = False  # trailing columns are raw PMU event counts

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


WORKLOADS = Schema("workloads", (
    Column("workload_id", "id"), Column("workload_class", "str"), Column("footprint_gb", "float"),
), key="workload_id", has_events=True)

SLOWDOWNS = Schema("slowdowns", (
    Column("workload_id", "id"), Column("latency_ratio", "float"), Column("spilled_pct", "float"),
    Column("slowdown_pct", "float"), Column("repetition", "int"),
), key=None)

VMS = Schema("vms", (
    Column("vm_id", "id"), Column("customer_id", "id"), Column("cluster_id", "id"),
    Column("server_id", "id", nullable=True, optional=True), Column("region", "str"), Column("vm_type", "str"),
    Column("vcpus", "int"), Column("memory_gb", "float"), Column("os", "str"),
    Column("created_at", "timestamp"), Column("deleted_at", "timestamp", nullable=True),
    Column("untouched_fraction", "float", nullable=True),
    # eval-only ground truth: production VMs have none, and it may name workloads the lab never measured
    Column("workload_id", "id", nullable=True, optional=True),
), key="vm_id")

VM_COUNTERS = Schema("vm_counters", (Column("vm_id", "id"),), key="vm_id", has_events=True)

SCHEMAS: dict[str, Schema] = {s.table: s for s in (WORKLOADS, SLOWDOWNS, VMS, VM_COUNTERS)}
TABLES: tuple[str, ...] = tuple(SCHEMAS)


def event_columns(df: pd.DataFrame, schema: Schema) -> list[str]:
    """PMU event columns: everything after the schema's fixed columns."""
    fixed = set(schema.names)
    return [c for c in df.columns if c not in fixed]


def _bad_rows(df: pd.DataFrame, mask: np.ndarray | pd.Series, key: str | None) -> list:
    mask = np.asarray(mask, dtype=bool)
    if key and key in df.columns:
        return df.loc[mask, key].head(6).tolist()
    return [f"row {i}" for i in np.flatnonzero(mask)[:6]]


def _coerce(df: pd.DataFrame, col: Column, schema: Schema) -> pd.Series:
    s = df[col.name]
    if col.kind in ("id", "str"):
        out = s.astype("string")
        if col.kind == "id":
            out = out.str.strip()
        return out
    if col.kind == "timestamp":
        out = pd.to_datetime(s, utc=True, errors="coerce", format="mixed")
        broken = out.isna() & s.notna()
        if broken.any():
            raise ContractError(schema.table, "values are not timestamps", column=col.name,
                                rows=_bad_rows(df, broken, schema.key),
                                fix="write ISO-8601 UTC timestamps, e.g. 2026-01-31T12:00:00Z")
        return out
    out = pd.to_numeric(s, errors="coerce")
    broken = out.isna() & s.notna()
    if broken.any():
        raise ContractError(schema.table, "values are not numeric", column=col.name,
                            rows=_bad_rows(df, broken, schema.key), fix="write plain numbers")
    if col.kind == "int":
        fractional = out.notna() & (out != np.floor(out))
        if fractional.any():
            raise ContractError(schema.table, "values must be whole numbers", column=col.name,
                                rows=_bad_rows(df, fractional, schema.key))
        return out.astype("Int64")
    return out.astype("float64")


def _require(cond: pd.Series, df: pd.DataFrame, schema: Schema, column: str, problem: str,
             fix: str = "") -> None:
    bad = ~cond.fillna(True).astype(bool)
    if bad.any():
        raise ContractError(schema.table, problem, column=column,
                            rows=_bad_rows(df, bad, schema.key), fix=fix)


def validate_table(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Return a typed copy of ``df`` or raise ContractError for the first problem found."""
    schema = SCHEMAS[table]
    missing = [c.name for c in schema.columns if c.name not in df.columns and not c.optional]
    if missing:
        raise ContractError(table, f"missing columns {missing}", column=missing[0],
                            fix=f"the table needs columns {schema.names}")
    out = pd.DataFrame(index=df.index)
    df = df.assign(**{c.name: pd.Series(pd.NA, index=df.index, dtype="string")
                      for c in schema.columns if c.optional and c.name not in df.columns})
    for col in schema.columns:
        out[col.name] = _coerce(df, col, schema)
        if not col.nullable:
            _require(out[col.name].notna(), df, schema, col.name, "values are missing")
    if schema.key:
        dup = out[schema.key].duplicated(keep=False)
        if dup.any():
            raise ContractError(table, "duplicate ids", column=schema.key,
                                rows=out.loc[dup, schema.key].unique()[:6].tolist(),
                                fix="each id must appear once")
    events = event_columns(df, schema) if schema.has_events else []
    if schema.has_events and not events:
        raise ContractError(table, "no PMU event columns", fix="add one column per raw event count")
    if events:
        counts = df[events].apply(pd.to_numeric, errors="coerce")
        for name in events:
            raw, num = df[name], counts[name]
            _require(~(num.isna() & raw.notna()), df, schema, name, "counter values are not numeric")
            _require(num.isna() | (num >= 0), df, schema, name, "counter values are negative",
                     fix="raw PMU counts are non-negative; check the collector's overflow handling")
        out = pd.concat([out, counts.astype("float64")], axis=1)
    _check_ranges(out, schema, df)
    return out.reset_index(drop=True)


def _check_ranges(out: pd.DataFrame, schema: Schema, raw: pd.DataFrame) -> None:
    t = schema.table
    if t == "workloads":
        _require(out.footprint_gb > 0, raw, schema, "footprint_gb", "footprint_gb must be > 0")
    elif t == "slowdowns":
        _require(out.latency_ratio >= 1, raw, schema, "latency_ratio",
                 "latency_ratio is pool/local latency and must be >= 1")
        _require(out.spilled_pct.between(0, 100), raw, schema, "spilled_pct",
                 "spilled_pct must lie in [0, 100]")
        _require(np.isfinite(out.slowdown_pct), raw, schema, "slowdown_pct", "slowdown_pct must be finite")
        _require(out.repetition >= 0, raw, schema, "repetition", "repetition must be >= 0")
    elif t == "vms":
        request.check_frame(out, t)
        _require(out.untouched_fraction.between(0, 1) | out.untouched_fraction.isna(), raw, schema,
                 "untouched_fraction", "untouched_fraction must lie in [0, 1]")
        _require(out.deleted_at.isna() | (out.deleted_at >= out.created_at), raw, schema,
                 "deleted_at", "deleted_at is before created_at")
        _require(out.deleted_at.notna() | out.untouched_fraction.isna(), raw, schema,
                 "untouched_fraction", "a running VM (no deleted_at) cannot have a lifetime label",
                 fix="leave untouched_fraction empty until the VM is deleted")


def validate_tables(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Validate each table and the references between them."""
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ContractError(unknown[0], f"unknown table; the contract has {list(TABLES)}")
    out = {name: validate_table(df, name) for name, df in tables.items()}
    if "workloads" in out:
        known = out["workloads"].workload_id
        if "slowdowns" in out:
            s = out["slowdowns"]
            _require(s.workload_id.isin(known), s, SLOWDOWNS, "workload_id",
                     "slowdowns reference unknown workloads", fix="add the workloads or drop those rows")
    if "vms" in out and "vm_counters" in out:
        c = out["vm_counters"]
        _require(c.vm_id.isin(out["vms"].vm_id), c, VM_COUNTERS, "vm_id", "counters for unknown VMs")
    if "workloads" in out and "vm_counters" in out:
        lab = set(event_columns(out["workloads"], WORKLOADS))
        vm = set(event_columns(out["vm_counters"], VM_COUNTERS))
        if lab != vm:
            diff = sorted(lab ^ vm)
            raise ContractError("vm_counters", f"event columns differ from workloads': {diff[:5]}",
                                column=diff[0], fix="count the same PMU events in the lab and on VMs")
    return out
