"""Regret of a night's policy: what the best threshold pair in hindsight would have put on the
pool within the budget on that night's VMs, minus what the chosen pair put there; and against the best
pair fixed over every night (``best_fixed``), the yardstick a nightly solver can reach.

Every (LI threshold, UM target) pair is replayed on the night's VMs with the decision rule the
service runs (``models.decision``): a VM the LI model calls insensitive goes to the pool whole,
every other gets the UM target's zNUMA. Realized per pair: the pool share of GB, and the share of
VMs mispredicted, counted as `evaluate` counts them (known FP, the lab error rate for pool-only
VMs without truth, OP known or confirmed so far), and what the QoS monitor leaves of them
(``unmitigated_grid``), the figure the budget bounds.

``best_admitted`` is the same fixed yardstick among the LI thresholds the lab admits (``admitted``): the best a
solver that trusts its lab can be asked to approach.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.evaluation.qos import judged_touches
from pond.models.decision import PolicyKnobs, decide
from pond.optimize.solver import error_draws, error_rate


def realized_grid(night: pd.DataFrame, thresholds: np.ndarray, offsets: np.ndarray,
                  error_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pool share, mispredicted share), each (len(thresholds), len(offsets)). ``night``: one row per
    VM with memory_gb, has_history, p_insensitive, um_raw, sensitive (1/0/NaN) and
    touched_known_gb (NaN: nothing known). Threshold inf and offset NaN mean "model off"."""
    mem = night["memory_gb"].to_numpy(float)
    n = max(len(mem), 1)
    p = night["p_insensitive"].to_numpy(float)
    sens = night["sensitive"].to_numpy(float)
    pool_z, op = _znuma(night, offsets)
    # Per threshold, sums over the VMs it calls: suffix sums in score order, not a thresholds x VMs
    # matrix (102 x 135,000 floats a night at 10M VMs). Columns: FP known, truth unknown, GB, then
    # each UM target's OP and zNUMA GB (what the called VMs no longer get).
    eligible = np.flatnonzero(night["has_history"].to_numpy(bool) & ~np.isnan(p))
    order = eligible[np.argsort(p[eligible], kind="stable")]
    cols = np.vstack([(sens == 1.0), np.isnan(sens), mem, op, pool_z])[:, order].astype(float)
    suffix = np.hstack([np.cumsum(cols[:, ::-1], axis=1)[:, ::-1], np.zeros((len(cols), 1))])
    first = np.searchsorted(p[order], np.asarray(thresholds, float), side="left")
    s = suffix[:, first]                                     # (columns, thresholds)
    k = len(offsets)
    fp, unknown, called_gb = s[0], s[1], s[2]
    op_called, z_called = s[3:3 + k].T, s[3 + k:].T          # (thresholds, targets)
    mis = (fp + np.asarray(error_rate) * unknown)[:, None] + op.sum(axis=1)[None, :] - op_called
    pool = called_gb[:, None] + pool_z.sum(axis=1)[None, :] - z_called
    return pool / mem.sum(), mis / n


