"""The telemetry contract (docs/design.md) as code: table schemas and their validation.

Outside tools write these tables, so names are fixed; validation is strict and vectorized, and
every rejection names the table, the column and the first offending rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from pond.core.errors import ContractError
from pond.telemetry import request

Kind = Literal["id", "str", "float", "int", "timestamp"]


@dataclass(frozen=True)
class Column:
    """A contract column. ``ge``/``gt``/``le`` bound what is plausible (numbers, or timestamps as
    ISO text); a bounded column also refuses inf and NaN-like text."""

    name: str
    kind: Kind
    nullable: bool = False
    optional: bool = False      # the column may be absent: it is then added, all null
    ge: float | str | None = None
    gt: float | str | None = None
    le: float | str | None = None

    def bounds(self) -> str:
        lo = f"[{self.ge}" if self.ge is not None else f"({self.gt}" if self.gt is not None else "(-inf"
        return f"{lo}, {self.le if self.le is not None else 'inf'}]"


# Plausible ranges (docs/your-telemetry.md, "The contract's rules"): beyond them a value is a unit or export error.
EARLIEST, LATEST = "2000-01-01", "2100-01-01"   # timestamps: ISO-8601 text or Parquet timestamps, UTC
MAX_SLOWDOWN_PCT = 10_000.0
MAX_COUNT = 1e18            # a raw PMU count: 3e14 cycles is a day at 3.5 GHz on one thread


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
    Column("workload_id", "id"), Column("workload_class", "str"),
    Column("footprint_gb", "float", gt=0, le=request.MEMORY_GB_MAX),
), key="workload_id", has_events=True)

SLOWDOWNS = Schema("slowdowns", (
    Column("workload_id", "id"), Column("latency_ratio", "float", ge=1, le=10),
    Column("spilled_pct", "float", ge=0, le=100), Column("slowdown_pct", "float", gt=-100, le=MAX_SLOWDOWN_PCT),
    Column("repetition", "int", ge=0, le=1e6),
), key=None)

VMS = Schema("vms", (
    Column("vm_id", "id"), Column("customer_id", "id"), Column("cluster_id", "id"),
    Column("server_id", "id", nullable=True, optional=True), Column("region", "str"), Column("vm_type", "str"),
    Column("vcpus", "int"), Column("memory_gb", "float"), Column("os", "str"),
    Column("created_at", "timestamp", ge=EARLIEST, le=LATEST),
    Column("deleted_at", "timestamp", nullable=True, ge=EARLIEST, le=LATEST),
    Column("untouched_fraction", "float", nullable=True, ge=0, le=1),
    # running VMs: the share not touched yet when the table was written (an upper bound of the final one)
    Column("untouched_so_far", "float", nullable=True, optional=True, ge=0, le=1),
    # eval-only ground truth: production VMs have none, and it may name workloads the lab never measured
    Column("workload_id", "id", nullable=True, optional=True),
), key="vm_id")

VM_COUNTERS = Schema("vm_counters", (Column("vm_id", "id"),), key="vm_id", has_events=True)

# Optional: slowdowns measured on fleet VMs (A/B tests of internal workloads, Pond §4.4), the evidence of
# how often the VMs the LI model calls insensitive are not. Rows may name VMs the export does not hold.
VM_SLOWDOWNS = Schema("vm_slowdowns", (
    Column("vm_id", "id"), Column("latency_ratio", "float", ge=1, le=10),
    Column("spilled_pct", "float", ge=0, le=100), Column("slowdown_pct", "float", gt=-100, le=MAX_SLOWDOWN_PCT),
    Column("measured_at", "timestamp", ge=EARLIEST, le=LATEST),
), key=None)

# Optional: the lab's PMU events counted during its spill runs (part of the footprint on the pool, at a latency
# ratio), one row per run the slowdowns table times: what the QoS monitor's model learns a slowed VM's counters from.
SPILL_COUNTERS = Schema("spill_counters", (
    Column("workload_id", "id"), Column("latency_ratio", "float", ge=1, le=10),
    Column("spilled_pct", "float", ge=0, le=100), Column("repetition", "int", ge=0, le=1e6),
), key=None, has_events=True)

# Optional: the PMU events a provider's hypervisor counted while a VM ran with ``pool_gb`` of its memory on a pool (a
# CXL or remote NUMA node) at ``latency_ratio``, one counting window per row: what the QoS monitor's model scores in the
# replay where the data cannot say how counters change on a pool. Rows may name VMs the export does not hold.
VM_POOL_COUNTERS = Schema("vm_pool_counters", (
    Column("vm_id", "id"), Column("latency_ratio", "float", ge=1, le=10),
    Column("pool_gb", "float", ge=0, le=request.MEMORY_GB_MAX),
    Column("measured_at", "timestamp", ge=EARLIEST, le=LATEST),
), key=None, has_events=True)

# Written beside the tables by the built-in generator only: the slowdowns of every workload its VMs
# run (evaluation truth; no stage trains on it). Not a contract table: exports never have it.
TRUTH_FILE = "population_truth.parquet"
# Written beside it by the built-in generator only: how each workload's counters change when part of its memory is
# on a pool (its mechanisms and local event rates, ``telemetry.fleet.pool_counters``), so that the replay can show the
# QoS monitor a VM's counters under the allocation a policy gave it. A provider's hypervisor records them instead.
POOL_FILE = "population_pool.parquet"

SCHEMAS: dict[str, Schema] = {s.table: s for s in (WORKLOADS, SLOWDOWNS, VMS, VM_COUNTERS, VM_SLOWDOWNS,
                                                   SPILL_COUNTERS, VM_POOL_COUNTERS)}
OPTIONAL_TABLES: tuple[str, ...] = ("vm_slowdowns", "spill_counters", "vm_pool_counters")
TABLES: tuple[str, ...] = tuple(t for t in SCHEMAS if t not in OPTIONAL_TABLES)   # every data set has these


def text_columns(table: str) -> tuple[str, ...]:
    """The columns a CSV reader keeps as written, whatever they look like: ids and names (``001``,
    ``1e5``, ``2026-01-05``, ``NA``) are text, and a guessed type would merge ``01`` with ``1``."""
    if table == request.TABLE:
        return request.TEXT_FIELDS
    schema = SCHEMAS.get(table)
    return () if schema is None else tuple(c.name for c in schema.columns if c.kind in ("id", "str"))


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
            stripped = out.str.strip()
            if not stripped.equals(out):       # else keep the unstripped values: they share the read's memory
                out = stripped
        return out
    if col.kind == "timestamp":
        if isinstance(s.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(s):
            out = s.dt.tz_localize("UTC") if s.dt.tz is None else s.dt.tz_convert("UTC")   # typed: no parse
            _in_range(out, col, df, schema)
            return out
        numbers = (pd.Series(True, index=s.index) & s.notna() if pd.api.types.is_numeric_dtype(s)
                   else s.astype("string").str.fullmatch(r"\s*[-+]?\d+(\.\d*)?\s*").fillna(False))
        if numbers.any():
            raise ContractError(schema.table, "timestamps are numbers (epoch seconds? milliseconds?), whose unit "
                                "is a guess", column=col.name, rows=_bad_rows(df, numbers, schema.key),
                                fix="write ISO-8601 UTC timestamps, e.g. 2026-01-31T12:00:00Z "
                                    "(from epoch seconds: pandas.to_datetime(x, unit='s', utc=True))")
        out = pd.to_datetime(s, utc=True, errors="coerce", format="mixed")
        broken = out.isna() & s.notna()
        if broken.any():
            raise ContractError(schema.table, "values are not timestamps", column=col.name,
                                rows=_bad_rows(df, broken, schema.key),
                                fix="write ISO-8601 UTC timestamps, e.g. 2026-01-31T12:00:00Z")
        _in_range(out, col, df, schema)
        return out
    out = pd.to_numeric(s, errors="coerce")
    broken = (out.isna() & s.notna()) | request.booleans(s)
    if broken.any():
        raise ContractError(schema.table, "values are not numeric", column=col.name,
                            rows=_bad_rows(df, broken, schema.key), fix="write plain numbers")
    _in_range(out, col, df, schema)
    if col.kind == "int":
        fractional = out.notna() & (out != np.floor(out))
        if fractional.any():
            raise ContractError(schema.table, "values must be whole numbers", column=col.name,
                                rows=_bad_rows(df, fractional, schema.key))
        return out.astype("Int64")
    return out.astype("float64")


def _in_range(values: pd.Series, col: Column, raw: pd.DataFrame, schema: Schema) -> None:
    """NaN-free values outside the column's plausible range (inf included) -> ContractError."""
    if col.ge is None and col.gt is None and col.le is None:
        return
    ts = col.kind == "timestamp"

    def bound(x: float | str) -> Any:
        return pd.Timestamp(x, tz="UTC") if ts else float(x)

    ok = pd.Series(True, index=values.index)
    if col.ge is not None:
        ok &= values >= bound(col.ge)
    if col.gt is not None:
        ok &= values > bound(col.gt)
    if col.le is not None:
        ok &= values <= bound(col.le)
    bad = values.notna() & ~ok.fillna(False).astype(bool)
    if bad.any():
        raise ContractError(schema.table, f"{col.name} must lie in {col.bounds()}", column=col.name,
                            rows=_bad_rows(raw, bad, schema.key),
                            fix="check the export's units (GB, percent, UTC) and drop impossible rows")


