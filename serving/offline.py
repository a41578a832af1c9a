"""`pond predict`: a file of VM requests -> a file of allocations, through the service's engine.

For offline evaluation and the scheduler's bulk replays. Input: CSV or Parquet with the ``vms``
request columns (vm_id, customer_id, vm_type, vcpus, memory_gb, os, region; cluster_id
optional; other columns ignored). Output: Parquet or CSV with the service's response fields.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from features.build import REQUEST_SHAPE
from serving.engine import REQUEST_COLUMNS, Engine, parse_vm_type
from telemetry.errors import ContractError, InputFormatError
from telemetry.io import read_raw, write_atomic

TABLE = "requests"


def _bad(column: str, problem: str, rows: pd.Series, fix: str) -> ContractError:
    return ContractError(TABLE, problem, column=column, rows=rows.astype(str).head(5).tolist(), fix=fix)


def request_columns(df: pd.DataFrame) -> dict[str, list]:
    """Validated request columns; errors name the column and the first offending vm_ids."""
    missing = [c for c in REQUEST_COLUMNS if c not in df.columns]
    if missing:
        raise ContractError(TABLE, f"missing columns {missing}", column=missing[0],
                            fix=f"provide {list(REQUEST_COLUMNS)} (cluster_id optional)")
    ids = df["vm_id"].astype(str)
    for c in ("vm_id", "customer_id", "vm_type", "os", "region"):
        empty = df[c].isna() | (df[c].astype(str).str.len() == 0)
        if empty.any():
            raise _bad(c, f"{c} must be a non-empty string", ids[empty], f"fill {c} for every request")
    for c in ("vcpus", "memory_gb"):
        num = pd.to_numeric(df[c], errors="coerce").astype("float64")
        bad = ~(num > 0) | ~np.isfinite(num)
        if bad.any():
            raise _bad(c, f"{c} must be a number > 0", ids[bad], f"fix {c} in these rows")
    types = df["vm_type"].astype(str)
    uniq = types.drop_duplicates()
    bad_types = set(uniq[[parse_vm_type(t) is None for t in uniq]])   # per distinct type, not per row
    if bad_types:
        raise _bad("vm_type", "vm_type must look like Standard_<FAMILY><SIZE>[suffix]_v<GEN>",
                   ids[types.isin(bad_types)], "use Azure size names, e.g. Standard_D4s_v3")
    cols = {c: df[c].astype(str).tolist() for c in ("vm_id", "customer_id", "vm_type", "os", "region")}
    cols["vcpus"] = pd.to_numeric(df["vcpus"]).astype("float64").to_numpy()
    cols["memory_gb"] = pd.to_numeric(df["memory_gb"]).astype("float64").to_numpy()
    cols["cluster_id"] = (df["cluster_id"].astype(object).where(df["cluster_id"].notna(), None).tolist()
                          if "cluster_id" in df else None)
    return cols


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
    cols = request_columns(read_raw(in_path))
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
    for r in zip(*(cols[c] if cols[c] is not None else [None] * len(cols["vm_id"]) for c in REQUEST_SHAPE)):
        if um_cache is None:
            eng.um_cache.clear()
        timings: dict[str, float] = {}
        t = time.perf_counter()
        eng.allocate_one(*r, timings=timings)
        times.append(time.perf_counter() - t)
        ran.append("infer" in timings)
    return times, ran
