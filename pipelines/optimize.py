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
(``optimize.serve``, ``optimize.pool_cap``; ``serve: answer`` reads `simulate`'s sizing answer from its metrics,
``--answer``), with the QoS monitor's flags as the fleet's evidence (its model: ``--monitor``); and the frontier (pool share vs
misprediction budget, Pond Fig. 20) for the combined policy, LI only and UM only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pond.core.params import Params
from pond.models.monitor_runtime import MonitorModel
from pond.optimize.tonight import solve
from pond.telemetry.storage import Location


def run(params: Params, li_dir: Path, um_dir: Path, features_dir: Path, out_path: Path,
        metrics_path: Path, frontier_path: Path, plot_path: Path, raw_dir: Location | None = None,
        answer_path: Path | None = None, monitor_dir: Path | None = None) -> dict[str, Any]:
    answer = None
    if answer_path is not None and answer_path.exists():     # simulate's metrics: its sizing answer per ratio
        answer = json.loads(answer_path.read_text()).get("answer", {})
    night = solve(params, li_dir, um_dir, features_dir, raw_dir, answer, MonitorModel.load(monitor_dir))
    night.write(out_path, metrics_path, frontier_path, plot_path, params.optimize.tp)
    for line in night.notes:
        print(line)
    return night.policy
