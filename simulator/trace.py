"""The trace `simulate` replays: its time span, where its VMs ran, and the VMs alive in the window.

The local engine reads the ``vms`` table whole (``read_trace``) and places it in this process. The
dask engine never holds the trace there (``split_trace``, ``gather_window``): the workers split it by
cluster, one partition per cluster spread by size where the dataset has cluster folders, else a hash
of the cluster (``features.shuffle``, with the contract's row checks and a duplicate-id check across
days), each partition is placed on a worker, and only the VMs alive in the window come back (a
tenth of a 10M-VM trace). Placement never crosses a cluster (servers and pools belong to one), so
each partition's placement is the local one's, and the window's VMs come back in the local order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import numpy as np
import pandas as pd

from pond.core.errors import ConfigError
from pond.core.params import SimParams
from pond.features.shuffle import ROW, Split, read_partition, require_unique_ids, split, spread, units, upload
from pond.simulator.pool_sim import Placement, place, require_group_column
from pond.simulator.sizing import in_window
from pond.telemetry.io import cluster_bytes, find_table, read_tables
from pond.telemetry.storage import Location, absolute

Runner = Callable[[Callable, list[tuple]], list]


@dataclass(frozen=True)
class Span:
    """What the replay needs of the whole trace before it places a VM."""
    rows: int
    t0: pd.Timestamp                   # the first creation: second 0
    last_created: pd.Timestamp
    horizon: int                       # one second past the last event: where running VMs end
    last_end: int                      # the last VM's end, in seconds
    all_servers: bool                  # every VM names its server: the trace's placement is kept
    groups: pd.Index                   # the clusters (or regions) servers are grouped by, sorted
    bulk_start: pd.Timestamp           # the first day of the trace's arrivals (``bulk_start``)


@dataclass(frozen=True)
class Window:
    """The VMs alive in the window, in vm_id order, and where they ran (``placement.cluster``: codes
    into ``Span.groups``; ``oversized`` counts the whole trace's)."""
    vms: pd.DataFrame
    start: np.ndarray                  # seconds from ``Span.t0``
    end: np.ndarray
    placement: Placement


def facts(vms: pd.DataFrame, pack_by: str) -> dict:
    """The part of a ``Span`` one piece of the trace gives (``span`` adds the pieces up)."""
    if len(vms):
        require_group_column(vms, pack_by)
    return {"rows": len(vms), "first": vms["created_at"].min() if len(vms) else pd.NaT,
            "last": vms["created_at"].max() if len(vms) else pd.NaT,
            "deleted": vms["deleted_at"].max() if len(vms) else pd.NaT,
            "running": bool(vms["deleted_at"].isna().any()) if len(vms) else False,
            "servers": bool(len(vms) == 0 or ("server_id" in vms.columns and vms["server_id"].notna().all())),
            "groups": pd.unique(vms[pack_by]) if len(vms) else np.array([], object),
            "dtype": vms[pack_by].dtype if len(vms) else None,
            "days": vms["created_at"].dt.floor("D").value_counts() if len(vms) else pd.Series(dtype="int64")}


def bulk_start(arrivals_per_day: pd.Series) -> pd.Timestamp:
    """The first day whose arrivals are at least half of a typical day's, the typical day being the one the
    median VM arrived on. An export of the VMs alive over a month holds VMs created years before (one VM
    in 2019 beside a month of 2026): the trace's first creation then says nothing of when its arrivals
    start, and a warm-up counted from it fills no server."""
    days = arrivals_per_day.sort_index()
    by_count = days.sort_values(kind="stable")
    typical = by_count.to_numpy()[np.searchsorted(by_count.cumsum().to_numpy(), by_count.sum() / 2)]
    return days.index[np.argmax(days.to_numpy() >= typical / 2)]


def span(pieces: list[dict]) -> Span:
    """The trace's span from its pieces' facts: the same seconds as one piece holding every VM."""
    pieces = [p for p in pieces if p["rows"]]
    if not pieces:
        raise ConfigError("simulate: table 'vms' has no rows to replay; import a trace")
    t0 = min(p["first"] for p in pieces)
    last = max(p["last"] for p in pieces)
    deleted = [p["deleted"] for p in pieces if not pd.isna(p["deleted"])]
    start_max = np.int64((last - t0).total_seconds())
    end_max = (max(deleted) - t0).total_seconds() if deleted else np.nan
    horizon = int(max(start_max, np.nanmax(np.array([end_max]), initial=0))) + 1
    running = any(p["running"] for p in pieces)
    last_end = horizon if running or not deleted else int(np.int64(end_max))
    groups = pd.Series(np.concatenate([np.asarray(p["groups"], object) for p in pieces]),
                       dtype=pieces[0]["dtype"]).drop_duplicates()
    per_day = pd.concat([p["days"] for p in pieces]).groupby(level=0).sum()
    return Span(sum(p["rows"] for p in pieces), t0, last, horizon, last_end,
                all(p["servers"] for p in pieces), pd.factorize(groups, sort=True)[1], bulk_start(per_day))


def seconds(vms: pd.DataFrame, s: Span) -> tuple[np.ndarray, np.ndarray]:
    """Each VM's start and end, in seconds from the trace's start; running VMs end at its horizon."""
    start = ((vms["created_at"] - s.t0).dt.total_seconds()).to_numpy().astype(np.int64)
    end = (vms["deleted_at"] - s.t0).dt.total_seconds()
    return start, end.fillna(s.horizon).to_numpy().astype(np.int64)


def read_trace(raw_dir: Location) -> pd.DataFrame:
    """The vms table (either layout) in vm_id order: the order every replay indexes its arrays by."""
    return read_tables(raw_dir, ["vms"])["vms"].sort_values("vm_id", kind="stable").reset_index(drop=True)


def window_of(vms: pd.DataFrame, s: Span, window: tuple[int, int], sp: SimParams, pack_by: str) -> Window:
    """Place ``vms`` (in vm_id order: the whole trace, or whole clusters of it) and keep those alive
    in ``window``. The trace's servers are kept only if every VM of the trace names one (``s``)."""
    start, end = seconds(vms, s)
    placement = place(vms, start, end, sp, pack_by, s.all_servers)   # earlier VMs shape the first fit
    keep = in_window(start, end, window)                             # only VMs alive in the window weigh on it
    cluster = s.groups.get_indexer(vms.loc[keep, pack_by])
    return Window(vms[keep].reset_index(drop=True), start[keep], end[keep],
                  Placement(cluster, placement.host[keep], placement.sockets_per_host, placement.assignment,
                            placement.oversized))


def _part_window(scratch: Location, k: int, s: Span, window: tuple[int, int], sp: SimParams, pack_by: str) -> Window:
    from pond.core.progress import silenced
    require_unique_ids(scratch, k)
    vms = read_partition(scratch, "vms", k, pd.DataFrame()).drop(columns=ROW)
    with silenced():
        return window_of(vms.sort_values("vm_id", kind="stable").reset_index(drop=True), s, window, sp, pack_by)


def cluster_partitions(raw_dir: Location, pack_by: str, partitions: int) -> dict[str, int]:
    """A partition per cluster, spread by the bytes of its folders, when the ``vms`` dataset has a
    cluster level (``telemetry.io.write_partitioned``) and servers are grouped by cluster; else none
    (each cluster's partition is a hash of it: 12 clusters took 9 of 16 partitions at 10M VMs)."""
    path = find_table(raw_dir, "vms")
    if pack_by != "cluster_id" or path is None:
        return {}
    return spread(cluster_bytes(path), partitions)


def split_trace(run: Runner, raw_dir: Location, pack_by: str, partitions: int, scratch: Location
                ) -> tuple[Span, list[int]]:
    """The workers validate the trace, one task per creation day, and write it to ``scratch`` by
    ``pack_by`` (whole clusters per partition, ``cluster_partitions``): the span, and the partitions written."""
    raw_dir = absolute(raw_dir)
    no_counters = pd.DataFrame({"vm_id": pd.Series(dtype="string")})
    assigned = cluster_partitions(raw_dir, pack_by, partitions)
    plan, copied = upload(units(raw_dir, no_counters, date.max), scratch)
    if copied:
        print(f"simulate: copied {copied / 2**30:.2f} GiB of the vms table to {scratch} for the workers")
    splits: list[Split] = run(_split, [(u, scratch, partitions, pack_by, assigned) for u in plan])
    return span([x.summary for x in splits]), sorted({k for x in splits for k in x.vms})


def gather_window(run: Runner, scratch: Location, parts: list[int], s: Span, window: tuple[int, int],
                  sp: SimParams, pack_by: str) -> Window:
    """``window_of`` the whole trace, one task per partition of ``split_trace``: the stage's process
    receives the window's VMs only, and puts them in the local engine's order."""
    got: list[Window] = run(_part_window, [(scratch, k, s, window, sp, pack_by) for k in parts])
    vms = pd.concat([w.vms for w in got], ignore_index=True)
    order = vms["vm_id"].sort_values(kind="stable").index.to_numpy()   # the local engine's order
    start, end, cluster, host = (np.concatenate(a)[order] for a in zip(
        *((w.start, w.end, w.placement.cluster, w.placement.host) for w in got)))
    p = got[0].placement
    return Window(vms.iloc[order].reset_index(drop=True), start, end,
                  Placement(cluster, host, p.sockets_per_host, p.assignment, sum(w.placement.oversized for w in got)))


def _split(unit, scratch: Location, partitions: int, pack_by: str, assigned: dict[str, int]) -> Split:
    return split(unit, scratch, partitions, pack_by, lambda vms: facts(vms, pack_by), assigned)
