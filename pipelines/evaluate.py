"""Stage `evaluate`: the policy, applied exactly as the service applies it, to every VM created on the
day after the as-of day (ended or censored, ``evaluation.combined``); compared with LI-only,
UM-only and static 10%/15% pools on the same VMs; ``served`` is the one the service applies
(``optimize.serve``), and ``decisions.parquet`` holds its decisions. Slowdown truth comes from
``evaluation.truth``; where there is none, false positives are the lab estimate, labelled so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.days import next_day
from core.engine import run_all, session
from core.errors import ConfigError
from core.params import EngineParams, QosParams
from evaluation.combined import outcomes, spill_table, summarize
from evaluation.plots import pyplot, save_figure
from evaluation.qos import summarize as monitor_summary
from evaluation.qos import watch
from evaluation.sla_alpha import keep_on_pool_pct, nearest_curves, sla_alpha
from evaluation.sla_alpha import summarize as alpha_summary
from evaluation.truth import measured_truth, truth_table
from features.build import lab_features
from models.names import static_policy_name
from models.decision import PolicyKnobs, decide, policy_knobs, served_name
from models.dask_fit import workers_of
from models.inference import ModelFiles, Models, Scores, score, score_in_parts
from models.policy import read_policy
from optimize.monitor import monitor_scores, own_rows
from telemetry.atomic import AtomicDir, write_json
from telemetry.io import read_days, read_tables
from telemetry.storage import Location

STATIC_FRACTIONS = (0.10, 0.15)


def run(policy_path: Path, li_dir: Path, um_dir: Path, features_dir: Path, raw_dir: Location, out_dir: Path,
        metrics_path: Path, plots_dir: Path, engine: EngineParams | None = None, client: Any = None,
        qos: QosParams | None = None) -> dict[str, Any]:
    """``engine.backend: dask``: the day's VMs are scored on the cluster, one slice per worker
    (``client``: the caller's, as `backtest` keeps one for all its nights; else this stage's own,
    started once the inputs are read). ``qos``: the QoS monitor replayed on every policy (``evaluation.qos``)."""
    qos = qos or QosParams()
    policy = read_policy(policy_path)
    files = ModelFiles.from_policy(policy, li_dir, um_dir)
    day = next_day(policy["as_of"])
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
    has_history, p, raw = s.has_history, s.p_insensitive, s.um_raw
    table, source = truth_table(raw_dir, policy["latency_ratio"])
    measured = measured_truth(raw_dir, policy["latency_ratio"], vms)
    if measured is not None and len(measured):
        source += "+vm_slowdowns"      # a measured VM without other truth is judged by its own slowdown
    rate = policy["li"]["error_rate"]
    own = own_rows(vms, raw_dir)
    p_exceed = monitor_scores(models, vms, raw_dir, own)
    workload = vms["workload_id"] if "workload_id" in vms.columns else pd.Series(np.nan, index=vms.index, dtype=object)
    created = vms["created_at"].to_numpy()
    variants = {
        **{name: (knobs, raw) for name, knobs in policy_knobs(policy).items()},
        **{static_policy_name(f): (PolicyKnobs(None, 0.0), np.full(len(vms), f)) for f in STATIC_FRACTIONS},
    }
    lowest = min((k.li_threshold for k, _ in variants.values() if k.li_threshold is not None), default=np.inf)
    with np.errstate(invalid="ignore"):     # SLA-alpha restores only insensitive calls: a flagged VM some policy calls
        callable_flagged = (p_exceed >= qos.threshold) & has_history & (p >= lowest)
    keep = alpha_keep(own, callable_flagged, raw_dir, policy, qos.alpha_neighbors)
    metrics: dict[str, Any] = {"day": day.isoformat(), "budget": policy["misprediction_budget"],
                               "history_share": float(has_history.mean()), "truth_source": source}
    with AtomicDir(out_dir) as tmp:
        for name, (knobs, um_raw) in variants.items():
            d = decide(vms.memory_gb.to_numpy(), has_history, p, um_raw, knobs)
            out = watch(outcomes(vms, d, table, policy["pdm"], measured), p_exceed, created, qos.threshold,
                        qos.max_mitigated_share)
            out = sla_alpha(out, keep, table, workload, policy["pdm"])
            metrics[name] = summarize(out, rate) | monitor_summary(out, rate) | alpha_summary(out, rate)
            if name == "served":
                out.assign(p_insensitive=p, has_history=has_history, um_raw=raw, untouched_pred=d["untouched_fraction"],
                           p_exceed=p_exceed, created_at=created) \
                   .to_parquet(tmp / "decisions.parquet", index=False)
    for name in ("combined", "served"):     # the budget bounds what the monitor leaves slowed (Pond §6.4.3)
        metrics[name]["within_budget"] = metrics[name]["mispredictions_unmitigated"] <= metrics["budget"]
        metrics[name]["within_budget_raw"] = metrics[name]["mispredictions_conservative"] <= metrics["budget"]
    metrics["served_policy"] = served_name(policy)
    c = metrics["served"]
    if c["lab_truth_share"] < 1.0:
        print(f"evaluate: {1 - c['lab_truth_share']:.1%} of the {len(vms)} VMs have no lab workload with slowdown "
              "truth (no vms.workload_id, or a workload no truth table holds) and no vm_slowdowns report: their "
              "false positives are the lab estimate, not realized")
    if c["pool_only_without_truth"]:
        print(f"evaluate: {c['pool_only_without_truth']} pool-only VMs have no slowdown truth (no vms.workload_id, or "
              f"a workload no truth table holds): each counts as the lab error rate {rate:.2%} (fp_source "
              f"{c['fp_source']})")
    if c["censored"]:
        print(f"evaluate: {c['censored']} VMs were still running at the end of the trace; "
              f"{c['censored_unresolved']} of their zNUMAs are not yet confirmed either way: mispredictions "
              f"{c['mispredictions_conservative']:.2%} confirmed, {c['mispredictions_worst_case']:.2%} worst case")
    write_json(metrics_path, metrics)
    rows = pd.DataFrame([{"policy": k, **v} for k, v in metrics.items() if isinstance(v, dict)])
    plots_dir.mkdir(parents=True, exist_ok=True)
    rows[["policy", "pool_share", "mispredictions_conservative", "mispredictions_severe"]].round(5) \
        .to_csv(plots_dir / "policies.csv", index=False)
    _plot(rows, metrics["budget"], plots_dir / "policies.png")
    print(f"evaluate: the service applies {metrics['served_policy']} (optimize.serve, optimize.pool_cap): the row 'served'; "
          f"the QoS monitor mitigates up to {qos.max_mitigated_share:.0%} of the VMs (flag at P(exceed) >= "
          f"{qos.threshold:g})")
    for r in rows.itertuples():
        print(f"evaluate {r.policy:12s} pool {100 * r.pool_share:5.1f}%  mispredicted {100 * r.mispredictions_conservative:5.2f}% "
              f"(severe {100 * r.mispredictions_severe:5.2f}%), unmitigated {100 * r.mispredictions_unmitigated:5.2f}% "
              f"after {100 * r.mitigations:4.2f}% mitigated ({100 * r.false_alarms:4.2f}% false alarms)")
    return metrics


def alpha_keep(own: pd.DataFrame, flagged: np.ndarray, raw_dir: Location, policy: dict, k: int) -> np.ndarray:
    """Per VM, the share of its memory SLA-alpha keeps on the pool if it is mitigated (``evaluation.sla_alpha``),
    predicted from its own counters; worked out for the ``flagged`` rows only (NaN elsewhere)."""
    tables = read_tables(raw_dir, ["workloads", "slowdowns"])
    lab = lab_features(tables["workloads"]).set_index("workload_id")
    curves = spill_table(tables["slowdowns"], policy["latency_ratio"])
    keep = np.full(len(own), np.nan)
    rows = np.flatnonzero(flagged)
    features = [c for c in policy["li"]["features"] if c in lab.columns]
    keep[rows] = keep_on_pool_pct(nearest_curves(own.iloc[rows].reindex(columns=features), lab, curves, k),
                                  policy["pdm"])
    return keep


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
