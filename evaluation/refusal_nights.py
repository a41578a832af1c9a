"""The service's memory of the monitor's flags run through the backtest's nights (``evaluation.refusal``): the nights
run apart, in processes, so the memory, which runs through them in time order, is replayed once they are all done,
from what each night wrote (its policy, its served decisions with the monitor's flags, the day's VMs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.days import next_day
from pond.core.params import QosParams
from pond.evaluation.backtest import chosen_pair, grid_candidates
from pond.evaluation.combined import realize, summarize
from pond.evaluation.qos import summarize as monitor_summary
from pond.evaluation.refusal import group_of, refused_calls
from pond.evaluation.regret import realized_grid, unmitigated_grid
from pond.evaluation.truth import measured_truth, truth_table
from pond.models.bundle import BundlePaths
from pond.models.decision import decide, policy_knobs
from pond.models.policy import Policy, read_policy
from pond.telemetry.io import read_days
from pond.telemetry.storage import Location


def night_refusals(nights: list[pd.DataFrame], groups: pd.Series, lag_s: float, hold_s: float) -> list[np.ndarray]:
    """Per night (a policy's decisions on its next day: ``vm_id``, ``created_at``, ``li_called``, ``seen_slowed``, in
    order), which VMs the service's memory refuses, the memory carried from night to night. ``groups``: each VM's
    group by ``vm_id`` (``group_of``)."""
    if not nights:
        return []
    d = pd.concat([n[["vm_id", "created_at", "li_called", "seen_slowed"]] for n in nights], ignore_index=True)
    created = d.created_at.to_numpy("datetime64[us]").astype(np.int64) / 1e6
    got = refused_calls(groups.reindex(d.vm_id.to_numpy()).to_numpy(object), created, d.li_called.to_numpy(bool),
                        d.seen_slowed.to_numpy(bool), lag_s, hold_s)
    return np.split(got, np.cumsum([len(n) for n in nights])[:-1])


POLICIES = ("combined", "served")     # the policies the nights' rows realize with the memory


def own_calls(policy: Policy, night: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per policy of ``POLICIES``, the VMs of the night it calls insensitive without any refusal: each policy's
    memory holds its own calls' flags, as a service serving it would."""
    knobs = policy_knobs(policy)
    args = (night.memory_gb.to_numpy(float), night.has_history.to_numpy(bool), night.p_insensitive.to_numpy(np.float64),
            night.um_raw.to_numpy(float))
    return {name: decide(*args, knobs[name])["li_called"] for name in POLICIES}


def refused_figures(policy: Policy, vms: pd.DataFrame, night: pd.DataFrame, refused: dict[str, np.ndarray],
                    raw_dir: Location, qos: QosParams) -> dict[str, dict[str, Any]]:
    """The night's combined and served policies on its next day with the VMs each refuses (``refused``, per name)
    decided without their LI call, realized as ``evaluation.next_day.judge`` realizes them (``night``: its
    ``decisions.parquet``, the monitor's flags and the scores of every VM; ``vms``: the day's VMs, the same rows)."""
    if not np.array_equal(vms.vm_id.to_numpy(object), night.vm_id.to_numpy(object)):
        vms = vms.set_index("vm_id").loc[night.vm_id.to_numpy()].reset_index()
    table, _ = truth_table(raw_dir, policy.latency_ratio)
    measured = measured_truth(raw_dir, policy.latency_ratio, vms)
    judged = night["touch_spill_pct"].to_numpy(float) if "touch_spill_pct" in night.columns else None
    rate, knobs, out = policy.li.error_rate, policy_knobs(policy), {}
    for name in POLICIES:
        p = np.where(refused[name], np.nan, night.p_insensitive.to_numpy(np.float64))
        d = decide(vms.memory_gb.to_numpy(float), night.has_history.to_numpy(bool), p, night.um_raw.to_numpy(float),
                   knobs[name])
        w = realize(vms, d, table, policy.pdm, measured, night.seen_slowed.to_numpy(bool), qos, touch_spill_pct=judged)
        m = summarize(w, rate) | monitor_summary(w, rate)
        m["refused_calls"] = float(refused[name].sum() / max(len(w), 1))
        m["within_budget"] = m["mispredictions_unmitigated"] <= policy.misprediction_budget
        out[name] = m
    return out


