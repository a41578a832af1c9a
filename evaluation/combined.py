"""A policy's decisions on VMs, judged against what is known of their outcomes (Pond §6.4.3).

Ground truth per VM has two parts:

- *Slowdown*: its workload's slowdown entirely on pool and per spilled share. Known where
  ``vms.workload_id`` names a workload of a truth table (``evaluation.truth``): the built-in
  fleet's population truth, or a provider's lab runs. A provider's VMs have no lab identity, so
  their false positives cannot be realized: each pool-only VM without truth counts as the lab's
  error rate among workloads called insensitive (``fp_estimate_rate``), and ``fp_source`` says so.
- *Untouched memory*: ``untouched_fraction`` once the VM ended. A VM still running at the end of
  the trace is *censored*: its ``untouched_so_far`` (an upper bound of the final value) confirms
  an overprediction when the memory touched so far already exceeds its local node; the
  worst-case count adds every censored zNUMA VM not yet confirmed.

Two misprediction counts:

- conservative (Pond): a pool-only VM whose workload exceeds the PDM entirely on pool (FP), plus
  every zNUMA VM whose real untouched memory is smaller than its zNUMA (OP). A VM the LI model
  called insensitive but a pool cap gave a zNUMA (``models.decision``) is judged as pool-only: FP
  if its workload exceeds the PDM entirely on pool, whatever it touches;
- severity-aware: only those whose spill actually pushes the workload past the PDM. For a zNUMA
  VM, the spill is the touched memory that does not fit the local node, as a share of the touched
  memory, and the slowdown is the workload's mean slowdown at that share (linear between the
  lab's spill levels).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.core.params import QosParams
from pond.evaluation.qos import judged_touches, watch
from pond.models.decision import POOL_ONLY, ZNUMA
from pond.models.li import exceeds_pdm


def spill_table(slowdowns: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """Mean slowdown (%) per workload (rows) and spilled share of the footprint (columns, 0-100)."""
    s = slowdowns[np.isclose(slowdowns["latency_ratio"], ratio)]
    return s.pivot_table(index="workload_id", columns="spilled_pct", values="slowdown_pct", aggfunc="mean").sort_index(axis=1)


def slowdown_at(table: pd.DataFrame, workload_id: pd.Series, spilled_pct: np.ndarray) -> np.ndarray:
    """Each VM's workload slowdown at its spilled share; NaN for VMs without a known workload."""
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