def _require(cond: pd.Series, df: pd.DataFrame, schema: Schema, column: str, problem: str,
             fix: str = "") -> None:
    bad = ~cond.fillna(True).astype(bool)
    if bad.any():
        raise ContractError(schema.table, problem, column=column,
                            rows=_bad_rows(df, bad, schema.key), fix=fix)


def _has_duplicates(ids: pd.Series) -> bool:
    """Whether a key repeats, by sorting the Arrow strings: ``duplicated`` turns every id into a Python
    string first (at 10M VMs, 1.3 GiB more at the read's peak and 2.6 s against 0.9 s)."""
    column = request.arrow_text(ids)
    if column is None:
        return bool(ids.duplicated().any())
    if len(column) < 2:
        return False
    ordered = pc.take(column, pc.array_sort_indices(column))
    return bool(pc.any(pc.equal(ordered[1:], ordered[:-1])).as_py())


def validate_table(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Return a typed copy of ``df`` or raise ContractError for the first problem found."""
    schema = SCHEMAS[table]
    request.refuse_near_names(df, table, schema.names)
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
            _require(out[col.name].notna(), df, schema, col.name, "values are missing",
                     f"fill {col.name} in these rows, or drop the rows: the column is required in every row")
    if schema.key and _has_duplicates(out[schema.key]):
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
            _require(num.isna() | (num <= MAX_COUNT), df, schema, name, f"counter values exceed {MAX_COUNT:g} "
                     "(or are infinite)", fix="write raw counts; check the collector's scaling and overflow")
            _require(~request.booleans(raw), df, schema, name, "counter values are booleans",
                     fix="write raw counts")
        out = pd.concat([out, counts.astype("float64")], axis=1)
    _check_ranges(out, schema, df)
    return out.reset_index(drop=True)


def _check_ranges(out: pd.DataFrame, schema: Schema, raw: pd.DataFrame) -> None:
    t = schema.table
    if t == "vms":
        request.check_frame(out, t)
        _require(out.deleted_at.isna() | (out.deleted_at >= out.created_at), raw, schema,
                 "deleted_at", "deleted_at is before created_at")
        _require(out.deleted_at.notna() | out.untouched_fraction.isna(), raw, schema,
                 "untouched_fraction", "a running VM (no deleted_at) cannot have a lifetime label",
                 fix="leave untouched_fraction empty until the VM is deleted")


def validate_tables(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Validate each table and the references between them."""
    unknown = sorted(set(tables) - set(SCHEMAS))
    if unknown:
        raise ContractError(unknown[0], f"unknown table; the contract has {list(SCHEMAS)}")
    out = {name: validate_table(df, name) for name, df in tables.items()}
    if "workloads" in out:
        known = out["workloads"].workload_id
        if "slowdowns" in out:
            s = out["slowdowns"]
            _require(s.workload_id.isin(known), s, SLOWDOWNS, "workload_id",
                     "slowdowns reference unknown workloads", fix="add the workloads or drop those rows")
        if "spill_counters" in out:
            s = out["spill_counters"]
            _require(s.workload_id.isin(known), s, SPILL_COUNTERS, "workload_id",
                     "spill counters reference unknown workloads", fix="add the workloads or drop those rows")
            _same_events(out["workloads"], s, "spill_counters")
    if "vms" in out and "vm_counters" in out:
        c = out["vm_counters"]
        _require(c.vm_id.isin(out["vms"].vm_id), c, VM_COUNTERS, "vm_id", "counters for unknown VMs")
    for name in ("vm_counters", "vm_pool_counters"):
        if "workloads" in out and name in out:
            _same_events(out["workloads"], out[name], name, subset=name == "vm_pool_counters")
    return out


def _same_events(workloads: pd.DataFrame, other: pd.DataFrame, table: str, subset: bool = False) -> None:
    """Counters of another table are read with the lab's features: the same events, by the same names. With
    ``subset`` (the hypervisor's counts under a pool, of which the QoS monitor reads a few) any of the lab's events."""
    lab = set(event_columns(workloads, WORKLOADS))
    theirs = set(event_columns(other, SCHEMAS[table]))
    if (theirs - lab) if subset else (lab != theirs):
        diff = sorted(theirs - lab) if subset else sorted(lab ^ theirs)
        cased = request.near_names(sorted(theirs - lab), sorted(lab - theirs))   # {their name: the lab's}
        raise ContractError(table, f"event columns differ from workloads': {diff[:5]}"
                            + (f"; {len(cased)} of them only in upper and lower case, e.g. "
                               f"{next(iter(cased))!r} for the lab's {next(iter(cased.values()))!r}"
                               if cased else ""), column=diff[0],
                            fix=(f"name in {table} only events the lab counts" if subset else
                                 f"count the same PMU events in the lab's local runs and in {table}") + (
                                ", and name them in upper case in both tables, as docs/design.md does" * bool(cased)))
