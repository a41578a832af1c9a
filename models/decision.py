"""The per-VM decision of DESIGN.md, vectorized; the one implementation evaluation and serving share.

    history and P(insensitive) >= li_threshold   -> pool_only: everything on the pool
    else pool_gb = floor(u * memory_gb), u = clip(raw UM prediction - conformal offset, 0, 1)
         pool_gb == 0 -> local_only;  pool_gb > 0 -> znuma of pool_gb, the rest local
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POOL_ONLY, ZNUMA, LOCAL_ONLY = "pool_only", "znuma", "local_only"
_LABELS = np.array([LOCAL_ONLY, ZNUMA, POOL_ONLY])   # indexed by (znuma > 0) + 2 * pool_only


@dataclass(frozen=True)
class PolicyKnobs:
    li_threshold: float | None   # None: the LI model is not used
    um_offset: float | None      # None: the UM model is not used (no zNUMA)


def pool_gb(untouched: np.ndarray, memory_gb: np.ndarray) -> np.ndarray:
    """Whole GB exposed as zNUMA for a predicted untouched fraction: rounded down, never negative."""
    return np.floor(np.clip(untouched, 0.0, 1.0) * memory_gb + 1e-9)


def decide(memory_gb: np.ndarray, has_history: np.ndarray, p_insensitive: np.ndarray,
           um_raw: np.ndarray, knobs: PolicyKnobs) -> dict[str, np.ndarray]:
    memory_gb = np.asarray(memory_gb, dtype=float)
    n = len(memory_gb)
    if knobs.li_threshold is None:
        pool_only = np.zeros(n, dtype=bool)
    else:
        # NaN (no history) compares False: such a VM is never pool-only
        pool_only = np.asarray(has_history, dtype=bool) & (np.asarray(p_insensitive, dtype=float) >= knobs.li_threshold)
    if knobs.um_offset is None:
        u = np.zeros(n)
    else:
        u = np.clip(np.asarray(um_raw, dtype=float) - knobs.um_offset, 0.0, 1.0)
    znuma = np.where(pool_only, 0.0, pool_gb(u, memory_gb))
    pool = np.where(pool_only, memory_gb, znuma)
    decision = _LABELS[(znuma > 0) + 2 * pool_only]
    return {"decision": decision, "local_gb": memory_gb - pool, "pool_gb": pool, "znuma_gb": znuma,
            "untouched_fraction": u}


def policy_knobs(policy: dict) -> dict[str, PolicyKnobs]:
    """The optimized policy and its LI-only / UM-only alternatives, from ``policy.json``."""
    alt = policy["alternatives"]
    um = policy["um"]["offset"] if policy["um"]["enabled"] else None
    return {"combined": PolicyKnobs(policy["li"]["threshold"], um),
            "li_only": PolicyKnobs(alt["li_only"]["li_threshold"], None),
            "um_only": PolicyKnobs(None, alt["um_only"]["um_offset"])}
