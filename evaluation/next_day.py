"""The night's policy judged on the next day (the `evaluate` stage's work): the policy applied exactly as the service
applies it to every VM created on the day after the as-of day (ended or censored, ``evaluation.combined``); compared
with LI-only, UM-only and static 10%/15% pools on the same VMs; ``served`` is the one the service applies
(``optimize.serve``). Slowdown truth comes from ``evaluation.truth``; where there is none, false positives are the
lab estimate, labelled so. The QoS monitor is replayed on every policy (``evaluation.qos``), and SLA-alpha beside
it (``evaluation.sla_alpha``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.days import next_day
from pond.core.params import QosParams
from pond.evaluation.combined import realize, spill_table, summarize
from pond.evaluation.qos import summarize as monitor_summary
from pond.evaluation.sla_alpha import keep_on_pool_pct, nearest_curves, sla_alpha
from pond.evaluation.sla_alpha import summarize as alpha_summary
from pond.evaluation.truth import measured_truth, truth_table
from pond.features.build import lab_features
from pond.models.bundle import BundlePaths
from pond.models.decision import PolicyKnobs, decide, policy_knobs, served_name
from pond.models.inference import Models, Scores, score
from pond.models.monitor_runtime import MonitorModel
from pond.models.names import static_policy_name
from pond.models.policy import Policy, read_policy
from pond.optimize.monitor import POOL_COUNTERS, monitor_flags, own_rows
from pond.telemetry.io import read_tables
from pond.telemetry.storage import Location

STATIC_FRACTIONS = (0.10, 0.15)


@dataclass
class Judged:
    """The day's metrics per policy, the served policy's decisions and outcomes per VM, and lines to print."""

    metrics: dict[str, Any]
    served: pd.DataFrame
    notes: list[str]


def judge(policy: Policy, vms: pd.DataFrame, s: Scores, models: Models, raw_dir: Location,
          qos: QosParams, monitor: MonitorModel | None = None) -> Judged:
    """Every policy of the night on the next day's ``vms`` (``s``: their scores); ``monitor``: the QoS monitor's
    model, which flags the insensitive calls from their counters under the pool where the data allow
    (``optimize.monitor.monitor_flags``)."""
    day = next_day(policy.as_of)
    has_history, p, raw = s.has_history, s.p_insensitive, s.um_raw
    table, source = truth_table(raw_dir, policy.latency_ratio)
    measured = measured_truth(raw_dir, policy.latency_ratio, vms)
    if measured is not None and len(measured):
        source += "+vm_slowdowns"      # a measured VM without other truth is judged by its own slowdown
    rate = policy.li.error_rate
    own = own_rows(vms, raw_dir)
    flags = monitor_flags(vms, raw_dir, policy.latency_ratio, models, qos, monitor, own)
    workload = vms["workload_id"] if "workload_id" in vms.columns else pd.Series(np.nan, index=vms.index, dtype=object)
    created = vms["created_at"].to_numpy()
    variants = {
        **{name: (knobs, raw) for name, knobs in policy_knobs(policy).items()},
        **{static_policy_name(f): (PolicyKnobs(None, 0.0), np.full(len(vms), f)) for f in STATIC_FRACTIONS},
    }
    lowest = min((k.li_threshold for k, _ in variants.values() if k.li_threshold is not None), default=np.inf)
    with np.errstate(invalid="ignore"):     # SLA-alpha restores only insensitive calls: a flagged VM some policy calls
        callable_flagged = flags.seen_slowed & has_history & (p >= lowest)
    keep = alpha_keep(own, callable_flagged, raw_dir, policy, qos.alpha_neighbors)
    metrics: dict[str, Any] = {"day": day.isoformat(), "budget": policy.misprediction_budget,
                               "history_share": float(has_history.mean()), "truth_source": source,
                               "monitor": flags.source}
    served = pd.DataFrame()
    for name, (knobs, um_raw) in variants.items():
        d = decide(vms.memory_gb.to_numpy(), has_history, p, um_raw, knobs)
        out = sla_alpha(realize(vms, d, table, policy.pdm, measured, flags.seen_slowed, qos,
                                touch_spill_pct=flags.touch_spill_pct), keep, table, workload, policy.pdm)
        metrics[name] = summarize(out, rate) | monitor_summary(out, rate) | alpha_summary(out, rate)
        if name == "served":
            served = out.assign(p_insensitive=p, has_history=has_history, um_raw=raw,
                                untouched_pred=d["untouched_fraction"], p_exceed=flags.p_exceed,
                                seen_slowed=flags.seen_slowed, created_at=created)
            if flags.touch_spill_pct is not None:
                served = served.assign(touch_spill_pct=flags.touch_spill_pct)
    for name in ("combined", "served"):     # the budget bounds what the monitor leaves slowed (Pond §6.4.3)
        metrics[name]["within_budget"] = metrics[name]["mispredictions_unmitigated"] <= metrics["budget"]
        metrics[name]["within_budget_raw"] = metrics[name]["mispredictions_conservative"] <= metrics["budget"]
    metrics["served_policy"] = served_name(policy)
    c, notes = metrics["served"], []
    if c["lab_truth_share"] < 1.0:
        notes.append(f"evaluate: {1 - c['lab_truth_share']:.1%} of the {len(vms)} VMs have no lab workload with slowdown "
                     "truth (no vms.workload_id, or a workload no truth table holds) and no vm_slowdowns report: their "
                     "false positives are the lab estimate, not realized")
    if c["pool_only_without_truth"]:
        notes.append(f"evaluate: {c['pool_only_without_truth']} pool-only VMs have no slowdown truth (no vms.workload_id, or "
                     f"a workload no truth table holds): each counts as the lab error rate {rate:.2%} (fp_source "
                     f"{c['fp_source']})")
    if c["censored"]:
        notes.append(f"evaluate: {c['censored']} VMs were still running at the end of the trace; "
                     f"{c['censored_unresolved']} of their zNUMAs are not yet confirmed either way: mispredictions "
                     f"{c['mispredictions_conservative']:.2%} confirmed, {c['mispredictions_worst_case']:.2%} worst case")
    return Judged(metrics, served, notes)


def bundle_on(bundle_dir: Path, vms: pd.DataFrame, raw_dir: Location, qos: QosParams | None = None
              ) -> dict[str, Any]:
    """A registered bundle's served policy, realized on ``vms`` as ``judge`` realizes it, its QoS monitor (the
    bundle's own model) too."""
    qos = qos or QosParams()
    paths = BundlePaths.of(bundle_dir)
    policy = read_policy(paths.policy)
    models = Models.from_policy(policy, paths.li_dir, paths.um_dir)
    s = score(models, vms, pd.read_parquet(paths.snapshot_dir / "workload_history.parquet"))
    d = decide(vms["memory_gb"].to_numpy(float), s.has_history, s.p_insensitive, s.um_raw,
               policy_knobs(policy)["served"])
    table, _ = truth_table(raw_dir, policy.latency_ratio)
    flags = monitor_flags(vms, raw_dir, policy.latency_ratio, models, qos, MonitorModel.load(paths.monitor_dir))
    out = realize(vms, d, table, policy.pdm, measured_truth(raw_dir, policy.latency_ratio, vms), flags.seen_slowed, qos,
                  touch_spill_pct=flags.touch_spill_pct)
    rate = policy.li.error_rate
    return {**summarize(out, rate), **monitor_summary(out, rate), "served_policy": served_name(policy)}


