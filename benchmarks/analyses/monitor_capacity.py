"""Where the regret against the best fixed pair goes: the UM or the LI half, and the QoS monitor's capacity that the
LI calls' flags spend. After `benchmarks/backtest_variants.py`.

The monitor may mitigate ``qos.max_mitigated_share`` of a day's VMs; this measures what the solver charges for it.

    python -m benchmarks.analyses.monitor_capacity /tmp/bv/seed4*/*      # run dirs of benchmarks.backtest_variants

Per finished run (no model is trained again), from its saved nights:

- the best pair fixed over the nights in hindsight (``evaluation.backtest.with_fixed_regret``) and the mean of each
  night's chosen pair, the mean regret against the fixed pair (points of pool share), and how much of it each half
  of the fixed pair closes alone: the night's own LI threshold with the fixed UM target (``closed_by_um``), the fixed
  LI threshold with the night's own UM target (``closed_by_li``);
- what the solver charged (``policy.json``'s ``fleet_monitor``): the share of the LI calls the monitor flagged on the
  recent days, and the capacity those flags leave for zNUMA overpredictions (``mitigation_spare``), as % of VMs;
- what the next day did with the chosen pair (``evaluation/decisions.parquet``, truth read only to judge): the LI
  errors, those the monitor flagged and mitigated, the mitigations spent on LI calls and in all, as % of VMs.

Unless ``optimize.credit_caught_calls``, the solver charges every LI error in full *and* takes the LI calls' flags
out of the capacity it counts for overpredictions: an LI error the monitor catches is paid for twice.

``--thresholds 0.6 0.8``: per run and LI threshold, over the next days' VMs with history called at it (P(insensitive)
>= threshold), the share truly sensitive, the share the monitor flags (``seen_slowed``) and its recall among the
sensitive ones, beside the lab's recall the solver divides the flags by: does the monitor see the errors a lower
threshold lets in? Beside them, for runs whose models keep per-workload scores, the recall the credit uses: among
the lab's LI errors at the threshold (``lab_errors`` workloads), its mean and its lower bound.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta

from benchmarks.analyses.admissible_regret import replayed
from pond.core.params import load
from pond.evaluation.backtest import pair
from pond.models.monitor_runtime import MonitorModel
from pond.optimize.monitor import band_recall


def _index(candidates: list, threshold: float | None, target: float | None) -> tuple[int, int]:
    thresholds = np.asarray(candidates[0], float)
    i = 0 if threshold is None else int(np.flatnonzero(np.isclose(thresholds, threshold))[0])
    j = 0 if target is None else 1 + list(candidates[1][1:]).index(target)
    return i, j


def next_day(decisions: Path) -> dict[str, float]:
    """The chosen pair's next day, % of its VMs (module doc)."""
    d = pd.read_parquet(decisions, columns=["li_called", "false_positive", "mitigated"])
    li = d.li_called.to_numpy(bool)
    err = d.false_positive.fillna(False).to_numpy(bool) & li
    mit = d.mitigated.fillna(False).to_numpy(bool)
    n = max(len(d), 1)
    return {"li_errors_pct": 100 * err.sum() / n, "li_errors_mitigated_pct": 100 * (err & mit).sum() / n,
            "mitigations_on_li_pct": 100 * (li & mit).sum() / n, "mitigations_pct": 100 * mit.sum() / n}


def run_row(wd: Path) -> dict[str, object]:
    run = replayed(wd)
    nights = []
    for night, policy, r in zip(run.nights, run.policies, run.regrets):
        fm = json.loads((night / "policy.json").read_text()).get("fleet_monitor", {})
        t = policy.li.threshold if policy.li.enabled else None
        j = policy.um.target_op if policy.um.enabled else None
        nights.append({"threshold": t, "target": j, "pool": r["chosen_pool"], "at": _index(run.candidates, t, j),
                       "flag_rate_pct": 100 * (fm.get("flag_rate") or 0.0),
                       "spare_pct": 100 * (fm.get("mitigation_spare") or 0.0),
                       **next_day(night / "evaluation" / "decisions.parquet")})
    table, fixed, _ = run.fixed()
    if fixed is None:
        raise SystemExit(f"{wd}: no pair keeps the budget on every night")
    grids, candidates = run.grids, run.candidates
    per = pd.DataFrame(nights)
    per["pool_fixed_um"] = [float(g[0][n["at"][0], fixed[1]]) for g, n in zip(grids, nights)]
    per["pool_fixed_li"] = [float(g[0][fixed[0], n["at"][1]]) for g, n in zip(grids, nights)]
    best = pair(candidates, fixed)
    mean = per.drop(columns=["at"]).mean(numeric_only=True)
    return {"run": str(wd), "nights": len(per), "fixed_threshold": best["li_threshold"],
            "fixed_target": best["um_target_op"], "threshold": mean.threshold, "target": mean.target,
            "regret": 100 * float(table.regret_fixed.mean()),
            "closed_by_um": 100 * float((per.pool_fixed_um - per.pool).mean()),
            "closed_by_li": 100 * float((per.pool_fixed_li - per.pool).mean()),
            **{k: float(mean[k]) for k in ("flag_rate_pct", "spare_pct", "li_errors_pct", "li_errors_mitigated_pct",
                                           "mitigations_on_li_pct", "mitigations_pct")}}


