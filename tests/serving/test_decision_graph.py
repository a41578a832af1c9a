"""The decision as one ONNX graph: both models and the served rule, equal to the service's answers
on the next day's VMs field for field, and runnable with ONNX Runtime alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pond.models.decision import LABELS, PolicyKnobs, policy_knobs
from pond.models.decision_graph import build
from pond.models.inference import join_history, read_verified
from pond.models.runtime import session
from pond.telemetry import request
from tests.conftest import PACKAGES, run_pond
from tests.serving.conftest import bundle_paths

FIELDS = ("local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "p_insensitive", "li_called")


@pytest.fixture(scope="module")
def inputs(engine, next_day_vms, small_bundle):
    hist = pd.read_parquet(bundle_paths(small_bundle).snapshot_dir / "workload_history.parquet")
    joined = join_history(next_day_vms, hist)
    cols = request.columns_of(next_day_vms)
    return cols, {"li_X": joined.reindex(columns=engine.policy.li.features).to_numpy(np.float32),
                  "has_history": joined["n_vms"].notna().to_numpy(), "um_X": engine.um_inputs(cols),
                  "memory_gb": np.asarray(cols["memory_gb"], np.float64)}


def _policies(engine):
    knobs = policy_knobs(engine.policy)
    return {**knobs, "combined_cap20pct": dataclasses.replace(knobs["combined"], pool_cap=0.2),
            "li_only_cap50pct": dataclasses.replace(knobs["li_only"], pool_cap=0.5),
            "all_local": PolicyKnobs(None, None)}


def test_the_graph_answers_as_the_service_does(engine, inputs, small_bundle):
    cols, feeds = inputs
    policy, p = engine.policy, bundle_paths(small_bundle)
    li = read_verified(p.li_dir / policy.li.model, policy.li.sha256)
    um = read_verified(p.um_dir / policy.um.model, policy.um.sha256)
    called = 0
    for name, knobs in _policies(engine).items():
        graph = session(build(li, policy.li.classes, um, knobs).SerializeToString())
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
    assert run_pond(["decision-graph", str(tmp_path / "decision.onnx"), "--policy", str(p.policy), "--li", str(p.li_dir),
                 "--um", str(p.um_dir)]) == 0
    np.savez(tmp_path / "in.npz", **feeds)
    run = subprocess.run([sys.executable, "-I", "-c", SCHEDULER, str(tmp_path / "decision.onnx"), str(tmp_path / "in.npz"),
                          str(tmp_path / "out.npz")], capture_output=True, text=True, check=True)
    imported = set(run.stdout.strip().split(","))
    assert not imported & {"pond", *PACKAGES}
    got = np.load(tmp_path / "out.npz")
    want = engine.allocate(cols)          # the served knobs: what the written graph bakes in
    assert np.array(LABELS)[got["decision"]].tolist() == want["decision"].tolist()
    for field in FIELDS:
        np.testing.assert_array_equal(got[field], want[field], err_msg=field)


def test_a_deployed_single_counter_rule_is_embedded_as_it_is(engine, inputs, small_bundle):
    """The LI model the solver deploys may be a single-counter rule (models.li_rule), not a forest: its graph goes
    in as it is, and the graph answers as the rule's own session and the rule of models.decision do."""
    from pond.models.decision import decide
    from pond.models.li_rule import CounterRule, export_rule
    from pond.models.runtime import onnx_p_insensitive

    _cols, feeds = inputs
    policy, p = engine.policy, bundle_paths(small_bundle)
    known = feeds["li_X"][~np.isnan(feeds["li_X"]).all(axis=1)]
    rule = CounterRule(feature=3).fit(known)
    li = export_rule(rule, feeds["li_X"].shape[1])
    um = read_verified(p.um_dir / policy.um.model, policy.um.sha256)
    p_rule = onnx_p_insensitive(session(li), feeds["li_X"], [0, 1]).astype(np.float64)
    p_rule = np.where(np.isnan(feeds["li_X"]).all(axis=1), np.nan, p_rule)
    raw = engine.models.um.run(None, {"X": feeds["um_X"]})[0].ravel().astype(np.float64)
    knobs = dataclasses.replace(policy_knobs(policy)["combined"], li_threshold=float(np.nanmedian(p_rule)))
    got = dict(zip(["decision", "local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "p_insensitive", "li_called"],
                   session(build(li, [0, 1], um, knobs).SerializeToString()).run(None, feeds)))
    want = decide(feeds["memory_gb"], feeds["has_history"], p_rule, raw, knobs)
    assert np.array(LABELS)[got["decision"]].tolist() == want["decision"].tolist()
    np.testing.assert_array_equal(got["p_insensitive"], p_rule)
    for field in ("local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "li_called"):
        np.testing.assert_array_equal(got[field], want[field], err_msg=field)
    assert 0 < got["li_called"].sum() < len(got["li_called"])
