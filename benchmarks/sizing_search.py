"""How far a bisection of the local DRAM per server is from the lowest that holds, on the clusters the default
`simulate` replays: a first fit is not monotone in a capacity. For each cluster, all local: the VMs left out at each
whole GB around the answer, the answer of a bisection over [0, local_hi] and of ``pool_fit.lowest_holding`` (what
`simulate` searches with).

    python -m benchmarks.sizing_search [--raw data/raw] [--nightly data/backtest]

Run after `dvc repro`: it replays `pond simulate` on the same inputs, capturing each cluster's all-local replay.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from pond.simulator import pool_fit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", default="data/raw")
    ap.add_argument("--nightly", default="data/backtest")
    args = ap.parse_args()
    baselines: list[tuple[pool_fit.Events, int, float]] = []
    plain = pool_fit.size

    def spy(ev, pool_gb, spp, budget, local_hi, run=None, floor=(0.0, 0.0)):
        if not np.any(pool_gb) and spp == 1 and floor == (0.0, 0.0):
            baselines.append((ev, budget, local_hi))
        return plain(ev, pool_gb, spp, budget, local_hi, run, floor)

    pool_fit.size = spy
    from importlib.metadata import entry_points

    (command,) = entry_points(group="console_scripts", name="pond")   # the installed `pond`, run in this process
    pond = command.load()
    with tempfile.TemporaryDirectory() as tmp:
        pond(["--quiet", "simulate", "--raw", args.raw, "--nightly", args.nightly, "--out", f"{tmp}/sim",
              "--metrics", f"{tmp}/m.json", "--plots", f"{tmp}/plots"])
    pool_fit.size = plain
    for ev, budget, hi in baselines:           # each cluster's, on the window DRAM is bought on
        none = np.zeros(len(ev.cores))
        run = pool_fit.Replays(ev, none)

        def ok(cap: float) -> bool:
            return run(1, cap, 0.0, budget)[0] <= budget

        bisected = pool_fit.least_whole_gb(ok, hi)
        lowest = pool_fit.lowest_holding(ok, hi, 0.0, run.local_bound)
        out = {"servers": ev.n_servers, "vms": len(ev.cores), "budget": budget, "bound_gb": round(run.local_bound, 1),
               "bisected_gb": bisected, "lowest_holding_gb": lowest,
               "extra_gb_bought_by_the_bisection": ev.n_servers * (bisected - (lowest or bisected))}
        if lowest is not None and bisected > lowest:
            left = {int(L): int(run(1, float(L), 0.0)[0]) for L in range(int(lowest) - 20, int(bisected) + 1, 4)}
            out["left_out_by_gb"] = left
        print(json.dumps(out))


if __name__ == "__main__":
    main()
