"""Moving the fleet between workers through files, so that no fleet-sized table passes through the
stage's own process (the dask engine's `features` and `simulate`).

1. ``units``: the raw tables cut into pieces one worker reads alone, in the order the local engine
   reads them: one per creation-day folder of a partitioned dataset, or one for a single file.
2. ``split``: one task per unit validates its VMs (the contract's row checks) and writes them, and
   their counters, to the partition their customer (`features`: ``customer_partition``) or cluster
   (`simulate`) hashes to; their ids go to a partition by id, where ``require_unique_ids`` finds an
   id that two units share. Every VM carries ``_row``, its position in the local engine's row order. Counter events are copied only
   for the days the snapshot's history can use; elsewhere `features` needs only which VMs have
   counters (``features.history.history_counts``).
3. ``merge_in_order``: the partitions' outputs, each in ``_row`` order, streamed into one Parquet
   file in the local engine's order, one row group at a time.

The scratch folder must be visible to every worker: a LocalCluster's workers share this machine's
disk; a remote cluster needs shared storage there, a mounted path or a storage URL
(``telemetry.storage``; ``POND_SCRATCH``).
"""

from __future__ import annotations

import heapq
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pond.core.errors import ConfigError, ContractError
from pond.core.runtime import Runtime
from pond.telemetry.contract import validate_table
from pond.telemetry.io import COUNTERS, day_files, find_table, read_raw
from pond.telemetry.storage import Location, is_url, location, parquet_file, read_parquet, write_parquet

SCRATCH_ENV = Runtime.variable("scratch")
ROW = "_row"                                      # the local engine's row position of a VM
KINDS = ("vms", "ids", "has_counters", "counters")  # what split writes, one folder per partition each


def scratch_folder(tmp: Path, stage: str) -> Location:
    """Where the dask engine's workers exchange files: a fresh folder under ``POND_SCRATCH`` (a path
    every worker sees, or a storage URL), else beside the stage's output in ``tmp``."""
    base = Runtime.now().scratch
    if not base:
        return tmp / ".shuffle"
    return location(base) / f"{stage}-{socket.gethostname()}-{os.getpid()}-{tmp.name.rsplit('-', 1)[-1]}"


def customer_partition(customer_id: pd.Series, partitions: int) -> np.ndarray:
    """A stable partition number per row (the same customer, the same partition, on any machine)."""
    return _hash(customer_id, partitions)


def _hash(values: pd.Series, buckets: int) -> np.ndarray:
    return (pd.util.hash_pandas_object(values.astype("string"), index=False).to_numpy() % buckets).astype(np.int64)


def spread(sizes: Mapping[str, int], partitions: int) -> dict[str, int]:
    """A partition per named group, the largest first into the least loaded (ties: the lower number),
    so that no partition holds two groups while another is empty: ``split``'s ``assigned``."""
    load = [(0, k) for k in range(max(int(partitions), 1))]
    out: dict[str, int] = {}
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):   # one step per group (clusters), not per row
        size, k = heapq.heappop(load)
        out[name] = k
        heapq.heappush(load, (size + int(sizes[name]), k))
    return out


def group_partition(values: pd.Series, partitions: int, assigned: Mapping[str, int] | None = None) -> np.ndarray:
    """Each row's partition: its group's in ``assigned``, else a hash of the group. Either way a
    function of the value alone, so every row of a group lands in one partition, whichever task
    wrote it; a name ``assigned`` lacks (a layout without group folders, a folder whose name is not
    its rows' value) only loses the balance."""
    part = _hash(values, partitions)
    if assigned:
        named = values.astype("string").map(pd.Series(assigned, dtype="Int64"))
        known = named.notna().to_numpy()
        part[known] = named[known].to_numpy(np.int64)
    return part


@dataclass(frozen=True)
class Unit:
    """One split task's input: ``vms`` files (read in this order) and the matching counters."""
    index: int
    vms: tuple[Location, ...]
    counters: tuple[Location, ...] | pd.DataFrame = ()
    events: bool = True                  # copy counter events (False: only vm_id is needed)


@dataclass
class Split:
    """What one split task wrote: rows per partition, counter rows of no VM of its unit, and what
    the caller's ``summary`` made of the unit's VMs."""
    vms: dict[int, int] = field(default_factory=dict)
    stray_counters: int = 0
    summary: Any = None


