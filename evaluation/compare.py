"""Side by side: two bundles (registered versions or directories) of the nightly pipeline.

Reads only what a bundle carries (models.bundle): policy, held-out curves, metrics, snapshot and
a sample of its evaluation day's requests. Drift compares the two snapshots' feature
distributions. (The `compare` command adds the service's measured per-VM latency.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pond.models import bundle
from pond.models.bundle import BundlePaths
from pond.models.decision import served_name
from pond.models.names import ALL_LOCAL, at_ratio, li_model_name
from pond.models.policy import read_policy

DRIFT_COLUMNS_HISTORY = ("tma_dram_bound", "tma_memory_bound", "l3_miss_latency", "mlp", "tma_backend_bound")


def psi(expected: np.ndarray, actual: np.ndarray, bins: int = 10) -> float:
    """Population stability index of ``actual`` against ``expected``'s deciles (NaN dropped)."""
    e, a = expected[np.isfinite(expected)], actual[np.isfinite(actual)]
    if len(e) < bins or len(a) == 0:
        return float("nan")
    edges = np.unique(np.quantile(e, np.linspace(0, 1, bins + 1)))
    if len(edges) < 3:
        return 0.0
    edges[0], edges[-1] = -np.inf, np.inf
    pe = np.histogram(e, edges)[0] / len(e)
    pa = np.histogram(a, edges)[0] / len(a)
    pe, pa = np.clip(pe, 1e-6, None), np.clip(pa, 1e-6, None)
    return float(np.sum((pa - pe) * np.log(pa / pe)))


def drift(a_dir: Path, b_dir: Path) -> pd.DataFrame:
    """PSI and two-sample KS per snapshot feature (customer percentiles, workload-history TMA)."""
    rows = []
    for table, columns in (("customer_percentiles", None), ("workload_history", DRIFT_COLUMNS_HISTORY)):
        a = pd.read_parquet(BundlePaths.of(a_dir).snapshot_dir / f"{table}.parquet")
        b = pd.read_parquet(BundlePaths.of(b_dir).snapshot_dir / f"{table}.parquet")
        cols = columns or [c for c in a.columns if c.startswith("cust_")]
        for c in cols:
            if c not in a or c not in b:
                continue
            x, y = a[c].to_numpy(float), b[c].to_numpy(float)
            x, y = x[np.isfinite(x)], y[np.isfinite(y)]
            ks = stats.ks_2samp(x, y) if len(x) and len(y) else None
            rows.append({"table": table, "feature": c, "psi": psi(x, y),
                         "ks": float(ks.statistic) if ks else np.nan, "ks_pvalue": float(ks.pvalue) if ks else np.nan})
    return pd.DataFrame(rows)


def headline(bundle_dir: Path) -> dict[str, float | None]:
    """The night's figures a promotion is judged on (fractions), from what the bundle carries: the served LI
    model's held-out share called insensitive at 2% false positives, UM's memory on the pool at 4% overpredicted
    VMs, the evaluation day's realized pool share and mispredictions, and the DRAM the served policy saves in
    the replay with its interval. `register` logs them on the night's MLflow run and `pond compare` prints them,
    so the UI's comparison of two versions and the command show the same figures. None: the bundle lacks it."""
    policy = read_policy(BundlePaths.of(bundle_dir).policy)
    li = bundle.metrics(bundle_dir, "train_li").get(li_model_name(policy.latency_ratio, policy.pdm), {})
    li_fp2 = li.get(f"{li.get('selection.method', 'random_forest')}.li_at_fp2")
    served = _served_row(bundle_dir)
    sim = (bundle.metrics(bundle_dir, "simulate").get("policies", {})
           .get(at_ratio(served_name(policy), policy.latency_ratio), {}).get("recommended", {}))
    if served_name(policy) == ALL_LOCAL:     # the baseline: it saves nothing, and nothing is uncertain about that
        sim = {"savings": 0.0, "savings_interval": [0.0, 0.0]}
    lo, hi = sim.get("savings_interval") or (None, None)
    return {"li_at_fp2": None if li_fp2 is None else li_fp2 / 100,
            "um_at_op4": bundle.metrics(bundle_dir, "train_um").get("gbm.um_at_op4"),
            "realized_pool": served.get("pool_share"),
            "realized_mispredictions": served.get("mispredictions_conservative"),
            "dram_saved": sim.get("savings"), "dram_saved_lo": lo, "dram_saved_hi": hi}


def _served_row(bundle_dir: Path) -> dict[str, Any]:
    metrics = bundle.metrics(bundle_dir, "evaluate")
    return metrics.get("served") or metrics.get("combined", {})   # bundles before optimize.serve: combined


def summary(bundle_dir: Path) -> dict[str, Any]:
    info = bundle.verify(bundle_dir)
    policy = read_policy(BundlePaths.of(bundle_dir).policy)
    ev = _served_row(bundle_dir)
    size = {k: (Path(bundle_dir) / k / getattr(policy, k).model).stat().st_size for k in ("li", "um")}
    return {
        "as_of": policy.as_of, "served": served_name(policy), **headline(bundle_dir),
        "li_threshold": policy.li.threshold,
        "um_target_op": policy.um.target_op,
        "expected_li": policy.li.expected_li, "expected_um": policy.um.expected_um,
        "expected_pool": policy.expected.pool_share, "expected_fp": policy.li.expected_fp,
        "expected_op": policy.um.expected_op, "expected_mispredictions": policy.expected.mispredictions,
        "realized_li": ev.get("li_share"), "realized_um": ev.get("um_share"),
        "realized_fp": ev.get("false_positives"), "realized_op": ev.get("overpredictions"),
        "li_model_mb": size["li"] / 2 ** 20, "um_model_mb": size["um"] / 2 ** 20,
        "li_sha256": info["li_sha256"][:12], "um_sha256": info["um_sha256"][:12],
    }


def table(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame({"A": pd.Series(a), "B": pd.Series(b)})


def curves(bundle_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The bundle's LI/FP curve (its policy's ratio and PDM) and UM/OP curve."""
    p = BundlePaths.of(bundle_dir)
    policy = read_policy(p.policy)
    li = pd.read_parquet(p.li_dir / "heldout_curves.parquet")
    li = li[np.isclose(li.latency_ratio, policy.latency_ratio) & np.isclose(li.pdm, policy.pdm)]
    return li.sort_values("fp"), pd.read_parquet(p.um_dir / "heldout_curves.parquet").sort_values("op")
