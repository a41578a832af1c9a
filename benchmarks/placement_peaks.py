"""Why Pond's accounting reads the trace's servers and not all local's own first fit: how much a pool has to pool on
each placement of the same VMs (the default draw's static replay, `pond simulate --static-only`).

    python -m benchmarks.placement_peaks [--raw data/raw] [--group 16]      # about 40 s on 2 cores

For each placement, over the VMs the replay places: each server's peak against its DRAM, and the peak of each group
of ``--group`` consecutive servers (a pool of that many servers) against the sum of its servers' own peaks. A fixed
split of x of every VM saves x times one minus that ratio in Pond's accounting, so a ratio near 1 leaves a pool
nothing to pool. The trace's servers: production's packing on production's servers (``simulate.packing`` on
``socket_vcpus`` x ``socket_memory_gb`` x ``sockets_per_server``), which the DRAM did not bind; all local's first fit:
the servers and the local DRAM per server all local bought.

Run after `dvc repro` (or `pond generate`): it runs `pond simulate` in this process to capture both placements.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import numpy as np

from pond.core.params import load
from pond.simulator import pool_fit, sizing
from pond.simulator.pool_sim import Sweep


def ratios(start: np.ndarray, end: np.ndarray, server: np.ndarray, memory: np.ndarray, group: int
           ) -> tuple[np.ndarray, float, float]:
    """(each server's peak, sum of group peaks, sum of server peaks)."""
    sw = Sweep(start, end)
    peaks = sw.peaks(None, server, memory)
    return peaks, float(sw.peaks(None, server // group, memory).sum()), float(peaks.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", default="data/raw")
    ap.add_argument("--group", type=int, default=16, help="servers per pool (16: Pond's 32-socket pool)")
    args = ap.parse_args()
    traces, local = [], []
    plain_sizing, plain_size = sizing._pool_aware_sizing, pool_fit.size

    def spy_sizing(t, policies, q, *rest, **kw):
        traces.append((t, q))
        return plain_sizing(t, policies, q, *rest, **kw)

    def spy_size(ev, pool_gb, spp, budget, local_hi, run=None, floor=(0.0, 0.0)):
        got = plain_size(ev, pool_gb, spp, budget, local_hi, run, floor)
        if not np.any(pool_gb) and spp == 1 and floor == (0.0, 0.0):
            local.append((ev, got[0], got[3]))
        return got

    sizing._pool_aware_sizing, pool_fit.size = spy_sizing, spy_size
    from importlib.metadata import entry_points

    (command,) = entry_points(group="console_scripts", name="pond")   # the installed `pond`, run in this process
    with tempfile.TemporaryDirectory() as tmp:
        command.load()(["--quiet", "simulate", "--raw", args.raw, "--static-only", "--out", f"{tmp}/sim",
                        "--metrics", f"{tmp}/m.json", "--plots", f"{tmp}/plots"])
    sizing._pool_aware_sizing, pool_fit.size = plain_sizing, plain_size
    (t, _), = traces
    sp = load().simulate
    dram = sp.sockets_per_server * sp.socket_memory_gb   # the trace's servers': the packing's shape
    cluster, host = np.asarray(t.cluster), np.asarray(t.host)
    fill, group_sum, server_sum = [], 0.0, 0.0
    for c in np.unique(cluster):
        i = np.flatnonzero(cluster == c)
        peaks, g, s = ratios(np.asarray(t.start_s)[i], np.asarray(t.end_s)[i], host[i],
                             np.asarray(t.memory_gb, float)[i], args.group)
        fill.append(peaks / dram)
        group_sum, server_sum = group_sum + g, server_sum + s
    trace = {"placement": "the trace's servers", "servers": int(sum(len(f) for f in fill)),
             "server_peak_over_dram": round(float(np.mean(np.concatenate(fill))), 3),
             "group_peak_over_server_peaks": round(group_sum / server_sum, 3)}
    fill, group_sum, server_sum = [], 0.0, 0.0
    for ev, L, where in local:
        placed = where >= 0
        at = np.empty(len(ev.ev_vm), np.int64)                   # event order stands in for time
        start, end = np.zeros(len(ev.cores), np.int64), np.zeros(len(ev.cores), np.int64)
        at[:] = np.arange(len(ev.ev_vm))
        start[ev.ev_vm[ev.ev_arrival]], end[ev.ev_vm[~ev.ev_arrival]] = at[ev.ev_arrival], at[~ev.ev_arrival]
        peaks, g, s = ratios(start[placed], end[placed], where[placed], ev.memory_gb[placed], args.group)
        fill.append(peaks / L)
        group_sum, server_sum = group_sum + g, server_sum + s
    first_fit = {"placement": "all local's first fit at the DRAM it bought", "servers": int(sum(len(f) for f in fill)),
                 "server_peak_over_dram": round(float(np.mean(np.concatenate(fill))), 3),
                 "group_peak_over_server_peaks": round(group_sum / server_sum, 3)}
    for row in (trace, first_fit):
        print(json.dumps(row | {"group": args.group,
                                "half_split_saves_pct": round(50 * (1 - row["group_peak_over_server_peaks"]), 2)}))


if __name__ == "__main__":
    main()