def units(raw_dir: Location, counters: pd.DataFrame | Location, first_events_day: date) -> list[Unit]:
    """The raw tables cut into split tasks, in the local engine's read order (``read_raw``)."""
    vms = find_table(raw_dir, "vms")
    if vms is None:
        raise ContractError("vms", f"no vms.parquet or vms.csv in {raw_dir}",
                            fix="run `pond generate` or `pond import DIR` first")
    if not vms.is_dir():
        return [Unit(0, (vms,), counters if isinstance(counters, pd.DataFrame) else (counters,))]
    vm_days = day_files(vms)
    counter_days = day_files(counters) if not isinstance(counters, pd.DataFrame) and counters.is_dir() else {}
    out = []
    for i, day in enumerate(sorted(vm_days.keys() | counter_days.keys())):
        c = counters if isinstance(counters, pd.DataFrame) else tuple(counter_days.get(day, ()))
        out.append(Unit(i, tuple(vm_days.get(day, ())), c,
                        events=day == "unknown" or day >= first_events_day.isoformat()))
    return out


def upload(plan: list[Unit], scratch: Location) -> tuple[list[Unit], int]:
    """The units as workers can read them, and the bytes copied: with a scratch URL (a remote cluster
    that cannot see this machine's disk), each local file is copied under ``scratch/raw`` first, one
    file at a time; files already at a URL, or a scratch on a (shared) path, are read where they are."""
    if not is_url(scratch):
        return plan, 0
    copied = 0

    def put(unit: Unit, kind: str, files: tuple[Location, ...]) -> tuple[Location, ...]:
        nonlocal copied
        out = []
        for i, f in enumerate(files):
            if is_url(f):
                out.append(f)
                continue
            suffix = ".csv.gz" if f.name.endswith(".csv.gz") else Path(f.name).suffix
            target = scratch / "raw" / f"u{unit.index:06d}" / f"{kind}-{i:05d}{suffix or '.parquet'}"
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch.fs.put_file(str(f), target.path)
            copied += f.stat().st_size
            out.append(target)
        return tuple(out)

    staged = [Unit(u.index, put(u, "vms", u.vms),
                   u.counters if isinstance(u.counters, pd.DataFrame) else put(u, "counters", u.counters),
                   u.events) for u in plan]
    return staged, copied