def slowed_by_spill(table: pd.DataFrame, workload_id: pd.Series, touched_gb: np.ndarray, local_gb: np.ndarray,
                    pdm: float) -> np.ndarray:
    """Whether each VM's spill (its touched memory past ``local_gb``, as a share of what it touched) slows its
    workload past the PDM; ``local_gb`` may carry a leading axis (one row per allocation). False where the workload
    has no truth or nothing was touched."""
    touched = np.asarray(touched_gb, float)
    local = np.asarray(local_gb, float)
    shape = np.broadcast_shapes(touched.shape, local.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        spill = np.where(touched > 0, 100.0 * np.maximum(touched - local, 0.0) / touched, 0.0)
    spill = np.broadcast_to(spill, shape).ravel()
    ids = pd.Series(np.tile(workload_id.to_numpy(object), int(np.prod(shape[:-1], dtype=int))))
    return exceeds_pdm(slowdown_at(table, ids, spill), pdm).reshape(shape)


def _column(vms: pd.DataFrame, name: str, dtype: type = float) -> pd.Series:
    return vms[name] if name in vms.columns else pd.Series(np.nan, index=vms.index, dtype=dtype)


def outcomes(vms: pd.DataFrame, decision: dict[str, np.ndarray], table: pd.DataFrame, pdm: float,
             measured: pd.Series | None = None) -> pd.DataFrame:
    """One row per VM: the decision and what is known of its outcome (see the module doc). ``measured``: the
    VMs' own full-pool slowdowns by ``vm_id`` (``vm_slowdowns``), their truth where ``table`` has none."""
    mem = vms["memory_gb"].to_numpy(float)
    untouched = vms["untouched_fraction"].to_numpy(float)
    censored = np.isnan(untouched)
    so_far = _column(vms, "untouched_so_far").to_numpy(float)
    touched = (1.0 - untouched) * mem
    touched_so_far = (1.0 - np.where(censored, so_far, untouched)) * mem   # NaN: nothing known yet
    d = decision["decision"]
    local = decision["local_gb"]
    workload = _column(vms, "workload_id", object)
    full = slowdown_at(table, workload, np.full(len(vms), 100.0))
    if measured is not None and len(measured):
        full = np.where(np.isnan(full), measured.reindex(vms["vm_id"].to_numpy()).to_numpy(float), full)
    # a capped zNUMA of an insensitive call is judged as pool-only; one the cap left under 1 GB is all local
    called = np.asarray(decision.get("li_called", d == POOL_ONLY), bool) & (np.asarray(decision["pool_gb"]) > 0)
    fp = called & exceeds_pdm(full, pdm)
    znuma = (d == ZNUMA) & ~called
    op = znuma & (touched_so_far > local + 1e-9)          # final, or confirmed while running
    unresolved = znuma & censored & ~op                   # might still be overpredicted
    severe = fp | (op & ~censored & slowed_by_spill(table, workload, touched, local, pdm))
    return pd.DataFrame({"vm_id": vms["vm_id"].to_numpy(), "decision": d, "li_called": called, "memory_gb": mem,
                         "pool_gb": decision["pool_gb"], "znuma_gb": decision["znuma_gb"],
                         "false_positive": fp, "overpredicted": op, "op_unresolved": unresolved,
                         "severe": severe, "censored": censored, "lab_truth": ~np.isnan(full),
                         "sensitive": np.where(np.isnan(full), np.nan, exceeds_pdm(full, pdm)),
                         "touched_known_gb": touched_so_far})


def summarize(out: pd.DataFrame, fp_estimate_rate: float = 0.0) -> dict[str, float | int | str]:
    """Shares of GB and of VMs. ``fp_estimate_rate``: the lab's error rate among workloads called
    insensitive, counted for each pool-only VM whose slowdown truth is unknown."""
    n = max(len(out), 1)
    gb = out["memory_gb"].sum()
    pool_only = out["li_called"] if "li_called" in out.columns else out.decision == POOL_ONLY
    unknown_pool_only = int((pool_only & ~out["lab_truth"]).sum())
    fp_est = unknown_pool_only * fp_estimate_rate / n
    confirmed = float((out["false_positive"] | out["overpredicted"]).mean()) if len(out) else 0.0
    truth = float(out["lab_truth"].mean()) if len(out) else 0.0
    return {
        "vms": len(out),
        "pool_share": float(out["pool_gb"].sum() / gb) if gb else 0.0,
        "li_share": float(out.loc[pool_only, "pool_gb"].sum() / gb) if gb else 0.0,
        "um_share": float(out.loc[~pool_only, "znuma_gb"].sum() / gb) if gb else 0.0,
        "false_positives": float(out["false_positive"].sum() / n + fp_est),
        "false_positives_estimated": float(fp_est),
        "fp_source": "truth" if unknown_pool_only == 0 else ("lab_estimate" if truth == 0 else "truth+lab_estimate"),
        "overpredictions": float(out["overpredicted"].mean()) if len(out) else 0.0,
        "mispredictions_conservative": confirmed + fp_est,
        "mispredictions_worst_case": confirmed + fp_est + float(out["op_unresolved"].sum() / n),
        "mispredictions_severe": float(out["severe"].mean()) if len(out) else 0.0,
        "censored": int(out["censored"].sum()),
        "censored_unresolved": int(out["op_unresolved"].sum()),
        "pool_only_without_truth": unknown_pool_only,
        "lab_truth_share": truth,
    }


def realize(vms: pd.DataFrame, decisions: dict[str, np.ndarray], table: pd.DataFrame, pdm: float,
            measured: pd.DataFrame | None, seen_slowed: np.ndarray, qos: QosParams, created: np.ndarray | None = None,
            day: np.ndarray | None = None, touch_spill_pct: np.ndarray | None = None) -> pd.DataFrame:
    """One policy's decisions judged per VM (``outcomes``) and watched by the QoS monitor (``evaluation.qos``):
    how `evaluate`, the promotion gate and `simulate` realize a policy. ``seen_slowed``: the monitor's flag of each
    VM as an insensitive call (``optimize.monitor.monitor_flags``); ``created``: the order the monitor's
    flags come in (default: ``vms.created_at``); ``day``: whose capacity each VM draws on (default: one day);
    ``touch_spill_pct``: per VM, the least spilled share the monitor flags a zNUMA's touch at (``qos.touches:
    judged``, ``Flags.touch_spill_pct``); None: every touch flagged."""
    created = vms["created_at"].to_numpy() if created is None else created
    out = outcomes(vms, decisions, table, pdm, measured)
    seen = None if touch_spill_pct is None else judged_touches(out["touched_known_gb"].to_numpy(float),
                                                               decisions["local_gb"], touch_spill_pct)
    return watch(out, seen_slowed, created, qos.max_mitigated_share, day, touch_seen=seen)
