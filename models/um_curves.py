"""Untouched-memory trade-off (Pond Fig. 18): UM share of memory vs overprediction rate.

A prediction u for a VM of M GB exposes floor(u * M) GB as zNUMA. UM = sum of those GB over
the sum of all VMs' GB; a VM is *overpredicted* when its real untouched memory (fraction x M) is
smaller than its zNUMA, i.e. the guest will touch pool memory. OP = share of VMs overpredicted.
"""

from __future__ import annotations

import numpy as np

from pond.models.decision import pool_gb


def um_op(pred: np.ndarray, untouched: np.ndarray, memory_gb: np.ndarray) -> tuple[float, float]:
    """(UM share of GB, OP share of VMs); ``pred`` may be (n,) or (k, n) for k policies at once,
    decided one policy at a time: ``decide``'s arrays for all k would be k days of VMs (at 10M VMs,
    the 96 static fractions of a 135,250-VM day took 1.2 GiB)."""
    pred = np.asarray(pred, float)
    if pred.ndim == 2:
        pairs = [um_op(row, untouched, memory_gb) for row in pred]
        return np.array([u for u, _ in pairs]), np.array([o for _, o in pairs])
    pool = pool_gb(pred, memory_gb)
    over = untouched * memory_gb < pool - 1e-9
    return pool.sum(axis=-1) / memory_gb.sum(), over.mean(axis=-1)


def static_curve(untouched: np.ndarray, memory_gb: np.ndarray,
                 fractions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The baseline: the same fixed fraction of every VM on the pool, for each fraction."""
    return um_op(np.broadcast_to(fractions[:, None], (len(fractions), len(untouched))), untouched, memory_gb)


def op_at_um(um: np.ndarray, op: np.ndarray, target: float) -> float:
    """OP at ``target`` UM, linear between the curve's points (nan beyond its largest UM).

    OP is first made non-decreasing in UM: placing more memory never lowers overpredictions.
    """
    order = np.argsort(um, kind="stable")
    x, y = np.asarray(um)[order], np.maximum.accumulate(np.asarray(op)[order])
    return float(np.interp(target, x, y)) if target <= x[-1] + 1e-12 else float("nan")


def um_at_op(um: np.ndarray, op: np.ndarray, target: float) -> float:
    """UM at ``target`` OP, linear between the curve's points (0 below its smallest OP)."""
    order = np.argsort(op, kind="stable")
    x, y = np.asarray(op)[order], np.maximum.accumulate(np.asarray(um)[order])
    return float(np.interp(target, x, y)) if target >= x[0] - 1e-12 else 0.0
