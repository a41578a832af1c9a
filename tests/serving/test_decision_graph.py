"""The decision as one ONNX graph (issue 50): both models and the served rule, equal to the service's answers
on the next day's VMs field for field, and runnable with ONNX Runtime alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from models.decision import LABELS, policy_knobs
from models.decision_graph import build
from models.inference import join_history, read_verified
from models.runtime import session
from pipelines.cli import main
from telemetry import request
from tests.serving.conftest import bundle_paths

FIELDS = ("local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "p_insensitive", "li_called")


@pytest.fixture(scope="module")
def inputs(engine, next_day_vms, small_bundle):
    hist = pd.read_parquet(bundle_paths(small_bundle).snapshot_dir / "workload_history.parquet")
    joined = join_history(next_day_vms, hist)
    cols = request.columns_of(next_day_vms)
    return cols, {"li_X": joined.reindex(columns=engine.policy["li"]["features"]).to_numpy(np.float32),
                  "has_history": joined["n_vms"].notna().to_numpy(), "um_X": engine.um_inputs(cols),
                  "memory_gb": np.asarray(cols["memory_gb"], np.float64)}


def _policies(engine):
    knobs = policy_knobs(engine.policy)
    return {**knobs, "combined_cap20pct": dataclasses.replace(knobs["combined"], pool_cap=0.2),
            "li_only_cap50pct": dataclasses.replace(knobs["li_only"], pool_cap=0.5)}


def test_the_graph_answers_as_the_service_does(engine, inputs, small_bundle):
    cols, feeds = inputs
    policy, p = engine.policy, bundle_paths(small_bundle)
    li = read_verified(p.li_dir / policy["li"]["model"], policy["li"]["sha256"])
    um = read_verified(p.um_dir / policy["um"]["model"], policy["um"]["sha256"])
    called = 0
    for name, knobs in _policies(engine).items():
        graph = session(build(li, policy["li"]["classes"], um, knobs).SerializeToString())
        got = dict(zip([o.name for o in graph.get_outputs()], graph.run(None, feeds)))
        want = dataclasses.replace(engine, knobs=knobs).allocate(cols)
        assert np.array(LABELS)[got["decision"]].tolist() == want["decision"].tolist(), name
        for field in FIELDS:
            np.testing.assert_array_equal(got[field], want[field], err_msg=f"{name}: {field}")
        called += int(got["li_called"].sum())
    assert len(cols["vm_id"]) > 100 and called > 0 and np.isnan(feeds["li_X"]).all(axis=1).any()


SCHEDULER = """
import sys, numpy as np, onnxruntime as ort
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
feeds = dict(np.load(sys.argv[2]))
np.savez(sys.argv[3], **dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds))))
print(",".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_a_scheduler_runs_the_written_graph_with_onnx_runtime_alone(engine, inputs, small_bundle, tmp_path):
    cols, feeds = inputs
    p = bundle_paths(small_bundle)
    assert main(["decision-graph", str(tmp_path / "decision.onnx"), "--policy", str(p.policy), "--li", str(p.li_dir),
                 "--um", str(p.um_dir)]) == 0
    np.savez(tmp_path / "in.npz", **feeds)
    run = subprocess.run([sys.executable, "-I", "-c", SCHEDULER, str(tmp_path / "decision.onnx"), str(tmp_path / "in.npz"),
                          str(tmp_path / "out.npz")], capture_output=True, text=True, check=True)
    imported = set(run.stdout.strip().split(","))
    assert not imported & {"core", "models", "serving", "telemetry", "features", "optimize", "evaluation", "pipelines"}
    got = np.load(tmp_path / "out.npz")
    want = engine.allocate(cols)          # the served knobs: what the written graph bakes in
    assert np.array(LABELS)[got["decision"]].tolist() == want["decision"].tolist()
    for field in FIELDS:
        np.testing.assert_array_equal(got[field], want[field], err_msg=field)
