"""Importers of real telemetry: a contract directory, `perf stat -x,` runs, Azure V2 vmtable.

All of them only *build* tables; ``import_sources`` validates everything together and the
caller writes once, atomically, so a rejected import leaves the target untouched.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pandas as pd

from pond.core.errors import ContractError, InputFormatError
from pond.telemetry.contract import OPTIONAL_TABLES, TABLES, validate_tables
from pond.telemetry.io import find_table, read_csv, read_raw
from pond.telemetry.storage import Location

PERF_NOT_COUNTED = ("<not counted>", "<not supported>")
PLAIN_ALIAS = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")
AZURE_V2_COLUMNS = ["vmid", "subscriptionid", "deploymentid", "vmcreated", "vmdeleted", "maxcpu",
                    "avgcpu", "p95maxcpu", "vmcategory", "vmcorecountbucket", "vmmemorybucket"]
AZURE_TEXT = ("vmid", "subscriptionid", "deploymentid", "vmcategory", "vmcorecountbucket", "vmmemorybucket")
# Open-ended buckets of the public trace, mapped to a representative size.
AZURE_CORE_OVERFLOW, AZURE_MEMORY_OVERFLOW_GB = 32, 96.0


# What `perf stat -x,` puts before a count, by the flags it ran with: -I (the interval's end, in seconds),
# -A (the CPU), --per-thread (comm-pid), --per-socket / --per-die / --per-core / --per-node (the unit, then how
# many CPUs it sums), or several of them. The count, its unit and the event follow, as in the plain layout.
INTERVAL = re.compile(r"\s*\d+\.\d+")
CPU = re.compile(r"CPU\d+")
UNIT = re.compile(r"(S\d+(-D\d+)?(-L\d+-ID\d+|-C\d+)?|N\d+)")
THREAD = re.compile(r".+-\d+")
PREFIXES = ((), ("interval",), ("cpu",), ("thread",), ("interval", "cpu"), ("interval", "thread"),
            ("unit", "cpus"), ("interval", "unit", "cpus"))
PREFIX_FIELDS = {"interval": INTERVAL, "cpu": CPU, "unit": UNIT, "thread": THREAD, "cpus": re.compile(r"\d+")}
HYBRID = re.compile(r"(cpu_core|cpu_atom)/([A-Za-z0-9_.]+)/")   # a hybrid CPU's two PMUs: summed, as on one PMU


def _is_count(field: str) -> bool:
    raw = field.strip()
    if raw in PERF_NOT_COUNTED:
        return True
    try:
        float(raw)
    except ValueError:
        return False
    return True


def _prefix_fits(fields: list[str], kinds: tuple[str, ...]) -> bool:
    n = len(kinds)
    if len(fields) < n + 3 or not _is_count(fields[n]) or _is_count(fields[n + 1]) and fields[n + 1].strip():
        return False
    event = fields[n + 2].strip()
    if not event or _is_count(event):
        return False
    return all(PREFIX_FIELDS[k].fullmatch(f.strip()) for k, f in zip(kinds, fields))


def _layout(row: list[str], lineno: int, source: str) -> int:
    """How many fields stand before the count on this line (the flags' prefix), or a refusal naming the flag."""
    for kinds in PREFIXES:
        if _prefix_fits(row, kinds):
            return len(kinds)
    line = ",".join(row)[:80]
    if line.lstrip().startswith("{"):
        raise InputFormatError(f"{source} line {lineno}: this is `perf stat -j` (JSON) output. Fix: re-run the "
                               "workload with `perf stat -x, -o FILE -e ...` (CSV)")
    if len(row) >= 3 and row[2].strip() and not _is_count(row[2]) and not _is_count(row[0]) and not any(
            p.fullmatch(row[0].strip()) for p in (CPU, UNIT, THREAD)):
        raise InputFormatError(f"{source} line {lineno}: count {row[0].strip()!r} of {row[2].strip()} is not a number")
    if len(row) == 1 and (";" in line or "\t" in line):
        raise InputFormatError(f"{source} line {lineno}: the fields are not separated by commas (perf stat -x "
                               "with another separator?). Fix: re-run with `perf stat -x,`")
    raise InputFormatError(f"{source} line {lineno}: expected 'value,unit,event,...' (perf stat -x, output, "
                           f"optionally with -I, -A, --per-thread, --per-socket, --per-die, --per-core or "
                           f"--per-node before it), got {line!r}. `--metric-only` and `--summary` layouts are not "
                           "counts: re-run without them")


def parse_perf_stat(text: str, source: str = "perf output") -> pd.Series:
    """Event -> count from `perf stat -x,` output (CSV: value,unit,event,run,pct,...).

    Comment lines are skipped; `<not counted>` becomes NaN. Counts perf printed per interval (-I), per CPU
    (-A), per thread, or per socket, die, core or node are summed, as perf's own total sums them (each count
    already scaled for multiplexing by perf); a hybrid CPU's ``cpu_core/x/`` and ``cpu_atom/x/`` are summed as
    event x. An event listed in several groups at one place (emon-style lists repeat INST_RETIRED.ANY etc.)
    takes the mean of its values there. perf prints an event as it was named, and `perf list` shows the
    aliases in lower case: a plain alias (``cycle_activity.stalls_l3_miss``, any case) is upper-cased to the
    contract's column name; raw and PMU-qualified events (``cpu/event=0x3c/``, ``...:u``) are kept as written.
    """
    rows: list[tuple[str, str, float]] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
            continue
        k = _layout(row, lineno, source)
        raw, event = row[k].strip(), row[k + 2].strip()
        where = ",".join(f.strip() for f in row[:k])
        hybrid = HYBRID.fullmatch(event)
        if hybrid:
            event, where = hybrid.group(2), f"{where},{hybrid.group(1)}"
        if PLAIN_ALIAS.fullmatch(event):
            event = event.upper()
        if raw in PERF_NOT_COUNTED:
            val = np.nan
        else:
            try:
                val = float(raw)
            except ValueError:
                raise InputFormatError(f"{source} line {lineno}: count {raw!r} of {event} is not a number") from None
        rows.append((where, event, val))
    if not rows:
        raise InputFormatError(f"{source}: no events found; was it written by `perf stat -x,`?")
    df = pd.DataFrame(rows, columns=["where", "event", "value"])
    at_each = df.groupby(["event", "where"], sort=False)["value"].mean()       # NaN-skipping: counted runs only
    return at_each.groupby(level="event", sort=False).sum(min_count=1).astype(float).rename(None).rename_axis(None)


SPILL_META = ("latency_ratio", "spilled_pct")   # a meta row naming both is a run with memory on the pool


def _perf_rows(perf_dir: Location, meta: pd.DataFrame, meta_csv: Location) -> pd.DataFrame:
    """One row per file of ``meta``: its meta columns and its parsed counts."""
    runs = []
    for row in meta.itertuples(index=False):  # one file per lab run: a handful, not fleet-sized
        path = perf_dir / row.file
        if not path.exists():
            raise InputFormatError(f"{meta_csv}: file {row.file!r} not found in {perf_dir}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputFormatError(f"{path}: not UTF-8 text at byte {exc.start}; was it written by "
                                   "`perf stat -x,`? Fix: give the run's perf output as plain text") from None
        runs.append(parse_perf_stat(text, source=str(path)))
    return pd.concat([meta.reset_index(drop=True), pd.DataFrame(runs)], axis=1)


def perf_runs(perf_dir: Location, meta_csv: Location) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``workloads`` rows, and ``spill_counters`` rows (None when no run had memory on the pool), from one perf
    file per run.

    ``meta_csv`` maps each file to its workload: columns file, workload_id, workload_class, footprint_gb; and,
    for a run with part of the footprint on the pool (a CXL or remote NUMA node, e.g. under ``numactl
    --preferred``), latency_ratio and spilled_pct, with repetition optional. Local runs of one workload are summed;
    each spill run is a row of its own, as the slowdowns table times it.
    """
    meta = read_csv(meta_csv, "workloads", text=("file", "workload_id", "workload_class"))
    need = ["file", "workload_id", "workload_class", "footprint_gb"]
    missing = [c for c in need if c not in meta.columns]
    if missing:
        raise InputFormatError(f"{meta_csv}: missing columns {missing}; expected {need}, and latency_ratio and "
                               "spilled_pct for runs with memory on the pool")
    named = [c for c in SPILL_META if c in meta.columns]
    if len(named) == 1:
        raise InputFormatError(f"{meta_csv}: {named[0]} without {({*SPILL_META} - {*named}).pop()}; a run on the pool "
                               "needs both (the pool's latency over local, and the share of the footprint there)")
    spill = meta[list(SPILL_META)].notna().all(axis=1).to_numpy() if named else np.zeros(len(meta), bool)
    table = _perf_rows(perf_dir, meta, meta_csv)
    extra = [c for c in (*need, *SPILL_META, "repetition") if c in table.columns]
    events = [c for c in table.columns if c not in extra]
    local = table[~spill]
    summed = local.groupby("workload_id", sort=False)[events].sum(min_count=1).reset_index()
    info = meta.drop_duplicates("workload_id")[["workload_id", "workload_class", "footprint_gb"]]
    workloads = info.merge(summed, on="workload_id", how="right")[["workload_id", "workload_class", "footprint_gb",
                                                                   *events]]
    if not spill.any():
        return workloads, None
    runs = table[spill].reset_index(drop=True)
    keys = ["workload_id", "latency_ratio", "spilled_pct"]
    repetition = (runs["repetition"] if "repetition" in runs.columns and runs["repetition"].notna().all()
                  else runs.groupby(keys, sort=False).cumcount())
    spills = runs[keys].assign(repetition=repetition.to_numpy())
    return workloads, pd.concat([spills, runs[events]], axis=1)


VM_POOL_META = ("file", "vm_id", "latency_ratio", "pool_gb", "measured_at")


def vm_perf_runs(perf_dir: Location, meta_csv: Location) -> pd.DataFrame:
    """``vm_pool_counters`` rows from one perf file per counting window of a VM with memory on a pool (``perf stat
    -x,`` of the VM's vCPUs while ``pool_gb`` of it sat on a CXL or remote NUMA node). ``meta_csv``: columns file,
    vm_id, latency_ratio, pool_gb, measured_at (when the window ended)."""
    meta = read_csv(meta_csv, "vm_pool_counters", text=("file", "vm_id"))
    missing = [c for c in VM_POOL_META if c not in meta.columns]
    if missing:
        raise InputFormatError(f"{meta_csv}: missing columns {missing}; expected {list(VM_POOL_META)}: which VM each "
                               "file counted, at which pool latency, with how many GB on the pool, and when")
    table = _perf_rows(perf_dir, meta[list(VM_POOL_META)], meta_csv)
    return table.drop(columns=["file"])


def perf_workloads(perf_dir: Location, meta_csv: Location) -> pd.DataFrame:
    """``workloads`` rows from one perf file per run (``perf_runs``'s first table)."""
    return perf_runs(perf_dir, meta_csv)[0]


def azure_vms(vmtable: Location, trace_start: str = "2019-01-01T00:00:00Z") -> pd.DataFrame:
    """``vms`` rows (no labels, no workloads) from an Azure Public Dataset V2 vmtable CSV.

    The trace has no region, cluster, VM type or OS: the deployment stands in for the cluster
    (a deployment's VMs share one), the VM type is built from category and size buckets, and
    region and OS are 'unknown'. Times are seconds from ``trace_start``.
    """
    first = read_csv(vmtable, "vms", header=None, nrows=1, dtype=str)   # the public files have no header row
    has_header = str(first.iat[0, 0]).strip().lower() == "vmid" if first.size else False
    names = [str(c).strip().lower() for c in first.iloc[0]] if has_header else AZURE_V2_COLUMNS
    df = read_csv(vmtable, "vms", header=0 if has_header else None, names=names, text=AZURE_TEXT, low_memory=False)
    missing = [c for c in AZURE_V2_COLUMNS if c not in df.columns]
    if missing:
        raise InputFormatError(f"{vmtable}: not an Azure V2 vmtable, missing columns {missing}")
    empty = [c for c in AZURE_V2_COLUMNS if c != "vmdeleted" and df[c].isna().all()]   # all running: no deletion
    if empty:
        raise InputFormatError(f"{vmtable}: not an Azure V2 vmtable: column {empty[0]} is empty in every row (its rows "
                               f"have fewer than the {len(AZURE_V2_COLUMNS)} fields {', '.join(AZURE_V2_COLUMNS)}). "
                               "Fix: import the trace's vmtable file as it was downloaded")

    def seconds(col: str) -> pd.Series:
        """Seconds from the trace's start; blank only for a VM not deleted (``vmdeleted``)."""
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() & (df[col].notna() if col == "vmdeleted" else True)
        if bad.any():
            raise InputFormatError(f"{vmtable}: column {col} must be seconds from the trace's start; rows "
                                   f"{df.vmid[bad].astype(str).head(3).tolist()} have {df[col][bad].head(3).tolist()}. "
                                   "Fix: drop those rows, or export the times as numbers of seconds")
        return num

    def bucket(col: str, overflow: float) -> pd.Series:
        s = df[col].astype(str).str.strip()
        num = pd.to_numeric(s, errors="coerce")
        over = s.str.startswith(">")
        bad = num.isna() & ~over
        if bad.any():
            raise InputFormatError(f"{vmtable}: column {col} has unknown buckets {s[bad].unique()[:5].tolist()}")
        return num.where(~over, overflow)

    t0 = pd.Timestamp(trace_start)
    cores = bucket("vmcorecountbucket", AZURE_CORE_OVERFLOW).astype("int64")
    mem = bucket("vmmemorybucket", AZURE_MEMORY_OVERFLOW_GB).astype(float)
    created = t0 + pd.to_timedelta(seconds("vmcreated"), unit="s")
    deleted = t0 + pd.to_timedelta(seconds("vmdeleted"), unit="s")
    return pd.DataFrame({
        "vm_id": df.vmid.astype("string"), "customer_id": df.subscriptionid.astype("string"),
        "cluster_id": df.deploymentid.astype("string"), "server_id": pd.Series(pd.NA, index=df.index, dtype="string"),
        "region": "unknown",
        "vm_type": "azure_" + df.vmcategory.astype(str).str.strip() + "_" + cores.astype(str) + "c_"
                   + mem.astype(str).str.removesuffix(".0") + "g",
        "vcpus": cores, "memory_gb": mem, "os": "unknown", "created_at": created, "deleted_at": deleted,
        "untouched_fraction": np.nan, "workload_id": pd.Series(pd.NA, index=df.index, dtype="string"),
    })


def import_sources(contract_dir: Location | None = None, perf_dir: Location | None = None,
                   perf_meta: Location | None = None, azure_vmtable: Location | None = None,
                   existing: dict[str, pd.DataFrame] | None = None,
                   perf_vm_meta: Location | None = None) -> dict[str, pd.DataFrame]:
    """Collect tables from every source given, validate them together, return them typed.

    An import is the whole contract (all four tables, none empty), so that it can never replace
    a data set with part of one. ``existing`` (``pond import --partial``): the tables given
    replace theirs in that set, the others are kept, and the whole set is validated again. An
    Azure V2 vmtable alone is a trace for the pool simulator (``vms`` only) and stays one.
    """
    tables: dict[str, pd.DataFrame] = {}
    if contract_dir is not None:
        if not contract_dir.is_dir():
            raise InputFormatError(f"{contract_dir} is not a directory of contract tables")
        for name in (*TABLES, *OPTIONAL_TABLES):
            path = find_table(contract_dir, name)
            if path is not None:
                tables[name] = read_raw(path, name)
                if tables[name].empty:
                    raise ContractError(name, f"{path} has no rows", fix="export the table with its rows: an "
                                        "empty table would replace the data it is meant to update")
        if not tables:
            raise ContractError("workloads", f"no contract tables in {contract_dir}",
                                fix=f"name files {', '.join(TABLES)} with .parquet or .csv")
    if perf_dir is not None:
        if perf_meta is None and perf_vm_meta is None:
            raise InputFormatError("perf import needs --perf-meta (file, workload_id, workload_class, footprint_gb) "
                                   "for lab runs, or --perf-vm-meta (file, vm_id, latency_ratio, pool_gb, measured_at) "
                                   "for VMs counted on a pool")
        if perf_meta is not None:
            perf, spills = perf_runs(perf_dir, perf_meta)
            tables["workloads"] = pd.concat([tables.get("workloads", pd.DataFrame()), perf], ignore_index=True)
            if spills is not None:
                tables["spill_counters"] = pd.concat([tables.get("spill_counters", pd.DataFrame()), spills],
                                                     ignore_index=True)
        if perf_vm_meta is not None:
            tables["vm_pool_counters"] = pd.concat([tables.get("vm_pool_counters", pd.DataFrame()),
                                                    vm_perf_runs(perf_dir, perf_vm_meta)], ignore_index=True)
    if azure_vmtable is not None:
        az = azure_vms(azure_vmtable)
        tables["vms"] = pd.concat([tables.get("vms", pd.DataFrame()), az], ignore_index=True)
    if not tables:
        raise InputFormatError("nothing to import: give a contract directory, --perf-dir or --azure-vmtable")
    trace = azure_vmtable is not None and set(tables) == {"vms"} and existing is None
    if existing is not None:
        tables = {**existing, **tables}
    missing = [t for t in TABLES if t not in tables]
    if missing and not trace:
        raise ContractError(missing[0], f"the import has no {', '.join(missing)} table; a full import needs all of "
                            f"{', '.join(TABLES)}", fix="add the missing tables, or pass --partial to replace only "
                            "the tables given in the set already at --out")
    return validate_tables(tables)
