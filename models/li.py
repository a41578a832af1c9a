"""Latency-insensitivity (LI) model: RandomForest on PMU/TMA features of lab workloads (Pond §4.4).

A workload is *insensitive* at (latency ratio r, PDM) when its mean slowdown entirely on pool
memory (spilled 100%) is within the PDM. The forest keeps scikit-learn's default
hyperparameters; a constant imputer in front makes NaN features (e.g. no L3 misses, so no
miss latency) explicit, and is exported to ONNX with the forest so serving needs no code for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline

from pond.core.errors import ContractError
from pond.features.tma import TMA_COLUMNS

FULL_POOL_PCT = 100.0


# Pond's sensitivity rule, in one place: a run (or a VM) is slowed when its slowdown exceeds the PDM; a
# workload is latency-insensitive when its slowdown entirely on the pool is within it (§4.3). NaN is neither.
def exceeds_pdm(slowdown_pct: Any, pdm: float) -> Any:
    return slowdown_pct > pdm


def within_pdm(slowdown_pct: Any, pdm: float) -> Any:
    return slowdown_pct <= pdm


def at_full_pool(spilled_pct: Any) -> Any:
    """The runs (or spills) with all of the memory on the pool: the LI label's."""
    return spilled_pct == FULL_POOL_PCT


def li_feature_names(features: pd.DataFrame) -> list[str]:
    """Normalized event rates then TMA metrics, in the order the model and ONNX input use."""
    rates = [c for c in features.columns if c.startswith("rate:")]
    return rates + [c for c in TMA_COLUMNS if c in features.columns]


def full_pool_slowdown(slowdowns: pd.DataFrame, ratio: float) -> pd.Series:
    """Mean slowdown (%) entirely on pool at ``ratio``, per workload."""
    sel = slowdowns[np.isclose(slowdowns["latency_ratio"], ratio) & at_full_pool(slowdowns["spilled_pct"])]
    if sel.empty:
        full = at_full_pool(slowdowns["spilled_pct"])
        have = sorted(slowdowns.loc[full, "latency_ratio"].unique().tolist())
        if not have:
            spills = sorted(slowdowns["spilled_pct"].unique().tolist())
            raise ContractError("slowdowns", f"no run has its memory entirely on pool (spilled_pct=100); the spills "
                                f"measured are {spills}", column="spilled_pct", fix="add each workload's run with "
                                "spilled_pct 100: the LI label is the full-pool slowdown (Pond §4.3)")
        raise ContractError("slowdowns", f"no runs entirely on pool (spilled_pct=100) at latency_ratio {ratio}",
                            column="latency_ratio", fix=f"measure it, or train on the ratios with full-pool runs: "
                            f"{have}")
    return sel.groupby("workload_id")["slowdown_pct"].mean()


def li_labels(slowdowns: pd.DataFrame, ratio: float, pdm: float) -> pd.Series:
    """1 = insensitive (full-pool slowdown <= PDM), 0 = sensitive; indexed by workload_id."""
    return within_pdm(full_pool_slowdown(slowdowns, ratio), pdm).astype(np.int8).rename("insensitive")


def training_set(features: pd.DataFrame, slowdowns: pd.DataFrame, ratio: float,
                 pdm: float) -> tuple[np.ndarray, np.ndarray, list[str], pd.Index]:
    """(X float32, y, feature names, workload ids) for workloads that have both features and labels."""
    y = li_labels(slowdowns, ratio, pdm)
    f = features.set_index("workload_id")
    ids = f.index.intersection(y.index)
    if len(ids) < 10:
        raise ContractError("slowdowns", f"only {len(ids)} workloads have both counters and full-pool "
                            f"slowdowns at ratio {ratio}", fix="characterize more workloads in the lab")
    names = li_feature_names(features)
    return f.loc[ids, names].to_numpy(np.float32), y.loc[ids].to_numpy(), names, ids


def make_li_model(seed: int) -> Pipeline:
    return Pipeline([
        ("impute", SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True)),
        ("forest", RandomForestClassifier(random_state=seed)),
    ])


BASELINES = {"dram_bound": "tma_dram_bound", "memory_bound": "tma_memory_bound",
             "l3_miss_latency": "l3_miss_latency"}
