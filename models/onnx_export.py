"""ONNX export with parity checked, not assumed (docs/libraries.md). Scoring lives in ``models.runtime``."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import onnxmltools
from onnxmltools.convert.common.data_types import FloatTensorType
from skl2onnx import to_onnx
from sklearn.pipeline import Pipeline

from pond.core.errors import ModelError
from pond.models import lgbm_onnx
from pond.models.runtime import insensitive_proba, onnx_p_insensitive, session

ONNX_OPSET = 17
ONNX_OPSET_LIGHTGBM = 15  # the highest onnxmltools' LightGBM converter supports


def export_li(model: Pipeline, n_features: int) -> bytes:
    forest = model.named_steps["forest"]
    sample = np.zeros((1, n_features), dtype=np.float32)
    onx = to_onnx(model, sample, options={id(forest): {"zipmap": False}}, target_opset=ONNX_OPSET)
    return onx.SerializeToString()



def forest_splits(model: Pipeline, n_trees: int = 10) -> list[tuple[int, float]]:
    return [(int(t.tree_.feature[i]), float(t.tree_.threshold[i]))
            for t in model.named_steps["forest"].estimators_[:n_trees] for i in np.flatnonzero(t.tree_.feature >= 0)]


def lightgbm_splits(booster: lgb.Booster) -> list[tuple[int, float]]:
    """Numeric splits (feature index, threshold); categorical ones compare codes, not thresholds."""
    t = booster.trees_to_dataframe()
    t = t[t["decision_type"] == "<="]
    index = {name: i for i, name in enumerate(booster.feature_name())}
    return [(index[f], float(v)) for f, v in zip(t["split_feature"], t["threshold"])]


def boundary_rows(splits: list[tuple[int, float]], X: np.ndarray, n: int = 200, seed: int = 0) -> np.ndarray:
    """Rows whose features sit exactly on, just below and just above split thresholds."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(splits), size=min(n, len(splits)), replace=False)
    base = X[rng.integers(0, len(X), size=len(pick))].astype(np.float32)
    feature = np.array([splits[k][0] for k in pick], dtype=int)
    thr = np.array([splits[k][1] for k in pick]).astype(np.float32)
    out = []
    for value in (thr, np.nextafter(thr, np.float32(-np.inf)), np.nextafter(thr, np.float32(np.inf))):
        rows = base.copy()
        rows[np.arange(len(pick)), feature] = value
        out.append(rows)
    return np.vstack(out).astype(np.float32)


def check_parity(model: Pipeline, onnx_bytes: bytes, X: np.ndarray, atol: float = 1e-5) -> float:
    """Max |p_sklearn - p_onnx| over ``X``; raises ModelError when above ``atol``."""
    classes = [int(c) for c in model.classes_]
    ref = insensitive_proba(model.predict_proba(X), classes)
    got = onnx_p_insensitive(session(onnx_bytes), X, classes)
    diff = float(np.max(np.abs(ref - got))) if len(X) else 0.0
    if diff > atol:
        raise ModelError(f"ONNX export differs from the native model by {diff:.3g} (> {atol}); "
                         "do not serve it: check the skl2onnx version and feature dtypes (float32)")
    return diff


def export_um(booster: lgb.Booster) -> bytes:
    """The served UM graph: set-membership splits (models.lgbm_onnx), 3x faster than onnxmltools' chains."""
    return lgbm_onnx.to_onnx(booster, graph_name="untouched_memory")


def export_um_onnxmltools(booster: lgb.Booster) -> bytes:
    """onnxmltools' conversion of the same booster: the independent oracle the tests compare against."""
    n = booster.num_feature()
    onx = onnxmltools.convert_lightgbm(booster, initial_types=[("X", FloatTensorType([None, n]))],
                                       zipmap=False, target_opset=ONNX_OPSET_LIGHTGBM)
    onx.graph.name = "untouched_memory"  # the converter names the graph with a random uuid
    return onx.SerializeToString()


def check_regressor_parity(booster: lgb.Booster, onnx_bytes: bytes, X: np.ndarray, atol: float = 1e-4) -> float:
    """Max |LightGBM - ONNX| over ``X``; raises ModelError when above ``atol`` (docs/libraries.md)."""
    X = np.asarray(X, dtype=np.float32)
    sess = session(onnx_bytes)
    got = sess.run(None, {sess.get_inputs()[0].name: X})[0].ravel()
    diff = float(np.max(np.abs(booster.predict(X) - got))) if len(X) else 0.0
    if diff > atol:
        raise ModelError(f"ONNX export of the UM model differs from LightGBM by {diff:.3g} (> {atol}); "
                         "do not serve it: are thresholds float32 (models.um.float32_thresholds)?")
    return diff


PARITY_ROWS = 100_000   # seen rows a parity check runs on: all of the built-in fleet's 72,000, a sample beyond


def parity_sample(X: np.ndarray, seed: int, n: int = PARITY_ROWS) -> np.ndarray:
    """At most ``n`` of the rows, seeded, in their order: at 16,000 VMs a day a night's 286,000 training and
    calibration rows took ONNX Runtime and LightGBM 1.8 s, 14 times a backtest, for a check the split-threshold
    rows (``boundary_rows``) make sharper than more of the same rows would."""
    if len(X) <= n:
        return X
    return X[np.sort(np.random.default_rng(seed).choice(len(X), n, replace=False))]


def nan_rows(X: np.ndarray, seed: int) -> np.ndarray:
    """Rows with missing counters, for the parity check: the service sees them."""
    rng = np.random.default_rng(seed)
    rows = X[rng.integers(0, len(X), 20)].copy()
    rows[rng.random(rows.shape) < 0.3] = np.nan
    return rows
