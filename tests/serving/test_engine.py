"""The engine gives evaluate's answers, through inputs encoded exactly as the UM model was trained."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ModelError
from pond.models.bundle import BundlePaths
from pond.models.policy import Serve
from pond.serving.engine import Engine
from pond.serving.offline import allocations_frame, request_columns
from pond.telemetry.atomic import sha256_file
from pond.telemetry.request import FIELDS as REQUEST_FIELDS
from pond.telemetry.request import SHAPE as REQUEST_SHAPE
from tests.serving.conftest import bundle_paths


def _cols(vms: pd.DataFrame) -> dict[str, list]:
    return request_columns(vms[list(REQUEST_FIELDS)])


def test_um_inputs_equal_training_encoding(engine, next_day_vms):
    X = engine.um_inputs(_cols(next_day_vms))
    expected = engine.models.um_encoder.encode(next_day_vms)
    np.testing.assert_array_equal(X, expected)   # NaN == NaN here; identical float32 bits otherwise


def test_allocations_equal_evaluate_decisions(engine, next_day_vms, small_bundle):
    cols = _cols(next_day_vms)
    got = allocations_frame(cols, engine.allocate(cols), engine).set_index("vm_id")
    ev = pd.read_parquet(small_bundle / "evaluation" / "decisions.parquet").set_index("vm_id")
    got = got.loc[ev.index]                     # evaluate keeps the VMs that ended
    assert len(ev) > 100
    for c in ("decision", "pool_gb", "znuma_gb", "has_history"):
        assert got[c].tolist() == ev[c].tolist(), c
    np.testing.assert_array_equal(got.p_insensitive.to_numpy(), ev.p_insensitive.to_numpy())
    np.testing.assert_array_equal(got.untouched_fraction.to_numpy(), ev.untouched_pred.to_numpy())
    assert (got.local_gb + got.pool_gb == got.memory_gb).all()
    assert engine.policy.serve == Serve(policy="um_only", pool_cap=None)   # small_params' optimize.serve
    assert set(got.decision) == {"znuma", "local_only"} and engine.policy_summary["served"] == "um_only"


@pytest.mark.parametrize("serve, cap", [("combined", None), ("combined", 0.3), ("li_only", None)])
def test_the_engine_applies_the_served_policy(small_bundle, next_day_vms, tmp_path, serve, cap):
    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["serve"] = {"policy": serve, "pool_cap": cap}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    paths = bundle_paths(small_bundle)
    eng = Engine.load(BundlePaths(tmp_path / "policy.json", paths.li_dir, paths.um_dir, paths.snapshot_dir))
    out = eng.allocate(_cols(next_day_vms))
    mem = next_day_vms.memory_gb.to_numpy(float)
    threshold = policy["li"]["threshold"] if serve == "combined" else policy["alternatives"]["li_only"]["li_threshold"]
    called = out["has_history"] & (np.nan_to_num(out["p_insensitive"], nan=-1) >= threshold)
    assert called.sum() > 20 and eng.policy_summary["li_threshold"] == threshold
    if cap is None:
        assert (out["decision"][called] == "pool_only").all() and (out["pool_gb"][called] == mem[called]).all()
        assert eng.policy_summary["served"] == serve and eng.policy_summary["pool_cap"] is None
    else:   # a called VM gets exactly the cap, no VM more
        assert "pool_only" not in set(out["decision"])
        np.testing.assert_array_equal(out["pool_gb"][called], np.floor(cap * mem[called] + 1e-9))
        assert (out["pool_gb"] <= np.floor(cap * mem + 1e-9)).all()
        assert eng.policy_summary["served"] == "combined_cap30pct" and eng.policy_summary["pool_cap"] == cap
    if serve == "li_only":   # LI alone: whole VMs or nothing, and no UM target echoed
        assert set(out["decision"][~called]) == {"local_only"} and eng.policy_summary["um_target_op"] is None


def test_an_all_local_answer_puts_nothing_on_a_pool(small_bundle, next_day_vms, tmp_path):
    # simulate's answer where no pool pays (optimize.serve: answer serves it): every VM all local, whatever a cap says
    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["serve"] = {"policy": "all_local", "pool_cap": None}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    paths = bundle_paths(small_bundle)
    eng = Engine.load(BundlePaths(tmp_path / "policy.json", paths.li_dir, paths.um_dir, paths.snapshot_dir))
    out = eng.allocate(_cols(next_day_vms))
    assert set(out["decision"]) == {"local_only"} and not out["pool_gb"].any() and not out["li_called"].any()
    np.testing.assert_array_equal(out["local_gb"], next_day_vms.memory_gb.to_numpy(float))
    assert eng.policy_summary["served"] == "all_local" and eng.policy_summary["um_target_op"] is None


def test_unknown_customer_takes_the_no_history_path(engine, next_day_vms):
    vm = next_day_vms.iloc[[0]].assign(customer_id="never-seen", vm_id="x")
    out = engine.allocate(_cols(vm))
    assert not out["has_history"][0] and not out["customer_history"][0]
    assert np.isnan(out["p_insensitive"][0]) and out["decision"][0] != "pool_only"
    # the UM model still answers: no ended VMs (cust_n = 0), percentiles missing, as in training
    X = engine.um_inputs(_cols(vm))
    assert X[0, -6] == 0 and np.isnan(X[0, -5:]).all() and np.isfinite(out["untouched_fraction"][0])


def test_batch_of_one_equals_batch(engine, next_day_vms):
    cols = _cols(next_day_vms.head(50))
    whole = engine.allocate(cols)
    for i in (0, 17, 49):
        one = engine.allocate({k: (v[i:i + 1] if v is not None else None) for k, v in cols.items()})
        for k in ("decision", "pool_gb", "local_gb", "untouched_fraction"):
            assert one[k][0] == whole[k][i], k



class _Counted:
    """An ONNX session that counts the rows it is asked to score."""

    def __init__(self, session) -> None:
        self.session, self.rows = session, 0

    def run(self, names, feeds):
        self.rows += len(feeds["X"])
        return self.session.run(names, feeds)


def test_a_batch_runs_the_um_model_only_for_shapes_not_seen(engine, next_day_vms, monkeypatch):
    cols = _cols(next_day_vms)
    counted = _Counted(engine.models.um)
    cold = replace(engine, um_cache={}, models=replace(engine.models, um=counted))
    distinct = len({(c if c in engine.customer_index else None, *rest)
                    for c, *rest in zip(*(cols[k] for k in REQUEST_SHAPE))})
    first = cold.allocate(cols)
    assert counted.rows == len(cold.um_cache) == distinct < len(next_day_vms)
    half = {k: (v[: len(next_day_vms) // 2] if v is not None else None) for k, v in cols.items()}
    again = cold.allocate(half)
    assert counted.rows == distinct                     # every shape was seen: no model run
    for k, v in again.items():
        np.testing.assert_array_equal(v, first[k][: len(next_day_vms) // 2], err_msg=k)
    monkeypatch.setattr("pond.serving.engine.UM_CACHE_ENTRIES", 5)   # a file job larger than the cache: all rows run
    assert cold.allocate(half) is not None and counted.rows == distinct + len(half["vm_type"])

def _one(eng, cols: dict[str, list], i: int, timings: dict | None = None) -> dict:
    return eng.allocate_one(*(cols[c][i] for c in REQUEST_SHAPE), timings=timings)


def test_one_request_path_equals_the_batch_path(engine, next_day_vms):
    """allocate_one (encoding, cache, scalar rule) gives allocate's answer, field for field, hit or miss."""
    cols = _cols(next_day_vms)
    whole = engine.allocate(cols)
    cold = replace(engine, um_cache={})
    distinct = len({(c if c in engine.customer_index else None, *rest)
                    for c, *rest in zip(*(cols[k] for k in REQUEST_SHAPE))})
    # cold: one UM run per distinct request; again: all hits; prefilled: runs only for unseen shapes
    for eng, expected_runs in ((cold, distinct), (cold, 0), (engine, None)):
        ran = 0
        for i in range(len(next_day_vms)):
            timings: dict[str, float] = {}
            one = _one(eng, cols, i, timings)
            ran += "infer" in timings
            for k, v in one.items():
                w = whole[k][i]
                assert v == w or (np.isnan(v) and np.isnan(w)), (i, k, v, w)
            assert set(timings) >= {"enrich", "decide"}
        if expected_runs is not None:
            assert ran == expected_runs
        else:
            assert ran < distinct
    assert len(cold.um_cache) == distinct < len(next_day_vms)