def _read(files: tuple[Location, ...], table: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Files of one table as ``read_raw`` reads them: CSV as CSV, anything else as Parquet."""
    parts = []
    for f in files:
        if f.name.endswith((".csv", ".csv.gz")):
            parts.append(read_raw(f, table))
            continue
        try:
            parts.append(parquet_file(f).read(columns=columns).to_pandas())
        except (pa.ArrowException, OSError, KeyError) as exc:
            raise ContractError(table, f"cannot read {f}: {str(exc).splitlines()[0][:160]}",
                                fix="export the table again as Parquet (with a vm_id column)") from None
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"vm_id": pd.Series(dtype="string")})


def _read_vms(unit: Unit) -> pd.DataFrame:
    return validate_table(_read(unit.vms, "vms"), "vms") if unit.vms else pd.DataFrame()


def _read_counters(unit: Unit) -> pd.DataFrame:
    if isinstance(unit.counters, pd.DataFrame):
        return unit.counters if unit.events else unit.counters[["vm_id"]]
    return _read(unit.counters, COUNTERS, None if unit.events else ["vm_id"])


def _require_visible(unit: Unit) -> None:
    """A worker of a remote cluster without the raw tables' disk: say so, not "cannot read"."""
    files = unit.vms + (() if isinstance(unit.counters, pd.DataFrame) else unit.counters)
    missing = [os.fspath(f) for f in files if not is_url(f) and not os.path.exists(f)]
    if missing:
        raise ConfigError(f"the Dask worker on {socket.gethostname()} cannot see {missing[0]}"
                          f"{f' (and {len(missing) - 1} more files)' if len(missing) > 1 else ''}: the raw tables are "
                          "on a disk this worker does not mount. Fix: mount them at the same path on every worker, "
                          "give --raw as a storage URL (s3://...), or set POND_SCRATCH to a storage URL so that the "
                          "stage copies them there first")


def split(unit: Unit, scratch: Location, partitions: int, by: str = "customer_id",
          summary: Callable[[pd.DataFrame], Any] | None = None, assigned: Mapping[str, int] | None = None) -> Split:
    """Validate one unit's VMs and write them and their counters to the folders of the partitions
    of their ``by`` value (``group_partition``); ``summary(vms)``, if given, is returned with the counts."""
    _require_visible(unit)
    vms = _read_vms(unit)
    out = Split()
    part = np.empty(0, np.int64)
    if summary is not None:
        out.summary = summary(vms)
    if len(vms):
        vms[ROW] = (np.int64(unit.index) << 32) + np.arange(len(vms), dtype=np.int64)
        part = group_partition(vms[by], partitions, assigned)
        _write(scratch, "vms", vms, part, unit.index)
        _write(scratch, "ids", vms[["vm_id"]], _hash(vms["vm_id"], partitions), unit.index)
        out.vms = {int(k): int(n) for k, n in zip(*np.unique(part, return_counts=True))}
    counters = _read_counters(unit)
    if len(counters):
        of = pd.Series(part, index=pd.Index(vms["vm_id"] if len(vms) else [], dtype="string"))
        cpart = of.reindex(counters["vm_id"].astype("string")).to_numpy()
        known = ~np.isnan(cpart)
        out.stray_counters = int((~known).sum())
        counters, cpart = counters[known], cpart[known].astype(np.int64)
        _write(scratch, "has_counters", counters[["vm_id"]], cpart, unit.index)
        if unit.events:
            _write(scratch, "counters", counters, cpart, unit.index)
    return out


def _write(scratch: Location, kind: str, df: pd.DataFrame, part: np.ndarray, index: int) -> None:
    for k in np.unique(part):
        folder = scratch / kind / f"p{k:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        write_parquet(df[part == k], folder / f"u{index:06d}.parquet")


def require_unique_ids(scratch: Location, k: int) -> None:
    """No vm_id of partition ``k``'s ids (every VM whose id hashes there, from any unit) repeats:
    the check the local engine makes on the whole table, split by id."""
    ids = read_partition(scratch, "ids", k, pd.DataFrame({"vm_id": pd.Series(dtype="string")}))["vm_id"]
    dup = ids.duplicated(keep=False)
    if dup.any():
        raise ContractError("vms", "duplicate ids", column="vm_id", rows=ids[dup].unique()[:6].tolist(),
                            fix="each id must appear once")


def read_partition(scratch: Location, kind: str, k: int, empty: pd.DataFrame) -> pd.DataFrame:
    """Partition ``k``'s rows of one kind, in unit order (so VMs come in ``_row`` order)."""
    folder = scratch / kind / f"p{k:05d}"
    files = sorted(folder.glob("*.parquet"), key=lambda f: f.name) if folder.exists() else []
    if not files:
        return empty
    return pd.concat([read_parquet(f) for f in files], ignore_index=True)


def merge_in_order(parts: list[tuple[Location, np.ndarray]], out: Path, row_group: int) -> int:
    """Write the rows of ``parts`` (a Parquet file and its rows' ``_row``, increasing) into ``out`` in
    ``_row`` order, ``row_group`` rows per group; returns the number of rows. Each part is read once,
    front to back, so the process holds one row group and one batch per part."""
    parts = [(f, r) for f, r in parts if len(r)]
    if not parts:
        raise ValueError("merge_in_order needs at least one row")
    order = np.sort(np.concatenate([r for _, r in parts]))
    schemas = [parquet_file(f).schema_arrow for f, _ in parts]
    schema = pa.unify_schemas(schemas).with_metadata(schemas[0].metadata)   # a part's all-null column is typed by another's
    streams = [_Stream(f, schema) for f, _ in parts]
    with pq.ParquetWriter(out, schema) as writer:
        for a in range(0, len(order), row_group):
            lo, hi = order[a], order[min(a + row_group, len(order)) - 1]
            pieces, rows = [], []
            for s, (_, r) in zip(streams, parts):
                n = int(np.searchsorted(r, hi, side="right") - np.searchsorted(r, lo, side="left"))
                if n:
                    pieces.append(s.take(n))
                    rows.append(r[s.taken - n:s.taken])
            table = pa.concat_tables(pieces)
            writer.write_table(table.take(pa.array(np.argsort(np.concatenate(rows), kind="stable"))),
                               row_group_size=row_group)
    return len(order)


class _Stream:
    """The rows of one Parquet file, handed out front to back in any counts."""

    def __init__(self, path: Location, schema: pa.Schema) -> None:
        self.batches = parquet_file(path).iter_batches(batch_size=65_536)
        self.schema, self.buffer, self.taken = schema, pa.table({}), 0

    def take(self, n: int) -> pa.Table:
        while self.buffer.num_rows < n:
            batch = pa.Table.from_batches([next(self.batches)]).cast(self.schema)
            self.buffer = batch if self.buffer.num_columns == 0 else pa.concat_tables([self.buffer, batch])
        head, self.buffer = self.buffer.slice(0, n), self.buffer.slice(n)
        self.taken += n
        return head
