"""Stage `train_li`: per latency ratio and PDM, one LI model (``models.li_train``: the held-out LI/FP curves of the
forest and single-counter baselines, Pond Fig. 17, the choice between them by nested cross-validation, the chosen
model fit on all workloads, its ONNX export, parity-checked), the figure and an MLflow run.

Outputs in ``out_dir``:
- ``r{ratio}_pdm{pdm}.onnx``: input ``X`` float32 [n, len(features)], outputs ``label``, ``probabilities``.
- ``heldout_curves.parquet``: the solver's input, one row per (latency_ratio, pdm, threshold), from
  the chosen model's out-of-fold scores (every workload scored by models that never saw it):
  ``called`` (workloads with p_insensitive >= threshold), ``errors`` (sensitive among them),
  ``n`` (workloads), ``li`` = called / n, ``fp`` = errors / n, ``method``.
- ``heldout_scores.parquet``: the same scores per workload (``latency_ratio``, ``pdm``, ``workload_id``,
  ``p_insensitive``, ``insensitive``): which workloads are the LI errors at each threshold.
- ``manifest.json``: per model the method, file, sha256, feature list and order, classes, label
  counts, top feature importances (forest), parity.
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
from pond.models.li_train import TrainedLi, train
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_tables
from pond.telemetry.storage import Location

# Types a fitted imputer + forest pipeline holds that skops does not trust by default (docs/libraries.md).
SKOPS_TRUSTED = ["sklearn.tree._tree.Tree", "numpy.dtype", "pond.models.li_rule.CounterRule"]


def run(params: Params, features_dir: Path, raw_dir: Location, out_dir: Path,
        metrics_path: Path, plots_dir: Path) -> dict[str, Any]:
    p, seed = params.train_li, params.base.seed
    features = pd.read_parquet(features_dir / "workload_features.parquet")
    slowdowns = read_tables(raw_dir, ["slowdowns"])["slowdowns"]
    trained: list[TrainedLi] = []
    with start_run("train_li", {"seed": seed, **p.model_dump()}) as _, AtomicDir(out_dir) as tmp:
        import mlflow
        for ratio in p.latency_ratios:
            for pdm in p.pdms:
                li = train(features, slowdowns, ratio, pdm, p, seed)
                (tmp / f"{li.name}.onnx").write_bytes(li.onnx_bytes)
                _track(mlflow, li)
                trained.append(li)
        metrics = {li.name: li.metrics for li in trained}
        pd.concat([li.curve for li in trained], ignore_index=True).to_parquet(tmp / "heldout_curves.parquet",
                                                                             index=False)
        pd.concat([li.scores for li in trained], ignore_index=True).to_parquet(tmp / "heldout_scores.parquet",
                                                                              index=False)
        (tmp / "manifest.json").write_text(json.dumps({"models": {li.name: li.entry for li in trained}}, indent=2))
        plots = pd.concat([li.fp_curves for li in trained], ignore_index=True)
        plots_dir.mkdir(parents=True, exist_ok=True)
        plots.round(4).to_csv(plots_dir / "li_fp_curves.csv", index=False)
        _plot(plots, plots_dir / "li_fp_curves.png", p.band_level)
        mlflow.log_artifact(str(plots_dir / "li_fp_curves.png"))
        mlflow.log_dict(metrics, "train_li_metrics.json")
    write_json(metrics_path, metrics)
    for name, m in metrics.items():
        print(f"train_li {name}: " + ", ".join(f"{k}={v}" for k, v in m.items() if "band" not in k and "." in k
                                                and k.split(".")[0] in ("random_forest", "selection")))
    return metrics


def _track(mlflow: Any, li: TrainedLi) -> None:
    name = li.name
    mlflow.log_metrics(li.tracked)
    mlflow.log_metric(f"{name}.onnx_parity_max_abs_diff", li.entry["onnx_parity_max_abs_diff"])
    mlflow.log_text(li.importances.to_csv(header=["importance"]), f"{name}/feature_importances.csv")
    mlflow.log_metric(f"{name}.selection.margin_over_best_rule",
                      float(li.metrics["selection.margin_over_best_rule"] or 0.0))
    mlflow.onnx.log_model(onnx.load_from_string(li.onnx_bytes), name=f"li_{name}_onnx".replace(".", "_"),
                          pip_requirements=requirements("onnx", "onnxruntime"))
    mlflow.sklearn.log_model(li.model, name=f"li_{name}".replace(".", "_"), serialization_format="skops",
                             skops_trusted_types=SKOPS_TRUSTED,
                             pip_requirements=requirements("scikit-learn", "skops"))


def _plot(curves: pd.DataFrame, path: Path, level: float) -> None:
    plt = pyplot()

    models = list(dict.fromkeys(curves["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
    for ax, name in zip(axes[0], models):
        for method, g in curves[curves.model == name].groupby("method", sort=False):
            g = g[g.fp_pct <= 10]
            ax.step(g.fp_pct, g.li_pct, where="post", label=method)
            ax.fill_between(g.fp_pct, g.li_lo, g.li_hi, step="post", alpha=0.2)
        ax.set(xlabel="false positives (% of workloads)", ylabel="labelled insensitive (% of workloads)",
               title=f"{name} (held-out, {level:.0%} band)")
        ax.legend(loc="lower right")
    save_figure(fig, path)
