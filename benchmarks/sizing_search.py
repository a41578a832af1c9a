"""How far a bisection of the local DRAM per server is from the lowest that holds, on the clusters the default
`simulate` replays: a first fit is not monotone in a capacity. For each cluster, all local: the VMs left out at each
whole GB around the answer, the answer of a bisection over [0, local_hi], of ``pool_fit.lowest_holding`` (what
`simulate` searches with) and of a scan of every whole GB up from the cluster's bound (the least that holds there:
exact, where the bound holds nothing below it). Searches that top up DRAM bought ahead start from what was bought.

    python -m benchmarks.sizing_search [--raw data/raw] [--nightly data/backtest] [--static-only]

Run after `dvc repro`: it replays `pond simulate` on the same inputs, capturing each cluster's all-local replay.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import numpy as np

from pond.simulator import pool_fit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", default="data/raw")
    ap.add_argument("--nightly", default="data/backtest")
    ap.add_argument("--static-only", action="store_true",
                    help="the static pools' replay (`pond simulate --static-only`)")
    args = ap.parse_args()
    baselines: list[tuple[pool_fit.Events, int, float, float]] = []
    plain = pool_fit.size

    def spy(ev, pool_gb, spp, budget, local_hi, run=None, floor=(0.0, 0.0)):
        if not np.any(pool_gb) and spp == 1:
            baselines.append((ev, budget, local_hi, floor[0]))
        return plain(ev, pool_gb, spp, budget, local_hi, run, floor)

    pool_fit.size = spy
    from importlib.metadata import entry_points

    (command,) = entry_points(group="console_scripts", name="pond")   # the installed `pond`, run in this process
    pond = command.load()
    with tempfile.TemporaryDirectory() as tmp:
        source = ["--static-only"] if args.static_only else ["--nightly", args.nightly]
        pond(["--quiet", "simulate", "--raw", args.raw, *source, "--out", f"{tmp}/sim",
              "--metrics", f"{tmp}/m.json", "--plots", f"{tmp}/plots"])
    pool_fit.size = plain
    found = scanned = 0.0
    for ev, budget, hi, least in baselines:    # each cluster's, bought and (bought ahead) topped up
        none = np.zeros(len(ev.cores))
        run = pool_fit.Replays(ev, none)

        def ok(cap: float, run: pool_fit.Replays = run, budget: float = budget) -> bool:
            return run(1, cap, 0.0, budget)[0] <= budget

        bisected = pool_fit.least_whole_gb(ok, hi, least)
        lowest = pool_fit.lowest_holding(ok, hi, least, run.local_bound)
        start = int(max(np.floor(run.local_bound), np.floor(least)))
        scan = next((float(c) for c in range(start, int(lowest or start) + 1) if ok(float(c))), lowest)
        found, scanned = found + ev.n_servers * (lowest or 0.0), scanned + ev.n_servers * (scan or 0.0)
        out = {"servers": ev.n_servers, "vms": len(ev.cores), "budget": budget, "bound_gb": round(run.local_bound, 1),
               "bought_gb": least, "bisected_gb": bisected, "lowest_holding_gb": lowest, "scanned_gb": scan,
               "extra_gb_bought_by_the_bisection": ev.n_servers * (bisected - (lowest or bisected))}
        if lowest is not None and bisected > lowest:
            left = {int(L): int(run(1, float(L), 0.0)[0]) for L in range(int(lowest) - 20, int(bisected) + 1, 4)}
            out["left_out_by_gb"] = left
        print(json.dumps(out))
    print(json.dumps({"searches": len(baselines), "lowest_holding_total_gb": found, "scanned_total_gb": scanned,
                      "scan_below_pct": round(100 * (found - scanned) / found, 3) if found else None}))


if __name__ == "__main__":
    main()
