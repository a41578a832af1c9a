"""Stage `train_li`: per latency ratio and PDM, the held-out LI/FP curves (forest and single-counter
baselines, Pond Fig. 17), the choice between them by nested cross-validation
(``evaluation.li_select``), the chosen model fit on all workloads, its ONNX export
(parity-checked) and an MLflow run.

Outputs in ``out_dir``:
- ``r{ratio}_pdm{pdm}.onnx``: input ``X`` float32 [n, len(features)], outputs ``label``, ``probabilities``.
- ``heldout_curves.parquet``: the solver's input, one row per (latency_ratio, pdm, threshold), from
  the chosen model's out-of-fold scores (every workload scored by models that never saw it):
  ``called`` (workloads with p_insensitive >= threshold), ``errors`` (sensitive among them),
  ``n`` (workloads), ``li`` = called / n, ``fp`` = errors / n, ``method``.
- ``manifest.json``: per model the method, file, sha256, feature list and order, classes, label
  counts, top feature importances (forest), parity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd

from pond.core.params import Params
from pond.core.plots import pyplot, save_figure
from pond.evaluation.li_curves import mean_band, split_study, threshold_table
from pond.evaluation.li_select import FOREST, candidates, nested, oof_scores, select
from pond.models.li import BASELINES, make_li_model, training_set
from pond.models.li_rule import export_rule
from pond.models.names import li_model_name
from pond.models.onnx_export import boundary_rows, check_parity, export_li, forest_splits
from pond.models.runtime import sha256
from pond.pipelines.tracking import start_run
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_tables
from pond.telemetry.storage import Location

THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)
FP_GRID_PCT = np.round(np.arange(0.0, 50.01, 0.5), 2)
# Types a fitted imputer + forest pipeline holds that skops does not trust by default (ECOSYSTEM.md).
SKOPS_TRUSTED = ["sklearn.tree._tree.Tree", "numpy.dtype", "pond.models.li_rule.CounterRule"]


def run(params: Params, features_dir: Path, raw_dir: Location, out_dir: Path,
        metrics_path: Path, plots_dir: Path) -> dict[str, Any]:
    p, seed = params.train_li, params.base.seed
    ratios, pdms, n_splits, targets, level = p.latency_ratios, p.pdms, p.n_splits, p.fp_targets_pct, p.band_level
    features = pd.read_parquet(features_dir / "workload_features.parquet")
    slowdowns = read_tables(raw_dir, ["slowdowns"])["slowdowns"]
    metrics: dict[str, Any] = {}
    curve_rows, plot_rows, manifest = [], [], {"models": {}}
    with start_run("train_li", {"seed": seed, **p.model_dump()}) as _, AtomicDir(out_dir) as tmp:
        import mlflow
        for ratio in ratios:
            for pdm in pdms:
                name = li_model_name(ratio, pdm)
                X, y, names, ids = training_set(features, slowdowns, ratio, pdm)
                base = {m: X[:, names.index(col)] for m, col in BASELINES.items()}
                study = split_study(X, y, base, make_li_model, n_splits, seed, FP_GRID_PCT / 100, THRESHOLDS,
                                    desc=f"train_li {li_model_name(ratio, pdm)}")
                m = metrics.setdefault(name, {"workloads": len(y), "insensitive_share": float(y.mean())})
                for method, values in study.li_at_fp.items():
                    mean, lo, hi = mean_band(values, level)
                    for t in targets:
                        k = int(np.argmin(np.abs(FP_GRID_PCT - t)))
                        m[f"{method}.li_at_fp{t:g}"] = round(100 * float(mean[k]), 2)
                        m[f"{method}.li_at_fp{t:g}_band"] = [round(100 * float(lo[k]), 2), round(100 * float(hi[k]), 2)]
                        mlflow.log_metric(f"{name}.{method}.li_at_fp{t:g}", 100 * float(mean[k]))
                    plot_rows.append(pd.DataFrame({"model": name, "method": method, "fp_pct": FP_GRID_PCT,
                                                   "li_pct": 100 * mean, "li_lo": 100 * lo, "li_hi": 100 * hi}))
                groups = np.asarray(ids, dtype=object)
                makers = candidates(names)
                band = p.select_fp_pct / 100 * np.linspace(*p.select_band, 9)
                nest = nested(X, y, groups, makers, band, FP_GRID_PCT / 100, p.select_splits, p.cv_folds, seed)
                winner, inner = select(X, y, groups, makers, band, p.cv_folds, seed)
                k_sel = int(np.argmin(np.abs(FP_GRID_PCT - p.select_fp_pct)))
                held = {mth: float(c[:, k_sel].mean()) for mth, c in nest.curves.items()}
                rules = {mth: v for mth, v in held.items() if mth in BASELINES}
                best_rule = max(rules, key=rules.get) if rules else None
                m.update({"selection.method": winner, "selection.fp_pct": p.select_fp_pct,
                          "selection.fp_band_pct": [round(100 * float(band[0]), 3), round(100 * float(band[-1]), 3)],
                          **{f"selection.heldout_li.{mth}": round(100 * v, 2) for mth, v in held.items()},
                          "selection.best_rule": best_rule,
                          "selection.margin_over_best_rule": round(100 * (held["selected"] - rules[best_rule]), 2)
                          if best_rule else None,
                          "selection.outer_winner_share": {w: nest.winners.count(w) / len(nest.winners)
                                                           for w in dict.fromkeys(nest.winners)},
                          "selection.inner_li_all_workloads": {k: round(100 * v, 2) for k, v in inner.items()}})
                oof = oof_scores(makers[winner], X, y, groups, p.cv_folds, seed, p.oof_repeats)
                li_t, fp_t = threshold_table(oof, y, THRESHOLDS)
                curve_rows.append(pd.DataFrame({
                    "latency_ratio": ratio, "pdm": pdm, "threshold": THRESHOLDS,
                    "called": np.rint(li_t * len(y)).astype(int), "errors": np.rint(fp_t * len(y)).astype(int),
                    "n": len(y), "li": li_t, "fp": fp_t, "method": winner}))
                model = makers[winner](seed).fit(X, y)
                if winner == FOREST:
                    onnx_bytes = export_li(model, len(names))
                    splits = forest_splits(model)
                    imp = pd.Series(model.named_steps["forest"].feature_importances_, index=names)
                else:
                    onnx_bytes = export_rule(model, len(names))
                    splits = [(model.feature, float(v)) for v in np.unique(X[:, model.feature])]
                    imp = pd.Series(np.eye(len(names))[model.feature], index=names)
                imp = imp.sort_values(ascending=False)
                parity_rows = np.vstack([X, boundary_rows(splits, X, seed=seed), _nan_rows(X, seed)])
                parity = check_parity(model, onnx_bytes, parity_rows)
                (tmp / f"{name}.onnx").write_bytes(onnx_bytes)
                manifest["models"][name] = {
                    "method": winner, "file": f"{name}.onnx", "sha256": sha256(onnx_bytes), "latency_ratio": ratio,
                    "pdm": pdm, "features": names, "classes": [int(c) for c in model.classes_],
                    "workloads": len(y), "insensitive": int(y.sum()), "onnx_parity_max_abs_diff": parity,
                    "top_importances": {k: round(float(v), 4) for k, v in imp.head(15).items()}}
                mlflow.log_metric(f"{name}.onnx_parity_max_abs_diff", parity)
                mlflow.log_text(imp.to_csv(header=["importance"]), f"{name}/feature_importances.csv")
                mlflow.log_metric(f"{name}.selection.margin_over_best_rule",
                                  float(m["selection.margin_over_best_rule"] or 0.0))
                mlflow.onnx.log_model(onnx.load_from_string(onnx_bytes), name=f"li_{name}_onnx".replace(".", "_"))
                mlflow.sklearn.log_model(model, name=f"li_{name}".replace(".", "_"),
                                         serialization_format="skops",
                                         skops_trusted_types=SKOPS_TRUSTED)
        pd.concat(curve_rows, ignore_index=True).to_parquet(tmp / "heldout_curves.parquet", index=False)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        plots = pd.concat(plot_rows, ignore_index=True)
        plots_dir.mkdir(parents=True, exist_ok=True)
        plots.round(4).to_csv(plots_dir / "li_fp_curves.csv", index=False)
        _plot(plots, plots_dir / "li_fp_curves.png", level)
        mlflow.log_artifact(str(plots_dir / "li_fp_curves.png"))
        mlflow.log_dict(metrics, "train_li_metrics.json")
    write_json(metrics_path, metrics)
    for name, m in metrics.items():
        print(f"train_li {name}: " + ", ".join(f"{k}={v}" for k, v in m.items() if "band" not in k and "." in k
                                                and k.split(".")[0] in ("random_forest", "selection")))
    return metrics


def _nan_rows(X: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = X[rng.integers(0, len(X), 20)].copy()
    rows[rng.random(rows.shape) < 0.3] = np.nan
    return rows


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
