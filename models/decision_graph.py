"""The per-VM decision as one ONNX graph: both models and the rule of ``models.decision``, with a policy's knobs
baked in, for a scheduler that would rather embed the decision (C++, C#: ONNX Runtime) than call the service.

Inputs, per VM (the snapshot look-ups stay with the caller, as the service does them):

- ``li_X`` float32 [N, K]: the workload history of the VM's (customer, VM type, region) in the policy's
  ``li.features`` order (``workload_history.parquet``), all NaN where the snapshot has none;
- ``has_history`` bool [N]: whether the snapshot has that history;
- ``um_X`` float32 [N, F]: the UM model's inputs (``Engine.um_inputs``: the request's encoded fields, then the
  customer's percentiles from ``customer_percentiles.parquet``, or the no-history row);
- ``memory_gb`` double [N].

Outputs: ``decision`` int64 (0 local_only, 1 znuma, 2 pool_only: ``decision.LABELS``), ``local_gb``,
``pool_gb``, ``znuma_gb``, ``untouched_fraction``, ``p_insensitive`` (double), ``li_called`` (bool): the
service's fields, equal to its answers when run as the service runs its models (one thread per session:
ONNX Runtime's tree ensembles sum their trees in another order across threads, and P(insensitive) then
differs in its last bits). `pond decision-graph OUT` writes the served policy's graph.

The LI forest is exported by skl2onnx as ``TreeEnsembleClassifier`` (ai.onnx.ml 1), which ai.onnx.ml 5 (the UM
model's ``TreeEnsemble``) no longer has; a graph holds one version of a domain, so the forest is rewritten as a
``TreeEnsemble`` that sums the same leaf weights of class 1 in the same order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pond.models.decision import PolicyKnobs, policy_knobs
from pond.models.inference import read_verified
from pond.models.policy import read_policy

ML = "ai.onnx.ml"
OPSET, ML_OPSET = 21, 5


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def forest_as_tree_ensemble(classifier: onnx.NodeProto, positive: int, inp: str, out: str) -> onnx.NodeProto:
    """A binary ``TreeEnsembleClassifier`` (one weight per leaf, of class id 0, the positive class's score) as a
    ``TreeEnsemble`` whose one target is that score."""
    a = _attrs(classifier)
    if set(a["class_ids"]) != {0} or list(a["classlabels_int64s"]) != [0, 1] or positive != 1:
        raise ValueError("the LI forest is not a binary classifier with classes [0, 1] scoring class 1")
    if a.get("post_transform", b"NONE") not in (b"NONE", "NONE"):
        raise ValueError("the LI forest has a post transform; the graph expects raw leaf sums")
    trees = np.asarray(a["nodes_treeids"])
    ids = np.asarray(a["nodes_nodeids"])
    modes = [m.decode() if isinstance(m, bytes) else m for m in a["nodes_modes"]]
    if set(modes) - {"BRANCH_LEQ", "LEAF"}:
        raise ValueError(f"the LI forest has split modes {sorted(set(modes))}; the graph knows BRANCH_LEQ")
    weight = {(t, n): w for t, n, w in zip(a["class_treeids"], a["class_nodeids"], a["class_weights"])}
    branch_index, leaf_index = {}, {}
    leaf_weights: list[float] = []
    for t, n, m in zip(trees, ids, modes):
        if m == "LEAF":
            leaf_index[(t, n)] = len(leaf_weights)
            leaf_weights.append(weight.get((t, n), 0.0))
    splits, feats, tnode, tleaf, fnode, fleaf, missing = [], [], [], [], [], [], []
    where = {(t, n): i for i, (t, n) in enumerate(zip(trees, ids))}
    for t in dict.fromkeys(trees.tolist()):
        for i in np.flatnonzero(trees == t):
            if modes[i] == "BRANCH_LEQ":
                branch_index[(t, ids[i])] = len(branch_index)
        if (t, 0) in leaf_index:                 # a tree of one leaf: a split whose both sides reach it
            branch_index[(t, -1)] = len(branch_index)
    order = sorted(branch_index, key=branch_index.get)
    for t, n in order:
        if n == -1:
            leaf = leaf_index[(t, 0)]
            splits.append(0.0), feats.append(0), tnode.append(leaf), tleaf.append(1), fnode.append(leaf)
            fleaf.append(1), missing.append(0)
            continue
        i = where[(t, n)]
        splits.append(a["nodes_values"][i]), feats.append(a["nodes_featureids"][i])
        missing.append(a["nodes_missing_value_tracks_true"][i] if "nodes_missing_value_tracks_true" in a else 0)
        for child, node_ids, leafs in ((a["nodes_truenodeids"][i], tnode, tleaf),
                                       (a["nodes_falsenodeids"][i], fnode, fleaf)):
            if (t, child) in leaf_index:
                node_ids.append(leaf_index[(t, child)]), leafs.append(1)
            else:
                node_ids.append(branch_index[(t, child)]), leafs.append(0)
    roots = [branch_index[(t, 0)] if (t, 0) in branch_index else branch_index[(t, -1)]
             for t in dict.fromkeys(trees.tolist())]
    return helper.make_node(
        "TreeEnsemble", [inp], [out], domain=ML, aggregate_function=1, post_transform=0, n_targets=1,
        tree_roots=roots, nodes_featureids=feats, nodes_truenodeids=tnode, nodes_trueleafs=tleaf,
        nodes_falsenodeids=fnode, nodes_falseleafs=fleaf, nodes_missing_value_tracks_true=missing,
        nodes_splits=numpy_helper.from_array(np.asarray(splits, np.float32), "nodes_splits"),
        nodes_modes=numpy_helper.from_array(np.zeros(len(splits), np.uint8), "nodes_modes"),
        leaf_targetids=[0] * len(leaf_weights),
        leaf_weights=numpy_helper.from_array(np.asarray(leaf_weights, np.float32), "leaf_weights"))


def _li_nodes(li_model: onnx.ModelProto, classes: list[int]) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The deployed LI model's nodes, names prefixed ``lim_`` (its input fed from ``li_X``), ending in
    ``li_score`` [N, 1], P(insensitive): a forest's classifier rewritten as a ``TreeEnsemble`` (module doc); any
    other model (the single-counter rule, ``models.li_rule``) as it is, its class-1 probability taken. A model fit
    on one class scores 0, as ``runtime.insensitive_proba`` does."""
    m = onnx.compose.add_prefix(li_model, "lim_")
    nodes, forest = [helper.make_node("Identity", ["li_X"], [m.graph.input[0].name])], False
    for n in m.graph.node:
        if n.op_type == "TreeEnsembleClassifier" and 1 in classes:
            nodes.append(forest_as_tree_ensemble(n, classes.index(1), n.input[0], "li_score"))
            forest = True
        elif n.op_type != "TreeEnsembleClassifier":
            nodes.append(n)
    if forest:
        return nodes, list(m.graph.initializer)
    nodes.append(helper.make_node("Constant", [], ["li_class1"], value=helper.make_tensor(
        "li_class1", TensorProto.INT64, [1], [classes.index(1) if 1 in classes else 0])))
    if 1 in classes:
        nodes.append(helper.make_node("Gather", ["lim_probabilities", "li_class1"], ["li_score"], axis=1))
    else:      # one class: 0 for every row (the first column's NaN test, times 0)
        nodes += [helper.make_node("Gather", ["li_X", "li_class1"], ["li_col0"], axis=1),
                  helper.make_node("IsNaN", ["li_col0"], ["li_col0_nan"]),
                  helper.make_node("Cast", ["li_col0_nan"], ["li_col0_f"], to=TensorProto.FLOAT),
                  helper.make_node("Constant", [], ["li_zero"], value=helper.make_tensor("li_zero", TensorProto.FLOAT, [], [0.0])),
                  helper.make_node("Mul", ["li_col0_f", "li_zero"], ["li_score"])]
    return nodes, list(m.graph.initializer)


def _const(name: str, value: float | bool, dtype: int = TensorProto.DOUBLE) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, dtype, [], [value]))


