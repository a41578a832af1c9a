"""The monitor model as `train_monitor` trains it: judged on lab workloads it never saw, beside the LI model applied
to the same counters and Memstrata's single counter (the L3 miss latency), then fit on every spill run and exported.

Every method flags a run when its score reaches a threshold set, per latency ratio, so that at most
``max_false_alarm`` of the runs within the PDM are flagged at ``fa_confidence`` (a threshold set at the rate itself
overshoots it on other workloads about half the time); the threshold comes from the training workloads' own
out-of-fold scores (inner folds), never from the workloads it is judged on. Runs with nothing on the pool are trained on (they show the model what a run
that is not slowed looks like) but not judged: the monitor watches VMs with memory on the pool.

A VM all on the pool is an insensitive call, and the calls are the workloads the LI model finds insensitive: the
monitor's second threshold per ratio is set by the same rule on the runs all on the pool of the lab workloads an LI
model that never saw them calls (``train_monitor.call_level``). Among every spill run, those within the PDM
include workloads the LI model would never put on the pool, which the monitor scores high; set there, the threshold
passes over the calls' errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pond.core.errors import ContractError
from pond.core.params import MonitorParams
from pond.models.li import li_labels, make_li_model
from pond.models.monitor import fit_stall_rule, flag_threshold
from pond.models.monitor_features import LATENCY_RATIO, POOL_SHARE, POOL_STALLS, either, reads_stalls
from pond.models.onnx_export import boundary_rows, check_parity, export_li, forest_splits, nan_rows
from pond.models.runtime import sha256

METHODS = ("monitor", "li_model", "l3_miss_latency", "pool_stalls")
FA_GRID = np.round(np.arange(0.0, 0.2001, 0.005), 3)
Scorer = Callable[[np.ndarray], np.ndarray]          # rows of the runs -> flag score (higher: more likely slowed)


@dataclass(frozen=True)
class Lab:
    """The spill runs (``X``: monitor features, ``exceeds``, ``workload``, ``ratio``, ``spilled``) and each
    workload's local features (``local``, indexed by workload) with its LI label per ratio (``li``)."""
    X: np.ndarray
    exceeds: np.ndarray
    slowdown: np.ndarray             # each run's measured slowdown (%)
    workload: np.ndarray
    ratio: np.ndarray
    spilled: np.ndarray
    li_X: np.ndarray                 # the same runs' LI features (every event the lab counts, the LI model's)
    latency: np.ndarray              # each run's L3 miss latency (cycles; NaN: not counted)
    stalls: np.ndarray               # each run's pool stalls (``monitor_features.pool_stalls``; NaN: not counted)
    local: pd.DataFrame
    li: dict[float, pd.Series]


@dataclass(frozen=True)
class TrainedMonitor:
    metrics: dict[str, Any]
    curves: pd.DataFrame             # recall at each false-alarm rate, held-out scores, per method and ratio
    model: Any
    onnx_bytes: bytes
    entry: dict[str, Any]            # manifest.json's
    importances: pd.Series


def _fitters(lab: Lab, seed: int, stall_rule: bool = True) -> dict[str, Callable[[np.ndarray], Scorer]]:
    """Per method: from the training workloads, the scorer it judges held-out runs with."""
    def monitor(train: np.ndarray) -> Scorer:
        rows = np.isin(lab.workload, train)
        model = make_li_model(seed).set_params(forest__n_jobs=-1).fit(lab.X[rows], lab.exceeds[rows])
        rule = fit_stall_rule(lab.stalls[rows], lab.exceeds[rows]) if stall_rule else None
        return lambda idx: either(model.predict_proba(lab.X[idx])[:, 1], rule, lab.stalls[idx])

    def li_model(train: np.ndarray) -> Scorer:
        models = {}
        for r, labels in lab.li.items():
            ids = labels.index.intersection(pd.Index(train))
            y = labels.loc[ids].to_numpy()
            models[r] = make_li_model(seed).fit(lab.local.loc[ids].to_numpy(np.float32), y) if len(set(y)) > 1 \
                else None
        def score(idx: np.ndarray) -> np.ndarray:
            out = np.full(len(idx), np.nan)
            for r, model in models.items():
                at = np.isclose(lab.ratio[idx], r)
                if model is not None and at.any():
                    p = model.predict_proba(lab.li_X[idx[at]])
                    out[at] = 1.0 - p[:, list(model.classes_).index(1)]
            return out
        return score

    def rule(train: np.ndarray) -> Scorer:
        return lambda idx: np.nan_to_num(lab.latency[idx].astype(float), nan=0.0)

    def stalls(train: np.ndarray) -> Scorer:
        return lambda idx: np.nan_to_num(lab.stalls[idx].astype(float), nan=0.0)

    return {"monitor": monitor, "li_model": li_model, "l3_miss_latency": rule, "pool_stalls": stalls}


