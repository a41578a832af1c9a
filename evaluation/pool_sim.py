"""DRAM needed with and without a CXL pool, by replaying VM arrivals and departures (Pond Fig. 3, 21).

Each server must hold the peak of the local
memory of the VMs on it; each pool (consecutive servers of one cluster spanning ``pool_sockets``
sockets) must hold the peak of their pool memory. Without a pool every server holds the peak of
its VMs' whole memory. Savings = 1 - (sum of local peaks + sum of pool peaks) / sum of all-local
peaks. Peaks are exact at second resolution: one sorted event sweep per grouping, no per-VM loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.errors import ConfigError
from core.params import SimParams
from evaluation.packing import ServerShape, assign_servers


@dataclass
class Placement:
    """Where each VM ran: server index within its cluster, and how many sockets a server has."""
    cluster: np.ndarray
    host: np.ndarray
    sockets_per_host: int
    assignment: str           # "trace" (server_id given) or "first_fit"
    oversized: int            # VMs larger than a socket, given a socket of their own


def place(vms: pd.DataFrame, start_s: np.ndarray, end_s: np.ndarray, params: SimParams,
          cluster_col: str = "cluster_id") -> Placement:
    """The trace's servers when every VM names one; otherwise first fit on servers (evaluation.packing).

    ``cluster_col`` groups the servers (and pools, which never cross a group); an Azure V2 trace,
    whose cluster stands in for a deployment, is better packed by ``region``.
    """
    if cluster_col not in vms.columns:
        raise ConfigError(f"simulate: table 'vms' has no column {cluster_col!r} to group servers by; "
                          "use cluster_id or region")
    cluster, _ = pd.factorize(vms[cluster_col], sort=True)
    if len(vms) and vms["server_id"].notna().all():
        keys = vms[cluster_col].astype(str) + "\x00" + vms["server_id"].astype(str)
        codes, uniques = pd.factorize(keys, sort=True)
        first = pd.Series(np.arange(len(uniques))).groupby(pd.Series(uniques).str.split("\x00").str[0]).transform("min")
        return Placement(cluster, codes - first.to_numpy()[codes], params.sockets_per_server, "trace", 0)
    k = params.sockets_per_server
    shape = ServerShape(k * params.socket_vcpus, k * params.socket_memory_gb)
    cluster, host, oversized = assign_servers(vms, start_s, end_s, shape, cluster_col)
    return Placement(cluster, host, k, "first_fit", int(oversized.sum()))


class Sweep:
    """Events sorted by time once (departures first at equal seconds); peaks per any grouping."""

    def __init__(self, start_s: np.ndarray, end_s: np.ndarray):
        n = len(start_s)
        end_s = np.maximum(end_s, start_s + 1)
        t = np.concatenate([start_s, end_s])
        arrival = np.r_[np.ones(n, bool), np.zeros(n, bool)]
        order = np.lexsort((arrival, t))
        self.vm = np.r_[np.arange(n), np.arange(n)][order]
        self.sign = np.where(arrival[order], 1.0, -1.0)
        self._groupings: dict[object, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _grouping(self, key: object, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if key not in self._groupings:
            g = group[self.vm]
            o = np.argsort(g, kind="stable")      # stable: time order kept within each group
            gs = g[o]
            starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if len(gs) else np.zeros(0, np.int64)
            self._groupings[key] = (o, gs, starts)
        return self._groupings[key]

    def peaks(self, key: object, group: np.ndarray, amount: np.ndarray) -> np.ndarray:
        """Peak over time of the summed ``amount`` of the VMs alive in each group (index = group)."""
        o, gs, starts = self._grouping(key, group)
        out = np.zeros(int(group.max()) + 1 if len(group) else 0)
        if not len(gs):
            return out
        delta = (self.sign * np.asarray(amount, float)[self.vm])[o]
        level = np.cumsum(delta)
        level -= np.repeat(level[starts] - delta[starts], np.diff(np.r_[starts, len(gs)]))
        out[gs[starts]] = np.maximum.reduceat(level, starts)
        return np.round(out, 6)


def _global(cluster: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Cluster-local indices -> one index space (cluster-major)."""
    n_per = np.zeros(int(cluster.max()) + 1 if len(cluster) else 0, np.int64)
    np.maximum.at(n_per, cluster, local + 1)
    return np.r_[0, np.cumsum(n_per)[:-1]][cluster] + local if len(cluster) else local


def dram_savings(placement: Placement, start_s: np.ndarray, end_s: np.ndarray, memory_gb: np.ndarray,
                 pool_gb: dict[str, np.ndarray], pool_sockets: tuple[int, ...]) -> pd.DataFrame:
    """One row per policy and pool size: all-local, local and pool peaks (GB), and the saving."""
    sweep = Sweep(np.asarray(start_s, np.int64), np.asarray(end_s, np.int64))
    host = _global(placement.cluster, placement.host)
    baseline = sweep.peaks("host", host, memory_gb).sum()
    rows = []
    for name, pool in pool_gb.items():
        local = sweep.peaks("host", host, np.asarray(memory_gb, float) - pool).sum()
        for k in pool_sockets:
            if k % placement.sockets_per_host:
                continue   # a pool cannot split a server the trace names
            per_pool = k // placement.sockets_per_host
            pool_id = _global(placement.cluster, placement.host // per_pool)
            pooled = sweep.peaks(("pool", per_pool), pool_id, pool).sum()
            rows.append({"policy": name, "pool_sockets": k, "all_local_gb": baseline, "local_peak_gb": local,
                         "pool_peak_gb": pooled, "required_gb": local + pooled,
                         "savings": 1.0 - (local + pooled) / baseline if baseline > 0 else 0.0})
    return pd.DataFrame(rows)
