"""Latency-insensitivity model: labels, curves on hand-made cases, ONNX parity, reproducibility."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ContractError, ModelError
from pond.features.build import lab_features
from pond.models.li import BASELINES, li_labels, make_li_model, training_set
from pond.models.li_curves import cutoff_curve, li_at_fp, mean_band, split_study, threshold_table
from pond.models.onnx_export import boundary_rows, check_parity, export_li, forest_splits
from pond.models.runtime import onnx_p_insensitive, session


def _slowdowns(rows):
    return pd.DataFrame(rows, columns=["workload_id", "latency_ratio", "spilled_pct", "slowdown_pct", "repetition"])


def test_labels_use_mean_full_pool_slowdown_within_pdm():
    s = _slowdowns([
        ("a", 1.82, 100.0, 4.0, 0), ("a", 1.82, 100.0, 6.0, 1),   # mean 5.0 -> insensitive (<= PDM)
        ("b", 1.82, 100.0, 5.2, 0), ("b", 1.82, 50.0, 0.0, 0),    # only spilled 100 counts -> sensitive
        ("c", 2.22, 100.0, 1.0, 0), ("c", 1.82, 100.0, 30.0, 0),  # other ratio ignored
        ("d", 1.82, 100.0, -0.3, 0),                              # noise below zero is fine
    ])
    assert li_labels(s, 1.82, 5).to_dict() == {"a": 1, "b": 0, "c": 0, "d": 1}
    assert li_labels(s, 2.22, 5).to_dict() == {"c": 1}
    with pytest.raises(ContractError, match=r"latency_ratio 3.0.*full-pool runs: \[1.82, 2.22\]"):
        li_labels(s, 3.0, 5)
    with pytest.raises(ContractError, match=r"column 'spilled_pct': no run .* spills measured are \[50.0\]"):
        li_labels(s[s.spilled_pct == 50.0], 1.82, 5)   # a lab that never ran a workload entirely on pool


def test_cutoff_curve_by_hand():
    score = np.array([0.9, 0.8, 0.8, 0.3])
    y = np.array([1, 0, 1, 0])
    li, fp = cutoff_curve(score, y)
    np.testing.assert_allclose(li, [0, 0.25, 0.75, 1.0])   # the tie at 0.8 is taken together
    np.testing.assert_allclose(fp, [0, 0, 0.25, 0.5])
    np.testing.assert_allclose(li_at_fp(li, fp, np.array([0.0, 0.1, 0.25, 0.49, 1.0])), [0.25, 0.25, 0.75, 0.75, 1.0])
    t_li, t_fp = threshold_table(score, y, np.array([0.0, 0.5, 0.85, 0.95]))
    np.testing.assert_allclose(t_li, [1.0, 0.75, 0.25, 0.0])
    np.testing.assert_allclose(t_fp, [0.5, 0.25, 0.0, 0.0])


def test_mean_band_is_a_t_interval():
    mean, lo, hi = mean_band(np.array([[1.0], [3.0]]), 0.99)
    assert mean[0] == 2.0
    assert hi[0] - mean[0] == pytest.approx(63.65674, rel=1e-5)  # t(0.995, 1 dof) * sd / sqrt(2)
    assert mean[0] - lo[0] == pytest.approx(hi[0] - mean[0])


@pytest.fixture(scope="module")
def li_data(small_tables):
    feats = lab_features(small_tables["workloads"])
    return training_set(feats, small_tables["slowdowns"], 1.82, 5)


def test_same_seed_same_curves(li_data):
    X, y, names, _ = li_data
    base = {m: X[:, names.index(c)] for m, c in BASELINES.items()}
    grid, thr = np.linspace(0, 0.2, 21), np.linspace(0, 1, 11)
    a = split_study(X, y, base, make_li_model, 4, seed=11, fp_grid=grid, thresholds=thr)
    b = split_study(X, y, base, make_li_model, 4, seed=11, fp_grid=grid, thresholds=thr)
    c = split_study(X, y, base, make_li_model, 4, seed=12, fp_grid=grid, thresholds=thr)
    for m in a.li_at_fp:
        np.testing.assert_array_equal(a.li_at_fp[m], b.li_at_fp[m])
    np.testing.assert_array_equal(a.li_by_threshold, b.li_by_threshold)
    assert not np.array_equal(a.li_by_threshold, c.li_by_threshold)
    assert set(a.li_at_fp) == {"random_forest", *BASELINES}
    # more false positives allowed never means fewer workloads placed on the pool
    assert (np.diff(a.li_at_fp["random_forest"], axis=1) >= 0).all()


def test_onnx_parity_training_boundary_nan_rows(li_data):
    X, y, _, _ = li_data
    model = make_li_model(3).fit(X, y)
    onnx_bytes = export_li(model, X.shape[1])
    nan_rows = X[:10].copy()
    nan_rows[:, ::3] = np.nan
    edge = boundary_rows(forest_splits(model), X, n=100)
    for rows in (X, edge, nan_rows):
        assert check_parity(model, onnx_bytes, rows) <= 1e-5
        labels = session(onnx_bytes).run(["label"], {"X": rows})[0]
        np.testing.assert_array_equal(labels, model.predict(rows))
    assert onnx_p_insensitive(session(onnx_bytes), X[:3], [0, 1]).shape == (3,)


def test_parity_check_fails_loudly(li_data):
    X, y, _, _ = li_data
    a, b = make_li_model(1).fit(X, y), make_li_model(2).fit(X, 1 - y)
    with pytest.raises(ModelError, match="do not serve it"):
        check_parity(a, export_li(b, X.shape[1]), X)


@pytest.mark.slow
def test_train_li_stage(small_raw, tmp_path, monkeypatch):
    from tests.conftest import params_file, run_pond

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = str(params_file(tmp_path / "params.yaml", {
        "base": {"seed": 1, "as_of": "2026-01-08"},
        "train_li": {"latency_ratios": [1.82, 2.22], "pdms": [5], "n_splits": 3, "select_splits": 2, "cv_folds": 3,
                     "oof_repeats": 1}}))
    assert run_pond(["--params", params, "features", "--raw", str(small_raw), "--out", str(tmp_path / "features"),
                     "--metrics", str(tmp_path / "m" / "features.json")]) == 0
    out = tmp_path / "li"
    assert run_pond(["--params", params, "train_li", "--features", str(tmp_path / "features"), "--raw", str(small_raw),
                     "--out", str(out), "--metrics", str(tmp_path / "m" / "li.json"),
                     "--plots", str(tmp_path / "plots")]) == 0
    metrics = json.loads((tmp_path / "m" / "li.json").read_text())
    assert set(metrics) == {"r1.82_pdm5", "r2.22_pdm5"}
    assert {"random_forest.li_at_fp2", "dram_bound.li_at_fp2", "memory_bound.li_at_fp2",
            "l3_miss_latency.li_at_fp2"} <= set(metrics["r1.82_pdm5"])
    manifest = json.loads((out / "manifest.json").read_text())
    for name, m in manifest["models"].items():
        assert hashlib.sha256((out / m["file"]).read_bytes()).hexdigest() == m["sha256"]
        assert m["onnx_parity_max_abs_diff"] <= 1e-5
    curves = pd.read_parquet(out / "heldout_curves.parquet")
    assert list(curves.columns) == ["latency_ratio", "pdm", "threshold", "called", "errors", "n", "li", "fp", "method"]
    assert ((curves.fp <= curves.li + 1e-12) & curves.li.between(0, 1)).all()
    assert (curves.errors <= curves.called).all() and (curves.called <= curves.n).all()
    scores = pd.read_parquet(out / "heldout_scores.parquet")     # the same out-of-fold scores, per workload
    for (ratio, pdm), c in curves.groupby(["latency_ratio", "pdm"]):
        s = scores[(scores.latency_ratio == ratio) & (scores.pdm == pdm)]
        assert s.workload_id.is_unique and len(s) == c.n.iloc[0]
        called = s.p_insensitive.to_numpy()[None, :] >= c.threshold.to_numpy()[:, None]
        assert called.sum(axis=1).tolist() == c.called.tolist()
        assert (called & (s.insensitive.to_numpy() == 0)).sum(axis=1).tolist() == c.errors.tolist()
    for name, m in metrics.items():   # the deployed model is the one the selection chose
        assert manifest["models"][name]["method"] == m["selection.method"]
    assert (tmp_path / "plots" / "li_fp_curves.png").exists()
    import mlflow
    every = mlflow.search_runs(experiment_names=["pond"])
    runs = every[every["tags.stage"] == "train_li"]
    night = every[every["tags.pond.kind"] == "night"]       # the night it opened, still in progress (no register)
    assert len(runs) == 1 and len(night) == 1 and night.status.iloc[0] == "RUNNING"
    assert runs["tags.mlflow.parentRunId"].iloc[0] == night.run_id.iloc[0]
    logged = runs["metrics.r1.82_pdm5.random_forest.li_at_fp2"].iloc[0]
    assert logged == pytest.approx(metrics["r1.82_pdm5"]["random_forest.li_at_fp2"], abs=0.005)