def lab_band(wd: Path, thresholds: list[float]) -> pd.DataFrame | None:
    """Per LI threshold, the recall the solver credits (``optimize.monitor.band_recall``): the lab's LI errors at it
    and the monitor's held-out recall among them, mean and lower bound at ``optimize.confidence``; None for a run
    whose models predate the per-workload scores."""
    scores, manifest = wd / "li" / "heldout_scores.parquet", wd / "monitor" / "manifest.json"
    if not scores.exists() or not manifest.exists():
        return None
    o = load(wd / "params.yaml").optimize
    shares = MonitorModel.load(wd / "monitor").flag_shares(o.latency_ratio)
    s = pd.read_parquet(scores)
    s = s[np.isclose(s.latency_ratio, o.latency_ratio) & np.isclose(s.pdm, o.pdm)]
    counts = band_recall(s, shares, np.asarray(thresholds, float))
    if counts is None:
        return None
    k, n = counts
    lower = beta.ppf(1.0 - (o.confidence or 0.5), k + 0.5, n - k + 0.5)
    return pd.DataFrame({"threshold": thresholds, "lab_errors": n, "lab_band_recall_pct": 100 * (k + 0.5) / (n + 1),
                         "lab_band_lower_pct": 100 * lower})


def by_threshold(wd: Path, thresholds: list[float]) -> pd.DataFrame:
    """Per LI threshold, over the nights: the called VMs' error rate, flag rate and the monitor's recall on them (%),
    pooled over the nights' VMs; the lab recall of the monitor model (``fleet_monitor.lab_recall``) and, where the
    run has them, the recall among the lab's LI errors at the threshold (``lab_band``)."""
    frames, lab = [], []
    for f in sorted((wd / "backtest").glob("*/evaluation/decisions.parquet")):
        d = pd.read_parquet(f, columns=["has_history", "sensitive", "p_insensitive", "seen_slowed"])
        frames.append(d[d.has_history.to_numpy(bool) & d.sensitive.notna().to_numpy() & d.seen_slowed.notna().to_numpy()])
        lab.append(json.loads((f.parents[1] / "policy.json").read_text()).get("fleet_monitor", {}).get("lab_recall"))
    if not frames:
        raise SystemExit(f"{wd / 'backtest'}: no evaluation/decisions.parquet; run the backtest in {wd} first")
    d = pd.concat(frames, ignore_index=True)
    rows = []
    for t in thresholds:
        c = d[d.p_insensitive.to_numpy(float) >= t]
        sens, flag = c.sensitive.to_numpy(float) == 1.0, c.seen_slowed.to_numpy(bool)
        rows.append({"run": str(wd), "threshold": t, "called": len(c), "errors_pct": 100 * sens.mean(),
                     "flagged_pct": 100 * flag.mean(), "recall_pct": 100 * flag[sens].mean() if sens.any() else np.nan,
                     "lab_recall_pct": 100 * float(np.nanmean([x for x in lab if x is not None] or [np.nan]))})
    out = pd.DataFrame(rows)
    band = lab_band(wd, thresholds)
    return out if band is None else out.merge(band, on="threshold", how="left")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run dirs (params.yaml, li, features, backtest)")
    ap.add_argument("--thresholds", type=float, nargs="+", help="the monitor's recall per LI threshold instead")
    a = ap.parse_args()
    if a.thresholds:
        with pd.option_context("display.width", 250):
            print(pd.concat([by_threshold(wd, a.thresholds) for wd in a.runs]).round(2).to_string(index=False))
        return
    table = pd.DataFrame([run_row(wd) for wd in a.runs])
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
