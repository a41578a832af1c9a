"""Scoring with the exported models: what the service needs from ONNX Runtime, and nothing more.

Kept apart from ``models.onnx_export`` (scikit-learn, LightGBM, skl2onnx, onnxmltools) so that
the service installs and imports only ONNX Runtime (the ``serve`` extra).
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnxruntime as ort


def session(onnx_bytes: bytes) -> ort.InferenceSession:
    """One thread per session: the service scales by requests and workers, not inside a call."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])


def insensitive_proba(proba: np.ndarray, classes: list[int] | np.ndarray) -> np.ndarray:
    """P(class 1 = insensitive) from a classifier's class probabilities; zero when the training
    set held sensitive workloads only (a forest fit on one class has one column)."""
    classes = [int(c) for c in classes]
    return proba[:, classes.index(1)] if 1 in classes else np.zeros(len(proba))


def onnx_p_insensitive(sess: ort.InferenceSession, X: np.ndarray, classes: list[int]) -> np.ndarray:
    proba = sess.run(["probabilities"], {sess.get_inputs()[0].name: np.asarray(X, dtype=np.float32)})[0]
    return insensitive_proba(proba, classes)


def p_insensitive_rows(sess: ort.InferenceSession, X: np.ndarray, classes: list[int]) -> np.ndarray:
    """``onnx_p_insensitive`` per row, NaN for a row with no feature at all (nothing known of it)."""
    if len(X) == 0:
        return np.zeros(0)
    return np.where(np.isnan(X).all(axis=1), np.nan, onnx_p_insensitive(sess, X, classes))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
