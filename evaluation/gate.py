"""The promotion gate: may tonight's bundle replace the champion the service follows?

Both bundles are judged on the same VMs (the evaluation day of the candidate) with their own
models, policy and snapshot, so the comparison is the one the service would live through.
"""

from __future__ import annotations

from typing import Any

from core.params import GateParams


def gate(candidate: dict[str, Any], champion: dict[str, Any] | None, budget: float,
         p: GateParams) -> tuple[bool, str]:
    """(promote, reason). ``candidate``/``champion``: realized outcomes (evaluation.combined.summarize)."""
    mis, pool = candidate["mispredictions_conservative"], candidate["pool_share"]
    if mis > budget:
        return False, f"realized mispredictions {mis:.2%} exceed the budget {budget:.2%}"
    if champion is None:
        return True, f"no champion yet; realized mispredictions {mis:.2%} within the budget {budget:.2%}"
    drop = champion["pool_share"] - pool
    if drop > p.max_pool_share_drop:
        return False, (f"pool share {pool:.1%} is {drop:.1%} below the champion's {champion['pool_share']:.1%} "
                       f"on the same VMs (allowed drop {p.max_pool_share_drop:.1%})")
    return True, (f"realized mispredictions {mis:.2%} within the budget {budget:.2%}; pool share {pool:.1%} "
                  f"vs the champion's {champion['pool_share']:.1%} on the same VMs")
