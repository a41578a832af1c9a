"""The combined policy on the next day's VMs, judged against ground truth (Pond §6.4.3).

Ground truth per VM: its workload's lab slowdowns (full pool, and per spilled share) and its real
untouched fraction. Slowdowns are known only where ``vms.workload_id`` names a lab workload (the
built-in fleet); a provider's VMs have no lab identity, so for them only overpredictions can be
realized, and ``lab_truth_share`` says how many VMs the false-positive count covers. Two
misprediction counts:

- conservative (Pond): a pool-only VM whose workload exceeds the PDM entirely on pool (FP), plus
  every zNUMA VM whose real untouched memory is smaller than its zNUMA (OP);
- severity-aware: only those whose spill actually pushes the workload past the PDM. For a zNUMA
  VM, the spill is the touched memory that does not fit the local node, as a share of the touched
  memory, and the slowdown is the workload's mean slowdown at that share (linear between the
  lab's spill levels).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.decision import POOL_ONLY, ZNUMA


def spill_table(slowdowns: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """Mean slowdown (%) per workload (rows) and spilled share of the footprint (columns, 0-100)."""
    s = slowdowns[np.isclose(slowdowns["latency_ratio"], ratio)]
    return s.pivot_table(index="workload_id", columns="spilled_pct", values="slowdown_pct", aggfunc="mean").sort_index(axis=1)


def slowdown_at(table: pd.DataFrame, workload_id: pd.Series, spilled_pct: np.ndarray) -> np.ndarray:
    """Each VM's workload slowdown at its spilled share; NaN for VMs without a lab workload."""
    levels = table.columns.to_numpy(float)
    row = table.index.get_indexer(workload_id.astype(object))
    known = row >= 0
    out = np.full(len(row), np.nan)
    x = np.clip(spilled_pct[known], levels[0], levels[-1])
    hi = np.clip(np.searchsorted(levels, x, side="left"), 1, len(levels) - 1)
    lo = hi - 1
    vals = table.to_numpy(float)[row[known]]
    w = (x - levels[lo]) / (levels[hi] - levels[lo])
    out[known] = vals[np.arange(len(x)), lo] * (1 - w) + vals[np.arange(len(x)), hi] * w
    return out


def outcomes(vms: pd.DataFrame, decision: dict[str, np.ndarray], table: pd.DataFrame, pdm: float) -> pd.DataFrame:
    mem = vms["memory_gb"].to_numpy(float)
    touched = (1.0 - vms["untouched_fraction"].to_numpy(float)) * mem
    d = decision["decision"]
    full = slowdown_at(table, vms["workload_id"], np.full(len(vms), 100.0))
    spill_gb = np.maximum(touched - decision["local_gb"], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        spill_pct = np.where(touched > 0, 100.0 * spill_gb / touched, 0.0)
    fp = (d == POOL_ONLY) & (full > pdm)
    op = (d == ZNUMA) & (touched > decision["local_gb"] + 1e-9)
    severe = fp | (op & (slowdown_at(table, vms["workload_id"], spill_pct) > pdm))
    return pd.DataFrame({"vm_id": vms["vm_id"].to_numpy(), "decision": d, "memory_gb": mem,
                         "pool_gb": decision["pool_gb"], "znuma_gb": decision["znuma_gb"],
                         "false_positive": fp, "overpredicted": op, "severe": severe, "lab_truth": ~np.isnan(full)})


def summarize(out: pd.DataFrame) -> dict[str, float]:
    gb = out["memory_gb"].sum()
    return {
        "vms": int(len(out)),
        "pool_share": float(out["pool_gb"].sum() / gb),
        "li_share": float(out.loc[out.decision == POOL_ONLY, "memory_gb"].sum() / gb),
        "um_share": float(out["znuma_gb"].sum() / gb),
        "false_positives": float(out["false_positive"].mean()),
        "overpredictions": float(out["overpredicted"].mean()),
        "mispredictions_conservative": float((out["false_positive"] | out["overpredicted"]).mean()),
        "mispredictions_severe": float(out["severe"].mean()),
        "lab_truth_share": float(out["lab_truth"].mean()) if len(out) else 0.0,
    }


def realized(vms: pd.DataFrame, decision: dict[str, np.ndarray], table: pd.DataFrame, pdm: float) -> dict[str, float]:
    """The summary of one policy's decisions on VMs whose ground truth is known."""
    return summarize(outcomes(vms, decision, table, pdm))
