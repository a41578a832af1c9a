"""What a provider buys: one local-DRAM size per server and one pool capacity per pool, per cluster
(Pond §6.1, §6.5).

The exact replay of one cluster and the search for its sizes are ``simulator.cluster_sizing``'s.

**Bought ahead** (``judge``). A provider buys DRAM before the days it is judged on: each cluster's
``(L, P)`` is sized on one window, then the VMs of both windows are replayed on it and the judged
window's arrivals that no longer fit are counted (``judged_moves``). Where they exceed the move budget
the cluster buys more DIMMs: the cheapest ``(L, P)``, no smaller than what was bought, that holds on the
judged window (``required_gb``; ``bought_gb`` is the purchase before it). The same rule sizes all-local
and every policy; over-buying on the first window is never returned.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from pond.core.progress import progress, silenced
from pond.simulator import pool_fit
from pond.simulator.cluster_sizing import Cluster, Sizing, moves, size
from pond.simulator.nested_pools import nested
from pond.simulator.pool_sim import Sweep, global_index


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
    scan: bool = True            # pool-aware sizes: every whole GB up from the bound (the least that holds), or steps

    @property
    def judged(self) -> tuple[int, int]:
        return self.judge or self.window

    @property
    def span(self) -> tuple[int, int]:
        """The seconds whose VMs can change what is bought or judged."""
        return self.window[0], max(self.window[1], self.judged[1])


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
    for lo, hi in itertools.pairwise(bounds):
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
    every server and pool bought at its own peak within the window, which no provider can buy;
    ``kept_peak_required_gb``: the same with every VM on its trace server (``t.host``), as Pond's Fig. 3 keeps
    the trace's servers and changes only the VM's memory; with ``q.pool_aware`` off they are the same figure).

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


def take_policy(policy: Policy, i: np.ndarray) -> Policy:
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


def _returning(t: Trace, back: np.ndarray) -> np.ndarray:
    """The VMs whose pool memory comes back while they run: ``returned`` appends a second part for each, in order."""
    back = np.asarray(back)
    return np.flatnonzero((back > np.asarray(t.start_s)) & (back < np.asarray(t.end_s)))


def returned(t: Trace, pool_gb: np.ndarray, back: np.ndarray) -> tuple[Trace, np.ndarray]:
    """A VM whose pool memory comes back as local at second ``back`` (a QoS mitigation) as two on its server: its
    split until then, all local from then on, an arrival that moves the VM when the server has no room for it.
    The trace and the pool GB, with the second parts appended."""
    start_s, end_s, back = np.asarray(t.start_s), np.asarray(t.end_s), np.asarray(back)
    i = _returning(t, back)
    m = np.zeros(len(start_s), bool)
    m[i] = True
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
        for name, (pool, at) in back.items():   # a returned part stays on its VM's trace server (Pond's peaks)
            both, p = returned(t, pool, at)
            piece = np.arange(len(both)) >= len(t)
            parent = np.r_[np.full(len(t), -1, np.int64), _returning(t, at)]   # the VM each part continues
            parts.append(_pool_aware_sizing(both, {name: p}, q, False, piece, parent)
                         if q.pool_aware else distinct_sizing(both, {name: p}, q, False, piece))
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
        peak = float(base_peak[cluster[idx[0]]])      # on the trace's servers: kept for every policy
        rows.append({"policy": "all_local", "pool_sockets": 0, "cluster": int(cluster[idx[0]]), **_row(c, s),
                     "peak_required_gb": peak, "kept_peak_required_gb": peak, **got})
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
                peak = float(local_peak[code] + pool_peak[code])
                rows.append({"policy": name, "pool_sockets": k, "cluster": code, **_row(c, s),
                             "peak_required_gb": peak, "kept_peak_required_gb": peak, **got})
    return nested(pd.DataFrame(rows), q.sockets_per_server)


def _pool_aware_sizing(t: Trace, policies: dict[str, np.ndarray], q: Question, baseline: bool = True,
                       piece: np.ndarray | None = None, parent: np.ndarray | None = None) -> pd.DataFrame:
    """Sized on the VMs alive in ``q.window``; with ``q.judge``, the same scheduler then places the VMs alive in
    both windows on the servers and DRAM bought, and the judged window's arrivals that fit nowhere count.

    Each policy is placed afresh with its split: the provider's accounting (``required_gb``) and each server and
    pool at its own peak (``peak_required_gb``) are on that placement. A returned part (``parent``: the VM it
    continues) stays on its VM's server when that server has the local DRAM for it, as Pond copies a mitigated
    VM's memory to local DRAM (§4.2), and is placed again by the first fit otherwise (a live migration).
    ``kept_peak_required_gb`` keeps every VM on its trace server (``t.host``: production's packing on production's
    servers, ``simulator.pool_sim.place``) and changes only its memory, as Pond's simulator keeps the trace's
    servers (§6.1) and its Fig. 3 reads VM-to-server traces: one placement for every policy, made on servers whose
    DRAM did not bind it, so a proportional split on one-server pools is the same DRAM labelled twice, exactly.
    (All local's own first fit at the DRAM it bought fills every server to that DRAM at the cluster's peak, so its
    servers peak together and a pool has little to pool: 50% on 32-socket pools saved 2.5% there, 7.2% on the
    trace's servers.)"""
    judged, max_move_rate = q.judged, q.max_move_rate
    keep = t.alive(q.span)
    start, end = np.asarray(t.start_s, np.int64)[keep], np.asarray(t.end_s, np.int64)[keep]
    cluster, host = np.asarray(t.cluster)[keep], np.asarray(t.host)[keep]
    memory, cores = np.asarray(t.memory_gb, float)[keep], np.asarray(t.cores, float)[keep]
    pools = {name: np.asarray(v, float)[keep] for name, v in policies.items()}
    kept = Trace(start, end, cluster, host, cores, memory)
    cl = clusters(kept, q.window, q.server_vcpus, None if piece is None else np.asarray(piece)[keep])
    prev = pool_fit.linked(parent, keep)
    cl = [(idx, replace(c, events=replace(c.events, prev=pool_fit.linked(prev, idx)))) for idx, c in cl]
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
        every = pool_fit.servers_for(c.events, top, c.budget(max_move_rate))
        # bought ahead, the cluster still has the servers its whole span needs (its cores are built out for its
        # life; only its DIMMs are bought ahead): judged days that need one more server could otherwise only buy
        # DIMMs, up to ``top`` on every server, and the saving would measure cores, not pools
        ev = every if len(b) == len(idx) else pool_fit.events(start[idx][b], end[idx][b], c.cores[b],
                                                             c.memory_gb[b], every.n_servers, c.cap_cores,
                                                             pool_fit.linked(c.events.prev, b))
        fitted.append((sweep, top, b, ev if len(b) == len(idx) else pool_fit.servers_for(ev, top,
                                                                                        c.budget(max_move_rate))))
    rows = []
    replays: list[pool_fit.Replays] = []
    shown = progress(runs, len(runs), desc="simulate: pool-aware sizing", unit="runs")
    for r, (name, k, spp, pool) in enumerate(shown):
        if r == 0 or name != runs[r - 1][0]:     # a new policy: its pool sizes share its replays, per cluster
            replays = [pool_fit.Replays(ev, pool[idx][b], q.scan) for (idx, _), (_, _, b, ev) in zip(cl, fitted)]
        for (idx, c), (sweep, top, b, ev), run in zip(cl, fitted, replays):
            L, P, unplaced, where = pool_fit.size(ev, pool[idx][b], spp, c.budget(max_move_rate), top, run)
            P = P if k else 0.0
            got = {"bought_gb": ev.n_servers * (L + (P / spp if k else 0.0)),
                   "judged_vms": c.vms, "judged_moves": unplaced, "judged_stuck": unplaced}
            if name == "all_local":   # the search's own noise: a scan of every whole GB below what it found
                got |= {"searched_local_gb": L,
                        "scanned_local_gb": L if q.scan else pool_fit.scanned_local(run, c.budget(max_move_rate), L)}
            if q.judge is not None:   # both windows' VMs on the servers and DRAM bought; topped up where short
                L, P, unplaced, where, got = _judged(kept.take(idx), c, ev, pool[idx], spp, (L, P), q, top, got)
            peak, kept_peak = (_peaks(sweep, at, ev.n_servers, c.memory_gb, pool[idx], spp if k else 0, judged)
                               for at in (where, c.server))
            n_pools = -(-ev.n_servers // spp) if k else 0
            sized = Sizing(L, P, ev.n_servers, n_pools, unplaced, unplaced, ev.n_servers / spp if k else 0.0)
            rows.append({"policy": name, "pool_sockets": k, "cluster": int(cluster[idx[0]]), **_row(c, sized),
                         "peak_required_gb": peak, "kept_peak_required_gb": kept_peak, **got})
    return nested(pd.DataFrame(rows), q.sockets_per_server)


def _peaks(sweep: Sweep, where: np.ndarray, n_servers: int, memory: np.ndarray, pool: np.ndarray, spp: int,
           judged: tuple[int, int]) -> float:
    """Each server's local and each pool's GB at its own peak over ``judged``, VMs on ``where`` (-1: fitted
    nowhere, counted nowhere: their amounts are zero on a spare server); ``spp`` 0: no pool."""
    placed = where >= 0
    srv = np.where(placed, where, n_servers)
    peak = sweep.peaks(None, srv, np.where(placed, memory - pool, 0.0), judged).sum()
    if spp:
        peak += sweep.peaks(None, srv // spp, np.where(placed, pool, 0.0), judged).sum()
    return float(peak)


def _judged(t: Trace, c: Cluster, ev: pool_fit.Events, pool: np.ndarray, spp: int, bought: tuple[float, float],
            q: Question, top: float, got: dict) -> tuple[float, float, int, np.ndarray, dict]:
    """One cluster's pool-aware sizing (``t``: its VMs), ``bought`` (L, P) on one window and judged on ``q.judge``:
    (L, P, unplaced among its arrivals, server per VM, the row's bought/judged fields), topped up where short."""
    start, end, judge, (local, cap) = t.start_s, t.end_s, q.judged, bought
    on = arrived(start, judge)
    vms = int((on if c.piece is None else on & ~c.piece).sum())
    every = pool_fit.events(start, end, c.cores, c.memory_gb, ev.n_servers, c.cap_cores, c.events.prev)
    budget = int(np.floor(q.max_move_rate * vms + 1e-9))

    def missed(local: float, cap: float) -> tuple[int, np.ndarray]:
        where = pool_fit.replay(every, pool, spp, local, cap)[1]
        return int(((where < 0) & on).sum()), where

    n, where = missed(local, cap)
    got = got | {"judged_vms": vms, "judged_moves": n, "judged_stuck": n}
    if n > budget:                           # more DIMMs where the judged window needs them
        # sized on the replay that judges them (both windows' VMs, the bought days' own misses allowed as they
        # were): the judged window's VMs replayed alone leave its first VMs elsewhere, and the cheapest DIMMs
        # found there need not hold here (on the built-in fleet, twice the DRAM that does)
        before = int(((where < 0) & ~on).sum())
        local, cap, _, _ = pool_fit.size(every, pool, spp, budget + before, top, floor=(local, cap), scan=q.scan)
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
        tasks += [(vms, {name: take_policy(v, i)}, q, False) for name, v in sized.items()]
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
