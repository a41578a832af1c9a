"""Fig. 3 across draws of the built-in fleet, in the replay that decides (each policy placed afresh):

    python -m benchmarks.static_draws [--seeds 40 41 ... 49]      # about 23 min a seed on 2 cores beside a backtest
    python -m benchmarks.static_draws --set 'simulate.static_fractions=[0.5]' --set 'simulate.pool_sockets=[2,32,64]'
                                # 50% at 2, 32 and 64 sockets only: Pond's accounting the same (the trace's servers
                                # do not depend on the other sizes), the provider's not (nested pools), 4x faster
    python -m benchmarks.static_draws --buy-days 0                 # DRAM bought on the window it is judged on
    python -m benchmarks.static_draws --days 82 --buy-days 0       # Pond's 75 days after the 7-day warm-up
    python -m benchmarks.static_draws --set generate.fleet.clusters_per_region=1   # any key of params.yaml

Per seed, in a temporary folder: `pond generate` with ``base.seed`` set (every other key of params.yaml as
committed), then `pond simulate --static-only` (every VM split, no models). One JSON line per seed: 50% of every VM
on 32- and 64-socket pools as a provider buys, at each server's own peak and on the trace's servers (Pond's
accounting), the largest |saving| of a split on one-server pools in each (it should be about 0), the largest gap
between the provider's saving and Pond's over every split and pool size (Fig. 3 asks at most 3 points), the smallest step of any split's saving as the pool
grows up to 32 sockets (a larger pool never costs more: at least 0), and all local's premium of one size per cluster over the
peaks. A last line gives the span and median of the 32-socket figures over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.backtest_variants import with_sets

ROOT = Path(__file__).resolve().parents[1]


def one_seed(seed: int, work: Path, buy_days: str | None = None, days: int | None = None,
             sets: Sequence[str] = ()) -> dict:
    params = with_sets(yaml.safe_load((ROOT / "params.yaml").read_text()), sets)
    params["base"]["seed"] = seed
    if days is not None:
        params["generate"]["fleet"]["n_days"] = days
    if buy_days is not None:
        params["simulate"]["buy_days"] = buy_days if buy_days == "auto" else int(buy_days)
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    pond = [sys.executable, "-m", "pond.pipelines", "--quiet", "--params", str(work / "params.yaml")]
    for argv in (["generate", "--out", str(work / "raw")],
                 ["simulate", "--static-only", "--raw", str(work / "raw"), "--out", str(work / "out"),
                  "--metrics", str(work / "simulate.json"), "--plots", str(work / "plots")]):
        res = subprocess.run([*pond, *argv], cwd=ROOT, capture_output=True, text=True, check=False)
        if res.returncode:
            sys.exit(f"seed {seed}: pond {argv[0]} failed:\n{res.stderr[-2000:]}")
    table = pd.read_csv(work / "out" / "sizing.csv")
    metrics = json.loads((work / "simulate.json").read_text())
    static = table[table.policy.str.startswith("static_")]
    half = static[static.policy == "static_50pct"].set_index("pool_sockets")
    steps = [np.diff(g.sort_values("pool_sockets").query("pool_sockets <= 32").savings.to_numpy()).min()
             for _, g in static.groupby("policy")]
    one_server = static[static.pool_sockets == 2]
    pct = lambda x: round(100 * float(x), 2)
    return {"seed": seed, "clusters": metrics["clusters"], "servers": metrics["servers"],
            "half_32_provider": pct(half.savings.loc[32]), "half_32_own_peaks": pct(half.savings_per_server_peaks.loc[32]),
            "half_32_kept_placement": pct(half.savings_kept_placement.loc[32]),
            "half_64_provider": pct(half.savings.loc[64]), "half_64_own_peaks": pct(half.savings_per_server_peaks.loc[64]),
            "half_64_kept_placement": pct(half.savings_kept_placement.loc[64]),
            "one_server_pools_max_abs": pct(one_server.savings.abs().max()),
            "one_server_pools_own_peaks_max_abs": pct(one_server.savings_per_server_peaks.abs().max()),
            "one_server_pools_kept_placement_max_abs": pct(one_server.savings_kept_placement.abs().max()),
            "largest_gap_to_pond": pct((static.savings - static.savings_kept_placement).abs().max()),
            "smallest_step_up_to_32": pct(min(steps)),
            "all_local_premium": pct(metrics["all_local_uniform_premium"]), "cluster_scale": metrics["cluster_scale"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(40, 50)))
    ap.add_argument("--buy-days", help="simulate.buy_days (default: params.yaml's): 0 buys the DRAM on the window "
                    "it is judged on; the static replay's window (the trace after its warm-up) spans four weeks")
    ap.add_argument("--days", type=int, help="generate.fleet.n_days (default: params.yaml's); the static replay "
                    "measures the days after simulate.warmup_days, and a server's peak over more days is higher")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a params.yaml key to change in every draw (repeatable), e.g. generate.fleet.n_regions=2")
    args = ap.parse_args()
    with_sets(yaml.safe_load((ROOT / "params.yaml").read_text()), args.sets)   # a typo fails before any draw
    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(one_seed(seed, Path(tmp), args.buy_days, args.days, args.sets))
        print(json.dumps(rows[-1]), flush=True)
    for key in ("half_32_provider", "half_32_own_peaks", "half_32_kept_placement"):
        values = [r[key] for r in rows]
        print(json.dumps({"figure": key, "min": min(values), "max": max(values),
                          "span": round(max(values) - min(values), 2), "median": statistics.median(values)}))


if __name__ == "__main__":
    main()
