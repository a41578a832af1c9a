"""Stage `optimize`: the policy (LI threshold, UM target) for the PDM, TP and latency ratio in params.

Writes ``policy.json``: thresholds, the UM conformal offset, expected shares (mean and, with
``confidence``, Clopper-Pearson upper bounds of FP and OP), the sha256 of both models, PDM, TP,
ratio and as-of day; and the frontier (pool share vs misprediction budget, Pond Fig. 20) for the
combined policy, LI only and UM only.

FP bounds count each labelled workload once (n = all workloads scored on held-out halves), OP
bounds count every next-day VM of the backtest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.errors import ConfigError, ModelError
from core.params import Params
from evaluation.plots import pyplot, save_figure
from optimize.solver import clopper_pearson_upper, mispredicted, solve
from telemetry.io import write_json

BUDGETS_PCT = np.round(np.arange(0.0, 10.01, 0.25), 2)


def _li_candidates(curves: pd.DataFrame, ratio: float, pdm: float) -> pd.DataFrame:
    c = curves[np.isclose(curves.latency_ratio, ratio) & np.isclose(curves.pdm, pdm)]
    if c.empty:
        raise ConfigError(f"no LI curve for latency_ratio={ratio}, pdm={pdm}; add them to train_li params")
    none = pd.DataFrame({"threshold": [np.inf], "li": [0.0], "fp": [0.0], "n_test": [c.n_test.iloc[0]]})
    return pd.concat([none, c[["threshold", "li", "fp", "n_test"]]], ignore_index=True)


def _um_candidates(curves: pd.DataFrame) -> pd.DataFrame:
    none = pd.DataFrame({"target_op": [0.0], "um": [0.0], "op": [0.0], "vms": [curves.vms.max()], "overpredicted": [0]})
    return pd.concat([none, curves[["target_op", "um", "op", "vms", "overpredicted"]]], ignore_index=True)


def run(params: Params, li_dir: Path, um_dir: Path, features_dir: Path, out_path: Path,
        metrics_path: Path, frontier_path: Path, plot_path: Path) -> dict[str, Any]:
    o = params.optimize
    pdm, tp, ratio, level = o.pdm, o.tp, o.latency_ratio, o.confidence
    as_of = params.base.as_of
    li_manifest = json.loads((li_dir / "manifest.json").read_text())
    um_manifest = json.loads((um_dir / "manifest.json").read_text())
    name = f"r{ratio:g}_pdm{pdm:g}"
    if name not in li_manifest["models"]:
        raise ModelError(f"no LI model {name} in {li_dir}; train_li.latency_ratios/pdms must include it")
    li = _li_candidates(pd.read_parquet(li_dir / "heldout_curves.parquet"), ratio, pdm)
    um = _um_candidates(pd.read_parquet(um_dir / "heldout_curves.parquet"))
    vmf = pd.read_parquet(features_dir / "vm_features.parquet", columns=["day", "has_history"])
    day = pd.Timestamp(as_of).date()
    h = float(vmf.loc[vmf.day == day, "has_history"].mean()) if (vmf.day == day).any() else float(vmf.has_history.mean())
    n_workloads = int(li_manifest["models"][name]["workloads"])
    fp_used, op_used = li.fp.to_numpy(), um.op.to_numpy()
    if level is not None:
        fp_used = clopper_pearson_upper(np.round(li.fp.to_numpy() * n_workloads), n_workloads, level)
        fp_used[0] = 0.0  # not using LI has no false positives
        op_used = clopper_pearson_upper(um.overpredicted.to_numpy(), um.vms.to_numpy(), level)
        op_used[0] = 0.0
    budget = (100.0 - tp) / 100.0
    choice = solve(li.li.to_numpy(), fp_used, um.um.to_numpy(), op_used, h, budget)
    if not choice.feasible:
        raise ConfigError(f"no policy meets TP={tp}: even placing nothing on the pool is counted as infeasible")
    i, j = choice.li_index, choice.um_index
    target_key = f"{um.target_op[j]:g}"
    offset = 0.0 if j == 0 else um_manifest["offsets"].get(target_key)
    if offset is None:
        raise ModelError(f"UM manifest has no conformal offset for target {target_key}")
    policy = {
        "as_of": as_of, "pdm": pdm, "tp": tp, "latency_ratio": ratio,
        "confidence": level, "history_share": h, "misprediction_budget": budget,
        "li": {"enabled": bool(i > 0), "threshold": float(li.threshold[i]) if i > 0 else None,
               "model": li_manifest["models"][name]["file"], "sha256": li_manifest["models"][name]["sha256"],
               "features": li_manifest["models"][name]["features"], "classes": li_manifest["models"][name]["classes"],
               "expected_li": float(li.li[i]), "expected_fp": float(li.fp[i]), "fp_bound": float(fp_used[i])},
        "um": {"enabled": bool(j > 0), "target_op": float(um.target_op[j]), "offset": float(offset),
               "model": um_manifest["file"], "sha256": um_manifest["sha256"],
               "expected_um": float(um.um[j]), "expected_op": float(um.op[j]), "op_bound": float(op_used[j])},
        "expected": {"pool_share": choice.pool,
                     "mispredictions": float(mispredicted(h, li.li[i], li.fp[i], um.op[j])),
                     "mispredictions_bound": choice.mispredictions},
    }
    policy["alternatives"] = {}
    for alt, (si, sj) in {"li_only": (slice(None), slice(0, 1)), "um_only": (slice(0, 1), slice(None))}.items():
        c = solve(li.li.to_numpy()[si], fp_used[si], um.um.to_numpy()[sj], op_used[sj], h, budget)
        ai, aj = (c.li_index, 0) if alt == "li_only" else (0, c.um_index)
        policy["alternatives"][alt] = {
            "li_threshold": float(li.threshold[ai]) if ai > 0 else None,
            "um_offset": float(um_manifest["offsets"][f"{um.target_op[aj]:g}"]) if aj > 0 else None,
            "um_target_op": float(um.target_op[aj]), "expected_pool_share": c.pool}
    write_json(out_path, policy)
    write_json(metrics_path, {"pool_share": choice.pool, "mispredictions": policy["expected"]["mispredictions"],
                              "mispredictions_bound": choice.mispredictions, "li_share": float(li.li[i]),
                              "li_threshold": policy["li"]["threshold"], "um_share": float(um.um[j]),
                              "um_target_op": float(um.target_op[j]), "history_share": h})
    frontier = _frontier(li, um, fp_used, op_used, h)
    frontier_path.parent.mkdir(parents=True, exist_ok=True)
    frontier.round(5).to_csv(frontier_path, index=False)
    _plot(frontier, tp, plot_path)
    print(f"optimize: li threshold {policy['li']['threshold']}, um target {policy['um']['target_op']}, "
          f"pool share {choice.pool:.3f}, mispredictions {policy['expected']['mispredictions']:.4f} "
          f"(bound {choice.mispredictions:.4f}) within {budget:.3f}")
    return policy


def _frontier(li: pd.DataFrame, um: pd.DataFrame, fp: np.ndarray, op: np.ndarray, h: float) -> pd.DataFrame:
    rows = []
    variants = {"combined": (slice(None), slice(None)), "li_only": (slice(None), slice(0, 1)),
                "um_only": (slice(0, 1), slice(None))}
    for budget in BUDGETS_PCT:  # 41 budgets x 3 policies, each an O(n log n) solve
        for method, (si, sj) in variants.items():
            c = solve(li.li.to_numpy()[si], fp[si], um.um.to_numpy()[sj], op[sj], h, budget / 100)
            rows.append({"method": method, "budget_pct": budget, "pool_pct": 100 * c.pool if c.feasible else 0.0})
    return pd.DataFrame(rows)


def _plot(frontier: pd.DataFrame, tp: float, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, g in frontier.groupby("method"):
        ax.plot(g.budget_pct, g.pool_pct, label=method)
    ax.axvline(100 - tp, ls=":", color="k", label=f"budget at TP {tp:g}")
    ax.set(xlabel="scheduling mispredictions (% of VMs)", ylabel="memory on the pool (% of GB)",
           title="Pool share vs misprediction budget (Pond Fig. 20)")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
