"""Stage `optimize`: the policy (LI threshold, UM target) for the PDM, TP and latency ratio in params
(``optimize.solver``: shares of VMs, bounded jointly at ``confidence``).

Reads only what was known at the end of ``base.as_of``: the LI model's out-of-fold lab counts,
the UM backtest nights (which end before as_of, outcomes observed by then), the VMs created
in the ``recent_days`` up to as_of scored with the as-of workload history (how many VMs the LI
model will call insensitive, in VMs and in GB), and the fleet's slowdowns measured by then
(``vm_slowdowns``, optional: ``fleet_evidence``).

Writes ``policy.json``: thresholds, the UM conformal offset, expected shares (mean and bound),
the error rate among called workloads (lab and fleet; what `evaluate` charges VMs without slowdown truth),
the sha256 of both models, PDM, TP, ratio and as-of day, which policy the service applies
(``optimize.serve``, ``optimize.pool_cap``); and the frontier (pool share vs
misprediction budget, Pond Fig. 20) for the combined policy, LI only and UM only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pond.core.params import Params
from pond.evaluation.plots import pyplot, save_figure
from pond.optimize.tonight import solve
from pond.telemetry.atomic import write_json
from pond.telemetry.storage import Location


def run(params: Params, li_dir: Path, um_dir: Path, features_dir: Path, out_path: Path,
        metrics_path: Path, frontier_path: Path, plot_path: Path, raw_dir: Location | None = None) -> dict[str, Any]:
    night = solve(params, li_dir, um_dir, features_dir, raw_dir)
    write_json(out_path, night.policy)
    write_json(metrics_path, night.metrics)
    frontier_path.parent.mkdir(parents=True, exist_ok=True)
    night.frontier.round(5).to_csv(frontier_path, index=False)
    _plot(night.frontier, params.optimize.tp, plot_path, night.what)
    for line in night.notes:
        print(line)
    return night.policy


def _plot(frontier: pd.DataFrame, tp: float, path: Path, what: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, g in frontier.groupby("method"):
        ax.plot(g.budget_pct, g.pool_pct, label=method)
    ax.axvline(100 - tp, ls=":", color="k", label=f"budget at TP {tp:g}")
    ax.set(xlabel=f"{what} (% of VMs)", ylabel="memory on the pool (% of GB)",
           title="Pool share vs misprediction budget (Pond Fig. 20)")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