def report_lines(metrics: dict[str, Any], qos: QosParams) -> list[str]:
    """What the stage prints: the policy served, then one line per policy."""
    how = ("the monitor model on their counters under the pool" if metrics.get("monitor") == POOL_COUNTERS else
           f"the LI model on their first-hour counters, at P(exceed) >= {qos.threshold:g}")
    lines = [(f"evaluate: the service applies {metrics['served_policy']} (optimize.serve, optimize.pool_cap): the row "
             f"'served'; the QoS monitor mitigates up to {qos.max_mitigated_share:.0%} of the VMs, flagging insensitive "
             f"calls by {how}")]
    for r in metric_rows(metrics).itertuples():
        lines.append(f"evaluate {r.policy:12s} pool {100 * r.pool_share:5.1f}%  mispredicted "
                     f"{100 * r.mispredictions_conservative:5.2f}% (severe {100 * r.mispredictions_severe:5.2f}%), "
                     f"unmitigated {100 * r.mispredictions_unmitigated:5.2f}% after {100 * r.mitigations:4.2f}% "
                     f"mitigated ({100 * r.false_alarms:4.2f}% false alarms)")
    return lines


def metric_rows(metrics: dict[str, Any]) -> pd.DataFrame:
    """One row per policy of the day's metrics."""
    return pd.DataFrame([{"policy": k, **v} for k, v in metrics.items() if isinstance(v, dict)])


def alpha_keep(own: pd.DataFrame, flagged: np.ndarray, raw_dir: Location, policy: Policy, k: int) -> np.ndarray:
    """Per VM, the share of its memory SLA-alpha keeps on the pool if it is mitigated (``evaluation.sla_alpha``),
    predicted from its own counters; worked out for the ``flagged`` rows only (NaN elsewhere)."""
    tables = read_tables(raw_dir, ["workloads", "slowdowns"])
    lab = lab_features(tables["workloads"]).set_index("workload_id")
    curves = spill_table(tables["slowdowns"], policy.latency_ratio)
    keep = np.full(len(own), np.nan)
    rows = np.flatnonzero(flagged)
    features = [c for c in policy.li.features if c in lab.columns]
    keep[rows] = keep_on_pool_pct(nearest_curves(own.iloc[rows].reindex(columns=features), lab, curves, k),
                                  policy.pdm)
    return keep
