"""Pond's Fig. 3, before any model: a fixed share of every VM's memory on the pool, VMs on the servers the
scheduler gave them, and the DRAM that saves (Pond §3.1).

The VMs are placed once, all local, by the simulator's first fit on the server a provider buys
(``stranding.place``) and keep their servers; a pool joins ``pool_sockets`` consecutive sockets of a
cluster (``sockets_per_server`` per server). A fixed share ``f`` splits every VM: ``(1 - f)`` of it on its
server, ``f`` on its server's pool. Pond's accounting, over the measured window (after ``stranding.WARMUP_DAYS``):
each server buys its own peak of local memory in the window and each pool its own peak. All local is the sum of
the servers' peaks; with the split, ``(1 - f)`` of it plus the pools' peaks. A pool's peak is at most the sum of
its servers' shares of their peaks, so no fixed share can cost DRAM: what it saves is what pooling smooths.
Whatever the pool size, a share saves at most what one pool spanning each whole cluster saves (``cluster_pool``):
``f`` times one less the clusters' peaks over the servers' peaks.

Not here (``simulator.sizing`` does it): DRAM bought ahead, one size per server and per pool decided on the week before the
window and judged on it. On the first fit's servers, opened as load grows, a pool's servers change between the
week it is bought on and the week it is judged on, and up to 62% of the judged week's arrivals found their pool
full (azure shape, 64 sockets): that needs servers bought ahead of demand, which the placement does not model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.simulator.stranding import WARMUP_DAYS, Placed, place


def peaks(start: np.ndarray, end: np.ndarray, unit: np.ndarray, gb: np.ndarray, lo: int, hi: int,
          n_units: int) -> np.ndarray:
    """The peak GB of each unit (a server, a pool) over [lo, hi); at one second, departures first."""
    s, e = np.maximum(start, lo), np.minimum(end, hi)
    idx = np.flatnonzero(s < e)
    t = np.concatenate([s[idx], e[idx]])
    delta = np.concatenate([gb[idx], -gb[idx]])
    u = np.concatenate([unit[idx], unit[idx]])
    arrival = np.concatenate([np.ones(len(idx), bool), np.zeros(len(idx), bool)])
    order = np.lexsort((arrival, t, u))        # by unit, time, departures (False) first
    u, delta = u[order], delta[order]
    total = np.cumsum(delta)
    first = np.flatnonzero(np.r_[True, u[1:] != u[:-1]]) if len(u) else np.array([], np.int64)
    before = np.repeat(np.r_[0.0, total][first], np.diff(np.r_[first, len(u)]))   # the sum before each unit
    out = np.zeros(n_units)
    np.maximum.at(out, u, total - before)
    return out


def fixed_share_savings(vms: pd.DataFrame, shares: tuple[float, ...], pool_sockets: tuple[int, ...],
                        sockets_per_server: int = 2, placed: Placed | None = None, days: int | None = None,
                        first_day: int | None = None) -> pd.DataFrame:
    """One row per (share, pool sockets): the DRAM saved, per server and pool peaks, against all local, on the
    servers ``placed`` put the VMs on (default: ``stranding.place(vms)``), over the ``days`` from ``first_day``
    (default: after the warm-up; to the trace's end), ``cluster_pool``: what one pool per cluster saves, and
    ``all_local_gb``: the servers' peaks, which weigh the savings of several fleets into one."""
    placed = placed or place(vms)
    start, end, horizon, codes, unit, servers = (placed.start, placed.end, placed.horizon, placed.cluster,
                                                 placed.server, placed.servers)
    glob = placed.fleet_server
    mem = vms["memory_gb"].to_numpy(float)
    if first_day is None:
        lo = WARMUP_DAYS * 86400 if horizon > (WARMUP_DAYS + 1) * 86400 else 0
    else:
        lo = first_day * 86400
    horizon = horizon if days is None else min(horizon, lo + days * 86400)
    # no VM in the window (a foreign trace shorter than it): nothing to save, NaN rather than a division warning
    all_local = peaks(start, end, glob, mem, lo, horizon, int(servers.sum())).sum() or np.nan
    whole = peaks(start, end, codes, mem, lo, horizon, len(servers)).sum() / all_local
    rows = []
    for k in pool_sockets:
        per_pool = max(1, k // sockets_per_server)
        pools = -(-servers // per_pool)
        pool_glob = np.r_[0, np.cumsum(pools)[:-1]][codes] + unit // per_pool
        pool_peak = peaks(start, end, pool_glob, mem, lo, horizon, int(pools.sum())).sum()
        for f in shares:   # peaks scale with the share: f * mem peaks where mem does
            rows.append({"share": f, "pool_sockets": k, "servers": int(servers.sum()), "pools": int(pools.sum()),
                         "savings": float(1 - ((1 - f) * all_local + f * pool_peak) / all_local),
                         "cluster_pool": float(f * (1 - whole)), "all_local_gb": float(all_local)})
    return pd.DataFrame(rows)


def pooled_savings(fleets: list[pd.DataFrame]) -> pd.DataFrame:
    """Several fleets' ``fixed_share_savings`` as one fleet's, as Pond's figure pools its 100 clusters: each
    saving weighted by its fleet's servers' peaks."""
    d = pd.concat(fleets, ignore_index=True)
    weighted = d[["savings", "cluster_pool"]].mul(d["all_local_gb"], axis=0)
    g = pd.concat([d[["share", "pool_sockets", "all_local_gb"]], weighted], axis=1).groupby(
        ["share", "pool_sockets"], as_index=False).sum()
    g[["savings", "cluster_pool"]] = g[["savings", "cluster_pool"]].div(g["all_local_gb"], axis=0)
    return g
