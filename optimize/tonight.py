"""Tonight's policy (the `optimize` stage's work): the LI candidates from the lab's held-out curves, the UM
candidates from the backtest nights, the recent VMs' scores, the fleet's evidence (measured slowdowns and the
QoS monitor's flags), and the solver's choice, written out as ``policy.json``'s document.

Reads only what was known at the end of ``base.as_of`` (the stage's docstring says what each input is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import beta

from pond.core.days import days_up_to, end_of, in_days_up_to
from pond.core.errors import ConfigError, ModelError
from pond.core.params import Params
from pond.core.plots import pyplot, save_figure
from pond.features.history import KEY
from pond.models.decision import served_name
from pond.models.inference import join_history, load_verified
from pond.models.monitor_runtime import MonitorModel
from pond.models.names import li_model_name, served_of
from pond.models.policy import Policy, write_policy
from pond.models.runtime import onnx_p_insensitive, p_insensitive_rows
from pond.optimize.evidence import key_counts, key_labels, report_labels, report_summary, tonight
from pond.optimize.monitor import (
    FIRST_HOUR,
    POOL_COUNTERS,
    RECORDED,
    band_recall,
    false_alarm_counts,
    false_alarm_rate,
    lab_recall,
    nearest_counts,
    over_recall,
    own_rows,
    pool_scores,
    recall,
    recorded_scores,
)
from pond.optimize.solver import Credit, Grid, NextNight, best, called_shares, charged_rate, grid, more_cautious
from pond.telemetry.atomic import write_json
from pond.telemetry.io import COUNTERS, find_table, read_days, read_optional, table_columns
from pond.telemetry.storage import Location

BUDGETS_PCT = np.round(np.arange(0.0, 10.01, 0.25), 2)
VARIANTS = {"combined": (slice(None), slice(None)), "li_only": (slice(None), slice(0, 1)),
            "um_only": (slice(0, 1), slice(None))}


def li_candidates(curves: pd.DataFrame, ratio: float, pdm: float) -> pd.DataFrame:
    c = curves[np.isclose(curves.latency_ratio, ratio) & np.isclose(curves.pdm, pdm)]
    if c.empty:
        raise ConfigError(f"no LI curve for latency_ratio={ratio}, pdm={pdm}; add them to train_li params")
    off = pd.DataFrame({"threshold": [np.inf], "called": [0], "errors": [0], "n": [c.n.iloc[0]]})
    return pd.concat([off, c[["threshold", "called", "errors", "n"]]], ignore_index=True)


def um_candidates(nights: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(targets, UM share per target and night, OP per target and night); row 0 = UM off."""
    if nights.empty:
        raise ModelError("the UM backtest scored no night before base.as_of: move as_of later or lower "
                         "train_um.backtest_nights / calib_lag_days / curve_lag_days")
    um = nights.pivot_table(index="target_op", columns="as_of", values="um")
    op = nights.pivot_table(index="target_op", columns="as_of", values="op").reindex_like(um)
    zeros = np.zeros((1, um.shape[1]))
    return (np.r_[0.0, um.index.to_numpy(float)], np.vstack([zeros, um.to_numpy(float)]),
            np.vstack([zeros, op.to_numpy(float)]))


SLICE = 131_072    # VMs joined with the history's ~150 columns at a time (a whole week of 10M VMs took 2.7 GiB)


def li_scores(rows: pd.DataFrame, history: pd.DataFrame, sess: Any, model: dict) -> tuple[np.ndarray, np.ndarray]:
    """(P(insensitive), whether the model may call it) of each VM row, scored with the snapshot
    ``history``: callable only where the VM had history when it was created (the snapshot also
    holds later VMs' own counters). ``rows`` needs the history key and ``has_history``."""
    p, known = np.empty(len(rows)), np.empty(len(rows), bool)
    for start in range(0, len(rows), SLICE):   # each score depends on its own row only
        part = rows.iloc[start:start + SLICE]
        enriched = join_history(part, history)
        X = enriched.reindex(columns=model["features"]).to_numpy(np.float32)
        p[start:start + len(part)] = onnx_p_insensitive(sess, X, model["classes"])
        known[start:start + len(part)] = (part["has_history"].to_numpy(bool) & enriched["n_vms"].notna().to_numpy()
                                          & ~np.isnan(X).all(axis=1))
    return p, known