def test_prefilled_shapes_are_the_snapshots_and_equal_fresh_predictions(engine, small_bundle):
    shapes = pd.read_parquet(small_bundle / "features" / "snapshot" / "request_shapes.parquet")
    keys = list(engine.um_cache)[:engine.info["prefilled_shapes"]]
    assert len(shapes) < len(keys) <= 2 * len(shapes)    # each shape, and each shape for an unknown customer
    expected = {(t, float(v), float(m), o, r, None if pd.isna(c) else c)
                for t, v, m, o, r, c in shapes[list(REQUEST_SHAPE[1:])].itertuples(index=False)}
    assert {k[1:] for k in keys} == expected
    cold = replace(engine, um_cache={})
    for key in keys[:100] + keys[-100:]:
        customer, vm_type, vcpus, mem, os, region, cluster = key
        X = np.array([cold.um_row(customer or "", vm_type, vcpus, mem, os, region, cluster)], np.float32)
        assert float(cold.models.um.run(None, {"X": X})[0][0, 0]) == engine.um_cache[key]


def test_a_new_customer_on_a_known_shape_is_a_hit(engine):
    _customer, vm_type, vcpus, mem, os, region, cluster = next(k for k in engine.um_cache if k[0] is None)
    timings: dict[str, float] = {}
    hit = engine.allocate_one("never-seen", vm_type, vcpus, mem, os, region, cluster, timings=timings)
    assert "infer" not in timings and not hit["customer_history"]
    assert hit == replace(engine, um_cache={}).allocate_one("never-seen", vm_type, vcpus, mem, os, region, cluster)


