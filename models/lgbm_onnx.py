"""LightGBM regressor -> ONNX ``ai.onnx.ml`` TreeEnsemble (opset 5), with set-membership splits.

onnxmltools writes each categorical split as a chain of equality nodes, one per category: on the
nightly UM model that is 16,533 BRANCH_EQ nodes beside 1,762 numeric ones (and 3,100 leaves), and
ONNX Runtime walks every chain (19 us per VM). TreeEnsemble v5 has BRANCH_MEMBER: one node tests
a whole category set, so the same trees need 1,238 of them beside the 1,762 numeric ones
(``python -m benchmarks.analyses.onnx_nodes``). The
conversion follows LightGBM's own decision rules (include/LightGBM/tree.h):

- numeric ``<=``: NaN goes the default side when ``missing_type`` is NaN, else it counts as 0.0;
- categorical ``==``: a value in the set goes left; NaN (and any code outside the set) goes right,
  whatever ``missing_type`` says.

Thresholds are float32 (rounded down by ``models.um.float32_thresholds`` before this runs) and the
result is checked against LightGBM by ``check_regressor_parity`` on training, boundary, NaN and
unknown-category rows, as before.
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pond.core.errors import ModelError

LEQ, MEMBER = 0, 6   # TreeEnsemble v5 node modes


def _flatten(tree: dict, nodes: list[dict], leaves: list[float]) -> tuple[int, bool]:
    """Append the subtree's nodes/leaves; return (index, is_leaf) of its root."""
    if "leaf_value" in tree:
        leaves.append(float(tree["leaf_value"]))
        return len(leaves) - 1, True
    node: dict = {"feature": int(tree["split_feature"])}
    index = len(nodes)
    nodes.append(node)
    missing = tree.get("missing_type", "None")
    if missing == "Zero":
        raise ModelError("LightGBM split with missing_type=Zero (zero_as_missing) is not supported by the "
                         "ONNX converter; train without zero_as_missing")
    if tree["decision_type"] == "<=":
        t = np.float32(tree["threshold"])
        node.update(mode=LEQ, split=t, members=[],
                    tracks_true=int(tree["default_left"]) if missing == "NaN" else int(np.float32(0) <= t))
    elif tree["decision_type"] == "==":
        cats = [float(c) for c in str(tree["threshold"]).split("||")]
        node.update(mode=MEMBER, split=np.float32(np.nan), members=cats, tracks_true=0)
    else:
        raise ModelError(f"unknown LightGBM decision_type {tree['decision_type']!r}")
    node["true"] = _flatten(tree["left_child"], nodes, leaves)
    node["false"] = _flatten(tree["right_child"], nodes, leaves)
    return index, False


def to_onnx(booster: lgb.Booster, graph_name: str = "untouched_memory") -> bytes:
    """ONNX bytes computing ``booster.predict(X)`` (raw score) for float32 X; deterministic."""
    dump = booster.dump_model()
    if dump.get("num_class", 1) != 1:
        raise ModelError("only single-output LightGBM regressors convert to the UM graph")
    n_features = int(dump["max_feature_idx"]) + 1
    roots, modes, feats, splits, t_ids, t_leaf, f_ids, f_leaf, tracks = [], [], [], [], [], [], [], [], []
    members: list[float] = []
    leaf_weights: list[float] = []
    for info in dump["tree_info"]:
        nodes: list[dict] = []
        leaves: list[float] = []
        root, is_leaf = _flatten(info["tree_structure"], nodes, leaves)
        if is_leaf:   # a constant tree: one split that sends everything to its only leaf
            nodes.append({"feature": 0, "mode": LEQ, "split": np.float32(np.inf), "members": [], "tracks_true": 1,
                          "true": (0, True), "false": (0, True)})
            root = 0
        node_base, leaf_base = len(modes), len(leaf_weights)
        roots.append(node_base + root)
        for nd in nodes:
            modes.append(nd["mode"])
            feats.append(nd["feature"])
            splits.append(nd["split"])
            tracks.append(nd["tracks_true"])
            if nd["mode"] == MEMBER:
                members.extend([*nd["members"], np.nan])   # each node's set ends with NaN
            for side, ids, is_leaf_list in (("true", t_ids, t_leaf), ("false", f_ids, f_leaf)):
                idx, leaf = nd[side]
                ids.append(idx + (leaf_base if leaf else node_base))
                is_leaf_list.append(int(leaf))
        leaf_weights.extend(leaves)
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["variable"], domain="ai.onnx.ml", aggregate_function=1, post_transform=0,
        n_targets=1, tree_roots=roots,
        nodes_modes=numpy_helper.from_array(np.array(modes, dtype=np.uint8), "nodes_modes"),
        nodes_featureids=feats,
        nodes_splits=numpy_helper.from_array(np.array(splits, dtype=np.float32), "nodes_splits"),
        nodes_truenodeids=t_ids, nodes_trueleafs=t_leaf, nodes_falsenodeids=f_ids, nodes_falseleafs=f_leaf,
        nodes_missing_value_tracks_true=tracks,
        membership_values=numpy_helper.from_array(np.array(members, dtype=np.float32), "membership_values"),
        leaf_targetids=[0] * len(leaf_weights),
        leaf_weights=numpy_helper.from_array(np.array(leaf_weights, dtype=np.float32), "leaf_weights"),
    )
    graph = helper.make_graph([node], graph_name,
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
                              [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)],
                              producer_name="pond-znuma")
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()