def _folds(workloads: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(workloads)
    return [order[i::k] for i in range(k)]


def _judged(lab: Lab, idx: np.ndarray, r: float) -> np.ndarray:
    return idx[np.isclose(lab.ratio[idx], r) & (lab.spilled[idx] > 0)]


def estimate(lab: Lab, p: MonitorParams, seed: int) -> np.ndarray:
    """Every run's slowdown (%) estimated by a forest that never saw its workload: the figure set against CAMP's
    (a slowdown within 10 points of the measured one for 91-97% of workloads, from at most 12 counters)."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng([seed, 66])
    out = np.full(len(lab.slowdown), np.nan)
    workloads = np.unique(lab.workload)
    for test in _folds(workloads, p.folds, rng):
        rows = np.isin(lab.workload, test)
        model = make_pipeline(SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True),
                              RandomForestRegressor(random_state=seed, n_jobs=-1, min_samples_leaf=2))
        out[rows] = model.fit(lab.X[~rows], lab.slowdown[~rows]).predict(lab.X[rows])
    return out


def li_calls(lab: Lab, train: np.ndarray, rows: np.ndarray, seed: int) -> np.ndarray:
    """Each run's P(insensitive) of its workload at its ratio by an LI model trained on the ``train`` workloads'
    local counters (NaN: no LI label at that ratio): which of the lab's workloads the LI model would call."""
    out = np.full(len(rows), np.nan)
    for r, labels in lab.li.items():
        at = np.isclose(lab.ratio[rows], r)
        ids = labels.index.intersection(pd.Index(train))
        y = labels.loc[ids].to_numpy()
        if not at.any() or len(set(y)) < 2:
            continue
        model = make_li_model(seed).fit(lab.local.loc[ids].to_numpy(np.float32), y)
        local = lab.local.reindex(lab.workload[rows[at]]).to_numpy(np.float32)
        out[at] = model.predict_proba(local)[:, list(model.classes_).index(1)]
    return out


def whole_pool_runs(lab: Lab, rows: np.ndarray, r: float, called: np.ndarray, level: float) -> np.ndarray:
    """The runs of ``rows`` all on the pool at ``r`` whose workload the LI model calls (``called`` per run of the
    lab, P(insensitive) >= ``level``): the allocation and the workloads of an insensitive call on the fleet."""
    with np.errstate(invalid="ignore"):
        keep = np.isclose(lab.ratio[rows], r) & (lab.spilled[rows] >= 100.0) & (called[rows] >= level)
    return rows[keep]


def call_threshold(scores: np.ndarray, lab: Lab, runs: np.ndarray, p: MonitorParams, spill: float) -> float:
    """The whole-pool threshold: the flag rule of ``flag_threshold`` on ``runs`` (``whole_pool_runs``); the spill
    threshold ``spill`` where those runs cannot set one (none within the PDM, or too few for the confidence)."""
    t = flag_threshold(scores[runs], lab.exceeds[runs], p.max_false_alarm, p.fa_confidence)
    return t if np.isfinite(t) else spill


@dataclass(frozen=True)
class Heldout:
    """Per method, every run's held-out score and flag (NaN / 0 where the run is not judged); the monitor's flags
    at the whole-pool threshold (``calls``, set on the training workloads' whole-pool runs the LI model calls); and
    each run's P(insensitive) by an LI model that never saw its workload (``called``)."""
    scores: dict[str, np.ndarray]
    flags: dict[str, np.ndarray]
    calls: np.ndarray
    called: np.ndarray


def heldout(lab: Lab, p: MonitorParams, seed: int) -> Heldout:
    rng = np.random.default_rng([seed, 65])
    fitters = _fitters(lab, seed, p.stall_rule)
    n = len(lab.exceeds)
    scores = {m: np.full(n, np.nan) for m in METHODS}
    flags = {m: np.zeros(n, dtype=np.int8) for m in METHODS}
    calls, called = np.zeros(n, dtype=np.int8), np.full(n, np.nan)
    workloads = np.unique(lab.workload)
    for test in _folds(workloads, p.folds, rng):
        train = np.setdiff1d(workloads, test)
        inner = {m: np.full(n, np.nan) for m in METHODS}
        inner_called = np.full(n, np.nan)
        for inner_test in _folds(train, p.inner_folds, rng):
            rows = np.flatnonzero(np.isin(lab.workload, inner_test))
            for m, fit in fitters.items():
                inner[m][rows] = fit(np.setdiff1d(train, inner_test))(rows)
            if p.call_level is not None:
                inner_called[rows] = li_calls(lab, np.setdiff1d(train, inner_test), rows, seed)
        rows = np.flatnonzero(np.isin(lab.workload, test))
        train_rows = np.flatnonzero(np.isin(lab.workload, train))
        for m, fit in fitters.items():
            s = fit(train)(rows)
            scores[m][rows] = s
            for r in p.latency_ratios:
                judged = _judged(lab, train_rows, r)
                t = flag_threshold(inner[m][judged], lab.exceeds[judged], p.max_false_alarm, p.fa_confidence)
                at = np.isclose(lab.ratio[rows], r)
                flags[m][rows[at]] = (s[at] >= t).astype(np.int8)
                if m == "monitor":
                    if p.call_level is not None:
                        t = call_threshold(inner[m], lab, whole_pool_runs(lab, train_rows, r, inner_called,
                                                                           p.call_level), p, t)
                    calls[rows[at]] = (s[at] >= t).astype(np.int8)
        if p.call_level is not None:
            called[rows] = li_calls(lab, train, rows, seed)
    return Heldout(scores, flags, calls, called)


def figures(lab: Lab, scores: dict[str, np.ndarray], flags: dict[str, np.ndarray],
            p: MonitorParams) -> tuple[dict[str, Any], pd.DataFrame]:
    """Per ratio and method: the held-out flags' recall and false alarms; beside them the recall at
    ``max_false_alarm`` had the threshold been set on the held-out scores themselves (the curve's point, an upper
    bound of what a threshold set in advance achieves); and the recall-false-alarm curve."""
    m: dict[str, Any] = {}
    curves = []
    everything = np.arange(len(lab.exceeds))
    for r in p.latency_ratios:
        judged = _judged(lab, everything, r)
        y = lab.exceeds[judged]
        at: dict[str, Any] = {"runs_exceeding": int(y.sum()), "runs_within": int((1 - y).sum())}
        for method in METHODS:
            f, s = flags[method][judged], scores[method][judged]
            recall = np.array([float((s[y == 1] >= flag_threshold(s, y, fa)).mean()) if y.any() else np.nan
                               for fa in FA_GRID])
            at[method] = {"recall": _share(f[y == 1]), "false_alarm": _share(f[y == 0]),
                          "recall_at_max_false_alarm": _share(s[y == 1] >= flag_threshold(s, y, p.max_false_alarm))}
            curves.append(pd.DataFrame({"latency_ratio": r, "method": method, "false_alarm_pct": 100 * FA_GRID,
                                        "recall_pct": 100 * recall}))
        m[f"{r:g}"] = at
    return m, pd.concat(curves, ignore_index=True)


def full_pool_counts(lab: Lab, flagged: np.ndarray, ratios: tuple[float, ...]) -> dict[str, dict[str, int]]:
    """Per ratio, the held-out flags (``flagged``: at the whole-pool threshold) of the runs with the whole footprint
    on the pool: (runs past the PDM flagged, runs past it, runs within it flagged, runs within it). An insensitive
    call is all on the pool, so this is the monitor's recall where the solver counts its flags as evidence
    (``optimize.monitor``)."""
    out = {}
    for r in ratios:
        at = np.isclose(lab.ratio, r) & (lab.spilled >= 100.0)
        y, f = lab.exceeds[at], flagged[at].astype(bool)
        out[f"{r:g}"] = {"caught": int((f & (y == 1)).sum()), "exceeding": int((y == 1).sum()),
                         "alarms": int((f & (y == 0)).sum()), "within": int((y == 0).sum())}
    return out


def workload_flags(lab: Lab, flagged: np.ndarray, ratios: tuple[float, ...]) -> dict[str, dict[str, float]]:
    """Per ratio, each workload's share of its runs all on the pool that the held-out monitor flags. Joined with
    the LI model's out-of-fold scores (``train_li``'s ``heldout_scores.parquet``), it gives the monitor's recall
    among the very workloads the LI model errs on at each threshold (``optimize.tonight.band_recall``): near the
    LI boundary they are the marginal ones, which the recall over every run past the PDM overstates."""
    out = {}
    for r in ratios:
        at = np.isclose(lab.ratio, r) & (lab.spilled >= 100.0)
        shares = pd.Series(flagged[at].astype(float)).groupby(lab.workload[at]).mean()
        out[f"{r:g}"] = {str(w): round(float(v), 4) for w, v in shares.items()}
    return out


def called_figures(lab: Lab, runs: np.ndarray, spill_flags: np.ndarray, whole_flags: np.ndarray) -> dict[str, Any]:
    """On the whole-pool runs of the workloads an LI model that never saw them calls (``runs``), the held-out flags
    at the spill threshold and at the whole-pool one: the runs past the PDM there are the lab's LI errors, which the
    monitor must catch on the fleet, and those within it its false alarms on the fleet's calls."""
    y = lab.exceeds[runs]
    out: dict[str, Any] = {"runs_exceeding": int(y.sum()), "runs_within": int((1 - y).sum())}
    for name, f in (("spill_threshold", spill_flags[runs]), ("whole_pool_threshold", whole_flags[runs])):
        out[name] = {"recall": _share(f[y == 1]), "false_alarm": _share(f[y == 0])}
    return out


def _share(x: np.ndarray) -> float | None:
    return round(float(np.mean(x)), 4) if len(x) else None


def train(lab: Lab, names: list[str], p: MonitorParams, seed: int) -> TrainedMonitor:
    h = heldout(lab, p, seed)
    scores, flags = h.scores, h.flags
    metrics, curves = figures(lab, scores, flags, p)
    estimated = estimate(lab, p, seed)
    for r in p.latency_ratios:
        judged = _judged(lab, np.arange(len(lab.slowdown)), r)
        error = np.abs(estimated[judged] - lab.slowdown[judged])
        full = lab.spilled[judged] >= 100.0                  # CAMP's setting: the whole footprint on CXL
        metrics[f"{r:g}"]["slowdown_estimate"] = {
            "within_10_points": _share(error <= 10.0), "within_5_points": _share(error <= 5.0),
            "full_pool_within_10_points": _share(error[full] <= 10.0),
            "median_abs_error_points": round(float(np.median(error)), 3) if len(error) else None}
    metrics.update({"runs": len(lab.exceeds), "workloads": len(np.unique(lab.workload)),
                    "pdm": p.pdm, "max_false_alarm": p.max_false_alarm})
    everything = np.arange(len(lab.exceeds))
    thresholds, whole = {}, {}
    for r in p.latency_ratios:       # the served thresholds: every workload's held-out score, the same rules
        judged = _judged(lab, everything, r)
        thresholds[f"{r:g}"] = flag_threshold(scores["monitor"][judged], lab.exceeds[judged], p.max_false_alarm,
                                              p.fa_confidence)
        whole[f"{r:g}"] = thresholds[f"{r:g}"]
        if p.call_level is not None:
            runs = whole_pool_runs(lab, everything, r, h.called, p.call_level)
            whole[f"{r:g}"] = call_threshold(scores["monitor"], lab, runs, p, thresholds[f"{r:g}"])
            metrics[f"{r:g}"]["calls"] = called_figures(lab, runs, flags["monitor"], h.calls)
    model = make_li_model(seed).set_params(forest__n_jobs=-1).fit(lab.X, lab.exceeds)
    rule = fit_stall_rule(lab.stalls, lab.exceeds) if p.stall_rule else None
    onnx_bytes = export_li(model, len(names))
    rows = np.vstack([lab.X, boundary_rows(forest_splits(model), lab.X, seed=seed), nan_rows(lab.X, seed)])
    parity = check_parity(model, onnx_bytes, rows)
    importances = pd.Series(model.named_steps["forest"].feature_importances_, index=names).sort_values(
        ascending=False)
    entry = {"method": "random_forest", "file": "monitor.onnx", "sha256": sha256(onnx_bytes), "features": names,
             "classes": [int(c) for c in model.classes_], "pdm": p.pdm, "allocation": [POOL_SHARE, LATENCY_RATIO],
             "thresholds": thresholds, "whole_pool_thresholds": whole,
             "call_level": p.call_level, "max_false_alarm": p.max_false_alarm, "fa_confidence": p.fa_confidence,
             "runs": len(lab.exceeds), "full_pool": full_pool_counts(lab, h.calls, p.latency_ratios),
             "full_pool_workloads": workload_flags(lab, h.calls, p.latency_ratios),
             "onnx_parity_max_abs_diff": parity,
             "stall_rule": None if rule is None else {"feature": POOL_STALLS, "coef": rule.coef,
                                                      "intercept": rule.intercept},
             "top_importances": {k: round(float(v), 4) for k, v in importances.head(15).items()}}
    metrics["onnx_parity_max_abs_diff"] = parity
    return TrainedMonitor(metrics, curves, model, onnx_bytes, entry, importances)


def lab_for(runs: pd.DataFrame, features: pd.DataFrame, names: list[str], li_names: list[str], local: pd.DataFrame,
            slowdowns: pd.DataFrame, p: MonitorParams) -> Lab:
    """The study's arrays: ``runs`` (``models.monitor.spill_runs``) and their ``features`` aligned by row, the
    monitor's inputs ``names`` and the LI model's ``li_names`` (it reads every event, whatever the monitor reads)."""
    li = {}
    for r in p.latency_ratios:
        try:
            li[r] = li_labels(slowdowns, r, p.pdm)
        except ContractError:      # no full-pool runs at r: the LI model has no label there, and is not judged
            continue
    stalls = features[POOL_STALLS].to_numpy(float) if reads_stalls(names) else np.full(len(runs), np.nan)
    return Lab(X=features[names].to_numpy(np.float32), exceeds=runs["exceeds"].to_numpy(np.int8),
               slowdown=runs["slowdown_pct"].to_numpy(float),
               workload=runs["workload_id"].astype(str).to_numpy(), ratio=runs["latency_ratio"].to_numpy(float),
               spilled=runs["spilled_pct"].to_numpy(float), li_X=features[li_names].to_numpy(np.float32),
               latency=features["l3_miss_latency"].to_numpy(float),
               stalls=stalls, local=local[li_names], li=li)
