"""What a provider buys: one local-DRAM size per server and one pool capacity per pool, per cluster
(Pond §6.1, §6.5).

**Replay** (Pond's simulator). Every VM runs on its trace server, its memory split local/pool by
a policy; local memory per server and pool memory per pool are tracked at second resolution.
Before the measured window (warm-up) VMs are placed as the trace placed them, unchecked, so that
at the window's start servers hold what they hold in production. From the window's start on, a
VM whose local part does not fit its server's free local DRAM, or whose pool part does not fit
its pool's free capacity, is *moved*: to the lowest-numbered server of its cluster where its
local part, pool part and vCPUs fit. A VM that fits nowhere stays, over capacity, and counts as
a move too (the cluster would need another server). Only arrivals within the window are counted.

**Sizing.** Per cluster, the local GB per server ``L`` and GB per full pool ``P`` that minimize
``servers x (L + P / servers per pool)`` with moves <= ``max_move_rate`` x the window's arrivals: a cluster's
last pool, when its servers do not fill it, holds and costs its share of ``P`` (``pool_fit.pool_shares``). The search
is two-step. An approximate count, each window arrival's level on its trace server and pool as
if no VM had moved, gives for a few pool capacities the smallest ``L`` within the budget
(vectorized, an order statistic). The cheapest (L, P) is then checked with the exact replay
(compiled, one pass over the events), and ``L`` bisected on the exact count to 1 GB. The all-local
baseline is sized the same way with no pool.

**Bought ahead** (``judge``). A provider buys DRAM before the days it is judged on: each cluster's
``(L, P)`` is sized on one window, then the VMs of both windows are replayed on it and the judged
window's arrivals that no longer fit are counted (``judged_moves``). Where they exceed the move budget
the cluster buys more DIMMs: the cheapest ``(L, P)``, no smaller than what was bought, that holds on the
judged window (``required_gb``; ``bought_gb`` is the purchase before it). The same rule sizes all-local
and every policy; over-buying on the first window is never returned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from pond.core.progress import progress, silenced
from pond.simulator import pool_fit
from pond.simulator.pool_sim import Sweep, global_index

PRECISION_GB = 1.0      # L is bisected to this
POOL_CANDIDATES = 12    # pool capacities tried by the approximate count


@cache
def _kernel():
    """The compiled replay; built on first use so importing this module stays cheap."""
    import numba

    @numba.njit(cache=True)
    def replay(ev_vm, ev_arrival, server, pool_of, share, cores, local, pool, counted,
               cap_local, cap_pool, cap_cores, max_moves):  # pragma: no cover - compiled
        n_srv = pool_of.shape[0]
        used_l = np.zeros(n_srv)
        used_c = np.zeros(n_srv)
        used_p = np.zeros(pool_of.max() + 1 if n_srv else 0)
        where = np.full(server.shape[0], -1, np.int64)
        moves = 0
        stuck = 0
        eps = 1e-6
        for e in range(ev_vm.shape[0]):
            v = ev_vm[e]
            if ev_arrival[e]:
                s = server[v]
                if counted[v] and not (used_l[s] + local[v] <= cap_local + eps
                                       and used_p[pool_of[s]] + pool[v] <= cap_pool * share[pool_of[s]] + eps):
                    found = -1
                    for t in range(n_srv):
                        if (used_l[t] + local[v] <= cap_local + eps
                                and used_p[pool_of[t]] + pool[v] <= cap_pool * share[pool_of[t]] + eps
                                and used_c[t] + cores[v] <= cap_cores + eps):
                            found = t
                            break
                    moves += 1
                    if found < 0:
                        stuck += 1
                    if moves > max_moves:
                        return moves, stuck
                    if found >= 0:
                        s = found
                where[v] = s
                used_l[s] += local[v]
                used_c[s] += cores[v]
                used_p[pool_of[s]] += pool[v]
            else:
                s = where[v]
                used_l[s] -= local[v]
                used_c[s] -= cores[v]
                used_p[pool_of[s]] -= pool[v]
        return moves, stuck

    return replay


@dataclass(frozen=True)
class Trace:
    """The VMs a sizing replays, one entry per VM in every array: when it runs (seconds since the trace's start),
    the cluster and the server the trace (or the replay's own first fit) put it on, its vCPUs and its memory."""

    start_s: np.ndarray
    end_s: np.ndarray
    cluster: np.ndarray
    host: np.ndarray
    cores: np.ndarray
    memory_gb: np.ndarray

    def __len__(self) -> int:
        return len(self.start_s)

    def take(self, i: np.ndarray) -> Trace:
        """The VMs ``i`` (indices or a mask)."""
        return Trace(*(np.asarray(a)[i] for a in (self.start_s, self.end_s, self.cluster, self.host, self.cores,
                                                  self.memory_gb)))

    def alive(self, window: tuple[int, int]) -> np.ndarray:
        return in_window(self.start_s, self.end_s, window)


@dataclass(frozen=True)
class Question:
    """What a provider asks of a trace: the DRAM to buy per server and per pool of each size, on the VMs of
    ``window``, so that at most ``max_move_rate`` of its arrivals must move; with ``judge``, bought on ``window``
    and judged on that later one. ``pool_aware``: the servers are a first fit the trace did not make, so every
    policy is placed afresh with its split (``simulator.pool_fit``)."""

    sockets_per_server: int
    pool_sockets: tuple[int, ...]
    window: tuple[int, int]
    server_vcpus: float          # vCPUs a server has (a cluster gets at least its trace's own peak)
    max_move_rate: float
    pool_aware: bool = False
    judge: tuple[int, int] | None = None

    @property
    def judged(self) -> tuple[int, int]:
        return self.judge or self.window

    @property
    def span(self) -> tuple[int, int]:
        """The seconds whose VMs can change what is bought or judged."""
        return self.window[0], max(self.window[1], self.judged[1])


@dataclass(frozen=True)
class Cluster:
    """One cluster's VMs overlapping the window: the pool-aware replay's events (``pool_fit.Events``, on the
    trace's servers), and what the trace-placed replay adds to them: each VM's server (numbered from 0), whether
    the budget counts it, and which VMs are the returned parts of a mitigated one."""

    events: pool_fit.Events
    server: np.ndarray       # trace server per VM
    counted: np.ndarray      # bool per VM: arrived within the window
    piece: np.ndarray | None = None   # bool per VM: the all-local part of a mitigated VM (``returned``)

    @property
    def cores(self) -> np.ndarray:
        return self.events.cores

    @property
    def memory_gb(self) -> np.ndarray:
        return self.events.memory_gb

    @property
    def cap_cores(self) -> float:
        """vCPUs per server (at least the trace's own peak on any server)."""
        return self.events.cap_cores

    @property
    def vms(self) -> int:
        """The VMs counted: a mitigation's return moves a VM, but adds none to the budget's base."""
        return int((self.counted if self.piece is None else self.counted & ~self.piece).sum())

    @property
    def n_servers(self) -> int:
        return int(self.server.max()) + 1 if len(self.server) else 0

    def pools(self, servers_per_pool: int) -> np.ndarray:
        """Pool index per server: consecutive servers, ``servers_per_pool`` to a pool."""
        return np.arange(self.n_servers) // servers_per_pool

    def shares(self, servers_per_pool: int) -> np.ndarray:
        """Per pool, its share of a full pool's capacity and cost (``pool_fit.pool_shares``)."""
        return pool_fit.pool_shares(self.n_servers, servers_per_pool)

    def budget(self, max_move_rate: float) -> int:
        return int(np.floor(max_move_rate * self.vms + 1e-9))


@dataclass(frozen=True)
class Sizing:
    local_gb: float          # per server
    pool_gb: float           # per full pool
    servers: int
    pools: int
    moves: int               # exact replay, window arrivals
    stuck: int               # of the moves, VMs that fitted nowhere
    pool_units: float = 0.0  # full pools' worth bought: servers / servers per pool (a partial pool is its share)

    @property
    def required_gb(self) -> float:
        return self.servers * self.local_gb + self.pool_units * self.pool_gb


def moves(c: Cluster, pool_gb: np.ndarray, servers_per_pool: int, local_cap: float, pool_cap: float,
          max_moves: int | None = None) -> tuple[int, int]:
    """(moves, of which fitted nowhere) among the window's arrivals, by the exact replay; stops
    counting past ``max_moves``."""
    pool_gb = np.asarray(pool_gb, float)
    return _kernel()(c.events.ev_vm, c.events.ev_arrival, c.server, c.pools(servers_per_pool),
                     c.shares(servers_per_pool), c.cores,
                     c.memory_gb - pool_gb, pool_gb, c.counted, float(local_cap), float(pool_cap),
                     float(c.cap_cores), len(c.server) + 1 if max_moves is None else int(max_moves))


def approximate_frontier(local_level: np.ndarray, pool_level: np.ndarray, budget: int) -> list[tuple[float, float]]:
    """(L, P) pairs within ``budget`` arrivals over capacity, as if none had moved: for each of a few
    pool capacities P (the levels of the arrivals the budget could leave over P), the smallest L.
    ``*_level``: each window arrival's level right after it arrived, on its server and its pool."""
    n = len(local_level)
    if n == 0:
        return [(0.0, 0.0)]
    by_pool = np.sort(pool_level)[::-1]
    ranks = np.unique(np.linspace(0, min(budget, n - 1), min(budget + 1, POOL_CANDIDATES)).round().astype(int))
    out = []
    for j in ranks:
        p = float(by_pool[j])
        over = pool_level > p + 1e-9
        left = budget - int(over.sum())
        rest = np.sort(local_level[~over])[::-1]
        out.append((float(rest[left]) if left < len(rest) else 0.0, p))
    return out


def size(c: Cluster, pool_gb: np.ndarray, servers_per_pool: int, local_level: np.ndarray,
         pool_level: np.ndarray, max_move_rate: float, floor: tuple[float, float] = (0.0, 0.0)) -> Sizing:
    """The cheapest (L, P) of the approximate frontier, made feasible and tight on the exact replay.
    ``*_level``: per VM, its server's and its pool's level right after it arrived (trace placement);
    ``floor``: an (L, P) already bought, which the answer does not go below (DIMMs are not returned)."""
    budget = c.budget(max_move_rate)
    n_pools = int(c.pools(servers_per_pool).max()) + 1 if c.n_servers else 0
    units = c.n_servers / servers_per_pool              # full pools' worth: a partial pool holds and costs its share
    has_pool = bool(np.any(np.asarray(pool_gb) > 0))
    lvl_l = np.asarray(local_level, float)[c.counted]
    share = c.shares(servers_per_pool)[c.server // servers_per_pool][c.counted] if c.n_servers else np.ones(0)
    lvl_p = np.asarray(pool_level, float)[c.counted] / share if has_pool else np.zeros(len(lvl_l))
    frontier = [(max(lp[0], floor[0]), max(lp[1], floor[1])) for lp in approximate_frontier(lvl_l, lvl_p, budget)]
    local, cap_pool = min(frontier, key=lambda lp: c.n_servers * lp[0] + units * lp[1])
    top = max(float(lvl_l.max(initial=0.0)), floor[0])   # with L = top and P = the pool's top level, no VM moves

    def feasible(cap_local: float) -> bool:
        return moves(c, pool_gb, servers_per_pool, cap_local, cap_pool, budget)[0] <= budget

    if feasible(local):                  # the exact count is usually below the approximate one
        lo, hi = max(local - max(0.1 * local, 16.0), floor[0]), local
        if lo < hi and feasible(lo):
            lo, hi = (floor[0], floor[0]) if floor[0] > 0 and feasible(floor[0]) else (floor[0], lo)
    else:
        lo, hi, step = local, local, max(0.05 * local, PRECISION_GB)
        while True:
            hi = min(hi + step, top)
            if feasible(hi):
                break
            if hi >= top:                # moved VMs crowd other pools: give pools their top level
                cap_pool, lo = max(float(lvl_p.max(initial=0.0)), floor[1]), floor[0]
                break
            lo, step = hi, 2 * step
    while hi - lo > PRECISION_GB:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    hi = float(np.ceil(hi - 1e-9))       # whole GB
    if has_pool and cap_pool > floor[1]:  # the frontier's P is an arrival's level, not the least that holds
        cap_pool = pool_fit.least_whole_gb(lambda cap: moves(c, pool_gb, servers_per_pool, hi, cap, budget)[0]
                                           <= budget, cap_pool, floor[1])
    m, stuck = moves(c, pool_gb, servers_per_pool, hi, cap_pool)
    return Sizing(hi, float(cap_pool), c.n_servers, n_pools if has_pool else 0, int(m), int(stuck),
                  units if has_pool else 0.0)


def in_window(start_s: np.ndarray, end_s: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    """VMs alive at some second of the window (the others cannot change what it needs)."""
    return (np.asarray(start_s) < window[1]) & (np.maximum(end_s, np.asarray(start_s) + 1) > window[0])


def clusters(t: Trace, window: tuple[int, int], server_vcpus: float,
             piece: np.ndarray | None = None) -> list[tuple[np.ndarray, Cluster]]:
    """(VM indices, Cluster) per cluster code, for VMs that all overlap the window (``piece``: ``returned``'s)."""
    cluster, host, cores, memory_gb = t.cluster, t.host, t.cores, t.memory_gb
    start_s, end_s = np.asarray(t.start_s, np.int64), np.maximum(np.asarray(t.end_s, np.int64),
                                                                  np.asarray(t.start_s) + 1)
    g = global_index(cluster, host)
    peak_cores = Sweep(start_s, end_s).peaks("host", g, np.asarray(cores, float))
    out = []
    order = np.argsort(cluster, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(cluster[order]) != 0, True]) if len(cluster) else np.zeros(1, int)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = order[lo:hi]
        server = np.asarray(host)[idx].astype(np.int64)
        cap = max(float(server_vcpus), float(peak_cores[g[idx]].max()))
        ev = pool_fit.events(start_s[idx], end_s[idx], np.asarray(cores, float)[idx],
                             np.asarray(memory_gb, float)[idx], int(server.max()) + 1, cap)
        out.append((idx, Cluster(ev, server, arrived(start_s[idx], window),
                                 None if piece is None else np.asarray(piece)[idx])))
    return out


def arrived(start_s: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    """VMs created within the window: the ones its sizing or its judging counts."""
    start_s = np.asarray(start_s)
    return (start_s >= window[0]) & (start_s < window[1])


def fleet_sizing(t: Trace, policies: dict[str, Policy], q: Question) -> pd.DataFrame:
    """One row per (policy, pool size, cluster), the all-local baseline first (pool_sockets 0):
    the sized configuration, its moves, and the per-server-peak lower bound (``peak_required_gb``:
    every server and pool bought at its own peak within the window, which no provider can buy).

    ``q.judge``: DRAM is bought on ``q.window`` and judged on this later one (``judged_*``: its arrivals, the
    ones that no longer fitted under what was bought, and the per-server peaks over it). Without it,
    the window judges its own sizing (``judged_*`` repeat the fitted figures).

    ``q.pool_aware``: ``t.host`` is a first fit the trace did not make, so every policy is placed
    afresh, with its split, on as many servers (``simulator.pool_fit``); ``moves`` are then the
    VMs that fitted nowhere. Otherwise VMs stay on ``t.host`` and the few that no longer fit move.

    ``policies``: per name, each VM's pool GB, or (pool GB, the second its pool memory comes back as local, -1:
    never): a QoS mitigation (``evaluation.qos``), charged as local DRAM from that second (``returned``)."""
    sized, alias = distinct(policies)
    return with_aliases(distinct_sizing(t, sized, q), alias)


Policy = np.ndarray | tuple[np.ndarray, np.ndarray]   # pool GB per VM, or (pool GB, second it comes back: -1 never)


def _parts(policy: Policy) -> tuple[np.ndarray, np.ndarray | None]:
    return (np.asarray(policy[0], float), np.asarray(policy[1])) if isinstance(policy, tuple) else \
        (np.asarray(policy, float), None)


def _take(policy: Policy, i: np.ndarray) -> Policy:
    return (np.asarray(policy[0])[i], np.asarray(policy[1])[i]) if isinstance(policy, tuple) else np.asarray(policy)[i]


def distinct(policies: dict[str, Policy]) -> tuple[dict[str, Policy], dict[str, str]]:
    """Policies that put the same GB on the pool for every VM size alike (UM only is the same at
    every latency ratio), so each is sized once: (the first of each, every name -> the one sized)."""
    first: dict[bytes, str] = {}
    alias: dict[str, str] = {}
    for name, policy in policies.items():
        pool, back = _parts(policy)
        returns = b"" if back is None else b"|" + np.ascontiguousarray(back, np.int64).tobytes()
        key = hashlib.sha256(np.ascontiguousarray(pool).tobytes() + returns).digest()
        alias[name] = first.setdefault(key, name)
    return {n: policies[n] for n in dict.fromkeys(alias.values())}, alias


def returned(t: Trace, pool_gb: np.ndarray, back: np.ndarray) -> tuple[Trace, np.ndarray]:
    """A VM whose pool memory comes back as local at second ``back`` (a QoS mitigation) as two on its server: its
    split until then, all local from then on, an arrival that moves the VM when the server has no room for it.
    The trace and the pool GB, with the second parts appended."""
    start_s, end_s, back = np.asarray(t.start_s), np.asarray(t.end_s), np.asarray(back)
    m = (back > start_s) & (back < end_s)
    i = np.flatnonzero(m)
    return Trace(np.r_[start_s, back[i]], np.r_[np.where(m, back, end_s), end_s[i]],
                 np.r_[t.cluster, np.asarray(t.cluster)[i]], np.r_[t.host, np.asarray(t.host)[i]],
                 np.r_[t.cores, np.asarray(t.cores)[i]], np.r_[t.memory_gb, np.asarray(t.memory_gb)[i]]), \
        np.r_[pool_gb, np.zeros(len(i))]


def with_aliases(table: pd.DataFrame, alias: dict[str, str]) -> pd.DataFrame:
    """``table``'s rows for every name of ``alias`` (a copy of the rows of the policy sized for it),
    in ``alias``' order after the baseline."""
    if all(k == v for k, v in alias.items()) or table.empty:
        return table
    by = dict(tuple(table.groupby("policy", sort=False)))
    parts = [by["all_local"]] if "all_local" in by else []
    parts += [by[src].assign(policy=name) for name, src in alias.items() if src in by]
    return pd.concat(parts, ignore_index=True)


def distinct_sizing(t: Trace, policies: dict[str, Policy], q: Question, baseline: bool = True,
                    piece: np.ndarray | None = None) -> pd.DataFrame:
    """``fleet_sizing`` of distinct policies; the baseline's rows only when ``baseline``. A policy whose VMs get
    their pool memory back (``returned``) is sized on its own VMs (``piece``: the parts that came back), the
    baseline's never change."""
    plain, back = {}, {}
    for name, policy in policies.items():
        pool, at = _parts(policy)
        if at is not None and np.any((at > np.asarray(t.start_s)) & (at < np.asarray(t.end_s))):
            back[name] = (pool, at)
        else:
            plain[name] = pool
    if back:
        parts = [distinct_sizing(t, plain, q, baseline)] if plain or baseline else []
        for name, (pool, at) in back.items():
            both, p = returned(t, pool, at)
            parts.append(distinct_sizing(both, {name: p}, q, False, np.arange(len(both)) >= len(t)))
        table = pd.concat([x for x in parts if len(x)], ignore_index=True)
        rank = {n: r for r, n in enumerate(["all_local", *policies])}
        return table.iloc[np.argsort(table["policy"].map(rank).to_numpy(), kind="stable")].reset_index(drop=True)
    policies = plain
    if q.pool_aware:
        return _pool_aware_sizing(t, policies, q, baseline, piece)
    judge, judged, max_move_rate = q.judge, q.judged, q.max_move_rate
    keep = t.alive(q.span)
    start, end = np.asarray(t.start_s, np.int64)[keep], np.asarray(t.end_s, np.int64)[keep]
    cluster, host = np.asarray(t.cluster)[keep], np.asarray(t.host)[keep]
    memory = np.asarray(t.memory_gb, float)[keep]
    sweep = Sweep(start, end)
    server = global_index(cluster, host)
    cl = clusters(Trace(start, end, cluster, host, np.asarray(t.cores, float)[keep], memory), q.window,
                  q.server_vcpus, None if piece is None else np.asarray(piece)[keep])
    on = arrived(start, judged)

    def per_cluster(group: np.ndarray, peaks: np.ndarray) -> np.ndarray:
        owner = np.zeros(len(peaks), np.int64)
        owner[group] = cluster
        return np.bincount(owner, weights=peaks, minlength=int(cluster.max()) + 1 if len(cluster) else 0)

    def settle(idx: np.ndarray, c: Cluster, s: Sizing, pool: np.ndarray, spp: int, level_l: np.ndarray,
               level_p: np.ndarray) -> tuple[Sizing, dict[str, float | int]]:
        """What was bought on ``window``, judged on ``judge`` and topped up where it fell short."""
        if judge is None:
            return s, {"bought_gb": s.required_gb, "judged_vms": c.vms, "judged_moves": s.moves,
                       "judged_stuck": s.stuck}
        cj = replace(c, counted=on[idx])
        m, stuck = moves(cj, pool, spp, s.local_gb, s.pool_gb)
        got = {"bought_gb": s.required_gb, "judged_vms": cj.vms, "judged_moves": int(m),
               "judged_stuck": int(stuck)}
        if m <= cj.budget(max_move_rate):
            return replace(s, moves=int(m), stuck=int(stuck)), got
        # more DIMMs, the cheapest that hold on the judged window: what was bought is not returned
        return size(cj, pool, spp, level_l, level_p, max_move_rate, (s.local_gb, s.pool_gb)), got

    rows = []
    zeros = np.zeros(len(memory))
    base_level = sweep.at_arrival("host", server, memory)
    base_peak = per_cluster(server, sweep.peaks("host", server, memory, judged))
    for idx, c in cl if baseline else ():
        s = size(c, zeros[idx], 1, base_level[idx], zeros[idx], max_move_rate)
        s, got = settle(idx, c, s, zeros[idx], 1, base_level[idx], zeros[idx])
        rows.append({"policy": "all_local", "pool_sockets": 0, "cluster": int(cluster[idx[0]]), **_row(c, s),
                     "peak_required_gb": float(base_peak[cluster[idx[0]]]), **got})
    for name, pool_all in progress(policies.items(), len(policies), desc="simulate: sizing", unit="policies"):
        pool = np.asarray(pool_all, float)[keep]
        local_level = sweep.at_arrival("host", server, memory - pool)
        local_peak = per_cluster(server, sweep.peaks("host", server, memory - pool, judged))
        for k in q.pool_sockets:
            if k % q.sockets_per_server:
                continue     # a pool cannot split a server
            spp = k // q.sockets_per_server
            pool_id = global_index(cluster, host // spp)
            pool_level = sweep.at_arrival(("pool", spp), pool_id, pool)
            pool_peak = per_cluster(pool_id, sweep.peaks(("pool", spp), pool_id, pool, judged))
            for idx, c in cl:
                code = int(cluster[idx[0]])
                s = size(c, pool[idx], spp, local_level[idx], pool_level[idx], max_move_rate)
                s, got = settle(idx, c, s, pool[idx], spp, local_level[idx], pool_level[idx])
                rows.append({"policy": name, "pool_sockets": k, "cluster": code, **_row(c, s),
                             "peak_required_gb": float(local_peak[code] + pool_peak[code]), **got})
    return pd.DataFrame(rows)


def _pool_aware_sizing(t: Trace, policies: dict[str, np.ndarray], q: Question, baseline: bool = True,
                       piece: np.ndarray | None = None) -> pd.DataFrame:
    """Sized on the VMs alive in ``q.window``; with ``q.judge``, the same scheduler then places the VMs alive in
    both windows on the servers and DRAM bought, and the judged window's arrivals that fit nowhere count."""
    judged, max_move_rate = q.judged, q.max_move_rate
    keep = t.alive(q.span)
    start, end = np.asarray(t.start_s, np.int64)[keep], np.asarray(t.end_s, np.int64)[keep]
    cluster, host = np.asarray(t.cluster)[keep], np.asarray(t.host)[keep]
    memory, cores = np.asarray(t.memory_gb, float)[keep], np.asarray(t.cores, float)[keep]
    pools = {name: np.asarray(v, float)[keep] for name, v in policies.items()}
    kept = Trace(start, end, cluster, host, cores, memory)
    cl = clusters(kept, q.window, q.server_vcpus, None if piece is None else np.asarray(piece)[keep])
    bought = in_window(start, end, q.window)
    runs = [("all_local", 0, 1, np.zeros(len(memory)))] if baseline else []
    for name, pool in pools.items():
        runs += [(name, k, k // q.sockets_per_server, pool) for k in q.pool_sockets if k % q.sockets_per_server == 0]
    fitted = []
    for idx, c in cl:   # the servers: the trace's first fit's, or more where this subset fits worse (rare)
        sweep = Sweep(start[idx], end[idx])
        top = 2.0 * float(max(c.memory_gb.max(initial=0.0),
                              sweep.peaks("host", c.server, c.memory_gb).max(initial=0.0)))
        b = np.flatnonzero(bought[idx])     # the VMs the DRAM is bought on (all of them without ``judge``)
        ev = c.events if len(b) == len(idx) else pool_fit.events(start[idx][b], end[idx][b], c.cores[b],
                                                                c.memory_gb[b], c.n_servers, c.cap_cores)
        fitted.append((sweep, top, b, pool_fit.servers_for(ev, top, c.budget(max_move_rate))))
    rows = []
    replays: list[pool_fit.Replays] = []
    shown = progress(runs, len(runs), desc="simulate: pool-aware sizing", unit="runs")
    for r, (name, k, spp, pool) in enumerate(shown):
        if r == 0 or name != runs[r - 1][0]:     # a new policy: its pool sizes share its replays, per cluster
            replays = [pool_fit.Replays(ev, pool[idx][b]) for (idx, _), (_, _, b, ev) in zip(cl, fitted)]
        for (idx, c), (sweep, top, b, ev), run in zip(cl, fitted, replays):
            L, P, unplaced, where = pool_fit.size(ev, pool[idx][b], spp, c.budget(max_move_rate), top, run)
            P = P if k else 0.0
            got = {"bought_gb": ev.n_servers * (L + (P / spp if k else 0.0)),
                   "judged_vms": c.vms, "judged_moves": unplaced, "judged_stuck": unplaced}
            if q.judge is not None:   # both windows' VMs on the servers and DRAM bought; topped up where short
                L, P, unplaced, where, got = _judged(kept.take(idx), c, ev, pool[idx], spp, (L, P), q, top, got)
            placed = where >= 0           # an unplaced VM counts nowhere: its amounts are zero on a spare server
            srv = np.where(placed, where, ev.n_servers)     # (without ``judge``, ``b`` is every VM)
            peak = sweep.peaks(None, srv, np.where(placed, c.memory_gb - pool[idx], 0.0), judged).sum()
            if k:
                peak += sweep.peaks(None, srv // spp, np.where(placed, pool[idx], 0.0), judged).sum()
            n_pools = -(-ev.n_servers // spp) if k else 0
            sized = Sizing(L, P, ev.n_servers, n_pools, unplaced, unplaced, ev.n_servers / spp if k else 0.0)
            rows.append({"policy": name, "pool_sockets": k, "cluster": int(cluster[idx[0]]), **_row(c, sized),
                         "peak_required_gb": float(peak), **got})
    return pd.DataFrame(rows)


def _judged(t: Trace, c: Cluster, ev: pool_fit.Events, pool: np.ndarray, spp: int, bought: tuple[float, float],
            q: Question, top: float, got: dict) -> tuple[float, float, int, np.ndarray, dict]:
    """One cluster's pool-aware sizing (``t``: its VMs), ``bought`` (L, P) on one window and judged on ``q.judge``:
    (L, P, unplaced among its arrivals, server per VM, the row's bought/judged fields), topped up where short."""
    start, end, judge, (local, cap) = t.start_s, t.end_s, q.judged, bought
    on = arrived(start, judge)
    vms = int((on if c.piece is None else on & ~c.piece).sum())
    every = pool_fit.events(start, end, c.cores, c.memory_gb, ev.n_servers, c.cap_cores)
    budget = int(np.floor(q.max_move_rate * vms + 1e-9))

    def missed(local: float, cap: float) -> tuple[int, np.ndarray]:
        where = pool_fit.replay(every, pool, spp, local, cap)[1]
        return int(((where < 0) & on).sum()), where

    n, where = missed(local, cap)
    got = got | {"judged_vms": vms, "judged_moves": n, "judged_stuck": n}
    if n > budget:                           # more DIMMs where the judged window needs them
        j = np.flatnonzero(in_window(start, end, judge))
        ej = pool_fit.events(start[j], end[j], c.cores[j], c.memory_gb[j], ev.n_servers, c.cap_cores)
        local, cap, _, _ = pool_fit.size(ej, pool[j], spp, budget, top, floor=(local, cap))
        n, where = missed(local, cap)
    return local, cap, n, where, got


def _row(c: Cluster, s: Sizing) -> dict[str, float | int]:
    return {"window_vms": c.vms, "servers": s.servers, "pools": s.pools, "pool_units": s.pool_units,
            "local_gb_per_server": s.local_gb, "gb_per_pool": s.pool_gb, "required_gb": s.required_gb,
            "moves": s.moves, "stuck": s.stuck}


def fleet_sizing_by_cluster(run: Callable[[Callable, list[tuple]], list], t: Trace, policies: dict[str, Policy],
                            q: Question) -> pd.DataFrame:
    """``fleet_sizing``, one task per cluster and policy (``run(fn, tasks)``: here or on Dask), in its
    row order. Clusters share nothing (servers and pools never span two) and one policy's sizing
    never reads another's, so each task is the local code on one cluster's VMs and one policy (or
    the baseline). Fleets have a few large clusters: tasks that fine keep every worker busy to the
    end, and the largest clusters go first."""
    keep = t.alive(q.span)
    cluster = np.asarray(t.cluster)
    sized, alias = distinct(policies)
    codes, counts = np.unique(cluster[keep], return_counts=True)
    tasks = []
    for code in codes[np.argsort(-counts, kind="stable")]:   # a few hundred clusters at most
        i = np.flatnonzero((cluster == code) & keep)
        vms = t.take(i)
        tasks.append((vms, {}, q, True))
        tasks += [(vms, {name: _take(v, i)}, q, False) for name, v in sized.items()]
    parts = run(_quiet_sizing, tasks)
    if not parts:
        return fleet_sizing(t, policies, q)
    table = with_aliases(pd.concat([p for p in parts if len(p)], ignore_index=True), alias)
    rank = {name: r for r, name in enumerate(["all_local", *policies])}
    k_rank = {k: r for r, k in enumerate(q.pool_sockets)} | {0: -1}
    order = np.lexsort((table["cluster"].to_numpy(), table["pool_sockets"].map(k_rank).to_numpy(),
                        table["policy"].map(rank).to_numpy()))
    return table.iloc[order].reset_index(drop=True)


def _quiet_sizing(*args: Any) -> pd.DataFrame:
    with silenced():
        return distinct_sizing(*args)
