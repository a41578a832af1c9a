"""Node counts of the UM model's ONNX graph: ours (set-membership splits) vs onnxmltools' conversion.

Run after `dvc repro`: `python -m benchmarks.analyses.onnx_nodes` (reads data/models/um/um_lightgbm.txt).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lightgbm as lgb
import onnx
from onnx import numpy_helper

from pond.models.lgbm_onnx import LEQ, MEMBER
from pond.models.onnx_export import export_um, export_um_onnxmltools

ROOT = Path(__file__).resolve().parents[2]

V5_NAMES = {LEQ: "BRANCH_LEQ", MEMBER: "BRANCH_MEMBER"}


def node_modes(onnx_bytes: bytes) -> Counter:
    """Node kinds of the graph's tree ensemble (v5 keeps leaves apart from nodes)."""
    for node in onnx.load_from_string(onnx_bytes).graph.node:
        for a in node.attribute:
            if a.name == "nodes_modes":
                if a.strings:
                    return Counter(s.decode() for s in a.strings)
                return Counter(V5_NAMES[int(m)] for m in numpy_helper.to_array(a.t))
    raise SystemExit("no tree ensemble in the graph")


def main() -> None:
    booster = lgb.Booster(model_file=str(ROOT / "data/models/um/um_lightgbm.txt"))
    for name, data in (("onnxmltools", export_um_onnxmltools(booster)), ("ours", export_um(booster))):
        modes = node_modes(data)
        print(f"{name:12s} {sum(modes.values()):6d} nodes: " + ", ".join(f"{k} {v}" for k, v in sorted(modes.items())))


if __name__ == "__main__":
    main()
