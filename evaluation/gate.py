"""The promotion gate: may tonight's bundle replace the champion the service follows?

Both bundles are judged on the same VMs (the evaluation day of the candidate) with their own
models, policy and snapshot, so the comparison is the one the service would live through.
"""

from __future__ import annotations

from typing import Any

from pond.core.params import GateParams


def gate(candidate: dict[str, Any], champion: dict[str, Any] | None, budget: float,
         p: GateParams, unreadable: str | None = None) -> tuple[bool, str]:
    """(promote, reason). ``candidate``/``champion``: realized outcomes of the policy each serves
    (evaluation.combined.summarize and evaluation.qos.summarize, and ``served_policy``). The budget bounds the
    mispredictions the QoS monitor leaves slowed (``mispredictions_unmitigated``; the raw figure is in the reason).
    A changed ``optimize.serve`` is the operator's choice: it passes on the budget alone, since the policies put
    memory on the pool differently (what each saves is simulate's answer, not pool share). ``unreadable``: why
    the champion there is could not be judged (``registry.champion_on``); it is then judged on the budget alone."""
    raw, pool = candidate["mispredictions_conservative"], candidate["pool_share"]
    mis = candidate.get("mispredictions_unmitigated", raw)
    if mis > budget:
        return False, (f"realized mispredictions {mis:.2%} after the QoS monitor ({raw:.2%} before) exceed the "
                       f"budget {budget:.2%}")
    if champion is None:
        why = "no champion yet" if unreadable is None else f"the champion cannot be read by this code ({unreadable})"
        return True, f"{why}; realized mispredictions {mis:.2%} within the budget {budget:.2%}"
    mine, theirs = candidate.get("served_policy", "combined"), champion.get("served_policy", "combined")
    if mine != theirs:   # pool share is not comparable across policies (a capped or UM-only one puts less there)
        return True, (f"the served policy changed from {theirs} to {mine} (optimize.serve / pool_cap): pool share "
                      f"{pool:.1%} vs the champion's {champion['pool_share']:.1%} is not compared; realized "
                      f"mispredictions {mis:.2%} within the budget {budget:.2%}")
    drop = champion["pool_share"] - pool
    if drop > p.max_pool_share_drop:
        return False, (f"pool share {pool:.1%} is {drop:.1%} below the champion's {champion['pool_share']:.1%} "
                       f"on the same VMs (allowed drop {p.max_pool_share_drop:.1%})")
    return True, (f"realized mispredictions {mis:.2%} within the budget {budget:.2%}; pool share {pool:.1%} "
                  f"vs the champion's {champion['pool_share']:.1%} on the same VMs")