def test_the_cache_is_bounded(engine, next_day_vms, monkeypatch):
    monkeypatch.setattr("pond.serving.engine.UM_CACHE_ENTRIES", 5)
    cold, cols = replace(engine, um_cache={}), _cols(next_day_vms.head(100))
    for i in range(100):
        _one(cold, cols, i)
        assert len(cold.um_cache) <= 5


def test_a_snapshot_without_request_shapes_starts_with_an_empty_cache(small_bundle, tmp_path, next_day_vms):
    """Bundles registered before the shapes existed still load and answer (the registry keeps old versions)."""
    for d in ("li", "um", "features/snapshot"):
        shutil.copytree(small_bundle / d, tmp_path / d)
    shutil.copy(small_bundle / "policy.json", tmp_path / "policy.json")
    (tmp_path / "features/snapshot/request_shapes.parquet").unlink()
    manifest = json.loads((tmp_path / "features/snapshot/manifest.json").read_text())
    del manifest["files"]                      # nor did their manifests list file hashes
    (tmp_path / "features/snapshot/manifest.json").write_text(json.dumps(manifest))
    old = Engine.load(bundle_paths(tmp_path))
    assert "prefilled_shapes" not in old.info and len(old.um_cache) == 1     # the warm-up request only
    cols = _cols(next_day_vms.head(20))
    assert _one(old, cols, 3) == _one(replace(old, um_cache={}), cols, 3)


def test_snapshot_without_the_models_customer_columns_is_refused(small_bundle, tmp_path):
    snap = tmp_path / "snapshot"
    shutil.copytree(small_bundle / "features" / "snapshot", snap)
    cust = pd.read_parquet(snap / "customer_percentiles.parquet")
    cust.drop(columns=["cust_p99"]).to_parquet(snap / "customer_percentiles.parquet")
    manifest = json.loads((snap / "manifest.json").read_text())     # a consistent snapshot, other percentiles
    manifest["files"]["customer_percentiles.parquet"] = sha256_file(snap / "customer_percentiles.parquet")
    (snap / "manifest.json").write_text(json.dumps(manifest))
    p = bundle_paths(small_bundle)
    with pytest.raises(ModelError, match=r"lacks columns \['cust_p99'\]"):
        Engine.load(replace(p, snapshot_dir=snap))
