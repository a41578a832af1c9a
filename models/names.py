"""The names of models, policies and per-ratio artifacts: each written once.

``evaluate`` and ``simulate`` named the same static policy two ways (``int(f * 100)`` and
``round(100 * f)``), which disagree for 0.29; every stage and benchmark now asks here.
"""

from __future__ import annotations

ALL_LOCAL = "all_local"   # no pool: every VM's memory local (the baseline, and the answer where no pool pays)


def li_model_name(ratio: float, pdm: float) -> str:
    """An LI model's name, as its file (``<name>.onnx``) and the LI manifest call it: ``r1.82_pdm5``."""
    return f"r{ratio:g}_pdm{pdm:g}"


def static_policy_name(fraction: float) -> str:
    """A static pool policy: ``fraction`` of every VM's memory on the pool, ``static_15pct``."""
    return f"static_{round(100 * fraction)}pct"


def capped_policy_name(policy: str, cap: float) -> str:
    """``policy`` with no VM over ``cap`` of its memory on the pool: ``combined_cap30pct``."""
    return f"{policy}_cap{round(100 * cap)}pct"


def at_ratio(name: str, ratio: float) -> str:
    """``name`` for one latency ratio (a policy, a night's file stem or a score column): ``combined_r1.82``."""
    return f"{name}_r{ratio:g}"


def split_ratio(name: str) -> tuple[str, str | None]:
    """(name, ratio as written) of an ``at_ratio`` name: ``("combined", "1.82")``; ``(name, None)`` without one."""
    base, sep, ratio = name.rpartition("_r")
    try:
        float(ratio)
    except ValueError:
        return name, None
    return (base, ratio) if sep and base else (name, None)


def served_of(row: str) -> tuple[str, float | None] | None:
    """(policy, pool cap) a service can apply for a nightly policy row's name (``combined_cap30pct_r1.82`` ->
    ``("combined", 0.3)``, ``um_only_r2.22`` -> ``("um_only", None)``, ``all_local`` -> ``("all_local", None)``);
    None for a row it cannot (a static pool, an unknown name)."""
    base, _ = split_ratio(row)
    policy, sep, cap = base.rpartition("_cap")
    if sep and cap.endswith("pct") and cap[:-3].isdigit() and 0 < int(cap[:-3]) <= 100:
        base, limit = policy, int(cap[:-3]) / 100.0
    else:
        limit = None
    if base == ALL_LOCAL:
        return ALL_LOCAL, None
    return (base, limit) if base in ("combined", "li_only", "um_only") else None
