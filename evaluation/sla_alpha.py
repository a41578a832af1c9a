"""SLA-alpha mitigation (seed 002): give a flagged VM back only the local memory that brings it within the PDM,
instead of all of its pool memory (``evaluation.qos``'s all-local mitigation).

How much is enough comes from the VM's spill curve (slowdown by share of its touched memory on the pool), which
the fleet does not measure: it is predicted from the VM's own first-hour counters as the mean curve of the
``k`` lab workloads nearest in the LI model's features (z-scored over the lab). The VM keeps on the pool the
largest share whose predicted slowdown, and every smaller share's, is within the PDM, taken of its whole memory
(it may touch all of it: what it keeps then spills no more than that share of what it touches).

The replay judges the result by the truth: a VM whose workload's slowdown at its spill after the restore is
still past the PDM stays slowed (``sla_alpha``'s ``alpha_slowed``): the DRAM saved is paid for in risk, and
`evaluate` reports both beside the all-local figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.evaluation.combined import slowdown_at
from pond.models.li import exceeds_pdm, within_pdm

GRID = np.linspace(0.0, 100.0, 201)     # spilled share of touched memory, %, every half point


def on_grid(curves: pd.DataFrame) -> np.ndarray:
    """(workloads, ``GRID``) slowdowns, linear between the curve's spill levels (``combined.spill_table``)."""
    levels = curves.columns.to_numpy(float)
    return np.vstack([np.interp(GRID, levels, row) for row in curves.to_numpy(float)]) if len(curves) \
        else np.zeros((0, len(GRID)))


def nearest_curves(own: pd.DataFrame, lab: pd.DataFrame, curves: pd.DataFrame, k: int) -> np.ndarray:
    """(VMs, ``GRID``) predicted slowdowns: per VM (rows of ``own``: the LI model's features), the mean curve of
    the ``k`` lab workloads (``lab``: the same columns, indexed by workload) nearest after z-scoring each feature
    over the lab. NaN rows where a VM has no counters or the lab no curve."""
    lab = lab[~lab.index.duplicated()]
    ids = lab.index.intersection(curves.index)
    out = np.full((len(own), len(GRID)), np.nan)
    if len(ids) == 0 or len(own) == 0:
        return out
    L = lab.loc[ids, list(own.columns)].to_numpy(float)
    mu, sd = np.nanmean(L, axis=0), np.nanstd(L, axis=0)
    mu, sd = np.nan_to_num(mu), np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    Lz = np.nan_to_num((L - mu) / sd)
    V = own.to_numpy(float)
    seen = ~np.isnan(V).all(axis=1)
    Vz = np.nan_to_num((V[seen] - mu) / sd)
    d = (Vz ** 2).sum(axis=1)[:, None] + (Lz ** 2).sum(axis=1)[None, :] - 2.0 * Vz @ Lz.T
    k = min(max(k, 1), len(ids))
    nn = np.argsort(d, axis=1, kind="stable")[:, :k]
    out[seen] = on_grid(curves.loc[ids])[nn].mean(axis=1)
    return out


def keep_on_pool_pct(curves: np.ndarray, pdm: float) -> np.ndarray:
    """Per VM, the largest spilled share (%, on ``GRID``) up to which every predicted slowdown is within ``pdm``;
    0 where even the first point is past it, NaN where there is no curve."""
    ok = np.logical_and.accumulate(within_pdm(np.nan_to_num(curves, nan=np.inf), pdm), axis=1)
    n = ok.sum(axis=1)
    return np.where(np.isnan(curves).all(axis=1), np.nan, np.where(n > 0, GRID[np.maximum(n - 1, 0)], 0.0))


def sla_alpha(watched: pd.DataFrame, keep_pct: np.ndarray, table: pd.DataFrame, workload: pd.Series,
              pdm: float) -> pd.DataFrame:
    """``watched`` (``evaluation.qos.watch``) with SLA-alpha's mitigation of each mitigated insensitive call:
    ``alpha_gb``, the local GB given back (the whole pool memory, as all-local, where there is no curve, and for a
    zNUMA caught by touching it), and ``alpha_slowed``: the VM's workload still past ``pdm`` at its spill after
    (``table``: truth by workload and spilled share; a VM without truth is not known to be slowed)."""
    mem = watched["memory_gb"].to_numpy(float)
    pool = watched["pool_gb"].to_numpy(float)
    partial = watched["mitigated"].to_numpy(bool) & watched["li_called"].to_numpy(bool) & ~np.isnan(keep_pct)
    after = np.where(partial, np.minimum(pool, np.nan_to_num(keep_pct) / 100.0 * mem), 0.0)
    restored = np.where(watched["mitigated"].to_numpy(bool), pool - after, 0.0)
    touched = watched["touched_known_gb"].to_numpy(float)
    touched = np.where(np.isnan(touched), mem, touched)          # not known: all of it, the most it can spill
    local = mem - after
    with np.errstate(divide="ignore", invalid="ignore"):
        spill = np.where(touched > 0, 100.0 * np.maximum(touched - local, 0.0) / touched, 0.0)
    slowed = partial & (after > 0) & exceeds_pdm(slowdown_at(table, workload, spill), pdm)
    return watched.assign(alpha_gb=restored, alpha_slowed=slowed)


def summarize(out: pd.DataFrame, fp_estimate_rate: float = 0.0) -> dict[str, float]:
    """SLA-alpha's day beside all-local's (``evaluation.qos.summarize``): the DRAM it gives back (share of the
    day's memory) and the mispredictions it leaves slowed (share of VMs; the lab's rate for a pool-only VM without
    truth, as there)."""
    n = max(len(out), 1)
    gb = float(out["memory_gb"].sum())
    unknown = out["li_called"] & ~out["lab_truth"] & ~out["mitigated"]
    left = out["unmitigated"] | out["alpha_slowed"]
    return {"sla_alpha_gb_share": float(out["alpha_gb"].sum() / gb) if gb else 0.0,
            "mispredictions_unmitigated_sla_alpha": float(left.sum() / n + unknown.sum() * fp_estimate_rate / n)}