def refusal_rows(night_dirs: list[Path], features_path: Path, raw_dir: Location, qos: QosParams, lag_s: float
                 ) -> pd.DataFrame:
    """One row per backtest night (``night_dirs``, oldest first: each with ``policy.json`` and
    ``evaluation/decisions.parquet``): its combined and served policies realized with the service's memory of the
    flags carried over the nights (``night_refusals``), ``qos.refusal_hours``; each policy's memory holds the flags
    of its own calls."""
    policies, decisions, days = _nights(night_dirs, features_path)
    groups, hold = _groups(days), 3600.0 * qos.refusal_hours
    calls = [own_calls(p, d) for p, d in zip(policies, decisions, strict=True)]
    refused = {name: [r & c[name] for r, c in zip(   # a VM not called is decided alike either way: not counted
        night_refusals([d.assign(li_called=c[name]) for d, c in zip(decisions, calls, strict=True)], groups, lag_s,
                       hold), calls, strict=True)] for name in POLICIES}
    rows = []
    for k, (policy, vms, night) in enumerate(zip(policies, days, decisions, strict=True)):
        f = refused_figures(policy, vms, night, {name: refused[name][k] for name in POLICIES}, raw_dir, qos)
        c, s = f["combined"], f["served"]
        rows.append({"refused_calls": c["refused_calls"], "realized_pool_refusing": c["pool_share"],
                     "realized_unmitigated_refusing": c["mispredictions_unmitigated"],
                     "mitigations_refusing": c["mitigations"],
                     "slowed_calls_refusing": float(c["false_positives_with_truth"]),
                     "slowed_calls_flagged_refusing": float(round((c["monitor_recall"] or 0.0)
                                                                  * c["false_positives_with_truth"])),
                     "served_refused_calls": s["refused_calls"], "served_pool_refusing": s["pool_share"],
                     "served_unmitigated_refusing": s["mispredictions_unmitigated"]})
    return pd.DataFrame(rows)


def _nights(night_dirs: list[Path], features_path: Path
            ) -> tuple[list[Policy], list[pd.DataFrame], list[pd.DataFrame]]:
    """Per night: its policy, its served decisions and the day's VMs."""
    policies = [read_policy(BundlePaths.of(n).policy) for n in night_dirs]
    decisions = [pd.read_parquet(n / "evaluation" / "decisions.parquet") for n in night_dirs]
    return policies, decisions, [read_days(features_path, next_day(p.as_of), next_day(p.as_of)) for p in policies]


def _groups(days: list[pd.DataFrame]) -> pd.Series:
    groups = pd.concat([pd.Series(group_of(v.customer_id, v.vm_type), index=v.vm_id.to_numpy()) for v in days])
    return groups[~groups.index.duplicated()]


def refusing_grids(night_dirs: list[Path], li_dir: Path, features_path: Path, qos: QosParams, lag_s: float
                   ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[int, int]]]:
    """Per night, every candidate pair's (pool share, share left slowed by the monitor), as
    ``evaluation.backtest.night_regret`` realizes them, with the service's memory: each LI threshold's own calls and
    flags refuse through the nights, so a threshold that calls more VMs insensitive also refuses more; and each
    night's chosen pair. What the regret against the best fixed pair becomes with the memory."""
    policies, decisions, days = _nights(night_dirs, features_path)
    groups, hold = _groups(days), 3600.0 * qos.refusal_hours
    cands = [grid_candidates(p, li_dir, n / "um") for p, n in zip(policies, night_dirs, strict=True)]
    cap = qos.max_mitigated_share

    def grid(night: pd.DataFrame, k: int, at: slice) -> tuple[np.ndarray, np.ndarray]:
        t, q, _, offsets = cands[k]
        judged = night["touch_spill_pct"].to_numpy(float) if "touch_spill_pct" in night.columns else None
        return (realized_grid(night, t[at], offsets, q[at])[0],
                unmitigated_grid(night, t[at], offsets, q[at], cap, touch_spill_pct=judged))

    grids = [grid(night, k, slice(None)) for k, night in enumerate(decisions)]
    thresholds = cands[0][0]
    if not all(np.array_equal(c[0], thresholds) for c in cands):
        raise ValueError("refusing_grids: the nights' LI candidates differ; they come from one li_dir and ratio")
    for i, t in enumerate(thresholds):
        if not np.isfinite(t) or hold <= 0:
            continue
        with np.errstate(invalid="ignore"):
            calls = [d.assign(li_called=d.has_history.to_numpy(bool) & (d.p_insensitive.to_numpy(float) >= t))
                     for d in decisions]
        for k, (night, r) in enumerate(zip(decisions, night_refusals(calls, groups, lag_s, hold), strict=True)):
            if r.any():
                pool, left = grid(night.assign(p_insensitive=np.where(r, np.nan, night.p_insensitive.to_numpy(float))),
                                  k, slice(i, i + 1))
                grids[k][0][i], grids[k][1][i] = pool[0], left[0]
    return grids, [chosen_pair(p, c[0], c[2]) for p, c in zip(policies, cands, strict=True)]
