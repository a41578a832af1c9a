"""One LI model as `train_li` trains it, per latency ratio and PDM: the held-out LI/FP curves of the forest and the
single-counter baselines (Pond Fig. 17), the choice between them by nested cross-validation (``models.li_select``),
the chosen model's out-of-fold threshold table (the solver's input), the model fit on all workloads and its ONNX
export, parity-checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pond.core.params import LiParams
from pond.models.li import BASELINES, make_li_model, training_set
from pond.models.li_curves import mean_band, split_study, threshold_table
from pond.models.li_rule import export_rule
from pond.models.li_select import FOREST, candidates, nested, oof_scores, select
from pond.models.names import li_model_name
from pond.models.onnx_export import boundary_rows, check_parity, export_li, forest_splits, nan_rows
from pond.models.runtime import sha256

THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)
FP_GRID_PCT = np.round(np.arange(0.0, 50.01, 0.5), 2)


@dataclass(frozen=True)
class TrainedLi:
    """One ratio and PDM's model and the figures about it."""
    name: str                      # models.names.li_model_name
    metrics: dict[str, Any]        # train_li.json's entry
    curve: pd.DataFrame            # heldout_curves.parquet's rows: the chosen model's out-of-fold threshold table
    scores: pd.DataFrame           # heldout_scores.parquet's rows: each workload's out-of-fold P(insensitive), label
    fp_curves: pd.DataFrame        # the Fig. 17 curves per method (mean and band), for the plot
    model: Any
    onnx_bytes: bytes
    entry: dict[str, Any]          # manifest.json's entry
    importances: pd.Series
    tracked: dict[str, float]      # the held-out LI at each FP target per method, unrounded, for MLflow


def train(features: pd.DataFrame, slowdowns: pd.DataFrame, ratio: float, pdm: float, p: LiParams,
          seed: int) -> TrainedLi:
    name = li_model_name(ratio, pdm)
    X, y, names, ids = training_set(features, slowdowns, ratio, pdm)
    base = {m: X[:, names.index(col)] for m, col in BASELINES.items()}
    study = split_study(X, y, base, make_li_model, p.n_splits, seed, FP_GRID_PCT / 100, THRESHOLDS,
                        desc=f"train_li {name}")
    m: dict[str, Any] = {"workloads": len(y), "insensitive_share": float(y.mean())}
    tracked, fp_curves = {}, []
    for method, values in study.li_at_fp.items():
        mean, lo, hi = mean_band(values, p.band_level)
        for t in p.fp_targets_pct:
            k = int(np.argmin(np.abs(FP_GRID_PCT - t)))
            m[f"{method}.li_at_fp{t:g}"] = round(100 * float(mean[k]), 2)
            m[f"{method}.li_at_fp{t:g}_band"] = [round(100 * float(lo[k]), 2), round(100 * float(hi[k]), 2)]
            tracked[f"{name}.{method}.li_at_fp{t:g}"] = 100 * float(mean[k])
        fp_curves.append(pd.DataFrame({"model": name, "method": method, "fp_pct": FP_GRID_PCT,
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
    curve = pd.DataFrame({
        "latency_ratio": ratio, "pdm": pdm, "threshold": THRESHOLDS,
        "called": np.rint(li_t * len(y)).astype(int), "errors": np.rint(fp_t * len(y)).astype(int),
        "n": len(y), "li": li_t, "fp": fp_t, "method": winner})
    scores = pd.DataFrame({"latency_ratio": ratio, "pdm": pdm, "workload_id": np.asarray(ids).astype(str),
                           "p_insensitive": oof, "insensitive": y.astype(np.int8)})
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
    parity_rows = np.vstack([X, boundary_rows(splits, X, seed=seed), nan_rows(X, seed)])
    parity = check_parity(model, onnx_bytes, parity_rows)
    entry = {
        "method": winner, "file": f"{name}.onnx", "sha256": sha256(onnx_bytes), "latency_ratio": ratio,
        "pdm": pdm, "features": names, "classes": [int(c) for c in model.classes_],
        "workloads": len(y), "insensitive": int(y.sum()), "onnx_parity_max_abs_diff": parity,
        "top_importances": {k: round(float(v), 4) for k, v in imp.head(15).items()}}
    return TrainedLi(name, m, curve, scores, pd.concat(fp_curves, ignore_index=True), model, onnx_bytes, entry, imp,
                     tracked)
