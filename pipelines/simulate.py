"""Stage `simulate`: the DRAM a provider must buy with and without pools, in steady state (Pond
§6.1, §6.5, Fig. 3 and 21), and how large the pools should be (``evaluation.replay`` says how).

Writes the metrics (``answer``: per ratio, the nightly policy within the budget that saves the most;
``served``: the one the service applies), the sizing per cluster and per fleet, and the savings curves.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pond.core.cluster import session
from pond.core.params import Params
from pond.evaluation.replay import backtest_nights, replay
from pond.features.shuffle import scratch_folder
from pond.simulator.sizing_report import plot_savings, print_report
from pond.telemetry.atomic import AtomicDir, remove_leftovers, write_json, writer_tag
from pond.telemetry.storage import Location, absolute, remove_tree


def run(params: Params, raw_dir: Location, backtest_dir: Path | None, metrics_path: Path, plots_dir: Path,
        out_dir: Path, pack_by: str = "cluster_id") -> dict[str, Any]:
    nights = backtest_nights(backtest_dir) if backtest_dir is not None else None
    if params.engine.backend == "local":
        return _run(params, None, raw_dir, nights, metrics_path, plots_dir, out_dir, pack_by, None)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out_dir)              # a killed run's scratch too
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-{writer_tag()}-scratch", dir=out_dir.parent))
    try:
        with session(params.engine) as client:
            return _run(params, client, raw_dir, nights, metrics_path, plots_dir, out_dir, pack_by,
                        absolute(scratch_folder(tmp, "simulate")))     # workers run in their own folders
    finally:
        remove_tree(tmp)


def _run(params: Params, client: Any | None, raw_dir: Location, nights: list[Path] | None, metrics_path: Path,
         plots_dir: Path, out_dir: Path, pack_by: str, scratch: Location | None) -> dict[str, Any]:
    done = replay(params, client, raw_dir, nights, pack_by, scratch)
    metrics, table, fleet, realized, label = done.metrics, done.table, done.fleet, done.realized, done.label
    write_json(metrics_path, metrics)
    with AtomicDir(out_dir) as tmp:
        table.to_csv(tmp / "sizing_by_cluster.csv", index=False)
        fleet.round(6).to_csv(tmp / "sizing.csv", index=False)
    plots_dir.mkdir(parents=True, exist_ok=True)
    curves = fleet.assign(savings_pct=(100 * fleet.savings).round(3),
                          per_server_peaks_pct=(100 * fleet.savings_per_server_peaks).round(3),
                          kept_placement_pct=(100 * fleet.savings_kept_placement).round(3))
    curves[["policy", "pool_sockets", "savings_pct", "per_server_peaks_pct", "kept_placement_pct"]].to_csv(
        plots_dir / "savings.csv", index=False)
    plot_savings(curves, plots_dir / "savings.png", label,
                 {n: {r: v["unmitigated"] for r, v in by.items()} for n, by in realized.items()})
    print_report(metrics)
    return metrics
