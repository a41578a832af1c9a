"""Regret of a night's policy: what the best threshold pair in hindsight would have put on the
pool within the budget on that night's VMs, minus what the chosen pair put there.

Every (LI threshold, UM target) pair is replayed on the night's VMs with the decision rule the
service runs (``models.decision``): a VM the LI model calls insensitive goes to the pool whole,
every other gets the UM target's zNUMA. Realized per pair: the pool share of GB, and the share of
VMs mispredicted, counted as `evaluate` counts them (known FP, the lab error rate for pool-only
VMs without truth, OP known or confirmed so far).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.decision import PolicyKnobs, decide


def realized_grid(night: pd.DataFrame, thresholds: np.ndarray, offsets: np.ndarray,
                  error_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pool share, mispredicted share), each (len(thresholds), len(offsets)). ``night``: one row per
    VM with memory_gb, has_history, p_insensitive, um_raw, sensitive (1/0/NaN) and
    touched_known_gb (NaN: nothing known). Threshold inf and offset NaN mean "model off"."""
    mem = night["memory_gb"].to_numpy(float)
    n = max(len(mem), 1)
    p = night["p_insensitive"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        called = night["has_history"].to_numpy(bool)[None, :] & (p[None, :] >= np.asarray(thresholds)[:, None])
    sens = night["sensitive"].to_numpy(float)
    known_fp, unknown = (sens == 1.0).astype(float), np.isnan(sens).astype(float)
    touched = night["touched_known_gb"].to_numpy(float)
    pool_z, op = np.zeros((len(offsets), len(mem))), np.zeros((len(offsets), len(mem)))
    no_history = np.zeros(len(mem), bool)
    for j, off in enumerate(offsets):   # a dozen UM targets, each one compiled pass over the VMs
        if np.isnan(off):
            continue
        d = decide(mem, no_history, np.full(len(mem), np.nan), night["um_raw"].to_numpy(float), PolicyKnobs(None, off))
        pool_z[j] = d["pool_gb"]
        with np.errstate(invalid="ignore"):
            op[j] = (d["pool_gb"] > 0) & (touched > d["local_gb"] + 1e-9)
    c = called.astype(float)
    rest = 1.0 - c
    mis = (c @ known_fp + np.asarray(error_rate) * (c @ unknown))[:, None] + rest @ op.T
    pool = (c @ mem)[:, None] + rest @ pool_z.T
    return pool / mem.sum(), mis / n
