"""Pond's model-free evidence (Fig. 2a stranding, Fig. 3 fixed pool shares) on built-in fleets, by scheduler rule
and by the length of the window each server and pool buys its peak over (issue 47):

    python -m benchmarks.pond_evidence [--seed 42] [--days 35 82] [--shape azure]

For each trace length in ``--days`` the built-in fleet is generated in a temporary folder (``generate.fleet.n_days``
set, every other key of params.yaml as committed). Per scheduler rule (``simulate.packing``), the VMs are placed
on the server a provider buys (``simulator.stranding``), then printed, one JSON line each:
- Fig. 2a: the mean stranded share of the cluster-days near 75% and 85% of cores scheduled;
- Fig. 3: DRAM saved by a fixed 10 / 30 / 50% of every VM on pools of 8 / 16 / 32 / 64 sockets, in Pond's
  accounting (each server and pool buys its own peak), over windows of 7, 28 and (when the trace is long enough)
  75 days after the 7-day warm-up: Pond's traces span 75 days.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import yaml

from pond.core.params import load
from pond.simulator.fixed_pools import fixed_share_savings
from pond.simulator.stranding import WARMUP_DAYS, by_utilization, cluster_days, place
from pond.telemetry.fleet import generate
from pond.telemetry.io import read_tables

ROOT = Path(__file__).resolve().parents[1]

SHARES, SOCKETS, WINDOWS = (0.1, 0.3, 0.5), (8, 16, 32, 64), (7, 28, 75)


def fig3(vms, placed, days: int) -> dict[str, list[float]]:
    """Pond's accounting over ``days`` after the warm-up: per share, the saving at each pool size (%)."""
    got = fixed_share_savings(vms, SHARES, SOCKETS, placed=placed, days=days)
    return {f"{f:g}": (100 * g.set_index("pool_sockets").savings.reindex(SOCKETS)).round(2).tolist()
            for f, g in got.groupby("share")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--days", type=int, nargs="+", default=[35, 82])
    ap.add_argument("--shape", choices=["azure", "footprint"], default="azure")
    args = ap.parse_args()
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["base"]["seed"] = args.seed
    raw["generate"]["fleet"]["shape"] = args.shape
    for n_days in args.days:
        raw["generate"]["fleet"]["n_days"] = n_days
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "params.yaml").write_text(yaml.safe_dump(raw))
            g = load(Path(tmp) / "params.yaml").generate
            generate(g.lab, g.fleet, Path(tmp) / "raw", g.variant)
            vms = read_tables(Path(tmp) / "raw", ["vms"])["vms"]
        for rule in ("first_fit", "best_fit"):
            placed = place(vms, rule=rule)
            levels = by_utilization(cluster_days(vms, placed))
            row = {"seed": args.seed, "shape": args.shape, "trace_days": n_days, "packing": rule,
                   "servers": int(placed.servers.sum()), "server_gb": placed.shape.memory_gb,
                   "stranded_pct_at": {k: round(v["mean_pct"], 2) for k, v in levels.items()},
                   "fig3_savings_pct_at_8_16_32_64_sockets": {
                       f"{days}_days": fig3(vms, placed, days) for days in WINDOWS if WARMUP_DAYS + days <= n_days}}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
