"""The LI forest rewritten for ai.onnx.ml 5 (models.decision_graph) scores as skl2onnx's classifier, bit for bit,
trees of one leaf included (a bootstrap sample too small to split)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline

from pond.models.decision_graph import ML, ML_OPSET, OPSET, forest_as_tree_ensemble
from pond.models.onnx_export import export_li
from pond.models.runtime import onnx_p_insensitive, session


@pytest.mark.parametrize("min_split", [2, 1000])     # 1000: every tree a single leaf
def test_the_rewritten_forest_scores_as_the_classifier(min_split):
    rng = np.random.default_rng(0)
    X = rng.random((200, 6)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.random(200) > 0.6).astype(int)
    forest = Pipeline([("impute", SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True)),
                       ("forest", RandomForestClassifier(n_estimators=20, min_samples_split=min_split,
                                                         random_state=0))]).fit(X, y)
    exported = export_li(forest, 6)
    node = next(n for n in onnx.load_from_string(exported).graph.node if n.op_type == "TreeEnsembleClassifier")
    graph = helper.make_graph([forest_as_tree_ensemble(node, 1, "X", "score")], "t",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N", 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(ML, ML_OPSET)])
    model.ir_version = 10
    test = rng.random((500, 6)).astype(np.float32)
    got = session(model.SerializeToString()).run(None, {"X": test})[0].ravel()
    np.testing.assert_array_equal(got, onnx_p_insensitive(session(exported), test, [0, 1]))
    assert (len(np.unique(got)) == 1) == (min_split == 1000)