def _znuma(night: pd.DataFrame, offsets: np.ndarray, touch_spill_pct: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(zNUMA GB, overpredicted) per UM target (rows; NaN: off, zeros) and VM, had every VM been given a zNUMA. With
    ``touch_spill_pct`` (``optimize.monitor.touch_spill_pct``), the second is the overpredictions the QoS monitor
    flags: those whose touched memory past the local node is at least that share of what the VM touched."""
    mem = night["memory_gb"].to_numpy(float)
    touched = night["touched_known_gb"].to_numpy(float)
    local = znuma_local_gb(night, offsets)
    pool_z = mem[None, :] - local
    with np.errstate(invalid="ignore"):
        op = ((pool_z > 0) & (touched[None, :] > local + 1e-9)).astype(float)
        if touch_spill_pct is not None:
            op *= judged_touches(touched[None, :], local, np.asarray(touch_spill_pct, float)[None, :])
    return pool_z, op


def znuma_local_gb(night: pd.DataFrame, offsets: np.ndarray) -> np.ndarray:
    """Per UM target (rows; NaN: off, all local) and VM, the local GB the target's zNUMA leaves it, had every VM been
    given one: what a touch must exceed to spill."""
    mem = night["memory_gb"].to_numpy(float)
    out = np.tile(mem, (len(offsets), 1))
    for j, off in enumerate(offsets):
        if not np.isnan(off):
            out[j] = decide(mem, np.zeros(len(mem), bool), np.full(len(mem), np.nan), night["um_raw"].to_numpy(float),
                            PolicyKnobs(None, off))["local_gb"]
    return out


def unmitigated_grid(night: pd.DataFrame, thresholds: np.ndarray, offsets: np.ndarray, error_rate: np.ndarray,
                     max_share: float, chunk: int = 16, touch_spill_pct: np.ndarray | None = None,
                     counted: np.ndarray | None = None) -> np.ndarray:
    """Per pair, the share of the night's VMs mispredicted and left slowed by the QoS monitor, as
    ``evaluation.qos.watch`` leaves them on one day: an insensitive call flagged by its own counters
    (``seen_slowed``, ``optimize.monitor.monitor_flags``) or a zNUMA that touches its node is mitigated, in order of
    creation (``created_at``; row order without it), up to ``floor(max_share x VMs)``; a pool-only VM without truth
    that is not mitigated counts the lab's ``error_rate``. ``chunk``: thresholds at a time (a chunk x VMs mask).
    ``touch_spill_pct`` (per row of ``night``): a touch is flagged only where the monitor judges it (``_znuma``).
    ``counted`` (UM targets x rows of ``night``): the overpredictions the count keeps, e.g. only those whose spill
    slows the VM past the PDM (Pond's "scheduling mispredictions", §6.4.3); None: every one (Pond's Eq. 1)."""
    order = np.argsort(night["created_at"].to_numpy(), kind="stable") if "created_at" in night.columns \
        else np.arange(len(night))
    night = night.iloc[order]
    n = max(len(night), 1)
    p = night["p_insensitive"].to_numpy(float)
    sens = night["sensitive"].to_numpy(float)
    slowed = night["seen_slowed"].to_numpy(bool)
    eligible = night["has_history"].to_numpy(bool) & ~np.isnan(p)
    _, op = _znuma(night, offsets)
    op = op.astype(bool)
    seen_op = op if touch_spill_pct is None else _znuma(night, offsets, np.asarray(touch_spill_pct)[order])[1] > 0
    counted_op = op if counted is None else op & np.asarray(counted, bool)[:, order]
    cap = np.floor(max_share * len(night) + 1e-9)
    t = np.asarray(thresholds, float)
    rate = np.asarray(error_rate, float)
    out = np.empty((len(t), len(offsets)))
    for lo in range(0, len(t), chunk):   # about 100 thresholds x a dozen targets, each a (chunk, VMs) mask
        with np.errstate(invalid="ignore"):
            called = eligible[None, :] & (p[None, :] >= t[lo:lo + chunk, None])
        fp, unknown = called & (sens == 1.0), called & np.isnan(sens)
        for j in range(len(offsets)):
            znuma_op = ~called & counted_op[j][None, :]
            flagged = (called & slowed[None, :]) | (~called & seen_op[j][None, :])
            mitigated = flagged & (np.cumsum(flagged, axis=1) <= cap)
            left = ((fp | znuma_op) & ~mitigated).sum(axis=1) + rate[lo:lo + chunk] * (unknown & ~mitigated).sum(axis=1)
            out[lo:lo + chunk, j] = left / n
    return out


def best_fixed(pools: list[np.ndarray], mispredicted: list[np.ndarray], budget: float) -> tuple[int, int] | None:
    """The pair that, kept every night, puts the most on the pool on average while keeping the budget on every
    night: the yardstick a nightly solver can be asked to approach (the per-night best in hindsight moves with
    each night's truth, so no fixed rule reaches it). None when no pair keeps the budget on every night.
    ``pools``/``mispredicted``: ``realized_grid``'s, one pair of grids per night, the same candidates each."""
    if not pools:
        return None
    ok = (np.stack(mispredicted) <= budget + 1e-12).all(axis=0)
    if not ok.any():
        return None
    mean = np.where(ok, np.stack(pools).mean(axis=0), -np.inf)
    i, j = np.unravel_index(int(np.argmax(mean)), mean.shape)
    return int(i), int(j)


def admitted(li_vm: np.ndarray, called: np.ndarray, errors: np.ndarray, level: float | None, budget: float
             ) -> np.ndarray:
    """Per LI candidate (the first: LI off), whether its calls alone fit the budget at the lab's error rate, charged
    as the solver charges it (``optimize.solver``'s posterior: its mean, or its ``level`` quantile). ``li_vm``: the
    share of recent VMs each threshold calls insensitive. A solver that trusts its lab can choose no other threshold,
    whatever its UM half."""
    q = error_rate(called, errors) if level is None else error_draws(called, errors, np.array([level]))[:, 0]
    return np.asarray(li_vm, float) * q <= budget + 1e-12


def best_admitted(pools: list[np.ndarray], mispredicted: list[np.ndarray], ok: np.ndarray, budget: float
                  ) -> tuple[int, int] | None:
    """``best_fixed`` among the pairs whose LI threshold ``ok`` admits (every UM target of an admitted threshold)."""
    return best_fixed(pools, [np.where(np.asarray(ok, bool)[:, None], m, np.inf) for m in mispredicted], budget)
