"""Where VMs run, and how much memory is in use there over time (Pond §6.1's simulator state).

``place``: the trace's servers, or first fit where the trace names none. ``Sweep``: the VM
arrivals and departures sorted once; per grouping (servers, pools of consecutive servers of one
cluster), each group's level after every event and its peak, exact at second resolution, one
sorted event sweep per grouping, no per-VM loop. ``simulator.sizing`` builds on both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pond.core.errors import ConfigError
from pond.core.params import SimParams
from pond.simulator.packing import ServerShape, assign_servers


@dataclass
class Placement:
    """Where each VM ran: server index within its cluster, and how many sockets a server has."""
    cluster: np.ndarray
    host: np.ndarray
    sockets_per_host: int
    assignment: str           # "trace" (server_id given), or the scheduler's rule: "first_fit" | "best_fit"
    oversized: int            # VMs larger than a socket, given a socket of their own


def require_group_column(vms: pd.DataFrame, column: str) -> None:
    """``vms`` has the column servers are grouped by (``--pack-by``)."""
    if column not in vms.columns:
        raise ConfigError(f"simulate: table 'vms' has no column {column!r} to group servers by; "
                          "use cluster_id or region")


def place(vms: pd.DataFrame, start_s: np.ndarray, end_s: np.ndarray, params: SimParams,
          cluster_col: str = "cluster_id", trace_servers: bool | None = None) -> Placement:
    """The trace's servers when every VM names one; otherwise ``params.packing`` on servers (simulator.packing).

    ``cluster_col`` groups the servers (and pools, which never cross a group); an Azure V2 trace,
    whose cluster stands in for a deployment, is better packed by ``region``. ``trace_servers``:
    whether every VM of the whole trace names one, when ``vms`` is only some of its clusters.
    """
    require_group_column(vms, cluster_col)
    cluster, _ = pd.factorize(vms[cluster_col], sort=True)
    if trace_servers is None:
        trace_servers = bool(len(vms)) and bool(vms["server_id"].notna().all())
    if trace_servers and len(vms):
        keys = vms[cluster_col].astype(str) + "\x00" + vms["server_id"].astype(str)
        codes, uniques = pd.factorize(keys, sort=True)
        first = pd.Series(np.arange(len(uniques))).groupby(pd.Series(uniques).str.split("\x00").str[0]).transform("min")
        return Placement(cluster, codes - first.to_numpy()[codes], params.sockets_per_server, "trace", 0)
    k = params.sockets_per_server
    shape = ServerShape(k * params.socket_vcpus, k * params.socket_memory_gb)
    cluster, host, oversized = assign_servers(vms, start_s, end_s, shape, cluster_col, params.packing)
    return Placement(cluster, host, k, params.packing, int(oversized.sum()))


class Sweep:
    """Events sorted by time once (departures first at equal seconds); levels and peaks per any grouping."""

    def __init__(self, start_s: np.ndarray, end_s: np.ndarray):
        n = len(start_s)
        end_s = np.maximum(end_s, start_s + 1)
        t = np.concatenate([start_s, end_s])
        arrival = np.r_[np.ones(n, bool), np.zeros(n, bool)]
        order = np.lexsort((arrival, t))
        self.vm = np.r_[np.arange(n), np.arange(n)][order]
        self.t = t[order]
        self.sign = np.where(arrival[order], 1.0, -1.0)
        self._groupings: dict[object, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _grouping(self, key: object, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Events ordered by group; kept under ``key`` for the next call (None: a one-off grouping)."""
        if key is None or key not in self._groupings:
            g = group[self.vm]
            o = np.argsort(g, kind="stable")      # stable: time order kept within each group
            gs = g[o]
            starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if len(gs) else np.zeros(0, np.int64)
            if key is None:
                return o, gs, starts
            self._groupings[key] = (o, gs, starts)
        return self._groupings[key]

    def _levels(self, key: object, group: np.ndarray, amount: np.ndarray) -> np.ndarray:
        """Each group's level right after each of its events, in group-then-time order."""
        o, gs, starts = self._grouping(key, group)
        delta = (self.sign * np.asarray(amount, float)[self.vm])[o]
        level = np.cumsum(delta)
        level -= np.repeat(level[starts] - delta[starts], np.diff(np.r_[starts, len(gs)]))
        return np.round(level, 6)

    def at_arrival(self, key: object, group: np.ndarray, amount: np.ndarray) -> np.ndarray:
        """Per VM: its group's level right after it arrived (itself included)."""
        o, _, _ = self._grouping(key, group)
        level = self._levels(key, group, amount)
        arrival = self.sign[o] > 0
        out = np.empty(len(self.vm) // 2)
        out[self.vm[o][arrival]] = level[arrival]
        return out

    def peaks(self, key: object, group: np.ndarray, amount: np.ndarray,
              window: tuple[float, float] | None = None) -> np.ndarray:
        """Peak over time of the summed ``amount`` of the VMs alive in each group (index = group);
        with ``window`` (start, end seconds), the peak within it, the level at its start included."""
        o, gs, starts = self._grouping(key, group)
        out = np.zeros(int(group.max()) + 1 if len(group) else 0)
        if not len(gs):
            return out
        level = self._levels(key, group, amount)
        if window is not None:
            t = self.t[o]
            before = t < window[0]                      # a prefix of each group's events
            group_end = np.r_[gs[1:] != gs[:-1], True]
            carried = before & (group_end | ~np.r_[before[1:], False])   # the level the window starts at
            level = np.where(carried | ((t >= window[0]) & (t < window[1])), level, 0.0)
        out[gs[starts]] = np.maximum.reduceat(level, starts)
        return np.maximum(out, 0.0)


def global_index(cluster: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Cluster-local indices (servers, pools) -> one index space, cluster-major."""
    n_per = np.zeros(int(cluster.max()) + 1 if len(cluster) else 0, np.int64)
    np.maximum.at(n_per, cluster, local + 1)
    return np.r_[0, np.cumsum(n_per)[:-1]][cluster] + local if len(cluster) else local
