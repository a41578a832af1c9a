"""The QoS monitor's model: from counters measured while a VM runs under its allocation, P(it exceeds the PDM there).

Pond's monitor (§4.3-4.4) asks whether a VM that runs on the pool suffers. The LI model cannot say: it was trained
on counters of runs on local DRAM, to predict what the whole pool would do. This model is trained on what the lab
records of every spill run (``spill_counters``: the PMU events with part of the footprint on the pool, at a latency
ratio), labelled by that run's own measured slowdown, with the allocation as two more inputs
(``models.monitor_features``): the share of the memory on the pool and the latency ratio. The forest and its
imputer are the LI model's (``models.li``), so it exports to ONNX the same way. Beside it, a logistic fit scores
the stalls the pool explains (``monitor_features.StallRule``), for the mechanisms too few lab workloads show for a
forest to learn.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.core.errors import ContractError
from pond.models.li import exceeds_pdm
from pond.models.monitor_features import StallRule

RUN_KEYS = ["workload_id", "latency_ratio", "spilled_pct", "repetition"]


def spill_runs(spill_counters: pd.DataFrame, slowdowns: pd.DataFrame, pdm: float) -> pd.DataFrame:
    """The spill runs that have both counters and a measured slowdown, each with ``exceeds`` (its own slowdown above
    the PDM). Runs pair on workload, latency ratio, spilled share and repetition; a lab that counted events on other
    repetitions than it timed pairs on the first three, with the mean slowdown over repetitions."""
    slow = slowdowns[RUN_KEYS + ["slowdown_pct"]]
    runs = spill_counters.merge(slow, on=RUN_KEYS, how="inner", validate="many_to_one")
    if runs.empty:
        keys = RUN_KEYS[:3]
        mean = slow.groupby(keys, as_index=False)["slowdown_pct"].mean()
        runs = spill_counters.merge(mean, on=keys, how="inner")
    if runs.empty:
        raise ContractError("spill_counters", "no spill run has a slowdown: no row pairs with slowdowns on "
                            "workload_id, latency_ratio and spilled_pct", column="workload_id",
                            fix="count the events of the same spill runs the slowdowns table times")
    return runs.assign(exceeds=exceeds_pdm(runs["slowdown_pct"].to_numpy(float), pdm).astype(np.int8))


def flag_threshold(scores: np.ndarray, exceeds: np.ndarray, max_false_alarm: float,
                   confidence: float | None = None) -> float:
    """The lowest threshold whose flags (score >= it) take at most ``max_false_alarm`` of the runs within the PDM:
    the most the monitor can catch at that false-alarm rate. With ``confidence``, at most that rate at this
    one-sided confidence (Clopper-Pearson, from how many runs within the PDM there are): a threshold set on some
    workloads keeps the rate on others. inf when there is no run within the PDM to judge by."""
    within = np.sort(np.asarray(scores, float)[np.asarray(exceeds) == 0])
    n = len(within)
    if n == 0:
        return float("inf")
    allowed = int(np.floor(max_false_alarm * n))
    if confidence is not None:
        from scipy.stats import beta

        k = np.arange(allowed + 1)
        upper = beta.ppf(confidence, k + 1, n - k)           # the rate's upper bound with k of n flagged
        allowed = int(k[upper <= max_false_alarm].max()) if (upper <= max_false_alarm).any() else -1
    if allowed < 0:
        return float("inf")
    # flags at >= t take the runs within the PDM scored >= t: at most `allowed` of them above the cut
    cut = within[n - allowed - 1] if allowed < n else -np.inf
    return float(np.nextafter(cut, np.inf))


def fit_stall_rule(stalls: np.ndarray, exceeds: np.ndarray) -> StallRule | None:
    """The logistic fit of ``exceeds`` on the runs' pool stalls; None without both classes among the counted runs."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(stalls, np.float64)
    ok = np.isfinite(x)
    y = np.asarray(exceeds)[ok]
    if len(set(y.tolist())) < 2:
        return None
    model = LogisticRegression(C=1e4, max_iter=1000).fit(100.0 * x[ok, None], y)
    return StallRule(float(model.coef_[0, 0]), float(model.intercept_[0]))