@dataclass(frozen=True)
class Recent:
    """The VMs created in the ``optimize.recent_days`` up to the end of ``base.as_of``, scored with the as-of
    history (``li_scores``): whom the next day's VMs resemble, and whom the QoS monitor has watched."""
    vms: pd.DataFrame        # vm_id, created_at, memory_gb
    p: np.ndarray            # P(insensitive) by the workload history
    known: np.ndarray        # whether the model may call it (history when it was created)

    def shares(self, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(share of VMs, share of GB) the LI model calls insensitive at each threshold; the share with history."""
        vms, gb = called_shares(self.p, self.known, self.vms.memory_gb.to_numpy(float), thresholds)
        return vms, gb, float(self.known.mean())


def recent_scores(params: Params, vm_features: Path, history: pd.DataFrame, sess: Any, model: dict) -> Recent:
    """``Recent`` read from ``vm_features``."""
    o, as_of = params.optimize, params.base.as_of
    workload = ["workload_id"] if "workload_id" in table_columns(vm_features) else []   # the pool's mechanisms'
    vmf = read_days(vm_features, *days_up_to(as_of, o.recent_days),
                    columns=["vm_id", *KEY, "created_at", "memory_gb", "has_history", *workload])
    recent = vmf[in_days_up_to(vmf.created_at, as_of, o.recent_days)]
    if recent.empty:
        raise ConfigError(f"no VMs were created in the {o.recent_days} days up to {as_of}: move base.as_of")
    p, known = li_scores(recent, history, sess, model)
    return Recent(recent[["vm_id", "created_at", "memory_gb", *workload]].reset_index(drop=True), p, known)


def li_model(li_dir: Path, ratio: float, pdm: float) -> dict[str, Any]:
    """The LI model's manifest entry for this latency ratio and PDM."""
    name = li_model_name(ratio, pdm)
    models = json.loads((li_dir / "manifest.json").read_text())["models"]
    if name not in models:
        raise ModelError(f"no LI model {name} in {li_dir}; train_li.latency_ratios/pdms must include it")
    return models[name]


def recent_li_shares(params: Params, vm_features: Path, history: pd.DataFrame, li_dir: Path, model: dict,
                     thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``Recent.shares`` of the ``recent_scores``."""
    sess = load_verified(li_dir / model["file"], model["sha256"])
    return recent_scores(params, vm_features, history, sess, model).shares(thresholds)


@dataclass(frozen=True)
class FleetEvidence:
    """What the fleet's measured slowdowns say per LI threshold (``fleet_evidence``)."""
    called: np.ndarray            # labelled history keys called insensitive
    errors: np.ndarray            # their shares of sensitive VMs, summed
    tonight: NextNight | None     # tonight's error rate among called VMs, from the measured days; None: no reports
    stats: dict[str, int]         # what was used and what was left out, and why

    def add_to(self, lab: pd.DataFrame) -> pd.DataFrame:
        """The lab's LI candidates with the fleet's keys counted beside its workloads."""
        return lab.assign(called=lab.called + self.called, errors=lab.errors + self.errors)


def fleet_evidence(params: Params, raw_dir: Location | None, vm_features: Path, history: pd.DataFrame,
                   li_dir: Path, model: dict, thresholds: np.ndarray) -> FleetEvidence:
    """The fleet's measured slowdowns (``vm_slowdowns``, optional: no evidence without it) per threshold.
    Only what was known by the end of ``base.as_of``: reports measured by then, of VMs created in the
    ``optimize.report_days`` up to it, scored with the as-of history as `recent_scores` scores recent VMs.
    A report of a VM this data set does not hold, of one without history, or measured before its VM was
    created, is counted and left out, never an error."""
    o, as_of = params.optimize, params.base.as_of
    zeros = np.zeros(len(thresholds))
    reports = read_optional(raw_dir, "vm_slowdowns") if raw_dir is not None and o.use_reports else None
    if reports is None:
        return FleetEvidence(zeros, zeros, None, {"rows": 0})
    vmf = read_days(vm_features, *days_up_to(as_of, o.report_days),
                    columns=["vm_id", *KEY, "created_at", "has_history"])
    sensitive, stats = report_labels(reports, as_of, o.latency_ratio, o.pdm, vmf.set_index("vm_id").created_at)
    vms = vmf.merge(sensitive.reset_index(), on="vm_id", how="inner")
    p, known = li_scores(vms, history, load_verified(li_dir / model["file"], model["sha256"]), model)
    used = vms[known]
    keys = key_labels(used[list(KEY)], p[known], used.sensitive.to_numpy())
    called, errors = key_counts(keys.p.to_numpy(), keys.sensitive.to_numpy(), thresholds)
    days = used.created_at.dt.floor("D").to_numpy()
    stats.update(vms_not_in_window=len(sensitive) - len(vms), vms_without_history=int((~known).sum()),
                 vms_used=len(used), keys=len(keys), days=len(np.unique(days)))
    return FleetEvidence(called, errors, tonight(days, p[known], used.sensitive.to_numpy(), thresholds), stats)


@dataclass(frozen=True)
class MonitorEvidence:
    """What the QoS monitor flagged among the recent VMs, per LI threshold (``monitor_evidence``)."""
    tonight: NextNight | None     # tonight's error rate among called VMs, from the flags; None: nothing watched
    flags: NextNight | None       # tonight's share of called VMs flagged (the capacity they spend); None: as above
    stats: dict[str, Any]         # what was watched, what was flagged, the monitor's lab error rates
    recall_counts: tuple[np.ndarray, np.ndarray] | None = None   # per LI candidate, the monitor model's held-out
    # (caught, errors) among the lab's LI errors at it, all on the pool (``band_recall``)
    divisor: np.ndarray | None = None  # per LI candidate, the recall tonight's flags were divided by
    watched: tuple[np.ndarray, np.ndarray] | None = None  # per LI candidate, the watched VMs called at it and their
    # flags (the monitor model's only)
    false_alarm: np.ndarray | None = None  # per LI candidate, the false-alarm rate taken off the flag rate
    # (``optimize.discount_false_alarms``; None: every flag counted as an error)

    def in_place_of(self, lab: pd.DataFrame) -> pd.DataFrame:
        """The LI candidates' counts with the monitor model's in place of the lab's where it watched calls
        (``optimize.lab_floor: false``): the VMs called at each threshold, and their flags divided by the recall as
        errors. A threshold no watched VM reached keeps the lab's counts."""
        if self.watched is None or self.divisor is None:
            return lab
        called, flagged = self.watched
        rho = np.maximum(self.divisor, 1e-9)
        phi = np.zeros_like(rho) if self.false_alarm is None else np.where(self.false_alarm < rho, self.false_alarm, 0)
        errors = np.clip((flagged - phi * called) / (rho - phi), 0.0, called)
        seen = called > 0
        return lab.assign(called=np.where(seen, called, lab.called), errors=np.where(seen, errors, lab.errors))

    def spare(self, params: Params, li_vm: np.ndarray, vms_per_day: float) -> np.ndarray | None:
        """Per LI candidate, the share of tonight's VMs the monitor can still mitigate once the LI calls' flags
        (their ``confidence`` quantile) have spent its capacity: ``floor(qos.max_mitigated_share x VMs a day)``.
        None where the monitor is not credited (``optimize.credit_mitigation``); 0 where it moves only the touches it
        judges to suffer (``qos.touches: judged``), which the budget still counts. Without counters it sees no LI
        call."""
        if not params.optimize.credit_mitigation:
            return None
        if params.qos.touches == "judged":        # a touch is moved only where the monitor judges it: none counted on
            return np.zeros(len(li_vm))
        cap = np.floor(params.qos.max_mitigated_share * vms_per_day + 1e-9) / max(vms_per_day, 1.0)
        level = params.optimize.confidence
        flags = (np.zeros(len(li_vm)) if self.flags is None
                 else self.flags.mean if level is None else np.clip(self.flags.quantile(level), 0.0, 1.0))
        return np.maximum(cap - li_vm * flags, 0.0)

    def credit(self, params: Params, vms_per_day: float) -> Credit | None:
        """The capacity shared by all the monitor flags, the LI errors it catches not charged (``optimize.solver``):
        ``floor(qos.max_mitigated_share x VMs a day)``, per LI candidate the monitor model's held-out recall among
        the lab's LI errors at it with the whole footprint on the pool (its ``1 - confidence`` quantile under the
        Jeffreys posterior: no error to judge it on, no credit to speak of) and tonight's flags among the calls at
        ``1 - confidence`` and ``confidence``. None unless ``credit_mitigation`` and ``credit_caught_calls``
        are on and the flags are the monitor model's (never the first-hour monitor's)."""
        o = params.optimize
        if not (o.credit_mitigation and o.credit_caught_calls) or self.recall_counts is None or self.flags is None:
            return None
        k, n = self.recall_counts
        level = o.confidence
        rho = (k + 0.5) / (n + 1.0) if level is None else beta.ppf(1.0 - level, k + 0.5, n - k + 0.5)
        cap = np.floor(params.qos.max_mitigated_share * vms_per_day + 1e-9) / max(vms_per_day, 1.0)
        lo, hi = ((self.flags.mean, self.flags.mean) if level is None else
                  (np.clip(self.flags.quantile(q), 0.0, 1.0) for q in (1.0 - level, level)))
        return Credit(float(cap), np.asarray(rho, float), lo, hi, touches_mitigated=params.qos.touches == "every")


def monitor_evidence(params: Params, raw_dir: Location | None, recent: Recent, sess: Any, model: dict,
                     lab: pd.DataFrame, monitor: MonitorModel | None = None, lab_scores: pd.DataFrame | None = None
                     ) -> MonitorEvidence:
    """The QoS monitor's flags (``optimize.monitor``) on the recent VMs the model may call whose first window
    ended by the end of ``base.as_of`` (``features.counter_delay_s`` after creation): their counters under the pool
    scored by the monitor's model where the data allow, else their own counters by tonight's LI model, flagged at
    ``qos.threshold``. Reads counters, never truth; a VM without counters is not watched. ``lab_scores``: the LI
    model's out-of-fold scores per lab workload (``heldout_scores.parquet``), which say the monitor's recall among
    the LI errors per candidate; without them its recall over every run past the PDM stands for each."""
    o = params.optimize
    if raw_dir is None or not o.use_monitor or find_table(raw_dir, COUNTERS) is None:
        return MonitorEvidence(None, None, {"vms_watched": 0})
    end = end_of(params.base.as_of)
    ended = (recent.vms.created_at + pd.Timedelta(seconds=params.features.counter_delay_s) <= end).to_numpy()
    watch = recent.known & ended
    p_exceed = np.full(len(recent.p), np.nan)
    source, on_pool = POOL_COUNTERS, pool_scores(recent.vms[watch], raw_dir, o.latency_ratio, monitor)
    if on_pool is None:                             # a provider's: what its hypervisor recorded by tonight
        source, on_pool = RECORDED, recorded_scores(recent.vms[watch], raw_dir, o.latency_ratio, monitor, end)
        on_pool = on_pool if on_pool is not None and np.isfinite(on_pool).any() else None
    if on_pool is not None and monitor is not None and monitor.full_pool_counts(o.latency_ratio) is not None:
        p_exceed[watch] = on_pool
        threshold = monitor.threshold(o.latency_ratio, whole=source == POOL_COUNTERS)
        c = monitor.full_pool_counts(o.latency_ratio)
        caught, sensitive, alarms, insensitive = c["caught"], c["exceeding"], c["alarms"], c["within"]
    else:
        X = own_rows(recent.vms[watch], raw_dir).reindex(columns=model["features"]).to_numpy(np.float32)
        p_exceed[watch] = 1.0 - p_insensitive_rows(sess, X, model["classes"])
        threshold, source = params.qos.threshold, FIRST_HOUR
        caught, sensitive, alarms, insensitive = lab_recall(lab, params.qos.threshold)
    seen = ~np.isnan(p_exceed)
    flagged = p_exceed[seen] >= threshold
    r = recall(caught, sensitive)
    days = recent.vms.created_at[seen].dt.floor("D").to_numpy()
    stats = {"monitor": source, "vms_watched": int(seen.sum()), "vms_flagged": int(flagged.sum()),
             "vms_window_not_ended": int((recent.known & ~ended).sum()),
             "vms_without_counters": int((watch & ~seen).sum()), "days": len(np.unique(days)),
             "lab_recall": r, "lab_false_alarm_rate": recall(alarms, insensitive)}
    if not seen.any():
        return MonitorEvidence(None, None, stats)
    flags = tonight(days, recent.p[seen], flagged.astype(float), lab.threshold.to_numpy())
    if source not in (POOL_COUNTERS, RECORDED):
        return MonitorEvidence(over_recall(flags, r), flags, stats)
    thresholds = lab.threshold.to_numpy(float)
    shares = monitor.flag_shares(o.latency_ratio) if monitor else None
    near = nearest_counts(lab_scores, shares, thresholds, o.recall_errors) if o.recall_errors else None
    counts = band_recall(lab_scores, shares, thresholds) if near is None else near
    if counts is None:
        counts = (np.full(len(thresholds), float(caught)), np.full(len(thresholds), float(sensitive)))
    divisor = np.full(len(thresholds), r) if near is None else (near[0] + 0.5) / (near[1] + 1.0)   # Jeffreys mean
    stats["recall_by_threshold"] = near is not None
    alarms_called = false_alarm_counts(lab_scores, shares, thresholds) if o.discount_false_alarms else None
    phi = None if alarms_called is None else false_alarm_rate(alarms_called)
    watched = key_counts(recent.p[seen], flagged.astype(float), thresholds)
    return MonitorEvidence(over_recall(flags, divisor, 0.0 if phi is None else phi), flags, stats, counts, divisor,
                           watched, phi)


def night_days(nights: pd.DataFrame, as_of: str) -> np.ndarray:
    """Each UM backtest night's as-of day relative to ``as_of``, in `um_candidates`' column order:
    the night ending at ``as_of`` (tonight, whose next day the policy serves) is day 0."""
    days = pd.to_datetime(np.sort(nights.as_of.astype(str).unique())) - pd.Timestamp(as_of)
    return days.days.to_numpy(float)


def choose(params: Params, li: pd.DataFrame, li_vm: np.ndarray, li_gb: np.ndarray, um_nights: pd.DataFrame,
           li_next: NextNight | None = None, spare: np.ndarray | None = None, credit: Credit | None = None
           ) -> tuple[Grid, tuple[int, int] | None, np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate pair's grid and the chosen pair (None: none within the budget), with the UM
    candidates (targets, UM and OP per night) it was chosen from. ``li``: the LI candidates' counts (the
    lab's, and the fleet's keys where measured); ``li_next``: the fleet's measured days (`FleetEvidence`,
    `MonitorEvidence`); ``spare``: the QoS monitor's capacity per LI candidate (`MonitorEvidence.spare`);
    ``credit``: the capacity shared by all it flags, caught LI errors not charged (`MonitorEvidence.credit`)."""
    o = params.optimize
    targets, um_n, op_n = um_candidates(um_nights)
    g = grid(li_gb, li_vm, li.called.to_numpy(), li.errors.to_numpy(), um_n, op_n, o.confidence, o.samples,
             params.base.seed, night_days(um_nights, params.base.as_of), li_next, spare, credit)
    return g, best(g.pool, g.bound, o.budget), targets, um_n, op_n


@dataclass
class Tonight:
    """What the stage writes: ``policy.json``, its metrics, the frontier and what its x axis counts; and lines
    to print."""

    policy: Policy
    metrics: dict[str, Any]
    frontier: pd.DataFrame
    what: str
    notes: list[str]

    def write(self, policy_path: Path, metrics_path: Path, frontier_path: Path, plot_path: Path, tp: float) -> None:
        """``policy.json``, its metrics, the frontier and its figure (Pond Fig. 20), each written whole."""
        write_policy(policy_path, self.policy)
        write_json(metrics_path, self.metrics)
        frontier_path.parent.mkdir(parents=True, exist_ok=True)
        self.frontier.round(5).to_csv(frontier_path, index=False)
        plot_frontier(self.frontier, tp, plot_path, self.what)


def plot_frontier(frontier: pd.DataFrame, tp: float, path: Path, what: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, g in frontier.groupby("method"):
        ax.plot(g.budget_pct, g.pool_pct, label=method)
    ax.axvline(100 - tp, ls=":", color="k", label=f"budget at TP {tp:g}")
    ax.set(xlabel=f"{what} (% of VMs)", ylabel="memory on the pool (% of GB)",
           title="Pool share vs misprediction budget (Pond Fig. 20)")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)


def served_policy(serve: str, pool_cap: float | None, answer: dict[str, Any] | None, ratio: float
                  ) -> tuple[str, float | None, str]:
    """(policy, pool cap) the service applies, and a line saying why. ``serve: answer`` takes `simulate`'s sizing
    answer at ``ratio`` (its ``answer`` metrics: the policy named, decided or not, with its cap); where there is
    none (no `simulate` yet, no policy within the budget, a name the service cannot apply) the solver's own
    combined rule, uncapped. Any other ``serve`` is the operator's choice, applied as given."""
    if serve != "answer":
        return serve, pool_cap, f"optimize: the service applies {serve} (optimize.serve, pool cap {pool_cap})"
    row = (answer or {}).get(f"{ratio:g}", {}).get("policy")
    got = served_of(row) if row else None
    if got is None:
        why = ("no sizing answer was given (`pond optimize --answer metrics/simulate.json`)" if answer is None else
               f"simulate's answer at {ratio:g} is {row or 'none (no nightly policy within the budget)'}")
        return "combined", None, f"optimize: the service applies the solver's combined rule: {why}"
    verdict = "decided" if answer[f"{ratio:g}"].get("decided", True) else "undecided, the solver's own"
    return got[0], got[1], f"optimize: the service applies simulate's sizing answer {row} ({verdict})"


def solve(params: Params, li_dir: Path, um_dir: Path, features_dir: Path, raw_dir: Location | None = None,
          answer: dict[str, Any] | None = None, monitor_model: MonitorModel | None = None) -> Tonight:
    """Tonight's policy for the PDM, TP and latency ratio in ``params.optimize``; ``answer``: `simulate`'s sizing
    answer per ratio (its metrics' ``answer``), which ``optimize.serve: answer`` serves; ``monitor_model``: the QoS
    monitor's model, whose flags are the fleet's evidence where the data allow (``monitor_evidence``)."""
    o, as_of = params.optimize, params.base.as_of
    pdm, tp, ratio, level = o.pdm, o.tp, o.latency_ratio, o.confidence
    um_manifest = json.loads((um_dir / "manifest.json").read_text())
    model = li_model(li_dir, ratio, pdm)
    lab = li_candidates(pd.read_parquet(li_dir / "heldout_curves.parquet"), ratio, pdm)
    history = pd.read_parquet(features_dir / "snapshot" / "workload_history.parquet")
    sess = load_verified(li_dir / model["file"], model["sha256"])
    recent = recent_scores(params, features_dir / "vm_features.parquet", history, sess, model)
    li_vm, li_gb, h = recent.shares(lab.threshold.to_numpy())
    fleet = fleet_evidence(params, raw_dir, features_dir / "vm_features.parquet", history, li_dir, model,
                           lab.threshold.to_numpy())
    notes = [f"optimize: {report_summary(fleet.stats)}"] if fleet.stats["rows"] else []
    scores = li_dir / "heldout_scores.parquet"           # absent from a model trained before it was kept
    lab_scores = pd.read_parquet(scores) if scores.exists() else None
    if lab_scores is not None:
        lab_scores = lab_scores[np.isclose(lab_scores.latency_ratio, ratio) & np.isclose(lab_scores.pdm, pdm)]
    monitor = monitor_evidence(params, raw_dir, recent, sess, model, lab, monitor_model, lab_scores)
    li_next = more_cautious(fleet.tonight, monitor.tonight, level)
    spare = monitor.spare(params, li_vm, len(recent.vms) / o.recent_days)
    credit = monitor.credit(params, len(recent.vms) / o.recent_days)
    li = fleet.add_to(lab) if o.lab_floor else monitor.in_place_of(fleet.add_to(lab))
    g, choice, targets, um_n, _op_n = choose(params, li, li_vm, li_gb,
                                            pd.read_parquet(um_dir / "heldout_nights.parquet"), li_next, spare, credit)
    budget = o.budget
    if choice is None:
        raise ConfigError(f"no policy meets TP={tp}: even placing nothing on the pool is counted as infeasible")
    i, j = choice
    q = charged_rate(li.called.to_numpy(), li.errors.to_numpy(), li_next)
    offsets = um_manifest["offsets"]
    offset = 0.0 if j == 0 else offsets.get(f"{targets[j]:g}")
    if offset is None:
        raise ModelError(f"UM manifest has no conformal offset for target {targets[j]:g}")
    fp_mean = li_vm[i] * q[i]
    raw = {
        "as_of": as_of, "pdm": pdm, "tp": tp, "latency_ratio": ratio,
        "confidence": level, "history_share": h,
        "misprediction_budget": budget,
        "li": {"enabled": bool(i > 0), "threshold": float(li.threshold[i]) if i > 0 else None,
               "model": model["file"], "sha256": model["sha256"], "method": model.get("method", "random_forest"),
               "features": model["features"], "classes": model["classes"],
               "expected_li": float(li_vm[i]), "expected_fp": float(fp_mean), "fp_bound": float(g.bound[i, 0]),
               "error_rate": float(q[i]), "lab_called": int(lab.called[i]), "lab_errors": int(lab.errors[i]),
               "fleet_called": int(fleet.called[i]), "fleet_errors": float(fleet.errors[i])},
        "fleet_reports": fleet.stats,
        "fleet_monitor": {**monitor.stats, "flag_rate": (float(monitor.tonight.mean[i]) if monitor.tonight is not None
                                                          else None),
                          "recall_divisor": None if monitor.divisor is None else float(monitor.divisor[i]),
                          "false_alarm_discount": (None if monitor.false_alarm is None
                                                   else float(monitor.false_alarm[i])),
                          "mitigation_spare": None if spare is None else float(spare[i]),
                          **({} if credit is None else
                             {"li_errors_caught": credit.caught_share(i, float(li_vm[i]), float(q[i]), float(g.op[j])),
                              "li_error_recall": float(np.broadcast_to(credit.recall, li_vm.shape)[i]),
                              "li_error_workloads": float(monitor.recall_counts[1][i])
                              if monitor.recall_counts is not None else None})},
        "um": {"enabled": bool(j > 0), "target_op": float(targets[j]), "offset": float(offset),
               "model": um_manifest["file"], "sha256": um_manifest["sha256"],
               "expected_um": float(um_n[j].mean()), "expected_op": float(g.mean[0, j]),
               "op_bound": float(g.bound[0, j])},
        "expected": {"pool_share": float(g.pool[i, j]), "mispredictions": float(g.mean[i, j]),
                     "mispredictions_bound": float(g.bound[i, j])},
    }
    alternatives = {}
    for alt in ("li_only", "um_only"):
        si, sj = VARIANTS[alt]
        c = best(g.pool[si, sj], g.bound[si, sj], budget) or (0, 0)
        ai, aj = (c[0], 0) if alt == "li_only" else (0, c[1])
        alternatives[alt] = {
            "li_threshold": float(li.threshold[ai]) if ai > 0 else None,
            "um_offset": float(offsets[f"{targets[aj]:g}"]) if aj > 0 else None,
            "um_target_op": float(targets[aj]), "expected_pool_share": float(g.pool[ai, aj])}
    serve, cap, why = served_policy(o.serve, o.pool_cap, answer, ratio)
    notes.append(why)
    policy = Policy.model_validate({**raw, "alternatives": alternatives, "serve": {"policy": serve, "pool_cap": cap}})
    metrics = {"pool_share": policy.expected.pool_share,
               "mispredictions": policy.expected.mispredictions,
               "mispredictions_bound": policy.expected.mispredictions_bound,
               "li_share": float(li_vm[i]), "li_threshold": policy.li.threshold,
               "li_error_rate": float(q[i]), "um_share": float(um_n[j].mean()),
               "um_target_op": float(targets[j]), "um_nights": int(um_n.shape[1]),
               "history_share": h, "fleet_keys": fleet.stats.get("keys", 0),
               "monitor_vms": monitor.stats["vms_watched"]}
    notes.append(f"optimize: li threshold {policy.li.threshold} ({policy.li.method}), um target "
                 f"{policy.um.target_op}, pool share {g.pool[i, j]:.3f}, mispredictions {g.mean[i, j]:.4f} "
                 f"(bound {g.bound[i, j]:.4f}) within {budget:.3f}; the service applies {served_name(policy)}")
    what = "mispredictions the QoS monitor leaves" if spare is not None else "scheduling mispredictions"
    return Tonight(policy, metrics, frontier(g), what, notes)


def frontier(g: Grid) -> pd.DataFrame:
    """Pool share (%) at each misprediction budget for the combined policy, LI only and UM only (Pond Fig. 20)."""
    rows = []
    for budget in BUDGETS_PCT:  # 41 budgets x 3 policies over a ~100 x 12 grid
        for method, (si, sj) in VARIANTS.items():
            c = best(g.pool[si, sj], g.bound[si, sj], budget / 100)
            rows.append({"method": method, "budget_pct": budget,
                         "pool_pct": 100 * float(g.pool[si, sj][c]) if c is not None else 0.0})
    return pd.DataFrame(rows)
