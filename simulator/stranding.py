"""Stranded memory by share of cores scheduled, per cluster and day (Pond §3.1, Fig. 2a).

Memory is *stranded* on a server whose cores are all rented while some of its memory is not: no VM can
use it. Pond measured it on production clusters: the daily average share of stranded memory is 6% in
clusters with 75% of cores scheduled and over 10% at about 85%, and the 95th percentile reaches 25% at
high utilization.

Here the VMs are placed as the pool simulator places a trace that names no server (``simulator.packing``,
``simulate.packing``: first fit, the lowest-numbered server of its cluster where the VM's vCPUs and memory
fit, or best fit, the one its vCPUs leave the fewest free on; a new one opened when none does), on servers with Pond's cores (96 vCPUs) and the DRAM a provider would have bought for them before the
measured window: the GB per vCPU the warm-up's VMs rented, times the server's vCPUs, rounded up to
``DIMM_GB`` (``bought_server``). Servers of a fixed 768 GB would strand half their memory under a mix that
rents 4 GB per vCPU, which no provider buys. Every hour, per cluster: the cores scheduled (vCPUs of running VMs over
the cores of the servers opened so far) and the memory stranded (free GB on servers with fewer free vCPUs
than the smallest VM asks for, over the memory of those servers); a cluster-day is their average over its
hours. The first ``WARMUP_DAYS`` are left out: servers fill from empty there, as production's never do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pond.simulator.packing import Rule, ServerShape, assign_servers

WARMUP_DAYS = 7
DIMM_GB = 32.0          # DRAM is bought in whole DIMMs per server (2 sockets x 8 channels of 16-64 GB)
SERVER_VCPUS = 96.0     # Pond §6.1's Intel host: 2 sockets of 24 cores x 2 threads
SAMPLE_S = 3600
BINS = {75: (0.70, 0.80), 85: (0.80, 0.90)}     # Pond's two utilization levels, each +-5 points of cores


def timeline(vms: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """(start, end) seconds of each VM from the midnight before the first creation, and the horizon: a second
    past the last creation, where running VMs end (each VM lasts at least a second)."""
    created = vms["created_at"]
    t0 = created.min().normalize()
    start = (created - t0).dt.total_seconds().to_numpy(np.int64)
    horizon = int(start.max()) + 1
    end = (vms["deleted_at"] - t0).dt.total_seconds().fillna(horizon).to_numpy(np.int64).clip(start + 1, horizon)
    return start, end, horizon


def bought_server(vms: pd.DataFrame) -> ServerShape:
    """The server a provider buys for this fleet, from what it knew before the measured window: the warm-up's VMs'
    GB per vCPU (all of them, weighted by size), times ``SERVER_VCPUS``, rounded up to whole DIMMs."""
    created = vms["created_at"]
    known = vms[created < created.min().normalize() + pd.Timedelta(days=WARMUP_DAYS)]
    known = known if len(known) else vms
    gb = SERVER_VCPUS * float(known["memory_gb"].sum()) / float(known["vcpus"].sum())
    return ServerShape(vcpus=SERVER_VCPUS, memory_gb=float(DIMM_GB * np.ceil(gb / DIMM_GB)))


@dataclass(frozen=True)
class Placed:
    """The trace on its first-fit servers, each VM keeping its server (``place``)."""
    shape: ServerShape
    start: np.ndarray       # seconds, ``timeline``
    end: np.ndarray
    horizon: int
    cluster: np.ndarray     # cluster code per VM
    server: np.ndarray      # server index within its cluster
    servers: np.ndarray     # servers per cluster

    @property
    def fleet_server(self) -> np.ndarray:
        """One index per server of the whole fleet, per VM."""
        return np.r_[0, np.cumsum(self.servers)[:-1]][self.cluster] + self.server


def place(vms: pd.DataFrame, shape: ServerShape | None = None, rule: Rule = "first_fit") -> Placed:
    """The simulator's scheduler (``rule``) on ``shape`` servers (default: ``bought_server``), once for every
    figure."""
    shape = shape or bought_server(vms)
    start, end, horizon = timeline(vms)
    codes, server, _ = assign_servers(vms, start, end, shape, rule=rule)
    servers = np.zeros(int(codes.max()) + 1 if len(codes) else 0, np.int64)
    np.maximum.at(servers, codes, server + 1)
    return Placed(shape, start, end, horizon, codes, server, servers)


def cluster_days(vms: pd.DataFrame, placed: Placed | None = None) -> pd.DataFrame:
    """One row per cluster and day after the warm-up: ``cores_scheduled`` and ``stranded`` (shares), on the
    servers ``placed`` put the VMs on (default: ``place(vms)``)."""
    placed = placed or place(vms)
    shape, start, end, horizon, servers = placed.shape, placed.start, placed.end, placed.horizon, placed.servers
    n_clusters, glob = len(servers), placed.fleet_server
    samples = horizon // SAMPLE_S + 1
    first = -(-start // SAMPLE_S)                               # the hours a VM is running at: first..last
    last = (end - 1) // SAMPLE_S
    count = np.maximum(last - first + 1, 0)
    vm = np.repeat(np.arange(len(vms)), count)
    hour = np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    key = glob[vm] * samples + hour
    size = int(servers.sum()) * samples
    cores = np.bincount(key, vms["vcpus"].to_numpy(float)[vm], minlength=size).reshape(-1, samples)
    memory = np.bincount(key, vms["memory_gb"].to_numpy(float)[vm], minlength=size).reshape(-1, samples)
    opened = np.full(len(glob) and int(servers.sum()), np.iinfo(np.int64).max)
    np.minimum.at(opened, glob, start)
    is_open = opened[:, None] <= np.arange(samples)[None, :] * SAMPLE_S          # servers x hours
    smallest = float(vms["vcpus"].min())
    full = is_open & (shape.vcpus - cores < smallest)
    stranded_gb = np.where(full, shape.memory_gb - memory, 0.0)
    cluster_of = np.repeat(np.arange(n_clusters), servers)
    per = pd.DataFrame({
        "cluster": np.repeat(cluster_of, samples), "hour": np.tile(np.arange(samples), len(cluster_of)),
        "open": is_open.ravel(), "cores": cores.ravel(), "stranded_gb": stranded_gb.ravel()})
    hourly = per.groupby(["cluster", "hour"], sort=True).agg(open=("open", "sum"), cores=("cores", "sum"),
                                                             stranded_gb=("stranded_gb", "sum")).reset_index()
    hourly = hourly[hourly.open > 0]
    hourly["cores_scheduled"] = hourly.cores / (hourly.open * shape.vcpus)
    hourly["stranded"] = hourly.stranded_gb / (hourly.open * shape.memory_gb)
    hourly["day"] = hourly.hour * SAMPLE_S // 86400
    daily = hourly.groupby(["cluster", "day"], sort=True)[["cores_scheduled", "stranded"]].mean().reset_index()
    names = np.sort(vms["cluster_id"].unique())
    daily["cluster_id"] = names[daily.cluster.to_numpy()]
    return daily[daily.day >= WARMUP_DAYS][["cluster_id", "day", "cores_scheduled", "stranded"]].reset_index(drop=True)


def by_utilization(days: pd.DataFrame) -> dict[int, dict[str, float]]:
    """Per Pond level (75, 85% of cores scheduled): the cluster-days near it, their mean stranded share and its
    5th-95th percentiles (Fig. 2a's bars); NaN where no cluster-day is near."""
    out = {}
    for level, (lo, hi) in BINS.items():
        s = days.stranded[(days.cores_scheduled >= lo) & (days.cores_scheduled < hi)]
        out[level] = {"cluster_days": len(s), "mean_pct": float(100 * s.mean()) if len(s) else np.nan,
                      "p5_pct": float(100 * s.quantile(0.05)) if len(s) else np.nan,
                      "p95_pct": float(100 * s.quantile(0.95)) if len(s) else np.nan}
    return out
