"""Pond's model-free evidence (Fig. 2a stranding, Fig. 3 fixed pool shares) on built-in fleets, by scheduler rule
and by the length of the window each server and pool buys its peak over:

    python -m benchmarks.pond_evidence [--seeds 42 ...] [--days 35 82] [--shape azure] [--variant walks]

For each trace length in ``--days`` and each seed, the built-in fleet is generated in a temporary folder
(``generate.fleet.n_days`` and ``base.seed`` set, every other key of params.yaml as committed). Per scheduler rule
(``simulate.packing``), the VMs are placed on the server a provider buys (``simulator.stranding``), then printed,
one JSON line each:
- Fig. 2a: the mean stranded share of the cluster-days near 75% and 85% of cores scheduled;
- Fig. 3: DRAM saved by a fixed 10 / 30 / 50% of every VM on pools of 8 / 16 / 32 / 64 sockets, in Pond's
  accounting (each server and pool buys its own peak), over windows of 7, 28 and (when the trace is long enough)
  75 days after the 7-day warm-up (Pond's traces span 75 days), and over the trace's last 28 days when they start
  later, where a trace that starts empty is closest to a steady state;
- beside each, what one pool spanning each whole cluster saves: no pool size saves more (``cluster_pool``).

With several seeds, a last line per rule pools the draws as Pond pools its 100 clusters: Fig. 2a over every draw's
cluster-days (with the 5th-95th percentiles, Fig. 2a's bars), Fig. 3 over every draw's servers and pools, the
draws' own 50% figures at 32 sockets (their median, and how many are under the foot of ``calibrate``'s band, 10%:
a pooled figure can pass where most draws do not), and ``calibrate``'s Fig. 2a and Fig. 3 checks on the pooled
figures (Fig. 3 over the 28 days after the warm-up).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from pond.core.params import load
from pond.evaluation.calibration import fig3_checks, report, stranding_checks
from pond.simulator.fixed_pools import fixed_share_savings, pooled_savings
from pond.simulator.stranding import WARMUP_DAYS, by_utilization, cluster_days, place
from pond.telemetry.fleet import generate
from pond.telemetry.io import read_tables

ROOT = Path(__file__).resolve().parents[1]

SHARES, SOCKETS, WINDOWS, LATE_DAYS = (0.1, 0.3, 0.5), (8, 16, 32, 64), (7, 28, 75), 28


def windows(n_days: int) -> dict[str, tuple[int, int | None]]:
    """Name -> (days, first day; None: after the warm-up) of the windows a trace of ``n_days`` holds."""
    got = {f"{days}_days": (days, None) for days in WINDOWS if WARMUP_DAYS + days <= n_days}
    if n_days - LATE_DAYS > WARMUP_DAYS + LATE_DAYS:
        got[f"last_{LATE_DAYS}_days"] = (LATE_DAYS, n_days - LATE_DAYS)
    return got


def as_pct(got: pd.DataFrame) -> dict[str, list[float]]:
    """Per share, the saving at each pool size and, last, with one pool per cluster (%)."""
    return {f"{f:g}": (100 * g.set_index("pool_sockets").savings.reindex(SOCKETS)).round(2).tolist()
            + [round(100 * float(g.cluster_pool.iloc[0]), 2)] for f, g in got.groupby("share")}


def as_json(levels: dict[int, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Fig. 2a's two levels (``by_utilization``) as JSON: string keys, two decimals."""
    return {str(k): {m: round(x, 2) if isinstance(x, float) else x for m, x in v.items()} for k, v in levels.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[42])
    ap.add_argument("--days", type=int, nargs="+", default=[35, 82])
    ap.add_argument("--shape", choices=["azure", "footprint"], default="azure")
    ap.add_argument("--variant", choices=["pond", "walks"], default=None, help="default: params.yaml's")
    args = ap.parse_args()
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["generate"]["fleet"]["shape"] = args.shape
    raw["generate"]["variant"] = args.variant or raw["generate"]["variant"]
    for n_days in args.days:
        raw["generate"]["fleet"]["n_days"] = n_days
        strand: dict[str, list[pd.DataFrame]] = {"first_fit": [], "best_fit": []}
        fig3: dict[tuple[str, str], list[pd.DataFrame]] = {}
        for seed in args.seeds:
            raw["base"]["seed"] = seed
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "params.yaml").write_text(yaml.safe_dump(raw))
                g = load(Path(tmp) / "params.yaml").generate
                generate(g.lab, g.fleet, Path(tmp) / "raw", g.variant)
                vms = read_tables(Path(tmp) / "raw", ["vms"])["vms"]
            for rule in ("first_fit", "best_fit"):
                placed = place(vms, rule=rule)
                days = cluster_days(vms, placed).assign(cluster_id=lambda d, s=seed: f"{s}/" + d.cluster_id)
                strand[rule].append(days)
                got = {name: fixed_share_savings(vms, SHARES, SOCKETS, placed=placed, days=n, first_day=first)
                       for name, (n, first) in windows(n_days).items()}
                for name, frame in got.items():
                    fig3.setdefault((rule, name), []).append(frame)
                print(json.dumps({"seed": seed, "shape": args.shape, "variant": raw["generate"]["variant"],
                                  "trace_days": n_days, "packing": rule,
                                  "servers": int(placed.servers.sum()), "server_gb": placed.shape.memory_gb,
                                  "stranded_pct_at": {k: v["mean_pct"]
                                                      for k, v in as_json(by_utilization(days)).items()},
                                  "fig3_savings_pct_at_8_16_32_64_sockets_and_cluster": {
                                      name: as_pct(frame) for name, frame in got.items()}}), flush=True)
        if len(args.seeds) > 1:
            for rule in ("first_fit", "best_fit"):
                days = pd.concat(strand[rule], ignore_index=True)
                frames = {name: pooled_savings(f) for (r, name), f in fig3.items() if r == rule}
                levels = by_utilization(days)
                draws = [as_pct(f)["0.5"][SOCKETS.index(32)] for f in fig3.get((rule, "28_days"), [])]
                checks = stranding_checks(levels) + (
                    fig3_checks(frames["28_days"]) if "28_days" in frames else [])
                at_32 = next((c for c in checks if c.name == "fig3_fixed50pct_at_32_sockets_pct"), None)
                foot = at_32.target - at_32.tolerance if at_32 else float("nan")   # calibrate's band, 10%
                print(json.dumps({
                    "seeds": args.seeds, "shape": args.shape, "variant": raw["generate"]["variant"],
                    "trace_days": n_days, "packing": rule,
                    "clusters": int(days.cluster_id.nunique()), "stranded_pct_at": as_json(levels),
                    "fig3_savings_pct_at_8_16_32_64_sockets_and_cluster": {
                        name: as_pct(frame) for name, frame in frames.items()},
                    "draws_50pct_at_32_sockets_28_days": draws,
                    "draws_50pct_at_32_sockets_28_days_median": round(float(np.median(draws)), 2) if draws else None,
                    "draws_under_band": sum(d < foot for d in draws),
                    "checks_28_days": {name: {"value": c["value"], "ok": c["ok"]}
                                       for name, c in report(checks)["checks"].items()}}), flush=True)


if __name__ == "__main__":
    main()
