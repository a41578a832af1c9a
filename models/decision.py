"""The per-VM decision of docs/design.md; the one implementation evaluation and serving share.

    history and P(insensitive) >= li_threshold   -> pool_only: everything on the pool
    else pool_gb = floor(u * memory_gb), u = clip(raw UM prediction - conformal offset, 0, 1)
         pool_gb == 0 -> local_only;  pool_gb > 0 -> znuma of pool_gb, the rest local

With a *pool cap* ``c < 1`` no VM puts more than ``floor(c * memory_gb)`` on the pool: a VM called
insensitive gets a zNUMA of exactly that, any other at most that. The models say how much of a VM
may go to the pool; the cap says how much of it a provider wants there. Pools sized by per-server
and per-pool peaks reward an even share on every server over whole VMs on the pool
(``simulator.pool_fit``). A capped VM never has more on the pool than the uncapped rule gives it,
so it cannot be mispredicted where the uncapped decision was not.

The rule is written once, as a compiled scalar function (``compiled_rules``). ``decide`` runs it over
arrays in a compiled loop (evaluation, batches); ``decide_one`` calls it on one VM, which costs
about a microsecond where ten numpy calls on length-1 arrays cost tens (the scheduler's path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from pond.models.names import capped_policy_name
from pond.models.policy import Policy

POOL_ONLY, ZNUMA, LOCAL_ONLY = "pool_only", "znuma", "local_only"
LABELS = (LOCAL_ONLY, ZNUMA, POOL_ONLY)          # indexed by the rule's code
_LABELS = np.array(LABELS)


@dataclass(frozen=True)
class PolicyKnobs:
    li_threshold: float | None   # None: the LI model is not used
    um_offset: float | None      # None: the UM model is not used (no zNUMA)
    pool_cap: float | None = None  # largest share of a VM on the pool; None: no cap (Pond's rule)

    def floats(self) -> tuple[float, float, float]:
        """The knobs as the compiled rule takes them: NaN stands for "not used"."""
        return (math.nan if self.li_threshold is None else float(self.li_threshold),
                math.nan if self.um_offset is None else float(self.um_offset),
                math.nan if self.pool_cap is None else float(self.pool_cap))


class Decision(NamedTuple):
    decision: str
    local_gb: float
    pool_gb: float
    znuma_gb: float
    untouched_fraction: float
    li_called: bool              # the LI model called the VM insensitive (pool-only, or capped zNUMA)


@cache
def compiled_rules() -> tuple[Any, Any]:
    """(the rule for one VM, the rule over arrays) as numba dispatchers, compiled on first use (and cached on disk)
    so that importing this module stays cheap. Each new combination of input types compiles once more (their
    ``signatures``), which is why ``decide`` hands the array rule one combination only."""
    import numba

    @numba.njit(cache=True)
    def rule(memory_gb, has_history, p_insensitive, um_raw, li_threshold, um_offset, pool_cap):  # pragma: no cover
        # NaN P(insensitive) (no history features) or NaN threshold (LI unused) compares False
        called = has_history and p_insensitive >= li_threshold
        capped = pool_cap < 1.0      # NaN: no cap
        u = 0.0
        if not math.isnan(um_offset):
            u = um_raw - um_offset
            if not u > 0.0:          # also a NaN prediction: nothing goes to the pool
                u = 0.0
            elif u > 1.0:
                u = 1.0
        if called and not capped:
            return 2, memory_gb, 0.0, u, True
        share = pool_cap if called else (min(u, pool_cap) if capped else u)
        if not share > 0.0:
            share = 0.0
        znuma = math.floor(share * memory_gb + 1e-9)   # whole GB, rounded down
        return (1 if znuma > 0.0 else 0), znuma, znuma, u, called

    @numba.njit(cache=True)
    def rule_many(memory_gb, has_history, p_insensitive, um_raw, li_threshold, um_offset, pool_cap):  # pragma: no cover
        n = memory_gb.shape[0]
        code = np.empty(n, np.int64)
        pool = np.empty(n)
        znuma = np.empty(n)
        u = np.empty(n)
        called = np.empty(n, np.bool_)
        for i in range(n):
            code[i], pool[i], znuma[i], u[i], called[i] = rule(memory_gb[i], has_history[i], p_insensitive[i],
                                                               um_raw[i], li_threshold, um_offset, pool_cap)
        return code, pool, znuma, u, called

    return rule, rule_many


def decide(memory_gb: np.ndarray, has_history: np.ndarray, p_insensitive: np.ndarray,
           um_raw: np.ndarray, knobs: PolicyKnobs) -> dict[str, np.ndarray]:
    """The decision for arrays of VMs (keys as ``Decision``'s fields, each an array).

    Every input is made a writable C array: numba compiles a separate rule for read-only arrays (an Arrow batch's
    columns are), which cost the first such batch after each start 0.3 s that ``Engine.warm`` had not paid."""
    memory_gb = np.require(memory_gb, np.float64, ["C", "W"])
    n = len(memory_gb)
    has_history = np.require(has_history, np.bool_, ["C", "W"])
    p = np.require(p_insensitive, np.float64, ["C", "W"])
    raw = np.require(um_raw, np.float64, ["C", "W"])
    if not len(has_history) == len(p) == len(raw) == n:
        raise ValueError(f"decide: {n} memory sizes, {len(has_history)} history flags, {len(p)} P(insensitive), "
                         f"{len(raw)} UM predictions; pass one of each per VM")
    code, pool, znuma, u, called = compiled_rules()[1](memory_gb, has_history, p, raw, *knobs.floats())
    return {"decision": _LABELS[code], "local_gb": memory_gb - pool, "pool_gb": pool, "znuma_gb": znuma,
            "untouched_fraction": u, "li_called": called}


def pool_gb(untouched: np.ndarray, memory_gb: np.ndarray) -> np.ndarray:
    """Whole GB exposed as zNUMA for a predicted untouched fraction (any broadcastable shapes)."""
    u, mem = np.broadcast_arrays(np.asarray(untouched, dtype=np.float64), np.asarray(memory_gb, dtype=np.float64))
    d = decide(mem.ravel(), np.zeros(mem.size, np.bool_), np.full(mem.size, math.nan), u.ravel(), PolicyKnobs(None, 0.0))
    return d["pool_gb"].reshape(u.shape)


def decide_one(memory_gb: float, has_history: bool, p_insensitive: float, um_raw: float,
               knobs: tuple[float, float, float]) -> Decision:
    """The same rule for one VM; ``knobs`` is ``PolicyKnobs.floats()``, converted once by the caller."""
    code, pool, znuma, u, called = compiled_rules()[0](memory_gb, has_history, p_insensitive, um_raw, *knobs)
    return Decision(LABELS[code], memory_gb - pool, pool, znuma, u, called)


def policy_knobs(policy: Policy) -> dict[str, PolicyKnobs]:
    """The optimized policy and its LI-only / UM-only alternatives, from ``policy.json``; and under
    ``served``, the one the service applies (``serve``: one of them, with its pool cap, or ``all_local`` where
    the sizing answer buys no pool)."""
    alt = policy.alternatives
    um = policy.um.offset if policy.um.enabled else None
    knobs = {"combined": PolicyKnobs(policy.li.threshold, um),
             "li_only": PolicyKnobs(alt["li_only"].li_threshold, None),
             "um_only": PolicyKnobs(None, alt["um_only"].um_offset)}
    served = knobs.get(policy.serve.policy, PolicyKnobs(None, None))     # all_local: neither model puts GB on a pool
    return knobs | {"served": replace(served, pool_cap=policy.serve.pool_cap)}


def served_name(policy: Policy) -> str:
    """The served policy's name where policies are listed side by side: ``um_only``, ``combined_cap30pct``."""
    cap = policy.serve.pool_cap
    return policy.serve.policy if cap is None or cap >= 1 else capped_policy_name(policy.serve.policy, cap)


