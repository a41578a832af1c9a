"""The fleet's own evidence on LI errors: slowdowns measured on fleet VMs (``vm_slowdowns``, A/B tests of
internal workloads, Pond §4.4), beside the lab's.

The lab runs each workload once, the budget counts the fleet's VMs, and on other draws of the built-in
fleet the VMs called insensitive erred 2-7 times as often as the lab's workloads did (docs/changelog.md).
A measured fleet VM speaks to that directly. The unit of evidence is the history key (customer, VM type,
region), not the VM: a key's VMs share one score and mostly one workload, so counting each would
overstate what was learned (weighting keys by their VMs, honestly, leaves a handful of effective keys:
docs/changelog.md, "What if the fleet reported slowdowns?").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.core.days import end_of
from pond.models.li import at_full_pool, exceeds_pdm  # the LI decision puts an insensitive VM entirely on the pool
from pond.optimize.solver import NextNight, spread


def _full_pool(reports: pd.DataFrame, ratio: float) -> np.ndarray:
    """Per row, whether it is a run entirely on the pool at ``ratio``: the only runs that say what an LI call does."""
    return np.isclose(reports.latency_ratio.to_numpy(float), ratio) & at_full_pool(reports.spilled_pct).to_numpy()


def _mean_slowdown(rows: pd.DataFrame) -> pd.Series:
    return rows.groupby("vm_id", observed=True).slowdown_pct.mean()


def full_pool_slowdowns(reports: pd.DataFrame, ratio: float) -> pd.Series:
    """Each measured VM's mean slowdown (%) entirely on pool at ``ratio``, by ``vm_id``: its own truth."""
    return _mean_slowdown(reports[_full_pool(reports, ratio)])


def measured_before_created(reports: pd.DataFrame, created_at: pd.Series) -> np.ndarray:
    """Per row, whether it was measured before its VM was created (``created_at`` by ``vm_id``; a VM it
    does not hold is never flagged). Such a row is not this VM's: an id the provider reused, or a clock
    that was wrong. Either way it cannot be the VM's truth, so it is counted and left out, not refused."""
    born = created_at[~created_at.index.duplicated()].reindex(reports.vm_id.to_numpy())
    return (reports.measured_at.reset_index(drop=True) < born.reset_index(drop=True)).to_numpy(bool)


def report_labels(reports: pd.DataFrame, as_of: str, ratio: float, pdm: float,
                  created_at: pd.Series | None = None) -> tuple[pd.Series, dict[str, int]]:
    """(sensitive or not per measured VM, what was left out and why) from ``vm_slowdowns`` rows known by the
    end of ``as_of``: a VM is sensitive when its mean slowdown entirely on pool at ``ratio`` exceeds ``pdm``,
    as the lab's workloads are labelled (``models.li.li_labels``). ``created_at`` (by ``vm_id``): rows
    measured before their VM existed are left out (``measured_before_created``)."""
    known = (reports.measured_at < end_of(as_of)).to_numpy()
    early = np.zeros(len(reports), bool) if created_at is None else measured_before_created(reports, created_at)
    fits = _full_pool(reports, ratio)
    sensitive = exceeds_pdm(_mean_slowdown(reports[known & ~early & fits]), pdm).rename("sensitive")
    return sensitive, {"rows": len(reports), "rows_measured_after_as_of": int((~known).sum()),
                       "rows_measured_before_created": int((known & early).sum()),
                       "rows_other_ratio_or_spill": int((known & ~early & ~fits).sum()), "vms_measured": len(sensitive)}


def report_summary(stats: dict[str, int]) -> str:
    """One line on what the fleet's reports gave the solver and what was left out, and why."""
    why = {"rows_measured_after_as_of": "measured after as_of", "rows_measured_before_created":
           "measured before their VM was created", "rows_other_ratio_or_spill": "at another ratio or spill"}
    out = [f"{stats[k]:,} rows {v}" for k, v in why.items() if stats.get(k)]
    out += [f"{stats[k]:,} VMs {v}" for k, v in (("vms_not_in_window", "outside the report window or the vms table"),
                                                 ("vms_without_history", "without history")) if stats.get(k)]
    return (f"vm_slowdowns: {stats['rows']:,} rows, {stats.get('vms_used', 0):,} measured VMs used as "
            f"{stats.get('keys', 0):,} history keys over {stats.get('days', 0)} days"
            + (f"; left out: {', '.join(out)}" if out else ""))


def key_labels(keys: pd.DataFrame, p: np.ndarray, sensitive: np.ndarray) -> pd.DataFrame:
    """One row per history key of the scored, measured VMs: its score and its share of sensitive VMs.
    ``keys``: the VMs' key columns, one row per VM, aligned with ``p`` and ``sensitive``."""
    frame = keys.reset_index(drop=True).assign(p=p, sensitive=np.asarray(sensitive, float))
    return frame.groupby(list(keys.columns), observed=True, sort=True).agg(
        p=("p", "first"), sensitive=("sensitive", "mean")).reset_index()


def key_counts(p: np.ndarray, sensitive: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per threshold t: the labelled keys the model calls insensitive (``p >= t``) and the errors among
    them (each key's share of sensitive VMs), the fleet's counts beside the lab's ``called``/``errors``."""
    p, sensitive = np.asarray(p, float), np.asarray(sensitive, float)
    order = np.argsort(p, kind="stable")
    errors_from = np.r_[np.cumsum(sensitive[order][::-1])[::-1], 0.0]   # errors of the keys from rank k on
    first = np.searchsorted(p[order], np.asarray(thresholds, float), side="left")
    return (len(p) - first).astype(float), errors_from[first]


def tonight(day: np.ndarray, p: np.ndarray, sensitive: np.ndarray, thresholds: np.ndarray) -> NextNight:
    """Per threshold, tonight's error rate among the VMs called insensitive, predicted from the measured
    days (``daily_rates``) as the solver predicts tonight's OP from the UM nights without their trend: the
    budget counts VMs, and which keys are busy on a day moves the rate more than how many keys were labelled."""
    return spread(daily_rates(day, p, sensitive, thresholds))


def daily_rates(day: np.ndarray, p: np.ndarray, sensitive: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(thresholds, days) error rate among the measured VMs created on each day that the model calls
    insensitive at each threshold, weighted as the budget weighs them (one VM, one count); NaN where it
    calls none of that day's. ``day``: each VM's creation day (any sortable label)."""
    thresholds = np.asarray(thresholds, float)
    days = np.unique(day)
    out = np.full((len(thresholds), len(days)), np.nan)
    for k, d in enumerate(days):   # at most report_days days, each vectorized over its VMs
        on = day == d
        called, errors = key_counts(p[on], np.asarray(sensitive, float)[on], thresholds)
        out[:, k] = np.where(called > 0, errors / np.maximum(called, 1.0), np.nan)
    return out
