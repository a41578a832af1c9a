"""Stage `evaluate`: the night's policy judged on the next day's VMs beside LI only, UM only and static pools
(``evaluation.next_day`` says how); ``decisions.parquet`` holds the served policy's decisions per VM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.cluster import run_all, session
from pond.core.days import next_day
from pond.core.errors import ConfigError
from pond.core.params import EngineParams, QosParams
from pond.core.plots import pyplot, save_figure
from pond.evaluation.next_day import judge, metric_rows, report_lines
from pond.models.dask_fit import workers_of
from pond.models.inference import ModelFiles, Models, Scores, score, score_in_parts
from pond.models.monitor_runtime import MonitorModel
from pond.models.policy import read_policy
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_days
from pond.telemetry.storage import Location


def run(policy_path: Path, li_dir: Path, um_dir: Path, features_dir: Path, raw_dir: Location, out_dir: Path,
        metrics_path: Path, plots_dir: Path, engine: EngineParams | None = None, client: Any = None,
        qos: QosParams | None = None, monitor_dir: Path | None = None) -> dict[str, Any]:
    """``engine.backend: dask``: the day's VMs are scored on the cluster, one slice per worker
    (``client``: the caller's, as `backtest` keeps one for all its nights; else this stage's own,
    started once the inputs are read). ``qos``: the QoS monitor replayed on every policy (``evaluation.qos``),
    with the monitor's model in ``monitor_dir`` where there is one (``optimize.monitor.monitor_flags``)."""
    qos = qos or QosParams()
    policy = read_policy(policy_path)
    files = ModelFiles.from_policy(policy, li_dir, um_dir)
    day = next_day(policy.as_of)
    vms = read_days(features_dir / "vm_features.parquet", day, day)
    if vms.empty:
        raise ConfigError(f"no VMs were created on {day}: move base.as_of earlier")
    history = pd.read_parquet(features_dir / "snapshot" / "workload_history.parquet")
    models = files.load()        # here: the QoS monitor's scores, and the day's scores without Dask
    if client is None and engine is not None and engine.backend != "local":
        with session(engine) as own:
            s = _score(files, models, vms, history, own)
    else:
        s = _score(files, models, vms, history, client)
    judged = judge(policy, vms, s, models, raw_dir, qos, MonitorModel.load(monitor_dir))
    metrics = judged.metrics
    with AtomicDir(out_dir) as tmp:
        judged.served.to_parquet(tmp / "decisions.parquet", index=False)
    for line in judged.notes:
        print(line)
    write_json(metrics_path, metrics)
    rows = metric_rows(metrics)
    plots_dir.mkdir(parents=True, exist_ok=True)
    rows[["policy", "pool_share", "mispredictions_conservative", "mispredictions_severe"]].round(5) \
        .to_csv(plots_dir / "policies.csv", index=False)
    _plot(rows, metrics["budget"], plots_dir / "policies.png")
    for line in report_lines(metrics, qos):
        print(line)
    return metrics


def _score(files: ModelFiles, models: Models, vms: pd.DataFrame, history: pd.DataFrame, client: Any) -> Scores:
    if client is None:
        return score(models, vms, history)
    workers = len(workers_of(client))
    print(f"evaluate: scoring {len(vms)} VMs on Dask, one slice per worker ({workers})")
    return score_in_parts(lambda fn, tasks: run_all(client, fn, tasks), files, vms, history, workers)


def _plot(rows: pd.DataFrame, budget: float, path: Path) -> None:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.bar(rows.policy, 100 * rows.pool_share)
    a.set(ylabel="memory on the pool (% of GB)", title="Pool share, next day")
    x = np.arange(len(rows))
    b.bar(x - 0.2, 100 * rows.mispredictions_conservative, 0.4, label="conservative (FP + every OP)")
    b.bar(x + 0.2, 100 * rows.mispredictions_severe, 0.4, label="past the PDM")
    b.axhline(100 * budget, ls=":", color="k", label="budget")
    b.set(xticks=x, xticklabels=rows.policy, ylabel="% of VMs", title="Mispredictions, next day")
    b.legend()
    for ax in (a, b):
        ax.tick_params(axis="x", rotation=30)
    save_figure(fig, path)
