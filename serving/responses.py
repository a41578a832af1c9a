"""The one response builder: an allocation answers the same fields, in the same order, on every path (the
single route, its hot path in ``serving.hot``, a JSON batch; ``serving.columnar`` writes the Arrow batch's
columns from the same names)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from starlette.responses import Response

from pond.serving.engine import Engine

ALLOCATION_FIELDS = ("decision", "memory_gb", "local_gb", "pool_gb", "znuma_gb")


def json_response(obj: Any, status: int = 200) -> Response:
    """orjson, not FastAPI's encoder: the response schemas document the routes, they do not re-validate."""
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def allocation_rows(cols: dict[str, list], out: dict[str, np.ndarray], engine: Engine) -> list[dict[str, Any]]:
    """Response objects, in request order (NaN P(insensitive) -> null)."""
    p = [None if x != x else x for x in out["p_insensitive"].tolist()]   # noqa: PLR0124  NaN, without a call
    cols_out = [out[k].tolist() for k in ALLOCATION_FIELDS]
    policy = engine.policy_summary
    return [{"vm_id": vm, **dict(zip(ALLOCATION_FIELDS, vals)), "p_insensitive": pi, "untouched_fraction": u,
             "has_history": h, "customer_history": c, "model_version": engine.version, "policy": policy}
            for vm, *vals, pi, u, h, c in zip(cols["vm_id"], *cols_out, p, out["untouched_fraction"].tolist(),
                                               out["has_history"].tolist(), out["customer_history"].tolist())]


def allocation_row(vm_id: str, out: dict[str, Any], engine: Engine) -> dict[str, Any]:
    """The response object of ``Engine.allocate_one`` (the same fields, in the same order, as a batch's)."""
    p = out["p_insensitive"]
    nan = p != p   # noqa: PLR0124  NaN, without a call
    return {"vm_id": vm_id, **{k: out[k] for k in ALLOCATION_FIELDS}, "p_insensitive": None if nan else p,
            "untouched_fraction": out["untouched_fraction"], "has_history": out["has_history"],
            "customer_history": out["customer_history"], "model_version": engine.version,
            "policy": engine.policy_summary}
