"""One cluster's DRAM, sized on the replay of its trace: the local GB per server and the GB per pool that hold the
window's VMs within the move budget (``simulator.sizing`` asks it for every cluster, policy and pool size).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from pond.simulator import pool_fit

PRECISION_GB = 1.0      # L is bisected to this
POOL_CANDIDATES = 12    # pool capacities tried by the approximate count


@cache
def _kernel():
    """The compiled replay; built on first use so importing this module stays cheap."""
    import numba

    @numba.njit(cache=True, nogil=True)
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
