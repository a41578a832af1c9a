"""A pool-aware first fit, and the DRAM one cluster buys under it (Pond §6.1, §6.5).

Where the trace names no server there is no placement to keep, so the scheduler places every VM,
and Pond's scheduler knows a VM's local/pool split when it places it. Per cluster and policy, the
VMs that overlap the window are replayed in time order (departures first at equal seconds); an
arriving VM goes to the lowest-numbered server whose free vCPUs hold its vCPUs, whose free local
DRAM (of ``L``) holds its local part and whose pool (of ``P``, ``servers_per_pool`` consecutive
servers) holds its pool part. A VM that fits nowhere is *unplaced*: the cluster would need
another server. Unplaced VMs count against the same budget as moves in the trace replay.

A placement made for all-local memory and then split strands what the split frees on servers
that were packed full and leaves no room on the servers whose VMs were not split, so a policy
that splits VMs unevenly (whole VMs on the pool) pays for it on both sides; placed with their
split, VMs fill what the policy freed.

The search is per (cluster, policy, pool size) on the servers the all-local first fit opened:
the smallest whole-GB ``L`` (scanned up from its bound on the exact replay: ``lowest_holding``) for each of a few
pool capacities ``P``, then a finer look around the cheapest ``servers x (L + P / servers per pool)`` (a cluster's last pool,
when its servers do not fill it, holds and costs its share of ``P``: ``pool_shares``). A policy's pool sizes
share its replays (``Replays``): one in which every pool always had room is the one unbounded pools
give, and stands, exactly, for every capacity and pool size its placement leaves room in (on the
largest cluster of the 10M-VM benchmark, 429 replays for UM only's six pool sizes instead of 917:
``benchmarks/shared_replays.py``).

The replay keeps a segment tree over servers laid out so that each pool is one subtree (pools are
padded to a power of two of servers); a node holds the largest free vCPUs and local GB below it
and, at the pool level and above, the largest free pool GB, so an arrival or a departure costs
O(log servers) whatever the pool size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

COARSE = 8        # pool capacities tried per sizing over the range, as many near the bound, then REFINE more
NEAR_STEP = 0.04  # near the least capacity that holds the pool parts (with local DRAM to spare), in 4% steps above it
REFINE = 4
PRECISION_GB = 1.0
SCAN_STEP = 0.02    # ``lowest_holding``'s first step up from the bound, of the bound
SCAN_FLAT = 10      # steps of that size (20% above the bound), then
SCAN_GROWTH = 1.25  # each step grows on the last by this


@cache
def _kernel():
    """The compiled replay; built on first use so importing this module stays cheap."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def replay(ev_vm, ev_arrival, cores, local, pool, prev, n_srv, spp, cap_c, cap_l, cap_p,
               max_unplaced):  # pragma: no cover - compiled
        k = 0
        while (1 << k) < spp:
            k += 1
        n_pools = (n_srv + spp - 1) // spp
        size = 1
        while size < max(n_pools << k, 1):
            size *= 2
        top = size >> k                 # pool nodes are [top, 2 * top)
        tc = np.full(2 * size, -1.0)
        tl = np.full(2 * size, -1.0)
        tp = np.full(2 * size, np.inf)  # below the pool level a node never prunes on the pool
        for s in range(n_srv):
            leaf = size + ((s // spp) << k) + s % spp
            tc[leaf] = cap_c
            tl[leaf] = cap_l
        for q in range(top):
            tp[top + q] = cap_p * min(spp, n_srv - q * spp) / spp if q < n_pools else -1.0   # a partial pool: its share
        for node in range(size - 1, 0, -1):
            tc[node] = max(tc[2 * node], tc[2 * node + 1])
            tl[node] = max(tl[2 * node], tl[2 * node + 1])
            if node < top:
                tp[node] = max(tp[2 * node], tp[2 * node + 1])
        where = np.full(cores.shape[0], -1, np.int64)
        stack = np.empty(128, np.int64)
        unplaced = 0
        eps = 1e-6
        for e in range(ev_vm.shape[0]):
            v = ev_vm[e]
            if ev_arrival[e]:
                c, lo, po = cores[v] - eps, local[v] - eps, pool[v] - eps
                found = -1
                depth = 0
                if prev[v] >= 0 and where[prev[v]] >= 0:     # a VM continued: its server first, if it has room
                    leaf = where[prev[v]]
                    if tc[leaf] >= c and tl[leaf] >= lo and tp[top + ((leaf - size) >> k)] >= po:
                        found = leaf
                if found < 0:
                    stack[0] = 1
                    depth = 1
                while depth > 0:
                    depth -= 1
                    node = stack[depth]
                    if tc[node] < c or tl[node] < lo or tp[node] < po:
                        continue
                    if node >= size:
                        found = node
                        break
                    stack[depth] = 2 * node + 1
                    stack[depth + 1] = 2 * node
                    depth += 2
                if found < 0:
                    unplaced += 1
                    if unplaced > max_unplaced:
                        break
                    continue
                where[v] = found
                sign = -1.0
            else:
                found = where[v]
                if found < 0:
                    continue
                sign = 1.0
            tc[found] += sign * cores[v]
            tl[found] += sign * local[v]
            tp[top + ((found - size) >> k)] += sign * pool[v]
            node = found // 2
            while node >= 1:
                tc[node] = max(tc[2 * node], tc[2 * node + 1])
                tl[node] = max(tl[2 * node], tl[2 * node + 1])
                if node < top:
                    tp[node] = max(tp[2 * node], tp[2 * node + 1])
                node //= 2
        server = np.full(cores.shape[0], -1, np.int64)
        for v in range(cores.shape[0]):       # leaf -> server number
            if where[v] >= 0:
                off = where[v] - size
                server[v] = (off >> k) * spp + (off & ((1 << k) - 1))
        return unplaced, server

    return replay


@cache
def _peak_kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def pool_peaks(ev_vm, ev_arrival, server, pool, spp, n_pools):  # pragma: no cover - compiled
        used = np.zeros(n_pools)
        peak = np.zeros(n_pools)
        for e in range(ev_vm.shape[0]):
            v = ev_vm[e]
            if server[v] < 0:
                continue
            q = server[v] // spp
            if ev_arrival[e]:
                used[q] += pool[v]
                peak[q] = max(peak[q], used[q])
            else:
                used[q] -= pool[v]
        return peak

    return pool_peaks


@dataclass(frozen=True)
class Events:
    """One cluster's VMs overlapping the window, as the replay takes them."""

    ev_vm: np.ndarray        # VM index per event, by time, departures first at equal seconds
    ev_arrival: np.ndarray   # bool per event
    cores: np.ndarray
    memory_gb: np.ndarray
    n_servers: int           # the servers the all-local first fit opened
    cap_cores: float
    prev: np.ndarray | None = None   # per VM, the VM it continues on the same server if it has room (-1: none)


def event_order(start_s: np.ndarray, end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(VM index, is arrival) per event: by time, departures first at equal seconds, then row order.
    A VM lives at least one second. The trace replay (``simulator.sizing``) and this one share it."""
    start_s = np.asarray(start_s)
    n = len(start_s)
    t = np.concatenate([np.maximum(end_s, start_s + 1), start_s])
    arrival = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    vm = np.r_[np.arange(n), np.arange(n)]
    order = np.lexsort((vm, arrival, t))
    return vm[order].astype(np.int64), arrival[order]


def events(start_s: np.ndarray, end_s: np.ndarray, cores: np.ndarray, memory_gb: np.ndarray, n_servers: int,
           cap_cores: float, prev: np.ndarray | None = None) -> Events:
    return Events(*event_order(start_s, end_s), np.asarray(cores, float), np.asarray(memory_gb, float),
                  int(n_servers), float(cap_cores), prev)


def linked(prev: np.ndarray | None, idx: np.ndarray) -> np.ndarray | None:
    """``prev`` (per VM, the index of the VM it continues, -1: none) of the VMs ``idx`` (indices or a mask), as
    indices among them: -1 where the VM continued is not among them."""
    if prev is None:
        return None
    prev = np.asarray(prev, np.int64)
    idx = np.flatnonzero(idx) if np.asarray(idx).dtype == bool else np.asarray(idx, np.int64)
    at = np.full(len(prev) + 1, -1, np.int64)          # the last entry answers -1's look-up
    at[idx] = np.arange(len(idx))
    return at[np.where(prev[idx] >= 0, prev[idx], len(prev))]


def servers_for(ev: Events, local_hi: float, budget: int) -> Events:
    """The events on their ``n_servers``, or on the fewest more servers where every VM fits all local
    at ``local_hi`` within ``budget``: a first fit of a subset of the trace can need more than the
    trace's did."""
    none = np.zeros(len(ev.cores))

    def fits(n: int) -> bool:
        return replay(replace(ev, n_servers=n), none, 1, local_hi, 0.0, budget)[0] <= budget

    most = max(len(ev.cores), ev.n_servers)           # a server per VM: all that more servers can do
    if fits(ev.n_servers) or not fits(most):
        return ev
    lo, hi = ev.n_servers, ev.n_servers + 1           # lo does not fit; hi doubles until it does
    while not fits(hi):
        lo, hi = hi, min(ev.n_servers + 2 * (hi - ev.n_servers), most)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return replace(ev, n_servers=hi)


def replay(ev: Events, pool_gb: np.ndarray, servers_per_pool: int, cap_local: float, cap_pool: float,
           max_unplaced: int | None = None) -> tuple[int, np.ndarray]:
    """(VMs that fitted nowhere, server index per VM or -1); stops counting past ``max_unplaced``."""
    pool_gb = np.asarray(pool_gb, float)
    limit = len(ev.cores) + 1 if max_unplaced is None else int(max_unplaced)
    prev = np.full(len(ev.cores), -1, np.int64) if ev.prev is None else np.asarray(ev.prev, np.int64)
    return _kernel()(ev.ev_vm, ev.ev_arrival, ev.cores, ev.memory_gb - pool_gb, pool_gb, prev, ev.n_servers,
                     int(servers_per_pool), ev.cap_cores, float(cap_local), float(cap_pool), limit)


class Replays:
    """One cluster's exact replays under one policy's split, at any ``L``, pool capacity and pool size.

    A replay in which every pool always had room for any arriving VM's pool part is the replay
    with pools of unbounded capacity: the pool test never pruned the first fit's search, so each
    VM went where the vCPUs and ``L`` alone sent it. That replay is kept per ``L`` (and count
    limit) and given back wherever its own placement shows the same is true, at another capacity
    or pool size: its largest pool level plus the largest pool part, with a margin, is within the
    capacity. The answer is the replay's, exactly; only the replays a pool shaped are run again.
    """

    SLACK_GB = 1e-3               # far above the float error of a pool's running level

    def __init__(self, ev: Events, pool_gb: np.ndarray, scan: bool = False) -> None:
        self.ev = ev
        self.pool_gb = np.asarray(pool_gb, float)
        self.scan = scan                              # the sizes searched by ``lowest_holding``'s scan, not its steps
        self.largest = float(self.pool_gb.max(initial=0.0))
        self.run = 0                                  # replays run (the others were given back)
        self._kept: dict[tuple[float, int | None], tuple[int, np.ndarray]] = {}
        self._level: dict[tuple[float, int | None, int], float] = {}
        self.local_bound = peak_total(ev, ev.memory_gb - self.pool_gb) / max(ev.n_servers, 1)

    def pool_bound(self, servers_per_pool: int) -> float:
        """The full pool's capacity the cluster's pool parts need at their peak, spread evenly over its pools."""
        return peak_total(self.ev, self.pool_gb) * servers_per_pool / max(self.ev.n_servers, 1)

    def __call__(self, servers_per_pool: int, cap_local: float, cap_pool: float,
                 max_unplaced: int | None = None) -> tuple[int, np.ndarray]:
        """``replay``'s answer."""
        key = (float(cap_local), max_unplaced)
        kept = self._kept.get(key)
        if kept is not None:
            at = (*key, servers_per_pool)
            if at not in self._level:
                self._level[at] = self._largest_level(kept[1], servers_per_pool)
            if self._room(self._level[at], cap_pool):
                return kept
        self.run += 1
        got = replay(self.ev, self.pool_gb, servers_per_pool, cap_local, cap_pool, max_unplaced)
        if kept is None:
            level = self._largest_level(got[1], servers_per_pool)
            if self._room(level, cap_pool):
                self._kept[key] = got
                self._level[(*key, servers_per_pool)] = level
        return got

    def _largest_level(self, server: np.ndarray, servers_per_pool: int) -> float:
        """The full pool's capacity at which every pool of a placement (VMs unplaced count nowhere) in pools of that
        size always had room for the largest pool part: a partial pool holds its share of the capacity."""
        share = pool_shares(self.ev.n_servers, servers_per_pool)
        peak = _peak_kernel()(self.ev.ev_vm, self.ev.ev_arrival, server, self.pool_gb, int(servers_per_pool),
                              len(share))
        return float(((peak + self.largest + self.SLACK_GB) / share).max(initial=0.0))

    def _room(self, level: float, cap_pool: float) -> bool:
        return level <= cap_pool


def pool_shares(n_servers: int, servers_per_pool: int) -> np.ndarray:
    """Per pool of ``servers_per_pool`` consecutive servers, its share of a full pool: 1, but for a cluster's last
    pool when the servers do not fill it (22 servers in 16-server pools: 1 and 6/16). A provider buys a pool for
    the servers it has, so a partial pool holds and costs that share of the capacity ``P`` (bought whole, a
    22-server cluster paid for 32 servers' pools, and more so the larger the pool)."""
    n_pools = -(-int(n_servers) // int(servers_per_pool))
    first = np.arange(n_pools) * servers_per_pool
    return np.minimum(servers_per_pool, n_servers - first) / servers_per_pool


def smallest_local(run: Replays, servers_per_pool: int, cap_pool: float, budget: int, hi: float,
                   least: float = 0.0) -> float | None:
    """The smallest whole-GB ``L`` of at least ``least`` with at most ``budget`` VMs unplaced at pool capacity
    ``cap_pool``, searched up from what the cluster's local parts need at their peak (``lowest_holding``); None
    when even ``hi`` leaves more unplaced."""
    def ok(cap_local: float) -> bool:
        return run(servers_per_pool, cap_local, cap_pool, budget)[0] <= budget

    return lowest_holding(ok, max(hi, least), least, run.local_bound, run.scan)


def scanned_lowest(ok: Callable[[float], bool], bound: float, found: float) -> float:
    """The lowest whole GB from ``bound`` up to ``found`` (which holds) at which ``ok`` holds: what a scan of every
    GB finds where ``lowest_holding``'s steps found ``found``. A first fit with a move budget is not monotone in its
    capacity, so the two differ by luck; `simulate` reports all local's difference as the search's own noise."""
    return next((float(c) for c in range(int(np.floor(bound)), int(np.ceil(found))) if ok(float(c))), float(found))


def scanned_local(run: Replays, budget: int, found: float) -> float:
    """``scanned_lowest`` of all local's local DRAM (no pool), from the cluster's bound up to ``found``."""
    return scanned_lowest(lambda cap: run(1, cap, 0.0, budget)[0] <= budget, run.local_bound, found)


def n_pools_of(ev: Events, servers_per_pool: int) -> int:
    return -(-ev.n_servers // servers_per_pool)


def smallest_pool(run: Replays, servers_per_pool: int, cap_local: float, cap_pool: float, budget: int,
                  least: float = 0.0) -> float:
    """The smallest whole-GB pool capacity of at least ``least``, at most ``cap_pool``'s whole GB, with at most
    ``budget`` VMs unplaced at ``cap_local``: the capacity grid lands near the answer, not on it (a proportional
    split on one-server pools came out 1.3% dearer than all local, the same DRAM labelled twice)."""
    return least_whole_gb(lambda cap: run(servers_per_pool, cap_local, cap, budget)[0] <= budget, cap_pool, least,
                          run.pool_bound(servers_per_pool), run.scan)


def least_whole_gb(ok: Callable[[float], bool], cap: float, least: float = 0.0, bound: float | None = None,
                   scan: bool = False) -> float:
    """The smallest whole-GB capacity in [``least``, ``cap``] that ``ok`` holds at (``cap`` itself when its whole GB
    does not hold): both replays search their pool capacity with it. ``bound``: a capacity below which ``ok``
    seldom holds (``lowest_holding`` searches up from it); without one, a bisection over the range."""
    if bound is not None:
        got = lowest_holding(ok, cap, least, bound, scan)
        return float(cap) if got is None else got
    hi = float(np.ceil(cap - 1e-9))
    if not ok(hi):
        return float(cap)
    lo = float(np.floor(least))
    if ok(lo):
        return lo
    return _bisect(ok, lo, hi)


def lowest_holding(ok: Callable[[float], bool], hi: float, least: float, bound: float,
                   scan: bool = False) -> float | None:
    """The smallest whole-GB capacity of at least ``least`` that ``ok`` holds at, found up from ``bound`` (what the
    cluster's VMs need at their peak, spread evenly): None when ``hi``'s whole GB does not hold.

    A first fit is not monotone in a capacity: a VM placed elsewhere early strands room later, so a cluster whose
    VMs fit at 476 GB a server can leave VMs out at 576-592 GB and fit again at 596. A bisection over the range
    settles on whichever border it meets first, another for each policy's split (a split on one-server pools,
    the same DRAM labelled twice, came out 1.3% cheaper than all local). ``scan``: every whole GB up from the bound,
    so the answer is the least that holds, exactly, for every configuration alike (a split on one-server pools is
    then all local's own replay at the same DRAM, and costs what all local does, to the GB). Otherwise steps up from
    the bound (2% of it, ten times, then growing by a quarter each time, so a far answer costs few replays) find the
    lowest border near the bound that is a step wide, and the last step is bisected: a capacity that holds, not
    always the least (on seed 47's largest cluster all local bought 508 GB a server where a 10% split on one-server
    pools, the same replay, showed that 390 held)."""
    top = float(np.ceil(hi - 1e-9))
    if not ok(top):
        return None
    floor_ = float(np.floor(least))
    start = max(float(np.floor(bound)), floor_)
    if start >= top:
        return top
    if ok(start):                    # the budget can leave a few VMs out: below the bound, bisect
        return floor_ if start == floor_ or ok(floor_) else _bisect(ok, floor_, start)
    step = PRECISION_GB if scan else max(PRECISION_GB, float(np.ceil(SCAN_STEP * max(bound, 1.0))))
    lo, steps = start, 0
    while True:
        up = min(lo + step, top)
        if up >= top or ok(up):
            return _bisect(ok, lo, up)
        steps += 1
        lo, step = up, step if scan or steps < SCAN_FLAT else float(np.ceil(step * SCAN_GROWTH))


def _bisect(ok: Callable[[float], bool], lo: float, hi: float) -> float:
    """The whole GB in (``lo``, ``hi``] where ``ok`` turns true, given ``ok(hi)`` and not ``ok(lo)``."""
    while hi - lo > PRECISION_GB:
        mid = float(np.floor((lo + hi) / 2))
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def peak_total(ev: Events, amount: np.ndarray) -> float:
    """The cluster's largest total of ``amount`` over its VMs alive at once."""
    step = np.where(ev.ev_arrival, 1.0, -1.0) * np.asarray(amount, float)[ev.ev_vm]
    return float(np.cumsum(step).max(initial=0.0))


def size(ev: Events, pool_gb: np.ndarray, servers_per_pool: int, budget: int,
         local_hi: float, run: Replays | None = None, floor: tuple[float, float] = (0.0, 0.0), scan: bool = False
         ) -> tuple[float, float, int, np.ndarray]:
    """(L, P, unplaced, server per VM) of the cheapest ``servers x (L + P / servers_per_pool)`` found;
    ``local_hi``: an ``L`` at which every VM fits with no pool (the all-local one's upper bound);
    ``run``: the replays of ``ev`` under ``pool_gb`` so far (pass the same one for every pool size);
    ``floor``: an (L, P) already bought, which the answer does not go below (DIMMs are not returned);
    ``scan``: ``lowest_holding``'s, for a ``run`` made here."""
    pool_gb = np.asarray(pool_gb, float)
    run = Replays(ev, pool_gb, scan) if run is None else run
    pool_units = ev.n_servers / servers_per_pool          # pools' worth bought: a partial pool is its share
    least = float(pool_shares(ev.n_servers, servers_per_pool).min(initial=1.0))   # a partial pool's share
    top = max(min(peak_total(ev, pool_gb) / least, servers_per_pool * local_hi), floor[1])
    if top <= 0:
        grid = [0.0]
    else:
        border = smallest_pool(run, servers_per_pool, local_hi, top, budget, floor[1])   # the least that holds
        near = border * (1.0 + NEAR_STEP * np.arange(COARSE))
        grid = sorted({max(p, floor[1]) for p in np.r_[np.linspace(top / COARSE, top, COARSE), near[near < top]]})
    cost: dict[float, tuple[float, float]] = {}

    def look(p: float) -> None:          # each from the bound: first fit is not monotone, so L need not fall as P grows
        if p not in cost:
            L = smallest_local(run, servers_per_pool, p, budget, local_hi, floor[0])
            cost[p] = (np.inf, np.inf) if L is None else (ev.n_servers * L + pool_units * p, L)

    for p in grid:
        look(p)
    if len(grid) > 1 and any(np.isfinite(c[0]) for c in cost.values()):
        best = min(cost, key=lambda p: cost[p][0])
        step = min(abs(p - best) for p in cost if p != best)
        for _ in range(REFINE):          # halve the step around the cheapest capacity so far
            best = min(cost, key=lambda p: cost[p][0])
            step /= 2
            for p in (best - step, best + step):
                if p > 0 and p >= floor[1]:
                    look(float(p))
    finite = {p: c for p, c in cost.items() if np.isfinite(c[0])}
    if not finite:                       # nothing fits within the budget: give every VM its own room
        p = max(top, 0.0)
        L = float(np.ceil(max(local_hi, float((ev.memory_gb - pool_gb).max(initial=0.0)), floor[0])))
    else:
        p = min(finite, key=lambda q: (finite[q][0], q))
        L = finite[p][1]
        if servers_per_pool and n_pools_of(ev, servers_per_pool) and p > 0:
            p = smallest_pool(run, servers_per_pool, L, p, budget, floor[1])
    unplaced, where = run(servers_per_pool, L, p)
    return float(L), float(p), int(unplaced), where
