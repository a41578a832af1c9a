"""Issue 14, a measured alternative: what if the scheduler placed each VM knowing its split? After `dvc repro`:

    python benchmarks/pool_aware_sizing.py [--pool-sockets 16] [--grid 25] [--steady] [--server-scale 1]

`simulate` keeps VMs where an all-local first fit put them and moves the few that no longer fit
(Pond's simulator on a trace). Here, per cluster, every policy is placed afresh by a first fit that
checks the VM's vCPUs, its local part against the server's local DRAM ``L`` and its pool part
against its pool's capacity ``P`` (as a pool-aware scheduler would), on the servers the all-local
first fit needs for the window; a VM that fits nowhere counts against the same 0.1% budget. For
each ``P`` on a grid, ``L`` is bisected to 1 GB; the cheapest ``servers x L + pools x P`` is kept,
and compared with all-local sized the same way. ``--steady`` gives every VM created before the
window the pool fraction of a random window VM (servers as if the policy had always run; not a
result, a bound on what the warm-up costs). Prints one JSON line per policy.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.params import load  # noqa: E402
from evaluation.pool_sim import place  # noqa: E402
from evaluation.sizing import in_window  # noqa: E402
from pipelines.simulate import _name, _static, nightly_decisions, read_trace  # noqa: E402


@numba.njit(cache=True)
def unplaced(ev_vm, ev_arr, cores, local, pool, n_srv, spp, cap_c, cap_l, cap_p):  # pragma: no cover
    """First fit over a segment tree (max free vCPUs, local GB, pool GB per subtree); VMs that fit nowhere."""
    size = 1
    while size < max(n_srv, 1):
        size *= 2
    tc, tl, tp = np.full(2 * size, -1.0), np.full(2 * size, -1.0), np.full(2 * size, -1.0)
    free_pool = np.full((n_srv + spp - 1) // spp, cap_p)
    for s in range(n_srv):
        tc[size + s], tl[size + s], tp[size + s] = cap_c, cap_l, cap_p
    for node in range(size - 1, 0, -1):
        tc[node], tl[node] = max(tc[2 * node], tc[2 * node + 1]), max(tl[2 * node], tl[2 * node + 1])
        tp[node] = max(tp[2 * node], tp[2 * node + 1])
    where = np.full(cores.shape[0], -1, np.int64)
    stack = np.empty(128, np.int64)
    missed = 0
    for e in range(ev_vm.shape[0]):
        v = ev_vm[e]
        if ev_arr[e]:
            found, top = -1, 1
            stack[0] = 1
            while top > 0:
                top -= 1
                node = stack[top]
                if tc[node] < cores[v] or tl[node] < local[v] or tp[node] < pool[v]:
                    continue
                if node >= size:
                    found = node - size
                    break
                stack[top], stack[top + 1] = 2 * node + 1, 2 * node
                top += 2
            if found < 0:
                missed += 1
                continue
            where[v], sign = found, -1.0
        else:
            found, sign = where[v], 1.0
            if found < 0:
                continue
        tc[found + size] += sign * cores[v]
        tl[found + size] += sign * local[v]
        k = found // spp
        free_pool[k] += sign * pool[v]
        for s in range(k * spp, min((k + 1) * spp, n_srv)):
            tp[size + s] = free_pool[k]
            node = (size + s) // 2
            while node >= 1:
                tc[node], tl[node] = max(tc[2 * node], tc[2 * node + 1]), max(tl[2 * node], tl[2 * node + 1])
                tp[node] = max(tp[2 * node], tp[2 * node + 1])
                node //= 2
    return missed


def smallest_local(args: tuple, cap_p: float, budget: int, hi: float) -> float | None:
    if unplaced(*args, hi, cap_p) > budget:
        return None
    lo = 0.0
    while hi - lo > 1.0:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if unplaced(*args, mid, cap_p) <= budget else (mid, hi)
    return float(np.ceil(hi))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool-sockets", type=int, default=16)
    ap.add_argument("--grid", type=int, default=25, help="pool capacities tried per policy and cluster")
    ap.add_argument("--steady", action="store_true")
    ap.add_argument("--server-scale", type=float, default=1.0,
                    help="servers (and so pools) this many times larger in vCPUs and GB: denser servers")
    args = ap.parse_args()
    params = load(ROOT / "params.yaml")
    sp = params.simulate
    server_c = args.server_scale * sp.sockets_per_server * sp.socket_vcpus
    server_m = args.server_scale * sp.sockets_per_server * sp.socket_memory_gb
    spp = args.pool_sockets // sp.sockets_per_server
    vms = read_trace(ROOT / "data/raw")
    (start, end), window, created_in, decisions = nightly_decisions(vms, ROOT / "data/backtest", (1.82,))
    mem, cores_all = vms.memory_gb.to_numpy(float), vms.vcpus.to_numpy(float)
    pools = {"all_local": np.zeros(len(mem)), **{_name(p, r): d["pool_gb"] for (p, r), d in decisions.items()}}
    for f in (0.15, 0.5):
        pools[f"static_{round(100 * f)}pct"] = _static(mem, created_in, f)["pool_gb"]
    if args.steady:
        pick = np.random.default_rng(params.base.seed).choice(np.flatnonzero(created_in), len(mem))
        pools = {k: np.where(created_in, v / mem, (v / mem)[pick]) * mem for k, v in pools.items()}
    placement = place(vms, start, end, sp)
    keep = in_window(start, end, window)
    totals: dict[str, float] = {}
    began = time.perf_counter()
    for c in np.unique(placement.cluster):
        idx = np.flatnonzero(keep & (placement.cluster == c))
        n = len(idx)
        t = np.concatenate([np.maximum(end[idx], start[idx] + 1), start[idx]])
        arrival = np.r_[np.zeros(n, bool), np.ones(n, bool)]
        vm = np.r_[np.arange(n), np.arange(n)]
        order = np.lexsort((vm, arrival, t))
        ev = (vm[order].astype(np.int64), arrival[order])
        budget = int(sp.max_move_rate * created_in[idx].sum())
        cores, zero = cores_all[idx], np.zeros(n)
        lo, hi = 1, int(placement.host[idx].max()) + 1
        while lo < hi:      # the servers an all-local first fit needs for the window
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if unplaced(*ev, cores, mem[idx], zero, mid, spp, server_c, server_m, 0.0) <= budget \
                else (mid + 1, hi)
        n_srv, n_pools = lo, (lo + spp - 1) // spp
        for name, pool_all in pools.items():
            pool = np.asarray(pool_all, float)[idx]
            fit_args = (*ev, cores, mem[idx] - pool, pool, n_srv, spp, server_c)
            grid = [0.0] if name == "all_local" else np.linspace(0, spp * server_m, args.grid)
            costs = [(n_srv * L + n_pools * P) for P in grid
                     if (L := smallest_local(fit_args, P, budget, 2 * server_m)) is not None]
            totals[name] = totals.get(name, 0.0) + (min(costs) if costs else float("nan"))
    base = totals.pop("all_local")
    for name, gb in totals.items():
        print(json.dumps({"policy": name, "pool_sockets": args.pool_sockets, "steady": args.steady,
                          "server_scale": args.server_scale,
                          "required_gb": round(gb), "all_local_gb": round(base), "savings": round(1 - gb / base, 4)}))
    print(json.dumps({"wall_s": round(time.perf_counter() - began, 1)}))


if __name__ == "__main__":
    main()
