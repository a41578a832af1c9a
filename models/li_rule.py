"""A single-counter LI rule as a model: the heuristic the forest must beat, deployable like it.

Pond's baselines call a workload insensitive when one counter (DRAM bound, memory bound, L3 miss
latency) is low. As an estimator, the rule scores ``s / (s + x)`` for counter value ``x >= 0``,
with ``s`` the training workloads' median: strictly decreasing in the counter (no two values
tie, so a threshold can cut anywhere) and in (0, 1], on the scale the solver's thresholds sweep.
It is a score, not a calibrated probability; the solver only counts workloads above a threshold.
A missing counter counts as 0, as the forest's imputer does. The ONNX graph does the same
float32 operations, so parity is exact.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.base import BaseEstimator, ClassifierMixin

from pond.models.onnx_export import ONNX_OPSET


class CounterRule(ClassifierMixin, BaseEstimator):
    """Low ``X[:, feature]`` = insensitive."""

    def __init__(self, feature: int = 0, name: str = ""):
        self.feature = feature
        self.name = name

    def _column(self, X: np.ndarray) -> np.ndarray:
        x = np.asarray(X, dtype=np.float32)[:, self.feature]
        return np.where(np.isnan(x), np.float32(0.0), x)

    def fit(self, X: np.ndarray, y: np.ndarray | None = None) -> CounterRule:
        med = np.float32(np.median(np.maximum(self._column(X), 0))) if len(X) else np.float32(0)
        self.scale_ = med if med > 0 else np.float32(1.0)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        x = np.maximum(self._column(X), np.float32(0))
        p = (self.scale_ / (self.scale_ + x)).astype(np.float32)
        return np.column_stack([np.float32(1.0) - p, p]).astype(np.float32)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (self.predict_proba(X)[:, 1] > 0.5).astype(np.int64)


def export_rule(rule: CounterRule, n_features: int) -> bytes:
    """ONNX graph with the forest's interface: input ``X`` [n, n_features] float32, outputs
    ``label`` int64 [n] and ``probabilities`` float32 [n, 2]."""
    inits = [numpy_helper.from_array(np.array([rule.feature], dtype=np.int64), "feature"),
             numpy_helper.from_array(np.array([rule.scale_], dtype=np.float32), "scale"),
             numpy_helper.from_array(np.array([0.0], dtype=np.float32), "zero"),
             numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one"),
             numpy_helper.from_array(np.array([0.5], dtype=np.float32), "half"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    nodes = [
        helper.make_node("Gather", ["X", "feature"], ["col"], axis=1),          # [n, 1]
        helper.make_node("IsNaN", ["col"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "col"], ["filled"]),
        helper.make_node("Max", ["filled", "zero"], ["x"]),
        helper.make_node("Add", ["scale", "x"], ["denominator"]),
        helper.make_node("Div", ["scale", "denominator"], ["p"]),
        helper.make_node("Sub", ["one", "p"], ["q"]),
        helper.make_node("Concat", ["q", "p"], ["probabilities"], axis=1),
        helper.make_node("Greater", ["p", "half"], ["above"]),
        helper.make_node("Cast", ["above"], ["label2d"], to=TensorProto.INT64),
        helper.make_node("Squeeze", ["label2d", "axis1"], ["label"]),
    ]
    graph = helper.make_graph(
        nodes, f"li_rule_{rule.name or rule.feature}",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                              producer_name="pond-znuma")
    onnx.checker.check_model(model)
    return model.SerializeToString()
