"""Stage `train_monitor`: the QoS monitor's model from the lab's spill runs (``models.monitor_train``): judged on
held-out workloads beside the LI model and the L3 miss latency, fit on every run, exported to ONNX, parity-checked.

Outputs in ``out_dir``: ``monitor.onnx`` (input ``X`` float32 [n, len(features)], outputs ``label``,
``probabilities``: class 1 = the run exceeds the PDM) and ``manifest.json`` (features in order, the flag threshold
per latency ratio, parity). A data set without ``spill_counters`` trains no monitor: the manifest says so, and the
metrics say why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pandas as pd

from pond.core.params import Params
from pond.core.plots import pyplot, save_figure
from pond.core.tracking import requirements, start_run
from pond.features.tma import pmu_features
from pond.models.li import li_feature_names
from pond.models.monitor import spill_runs
from pond.models.monitor_features import monitor_events, monitor_feature_names, monitor_features
from pond.models.monitor_train import lab_for, train
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.contract import WORKLOADS, event_columns
from pond.telemetry.io import find_table, read_tables
from pond.telemetry.storage import Location, location


def run(params: Params, raw_dir: Location, out_dir: Path, metrics_path: Path, plots_dir: Path) -> dict[str, Any]:
    p, seed = params.train_monitor, params.base.seed
    have = find_table(location(raw_dir), "spill_counters") is not None
    tables = read_tables(raw_dir, ["workloads", "slowdowns"] + ["spill_counters"] * have)
    spills = tables.get("spill_counters")
    with start_run("train_monitor", {"seed": seed, **p.model_dump()}) as _, AtomicDir(out_dir) as tmp:
        import mlflow
        if spills is None:
            metrics = {"trained": False, "reason": "the data set has no spill_counters table"}
            (tmp / "manifest.json").write_text(json.dumps({"monitor": None, "reason": metrics["reason"]}))
        else:
            recorded = event_columns(tables["workloads"], WORKLOADS)
            events, not_counted = monitor_events(p.events, recorded)
            runs = spill_runs(spills, tables["slowdowns"], p.pdm)
            features = monitor_features(runs, recorded, runs.spilled_pct / 100.0, runs.latency_ratio)
            names = monitor_feature_names(events)
            local = pmu_features(tables["workloads"], recorded, "workloads").set_index(
                tables["workloads"].workload_id.astype(str))
            lab = lab_for(runs, features, names, li_feature_names(features), local, tables["slowdowns"], p)
            trained = train(lab, names, p, seed)
            read = {"events": events if p.events is not None else None, "events_not_counted": not_counted}
            (tmp / "monitor.onnx").write_bytes(trained.onnx_bytes)
            (tmp / "manifest.json").write_text(json.dumps({"monitor": {**trained.entry, **read}}, indent=2))
            metrics = {"trained": True, "events_read": len(events), "events_not_counted": not_counted,
                       **trained.metrics}
            plots_dir.mkdir(parents=True, exist_ok=True)
            trained.curves.round(3).to_csv(plots_dir / "recall_false_alarm.csv", index=False)
            _plot(trained.curves, plots_dir / "recall_false_alarm.png", p.max_false_alarm)
            mlflow.log_metrics({f"{r}.{m}.{k}": v for r, at in trained.metrics.items() if isinstance(at, dict)
                                for m, f in at.items() if isinstance(f, dict) for k, v in f.items() if isinstance(v, float | int)})
            mlflow.log_artifact(str(plots_dir / "recall_false_alarm.png"))
            mlflow.onnx.log_model(onnx.load_from_string(trained.onnx_bytes), name="monitor_onnx",
                                  pip_requirements=requirements("onnx", "onnxruntime"))
        mlflow.log_dict(metrics, "train_monitor_metrics.json")
    write_json(metrics_path, metrics)
    for ratio, at in metrics.items():
        if isinstance(at, dict):
            print(f"train_monitor x{ratio}: " + "; ".join(
                f"{m} flags {100 * f['recall']:.1f}% of {at['runs_exceeding']} runs past the PDM at "
                f"{100 * f['false_alarm']:.1f}% of {at['runs_within']} within" for m, f in at.items()
                if isinstance(f, dict) and f.get("recall") is not None))
    return metrics


def _plot(curves: pd.DataFrame, path: Path, max_false_alarm: float) -> None:
    plt = pyplot()
    ratios = list(dict.fromkeys(curves.latency_ratio))
    fig, axes = plt.subplots(1, len(ratios), figsize=(5.5 * len(ratios), 4), squeeze=False)
    for ax, r in zip(axes[0], ratios):
        for method, g in curves[curves.latency_ratio == r].groupby("method", sort=False):
            ax.plot(g.false_alarm_pct, g.recall_pct, label=method)
        ax.axvline(100 * max_false_alarm, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="false alarms (% of runs within the PDM)", ylabel="flagged (% of runs past the PDM)",
               title=f"held-out lab workloads, latency x{r:g}", ylim=(0, 101))
        ax.legend(loc="lower right")
    save_figure(fig, path)
