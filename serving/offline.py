"""`pond predict`: a file of VM requests -> a file of allocations, through the service's engine.

For offline evaluation and the scheduler's bulk replays. Input: CSV or Parquet with the ``vms``
request columns (``telemetry.request``: vm_id, customer_id, vm_type, vcpus, memory_gb, os,
region; cluster_id optional; other columns ignored). Output: Parquet or CSV with the service's response fields.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.errors import InputFormatError
from pond.serving.engine import Engine
from pond.telemetry import request
from pond.telemetry.atomic import write_atomic
from pond.telemetry.io import read_raw

TABLE = request.TABLE


def request_columns(df: pd.DataFrame) -> dict[str, Any]:
    """Validated request columns (``telemetry.request``'s rules, as import and the HTTP routes apply
    them); errors name the column and the first offending vm_ids."""
    df = request.strip_matched(df)
    request.check_frame(df, TABLE)
    return request.columns_of(df)


def allocations_frame(cols: dict[str, list], out: dict[str, np.ndarray], engine: Engine) -> pd.DataFrame:
    return pd.DataFrame({
        "vm_id": cols["vm_id"], "decision": out["decision"], "memory_gb": out["memory_gb"],
        "local_gb": out["local_gb"], "pool_gb": out["pool_gb"], "znuma_gb": out["znuma_gb"],
        "p_insensitive": out["p_insensitive"], "untouched_fraction": out["untouched_fraction"],
        "has_history": out["has_history"], "customer_history": out["customer_history"],
        "model_version": engine.version,
    })


def predict_file(engine: Engine, in_path: Path, out_path: Path) -> pd.DataFrame:
    if not in_path.exists():
        raise InputFormatError(f"{in_path} not found")
    cols = request_columns(read_raw(in_path, TABLE))
    frame = allocations_frame(cols, engine.allocate(cols), engine)
    if out_path.suffix == ".csv":
        write_atomic(out_path, frame.to_csv(index=False))
    else:
        write_atomic(out_path, frame.to_parquet(index=False))
    return frame


def time_one_by_one(engine: Engine, cols: dict[str, list],
                    um_cache: dict | None) -> tuple[list[float], list[bool]]:
    """Seconds per ``allocate_one`` call over the requests in order, and whether each ran the UM
    model. The engine starts from ``um_cache``; None empties the cache before every call (the cost
    of the models themselves, as when comparing versions)."""
    eng = replace(engine, um_cache=dict(um_cache) if um_cache is not None else {})
    times, ran = [], []
    for r in zip(*(cols[c] if cols[c] is not None else [None] * len(cols["vm_id"]) for c in request.SHAPE)):
        if um_cache is None:
            eng.um_cache.clear()
        timings: dict[str, float] = {}
        t = time.perf_counter()
        eng.allocate_one(*r, timings=timings)
        times.append(time.perf_counter() - t)
        ran.append("infer" in timings)
    return times, ran
