"""The LI selection criterion on both built-in variants, without the rest of the night:

    python -m benchmarks.analyses.li_selection            (about 2 minutes on 2 cores)

Builds each variant's lab from params.yaml (``generate.lab``, ``base.seed``) and runs exactly
`train_li`'s selection (``models.li_select``: nested cross-validation, workloads as groups) per
latency ratio at ``optimize.pdm``: held-out LI at ``train_li.select_fp_pct`` of the selection
procedure, the forest and the best single-counter rule, and the model `train_li` would deploy.
One JSON line per (variant, ratio).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pond.core.params import load
from pond.features.build import lab_features
from pond.models.li import BASELINES, training_set
from pond.models.li_select import FOREST, candidates, nested, select
from pond.models.li_train import FP_GRID_PCT
from pond.telemetry.fleet.lab import build_lab

ROOT = Path(__file__).resolve().parents[2]

def main() -> None:
    params = load(ROOT / "params.yaml")
    p, seed = params.train_li, params.base.seed
    band = p.select_fp_pct / 100 * np.linspace(*p.select_band, 9)
    k = int(np.argmin(np.abs(FP_GRID_PCT - p.select_fp_pct)))
    for variant in ("pond", "walks"):
        lab = build_lab(params.generate.lab, variant)
        features = lab_features(lab.workloads)
        for ratio in p.latency_ratios:
            X, y, names, ids = training_set(features, lab.slowdowns, ratio, params.optimize.pdm)
            groups, makers = np.asarray(ids, dtype=object), candidates(names)
            study = nested(X, y, groups, makers, band, FP_GRID_PCT / 100, p.select_splits, p.cv_folds, seed)
            held = {m: 100 * float(c[:, k].mean()) for m, c in study.curves.items()}
            rule = max((m for m in held if m in BASELINES), key=held.get)
            deployed, _ = select(X, y, groups, makers, band, p.cv_folds, seed)
            print(json.dumps({"variant": variant, "ratio": ratio, "selected": round(held["selected"], 2),
                              "forest": round(held[FOREST], 2), "best_rule": rule, "best_rule_li": round(held[rule], 2),
                              "margin": round(held["selected"] - held[rule], 2), "deployed": deployed,
                              "outer_forest_share": study.winners.count(FOREST) / len(study.winners)}), flush=True)


if __name__ == "__main__":
    main()
