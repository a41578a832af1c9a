"""ONNX export with parity checked, not assumed (ECOSYSTEM.md), and a content hash for serving."""

from __future__ import annotations

import hashlib

import numpy as np
import onnxruntime as ort
from skl2onnx import to_onnx
from sklearn.pipeline import Pipeline

from telemetry.errors import ModelError

ONNX_OPSET = 17


def export_li(model: Pipeline, n_features: int) -> bytes:
    forest = model.named_steps["forest"]
    sample = np.zeros((1, n_features), dtype=np.float32)
    onx = to_onnx(model, sample, options={id(forest): {"zipmap": False}}, target_opset=ONNX_OPSET)
    return onx.SerializeToString()


def session(onnx_bytes: bytes) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])


def onnx_p_insensitive(sess: ort.InferenceSession, X: np.ndarray, classes: list[int]) -> np.ndarray:
    proba = sess.run(["probabilities"], {sess.get_inputs()[0].name: np.asarray(X, dtype=np.float32)})[0]
    return proba[:, classes.index(1)] if 1 in classes else np.zeros(len(X))


def boundary_rows(model: Pipeline, X: np.ndarray, n: int = 200, seed: int = 0) -> np.ndarray:
    """Rows whose features sit exactly on, just below and just above the forest's split thresholds."""
    rng = np.random.default_rng(seed)
    nodes = [(t.tree_.feature[i], t.tree_.threshold[i]) for t in model.named_steps["forest"].estimators_[:10]
             for i in np.flatnonzero(t.tree_.feature >= 0)]
    pick = rng.choice(len(nodes), size=min(n, len(nodes)), replace=False)
    base = X[rng.integers(0, len(X), size=len(pick))].copy()
    out = []
    for shift in (-np.inf, 0.0, np.inf):
        rows = base.copy()
        for r, k in enumerate(pick):
            f, thr = nodes[k]
            v = np.float32(thr)
            rows[r, f] = v if shift == 0.0 else np.nextafter(v, np.float32(shift))
        out.append(rows)
    return np.vstack(out).astype(np.float32)


def check_parity(model: Pipeline, onnx_bytes: bytes, X: np.ndarray, atol: float = 1e-5) -> float:
    """Max |p_sklearn - p_onnx| over ``X``; raises ModelError when above ``atol``."""
    classes = [int(c) for c in model.classes_]
    ref = model.predict_proba(X)[:, classes.index(1)] if 1 in classes else np.zeros(len(X))
    got = onnx_p_insensitive(session(onnx_bytes), X, classes)
    diff = float(np.max(np.abs(ref - got))) if len(X) else 0.0
    if diff > atol:
        raise ModelError(f"ONNX export differs from the native model by {diff:.3g} (> {atol}); "
                         "do not serve it: check the skl2onnx version and feature dtypes (float32)")
    return diff


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
