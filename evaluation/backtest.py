"""The nightly job replayed over consecutive nights (the `backtest` stage's work): each night's snapshot, the drift
of the UM model's inputs (KS and PSI per feature, the next day's VMs against the night's training window), the
night's regret (``evaluation.regret``: the best threshold pair in hindsight on the next day's VMs within the budget,
on what the QoS monitor leaves slowed, minus the chosen pair's realized pool share; ``regret_raw`` on the raw
figure), the best pair fixed over every night, and what `simulate` needs to decide the next day's VMs as that night
would have (``night_scores``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from scipy import stats

from pond.core.cluster import run_all
from pond.core.days import end_of, in_days_up_to
from pond.core.errors import TooLittleHistory
from pond.core.params import Params, QosParams
from pond.core.plots import pyplot, save_figure
from pond.evaluation.compare import psi
from pond.evaluation.regret import admitted, best_admitted, best_fixed, realized_grid, unmitigated_grid, znuma_local_gb
from pond.features.build import snapshot
from pond.features.partitioned import partitioned_snapshots
from pond.features.shuffle import scratch_folder
from pond.models.bundle import BundlePaths
from pond.models.inference import Models, score
from pond.models.monitor_runtime import MonitorModel
from pond.models.names import at_ratio
from pond.models.policy import Policy, read_policy
from pond.optimize.monitor import monitor_flags
from pond.optimize.solver import error_rate, regret
from pond.optimize.tonight import li_candidates, li_model, recent_li_shares, solve
from pond.telemetry.contract import WORKLOADS, event_columns
from pond.telemetry.io import counters_source, read_tables
from pond.telemetry.storage import Location, remove_tree


def input_drift(vmf: pd.DataFrame, as_of: pd.Timestamp, train_days: int,
                customer_columns: list[str]) -> dict[str, Any]:
    """KS and PSI of each numeric UM input (sizes and the customer columns): the next day's VMs
    vs the VMs created in the training window."""
    features = ["vcpus", "memory_gb", *customer_columns]
    end = end_of(as_of)
    train = vmf[in_days_up_to(vmf.created_at, as_of, train_days)]
    nxt = vmf[(vmf.created_at >= end) & (vmf.created_at < end + pd.Timedelta(days=1))]
    out: dict[str, Any] = {}
    for c in features:
        a, b = train[c].to_numpy(float), nxt[c].to_numpy(float)
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        out[f"ks.{c}"] = float(stats.ks_2samp(a, b).statistic) if len(a) and len(b) else np.nan
        out[f"psi.{c}"] = psi(a, b)
    ks = {c: out[f"ks.{c}"] for c in features}
    out["ks_max"], out["ks_max_feature"] = max(ks.values()), max(ks, key=lambda k: ks[k])
    out["psi_max"] = max(out[f"psi.{c}"] for c in features)
    return out


def night_regret(policy: Policy, li_dir: Path, um_dir: Path, decisions: Path, qos: QosParams,
                 touch_spill_pct: np.ndarray | None = None, counted: Callable[[np.ndarray], np.ndarray] | None = None
                 ) -> tuple[dict[str, float], np.ndarray, np.ndarray, list]:
    """The night's regret over the candidates the solver chose from (LI thresholds, UM targets), and their
    realized grids (pool share, mispredictions the QoS monitor leaves slowed: what the budget bounds) with the
    candidates: (thresholds, UM targets, None first: off). ``regret_raw``: the same yardstick on the raw figure.
    ``touch_spill_pct``: per row of ``decisions``, a zNUMA's touch flagged only where the monitor judges it
    (``evaluation.regret.unmitigated_grid``); default: the decisions' own column (``qos.touches: judged``), if any.
    ``counted``: given each UM target's local GB per VM (targets x rows), the overpredictions the count keeps
    (``unmitigated_grid``'s); None: every one."""
    thresholds, q, targets, offsets = grid_candidates(policy, li_dir, um_dir)
    night = pd.read_parquet(decisions)
    if touch_spill_pct is None and "touch_spill_pct" in night.columns:
        touch_spill_pct = night["touch_spill_pct"].to_numpy(float)
    pool, mis = realized_grid(night, thresholds, offsets, q)
    keep = None if counted is None else counted(znuma_local_gb(night, offsets))
    left = unmitigated_grid(night, thresholds, offsets, q, qos.max_mitigated_share, touch_spill_pct=touch_spill_pct,
                            counted=keep)
    i, j = chosen_pair(policy, thresholds, targets)
    out = regret(pool, left, policy.misprediction_budget, (i, j))
    out["regret_raw"] = regret(pool, mis, policy.misprediction_budget, (i, j))["regret"]
    out["chosen_mispredictions"] = float(mis[i, j])
    out["chosen_unmitigated"] = float(left[i, j])
    return out, pool, left, [thresholds, [None, *targets]]


def grid_candidates(policy: Policy, li_dir: Path, um_dir: Path) -> tuple[np.ndarray, np.ndarray, list[float],
                                                                         np.ndarray]:
    """The candidates the night's solver chose from: LI thresholds (the first: off) with the lab's error rate at each,
    and UM targets with the night's offsets (``offsets``' first, NaN: off)."""
    li = li_candidates(pd.read_parquet(li_dir / "heldout_curves.parquet"), policy.latency_ratio, policy.pdm)
    offsets_by_target = json.loads((um_dir / "manifest.json").read_text())["offsets"]
    targets = sorted(float(t) for t in offsets_by_target)
    return (li.threshold.to_numpy(float), error_rate(li.called.to_numpy(), li.errors.to_numpy()), targets,
            np.r_[np.nan, [offsets_by_target[f"{t:g}"] for t in targets]])


def chosen_pair(policy: Policy, thresholds: np.ndarray, targets: list[float]) -> tuple[int, int]:
    """The night's chosen pair as indices of ``grid_candidates``' (0: that model off)."""
    i = int(np.flatnonzero(np.isclose(thresholds, policy.li.threshold))[0]) if policy.li.enabled else 0
    return i, (1 + targets.index(policy.um.target_op) if policy.um.enabled else 0)


def night_scores(p: Params, night: Path, li_dir: Path, vms: pd.DataFrame, history: pd.DataFrame,
                 policy: Policy, raw_dir: Location | None = None, monitor: MonitorModel | None = None) -> None:
    """The night's policy for every ``simulate.latency_ratios`` (``policy_r<ratio>.json``) and the
    next day's VMs scored by the night's models (``scores.parquet``): what `simulate` decides them with.
    `evaluate` already scored them for the night's own ratio; only the other ratios' LI is scored here."""
    path = night / "evaluation" / "decisions.parquet"
    judged = ["touch_spill_pct"] if "touch_spill_pct" in pq.read_schema(path).names else []
    done = pd.read_parquet(path, columns=["vm_id", "has_history", "um_raw", "p_insensitive", "p_exceed", "seen_slowed",
                                          *judged])
    cols = {"vm_id": done.vm_id, "has_history": done.has_history, "um_raw": done.um_raw}
    for ratio in p.simulate.latency_ratios:
        path = night / f"{at_ratio('policy', ratio)}.json"
        if np.isclose(ratio, policy.latency_ratio):
            path.write_text(BundlePaths.of(night).policy.read_text())
            cols[at_ratio("p_insensitive", ratio)] = done.p_insensitive
            cols[at_ratio("p_exceed", ratio)] = done.p_exceed       # the QoS monitor's score (optimize.monitor.monitor_flags)
            cols[at_ratio("seen_slowed", ratio)] = done.seen_slowed
            if "touch_spill_pct" in done.columns:                      # qos.touches: judged
                cols[at_ratio("touch_spill_pct", ratio)] = done.touch_spill_pct
            continue
        at = p.with_as_of(p.base.as_of, ratio)
        solve(at, li_dir, night / "um", night / "features", raw_dir, monitor_model=monitor).write(
            path, night / f"{at_ratio('optimize', ratio)}.json", night / "plots" / f"{at_ratio('frontier', ratio)}.csv",
            night / "plots" / f"{at_ratio('frontier', ratio)}.png", at.optimize.tp)
        models = Models.from_policy(read_policy(path), li_dir, night / "um")
        s = score(models, vms, history)
        cols[at_ratio("p_insensitive", ratio)] = s.p_insensitive
        cols |= _flag_columns(vms, raw_dir, ratio, models, p, monitor)
    pd.DataFrame(cols).to_parquet(night / "scores.parquet", index=False)


def _flag_columns(vms: pd.DataFrame, raw_dir: Location | None, ratio: float, models: Models, p: Params,
                  monitor: MonitorModel | None) -> dict[str, np.ndarray]:
    """The QoS monitor's score and flag of each VM at ``ratio`` (``optimize.monitor.monitor_flags``); none without raw data."""
    if raw_dir is None:
        return {at_ratio("p_exceed", ratio): np.full(len(vms), np.nan),
                at_ratio("seen_slowed", ratio): np.zeros(len(vms), bool)}
    f = monitor_flags(vms, raw_dir, ratio, models, p.qos, monitor)
    judged = {} if f.touch_spill_pct is None else {at_ratio("touch_spill_pct", ratio): f.touch_spill_pct}
    return {at_ratio("p_exceed", ratio): f.p_exceed, at_ratio("seen_slowed", ratio): f.seen_slowed, **judged}


def scores_before(p: Params, night: Path, li_dir: Path, vms: pd.DataFrame, history: pd.DataFrame,
                  raw_dir: Location | None = None, monitor: MonitorModel | None = None) -> None:
    """The VMs running when the first night's next day begins, created before it, scored by that night's models at
    every ``simulate.latency_ratios`` (``scores_before.parquet``, the columns of ``scores.parquet``): a service
    that has run for months decided them too, so `simulate` decides them with the first night's policy rather
    than leave them all local under every policy (which bought every pool on top of local DRAM that could not
    shrink). That night's models may have seen them: `simulate` reports their mispredictions apart."""
    cols: dict[str, Any] = {"vm_id": vms.vm_id.to_numpy()}
    for ratio in p.simulate.latency_ratios:
        models = Models.from_policy(read_policy(night / f"{at_ratio('policy', ratio)}.json"), li_dir, night / "um")
        s = score(models, vms, history)
        cols |= {"has_history": s.has_history, "um_raw": s.um_raw}     # the night's UM model, whatever the ratio
        cols[at_ratio("p_insensitive", ratio)] = s.p_insensitive
        cols |= _flag_columns(vms, raw_dir, ratio, models, p, monitor)
    pd.DataFrame(cols).to_parquet(night / "scores_before.parquet", index=False)


def days_read(last: pd.Timestamp, n_nights: int, train_days: int) -> tuple[date, date]:
    """The creation days of VM features the nights ending at ``last`` use: each one's training window
    (``input_drift``) and next day, with a day's margin."""
    return (last - pd.Timedelta(days=n_nights + train_days - 1)).date(), (last + pd.Timedelta(days=1)).date()


@contextmanager
def snapshots(nights: list[Params], raw_dir: Location, tmp: Path,
              client: Any | None) -> Iterator[list[Callable[[], tuple[pd.DataFrame, pd.DataFrame]]]]:
    """Each night's snapshot (customer percentiles, workload history), what `features` would have
    written that night, one night at a time. With the dask engine the workers compute them from one
    split of the fleet by customer (``features.partitioned``) into a scratch folder, removed on exit: the
    stage's process never reads the ``vms`` table."""
    events = event_columns(read_tables(raw_dir, ["workloads"])["workloads"], WORKLOADS)
    counters = counters_source(raw_dir)
    if client is not None:
        scratch = scratch_folder(tmp, "backtest")
        try:
            parts = partitioned_snapshots(lambda fn, tasks: run_all(client, fn, tasks), raw_dir, counters, events,
                                          [p.features for p in nights], nights[0].engine.partitions, scratch)
            if parts is not None:
                yield [night.read for night in parts]
                return
        finally:
            remove_tree(scratch)
    vms = read_tables(raw_dir, ["vms"])["vms"]
    yield [partial(snapshot, vms, counters, events, p.features) for p in nights]


def night_row(as_of: str, policy: Policy, ev: dict[str, Any], regret: dict[str, float], um: dict[str, Any],
              drift: dict[str, Any]) -> dict[str, Any]:
    """One line of ``nights.csv``: what the night chose, expected and realized, its regret and its inputs' drift."""
    return {
        "as_of": as_of, "evaluation_day": ev["day"], "budget": ev["budget"],
        "li_threshold": policy.li.threshold, "um_target_op": policy.um.target_op,
        "expected_pool": policy.expected.pool_share,
        "expected_mispredictions": policy.expected.mispredictions,
        "realized_pool": ev["combined"]["pool_share"],
        "realized_mispredictions": ev["combined"]["mispredictions_conservative"],
        "realized_unmitigated": ev["combined"]["mispredictions_unmitigated"],
        "mitigations": ev["combined"]["mitigations"], "false_alarms": ev["combined"]["false_alarms"],
        "mitigated_gb_share": ev["combined"]["mitigated_gb_share"],
        "sla_alpha_gb_share": ev["combined"]["sla_alpha_gb_share"],
        "realized_unmitigated_sla_alpha": ev["combined"]["mispredictions_unmitigated_sla_alpha"],
        "monitor_flag_rate": policy.fleet_monitor.flag_rate, **_slowed_calls(ev["combined"]),
        "served_unmitigated": ev["served"]["mispredictions_unmitigated"],
        "realized_severe": ev["combined"]["mispredictions_severe"],
        "realized_worst_case": ev["combined"]["mispredictions_worst_case"],
        "censored": ev["combined"]["censored"], "fp_source": ev["combined"]["fp_source"],
        "li_method": policy.li.method, **regret,
        "um_calibrated_nights_within_target": um["calibrated.nights_within_target"],
        **drift,
    }


def _slowed_calls(combined: dict[str, Any]) -> dict[str, float]:
    """The insensitive calls the scorer finds slowed past the PDM, and those the QoS monitor flagged (NaN where the
    day has no truth to count them)."""
    n = combined.get("false_positives_with_truth")
    if n is None:
        return {"slowed_calls": float("nan"), "slowed_calls_flagged": float("nan")}
    return {"slowed_calls": float(n), "slowed_calls_flagged": float(round((combined.get("monitor_recall") or 0.0) * n))}


def lab_admits(p: Params, li_dir: Path, vm_features: Path, history: pd.DataFrame) -> np.ndarray:
    """Per LI candidate of the night (the first: off), whether the lab admits it (``evaluation.regret.admitted``):
    its calls among the ``optimize.recent_days``' VMs, scored with the night's history as `optimize` scores them,
    charged at the lab's out-of-fold error rate at ``optimize.confidence``. The lab's counts only: the fleet's
    reports and the monitor's flags are what a solver adds to them."""
    o = p.optimize
    lab = li_candidates(pd.read_parquet(li_dir / "heldout_curves.parquet"), o.latency_ratio, o.pdm)
    thresholds = lab.threshold.to_numpy(float)
    li_vm, _, _ = recent_li_shares(p, vm_features, history, li_dir, li_model(li_dir, o.latency_ratio, o.pdm),
                                   thresholds)
    return admitted(li_vm, lab.called.to_numpy(), lab.errors.to_numpy(), o.confidence, o.budget)


def with_fixed_regret(nights: pd.DataFrame, grids: list[tuple[np.ndarray, np.ndarray]], admits: list[np.ndarray]
                      ) -> tuple[pd.DataFrame, tuple[int, int] | None, tuple[int, int] | None]:
    """``nights`` with the best pair fixed over every night in hindsight (``evaluation.regret.best_fixed``) and
    each night's regret against it (the yardstick of the backtest's regret); and the same among the LI thresholds the lab admits
    on every night (``admits``: ``lab_admits`` per night), the yardstick a solver that trusts its lab can reach."""
    pools, left, budget = [g[0] for g in grids], [g[1] for g in grids], float(nights.budget.min())
    fixed = best_fixed(pools, left, budget)
    nights["fixed_pool"] = [float(g[fixed]) if fixed else np.nan for g in pools]
    nights["regret_fixed"] = nights.fixed_pool - nights.chosen_pool
    ok = np.logical_and.reduce(admits)
    best = best_admitted(pools, left, ok, budget)
    nights["admitted_pool"] = [float(g[best]) if best else np.nan for g in pools]
    nights["regret_admitted"] = nights.admitted_pool - nights.chosen_pool
    nights["admitted_thresholds"] = int(ok[1:].sum())
    return nights, fixed, best


def short_history(short: list[TooLittleHistory], trained: bool, as_of: str, asked: int, exc: TooLittleHistory) -> None:
    """A night with too little telemetry before it to train on: skipped at the start of a trace shorter than the
    nights asked (``short`` collects them), an error once a night has trained (later nights have more history)."""
    if trained:
        raise exc
    print(f"backtest: night {as_of} skipped: too little telemetry before it to train on (a trace shorter than "
          f"backtest.nights={asked} needs)")
    short.append(exc)


def summary(nights: pd.DataFrame, skipped: int, fixed: tuple[int, int] | None, candidates: list,
            admitted_pair: tuple[int, int] | None, asked: int | None = None, short: int = 0) -> dict[str, Any]:
    """``metrics/backtest.json``: ``asked``, the nights ``backtest.nights`` asked; ``short``, the first ones skipped
    with too little telemetry before them."""
    return {
        "nights": len(nights), "nights_asked": len(nights) + skipped + short if asked is None else asked,
        "nights_skipped_no_vms": skipped, "nights_skipped_short_history": short,
        "nights_within_budget": int((nights.realized_unmitigated <= nights.budget).sum()),   # left slowed
        "nights_within_budget_raw": int((nights.realized_mispredictions <= nights.budget).sum()),
        "realized_unmitigated_max": float(nights.realized_unmitigated.max()),
        "mitigations_max": float(nights.mitigations.max()),
        "nights_within_budget_sla_alpha": int((nights.realized_unmitigated_sla_alpha <= nights.budget).sum()),
        "mitigated_gb_share_mean": float(nights.mitigated_gb_share.mean()),
        "sla_alpha_gb_share_mean": float(nights.sla_alpha_gb_share.mean()),
        "nights_within_budget_worst_case": int((nights.realized_worst_case <= nights.budget).sum()),
        "realized_mispredictions_max": float(nights.realized_mispredictions.max()),
        "realized_pool_mean": float(nights.realized_pool.mean()),
        "regret_mean": float(nights.regret.mean()), "regret_max": float(nights.regret.max()),
        "regret_raw_mean": float(nights.regret_raw.mean()),
        "regret_fixed_mean": float(nights.regret_fixed.mean()), "regret_fixed_max": float(nights.regret_fixed.max()),
        "best_fixed_pair": None if fixed is None else pair(candidates, fixed),
        "regret_admitted_mean": float(nights.regret_admitted.mean()),
        "regret_admitted_max": float(nights.regret_admitted.max()),
        "admitted_thresholds": int(nights.admitted_thresholds.iloc[0]),
        **_monitor_recall(nights), **refusing_summary(nights),
        "best_admitted_pair": None if admitted_pair is None else pair(candidates, admitted_pair)}


def _monitor_recall(nights: pd.DataFrame) -> dict[str, Any]:
    """Over the nights, the slowed insensitive calls the QoS monitor flagged (the fleet's recall of the monitor, the
    figure the lab's held-out recall stands for), and the nights it flagged at least 80% of them on."""
    if "slowed_calls" not in nights.columns or nights.slowed_calls.isna().all():
        return {}
    n, caught = float(nights.slowed_calls.sum()), float(nights.slowed_calls_flagged.sum())
    some = nights[nights.slowed_calls > 0]
    return {"monitor_slowed_calls": int(n), "monitor_slowed_calls_flagged": int(caught),
            "monitor_recall": caught / n if n else None,
            "nights_monitor_recall_at_least_80pct": int((some.slowed_calls_flagged >= 0.8 * some.slowed_calls).sum()),
            "nights_with_slowed_calls": len(some)}


def refusing_summary(nights: pd.DataFrame) -> dict[str, Any]:
    """The same figures with the service refusing the LI call to a flagged customer and VM type
    (``evaluation.refusal``): what the service's memory of the monitor's flags changes."""
    if "realized_unmitigated_refusing" not in nights.columns:
        return {}
    n, caught = float(nights.slowed_calls_refusing.sum()), float(nights.slowed_calls_flagged_refusing.sum())
    return {"refusing": {
        "nights_within_budget": int((nights.realized_unmitigated_refusing <= nights.budget).sum()),
        "served_nights_within_budget": int((nights.served_unmitigated_refusing <= nights.budget).sum()),
        "realized_unmitigated_max": float(nights.realized_unmitigated_refusing.max()),
        "mitigations_max": float(nights.mitigations_refusing.max()),
        "realized_pool_mean": float(nights.realized_pool_refusing.mean()),
        "refused_calls_mean": float(nights.refused_calls.mean()),
        "monitor_slowed_calls": int(n), "monitor_recall": caught / n if n else None}}


def summary_line(m: dict[str, Any]) -> str:
    """The stage's last line, from ``summary``'s figures."""
    short = m.get("nights_skipped_short_history", 0)
    asked = (f" of the {m['nights_asked']} asked ({short} at the start had too little telemetry before them to "
             "train on)") if short else ""
    return (f"backtest: {m['nights']} nights{asked}; realized mispredictions within the budget on "
            f"{m['nights_within_budget']} of {m['nights']} after the QoS monitor, {m['nights_within_budget_raw']} "
            f"before it (worst case, censored VMs counted overpredicted: {m['nights_within_budget_worst_case']}); "
            f"pool share {m['realized_pool_mean']:.1%} on average; mean regret {100 * m['regret_mean']:.2f} points "
            f"(max {100 * m['regret_max']:.2f}) against each night's best pair in hindsight, "
            f"{100 * m['regret_fixed_mean']:.2f} against the best pair fixed over the nights, "
            f"{100 * m['regret_admitted_mean']:.2f} against the best fixed pair among the LI thresholds the lab admits"
            + _refusing_line(m.get("refusing")))


def _refusing_line(r: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    return (f"; with the service refusing the LI call to a flagged customer and VM type (qos.refusal_hours): within "
            f"the budget on {r['nights_within_budget']} nights after the monitor, pool share "
            f"{r['realized_pool_mean']:.1%}, {r['refused_calls_mean']:.2%} of the VMs refused")


def pair(candidates: list, at: tuple[int, int]) -> dict[str, float | None]:
    """A candidate pair by its indices, as a policy names it (None: that model off)."""
    t = float(candidates[0][at[0]])
    return {"li_threshold": t if np.isfinite(t) else None, "um_target_op": candidates[1][at[1]]}


def plot_nights(nights: pd.DataFrame, path: Path) -> None:
    plt = pyplot()
    x = pd.to_datetime(nights.evaluation_day)
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4))
    a.plot(x, 100 * nights.realized_mispredictions, marker="o", label="realized (FP + every OP)")
    a.plot(x, 100 * nights.realized_unmitigated, marker="s", label="left slowed by the QoS monitor")
    a.plot(x, 100 * nights.realized_severe, marker=".", label="realized, past the PDM")
    a.plot(x, 100 * nights.expected_mispredictions, ls="--", label="expected by the solver")
    a.plot(x, 100 * nights.budget, ls=":", color="k", label="budget (100 - TP)")
    a.set(ylabel="% of next-day VMs", title="Mispredictions per night")
    b.plot(x, 100 * nights.realized_pool, marker="o", label="realized")
    b.plot(x, 100 * nights.expected_pool, ls="--", label="expected")
    b.set(ylabel="memory on the pool (% of GB)", title="Pool share per night")
    c.plot(x, nights.ks_max, marker="o", label="max KS over UM inputs")
    c.plot(x, nights.psi_max, marker="s", label="max PSI over UM inputs")
    c.set(title="Input drift: next day vs training window")
    from matplotlib.dates import DateFormatter, DayLocator
    step = max(1, len(x) // 10)            # one tick per night, at most about ten
    for ax in (a, b, c):
        ax.legend(fontsize=8)
        ax.xaxis.set_major_locator(DayLocator(interval=step))
        ax.xaxis.set_major_formatter(DateFormatter("%m-%d"))
        ax.xaxis.set_minor_locator(DayLocator())
        ax.set_xlabel("evaluation day")
        ax.tick_params(axis="x", rotation=45)
    save_figure(fig, path)