def build(li: bytes, li_classes: list[int], um: bytes, knobs: PolicyKnobs) -> onnx.ModelProto:
    """The decision graph of one policy's models and served knobs (``policy_knobs(policy)["served"]``)."""
    li_model, um_model = onnx.load_from_string(li), onnx.load_from_string(um)
    nodes, initializers = _li_nodes(li_model, li_classes)
    um_nodes = [n for n in um_model.graph.node]
    if len(um_nodes) != 1 or um_nodes[0].op_type != "TreeEnsemble":
        raise ValueError("the UM model is not one TreeEnsemble node")
    nodes.append(helper.make_node("TreeEnsemble", ["um_X"], ["um_score"], domain=ML, **_attrs(um_nodes[0])))
    li_t, um_t, cap = knobs.floats()
    nodes += [
        _const("zero", 0.0), _const("one", 1.0), _const("nan", math.nan), _const("eps", 1e-9),
        _const("two", 2, TensorProto.INT64), _const("one_i", 1, TensorProto.INT64), _const("zero_i", 0, TensorProto.INT64),
        helper.make_node("Constant", [], ["axes1"], value=helper.make_tensor("axes1", TensorProto.INT64, [1], [1])),
        # P(insensitive): NaN where the history row is all NaN (no usable features), as Models.p_insensitive
        helper.make_node("Squeeze", ["li_score", "axes1"], ["li_score1"]),
        helper.make_node("Cast", ["li_score1"], ["p_raw"], to=TensorProto.DOUBLE),
        helper.make_node("IsNaN", ["li_X"], ["li_nan"]),
        helper.make_node("Cast", ["li_nan"], ["li_nan_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMin", ["li_nan_f", "axes1"], ["li_all_nan_f"], keepdims=0),
        helper.make_node("Cast", ["li_all_nan_f"], ["li_all_nan"], to=TensorProto.BOOL),
        helper.make_node("Where", ["li_all_nan", "nan", "p_raw"], ["p_insensitive"]),
        helper.make_node("Squeeze", ["um_score", "axes1"], ["um_score1"]),
        helper.make_node("Cast", ["um_score1"], ["um_raw"], to=TensorProto.DOUBLE),
    ]
    if math.isnan(li_t):
        nodes.append(helper.make_node("And", ["has_history", "has_history"], ["never"]))
        nodes.append(helper.make_node("Not", ["has_history"], ["not_hist"]))
        nodes.append(helper.make_node("And", ["never", "not_hist"], ["li_called"]))        # all False
    else:
        nodes += [_const("li_t", li_t), helper.make_node("GreaterOrEqual", ["p_insensitive", "li_t"], ["p_ge"]),
                  helper.make_node("And", ["has_history", "p_ge"], ["li_called"])]
    if math.isnan(um_t):
        nodes.append(helper.make_node("Mul", ["memory_gb", "zero"], ["untouched_fraction"]))
    else:
        nodes += [_const("um_off", um_t), helper.make_node("Sub", ["um_raw", "um_off"], ["u0"]),
                  helper.make_node("Greater", ["u0", "zero"], ["u_pos"]),
                  helper.make_node("Where", ["u_pos", "u0", "zero"], ["u1"]),        # also NaN -> 0
                  helper.make_node("Greater", ["u1", "one"], ["u_big"]),
                  helper.make_node("Where", ["u_big", "one", "u1"], ["untouched_fraction"])]
    capped = cap < 1.0
    if capped:
        nodes += [_const("cap", cap), helper.make_node("Min", ["untouched_fraction", "cap"], ["u_capped"]),
                  helper.make_node("Where", ["li_called", "cap", "u_capped"], ["share0"])]
    else:
        nodes.append(helper.make_node("Identity", ["untouched_fraction"], ["share0"]))
    nodes += [
        helper.make_node("Greater", ["share0", "zero"], ["share_pos"]),
        helper.make_node("Where", ["share_pos", "share0", "zero"], ["share"]),
        helper.make_node("Mul", ["share", "memory_gb"], ["share_gb"]),
        helper.make_node("Add", ["share_gb", "eps"], ["share_gb_eps"]),
        helper.make_node("Floor", ["share_gb_eps"], ["znuma_split"]),
        helper.make_node("Greater", ["znuma_split", "zero"], ["has_znuma"]),
        helper.make_node("Where", ["has_znuma", "one_i", "zero_i"], ["code_split"]),
    ]
    if capped:       # a called VM gets its capped zNUMA, like any other
        nodes += [helper.make_node("Identity", ["code_split"], ["decision"]),
                  helper.make_node("Identity", ["znuma_split"], ["znuma_gb"]),
                  helper.make_node("Identity", ["znuma_split"], ["pool_gb"])]
    else:            # a called VM goes to the pool whole
        nodes += [helper.make_node("Where", ["li_called", "two", "code_split"], ["decision"]),
                  helper.make_node("Where", ["li_called", "zero", "znuma_split"], ["znuma_gb"]),
                  helper.make_node("Where", ["li_called", "memory_gb", "znuma_split"], ["pool_gb"])]
    nodes.append(helper.make_node("Sub", ["memory_gb", "pool_gb"], ["local_gb"]))
    used = {i for n in nodes for i in n.input}
    nodes = [n for n in nodes if n.op_type != "Constant" or n.output[0] in used]   # the knobs' unused branches
    k = li_model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    f = um_model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    inputs = [helper.make_tensor_value_info("li_X", TensorProto.FLOAT, ["N", k]),
              helper.make_tensor_value_info("has_history", TensorProto.BOOL, ["N"]),
              helper.make_tensor_value_info("um_X", TensorProto.FLOAT, ["N", f]),
              helper.make_tensor_value_info("memory_gb", TensorProto.DOUBLE, ["N"])]
    outputs = [helper.make_tensor_value_info("decision", TensorProto.INT64, ["N"])] + [
        helper.make_tensor_value_info(n, TensorProto.DOUBLE, ["N"])
        for n in ("local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "p_insensitive")] + [
        helper.make_tensor_value_info("li_called", TensorProto.BOOL, ["N"])]
    graph = helper.make_graph(nodes, "pond_decision", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(ML, ML_OPSET)],
                              producer_name="pond-znuma")
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def for_policy(policy_path: Path, li_dir: Path, um_dir: Path) -> onnx.ModelProto:
    """The graph of the policy the service applies (its ``served`` knobs), from sha256-verified models."""
    policy = read_policy(policy_path)
    return build(read_verified(li_dir / policy.li.model, policy.li.sha256), policy.li.classes,
                 read_verified(um_dir / policy.um.model, policy.um.sha256), policy_knobs(policy)["served"])
