"""Stage `calibrate`: compare the fleet with docs/calibration.md; metrics JSON, plot data and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.plots import pyplot, save_figure
from pond.evaluation.calibration import (
    fig3_checks,
    fleet_checks,
    full_pool_slowdown,
    json_number,
    lab_checks,
    report,
    shape_checks,
    stranding_checks,
)
from pond.simulator.fixed_pools import fixed_share_savings
from pond.simulator.packing import Rule
from pond.simulator.stranding import by_utilization, cluster_days, place
from pond.telemetry.atomic import write_json
from pond.telemetry.io import read_tables
from pond.telemetry.storage import Location

FIG3_SHARES, FIG3_SOCKETS = (0.1, 0.3, 0.5), (8, 16, 32, 64)   # Pond Fig. 3's shares and pool sizes


def run(raw_dir: Location, features_dir: Path, metrics_path: Path, plot_dir: Path, packing: Rule = "first_fit"
        ) -> dict[str, Any]:
    t = read_tables(raw_dir, ["workloads", "slowdowns", "vms"])
    vm_feats = pd.read_parquet(features_dir / "vm_features.parquet", columns=["vm_id", "has_history"])
    checks = lab_checks(t["workloads"], t["slowdowns"]) + fleet_checks(t["vms"], vm_feats["has_history"])
    out = report(checks)
    # Reported beside the headline checks, not counted in them: the fleet's shape
    # against the public trace, Fig. 2a's stranding and Fig. 3's fixed pool shares, on the simulator's first fit
    placed = place(t["vms"], rule=packing)  # once, for Fig. 2a and Fig. 3
    server = placed.shape
    levels = by_utilization(cluster_days(t["vms"], placed))
    fig3 = fixed_share_savings(t["vms"], FIG3_SHARES, FIG3_SOCKETS, placed=placed)
    pond = shape_checks(t["vms"]) + stranding_checks(levels) + fig3_checks(fig3)
    out["azure_shape_and_stranding"] = {**report(pond), "stranding": {str(k): {m: json_number(x) for m, x in v.items()}
                                                                      for k, v in levels.items()},
                                        "server": {"vcpus": server.vcpus, "memory_gb": server.memory_gb,
                                                   "packing": packing},
                                        "fig3_savings_pct": {f"{f:g}": {str(k): json_number(100 * x) for k, x in zip(
                                            g.pool_sockets, g.savings)} for f, g in fig3.groupby("share")}}
    write_json(metrics_path, out)
    plot_dir.mkdir(parents=True, exist_ok=True)
    cdf = _slowdown_cdf(t["slowdowns"])
    cdf.to_csv(plot_dir / "slowdown_cdf.csv", index=False)
    _plot(cdf, t["vms"], plot_dir / "calibration.png")
    for c in checks:
        print(f"{'ok ' if c.ok else 'OFF'} {c.name:42s} {c.value:8.2f}  target {c.requirement}")
    print(f"calibrate: {out['passed']}/{out['total']} checks within tolerance")
    for c in pond:
        print(f"{'ok ' if c.ok else 'OFF'} {c.name:42s} {c.value:8.2f}  target {c.requirement}  (not counted yet)")
    return out


def _slowdown_cdf(slowdowns: pd.DataFrame) -> pd.DataFrame:
    s = full_pool_slowdown(slowdowns)
    rows = []
    for ratio in s.columns:
        v = np.sort(s[ratio].dropna().to_numpy())
        rows.append(pd.DataFrame({"latency_ratio": str(ratio), "slowdown_pct": v,
                                  "share_of_workloads": np.arange(1, len(v) + 1) / len(v)}))
    return pd.concat(rows, ignore_index=True)


def _plot(cdf: pd.DataFrame, vms: pd.DataFrame, path: Path) -> None:
    plt = pyplot()

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for ratio, g in cdf.groupby("latency_ratio"):
        ax1.step(g.slowdown_pct, g.share_of_workloads, where="post", label=f"generated, ratio {ratio}")
    for x, y, m in ((1, 0.26, "o"), (5, 0.43, "o"), (25, 0.79, "o"), (1, 0.23, "s"), (5, 0.37, "s"), (25, 0.63, "s")):
        ax1.plot(x, y, m, color="k", fillstyle="none")
    ax1.set(xscale="symlog", xlabel="slowdown entirely on pool (%)", ylabel="share of workloads",
            title="Lab slowdowns (markers: Pond Fig. 5; o 182%, s 222%)")
    ax1.legend(loc="lower right")
    u = np.sort(vms.untouched_fraction.dropna().to_numpy())
    ax2.plot(100 * u, np.arange(1, len(u) + 1) / len(u))
    ax2.axvline(50, ls=":", color="k")
    ax2.set(xlabel="untouched memory (%)", ylabel="share of VMs", title="Untouched memory (Pond: median 50%)")
    save_figure(fig, path)
