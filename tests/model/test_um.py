"""Untouched-memory model: leakage guard, curves by hand, conformal direction, ONNX parity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pond.core.errors import ConfigError
from pond.features.build import FeatureParams, vm_features
from pond.models.decision import pool_gb
from pond.models.onnx_export import (
    PARITY_ROWS,
    boundary_rows,
    check_regressor_parity,
    export_um,
    export_um_onnxmltools,
    lightgbm_splits,
    parity_sample,
)
from pond.models.runtime import session
from pond.models.um import (
    HEAD,
    ConformalOffset,
    UmEncoder,
    UntouchedModel,
    conformal_offsets,
    fit_vocabulary,
    float32_thresholds,
)
from pond.models.um_curves import op_at_um, static_curve, um_at_op, um_op
from pond.models.um_protocol import (
    UmParams,
    backtest_nights,
    creation_days,
    fit_night,
    fit_night_scored,
    night,
    night_columns,
)
from pond.telemetry import request
from tests.conftest import params_file, run_pond


@pytest.fixture(scope="module")
def vmf(small_raw):
    from pond.telemetry.io import read_tables
    t = read_tables(small_raw, ["vms"])
    return vm_features(t["vms"], small_raw / "vm_counters.parquet", FeatureParams(as_of="2026-01-09"))


P = UmParams(train_days=6, calib_days=1, calib_lag_days=1, backtest_nights=3, target_grid=(0.02, 0.04, 0.1))


def test_um_op_of_k_policies_is_each_policy_alone():
    """(k, n) predictions are decided one policy at a time, with the bits of the (n,) call for each."""
    rng = np.random.default_rng(4)
    u, mem = rng.random(500), rng.choice([2.0, 4.0, 8.0, 48.0, 256.0], 500)
    pred = rng.random((7, 500))
    um, op = um_op(pred, u, mem)
    assert um.shape == op.shape == (7,)
    pool = pool_gb(pred, mem)                    # the (k, n) matrix the stage used to decide at once
    assert um.tolist() == (pool.sum(axis=1) / mem.sum()).tolist()
    assert op.tolist() == (u * mem < pool - 1e-9).mean(axis=1).tolist()


def test_um_op_by_hand():
    pred, mem, u = np.array([0.5, 0.25, 0.1]), np.array([8.0, 4.0, 4.0]), np.array([0.6, 0.1, 0.5])
    um, op = um_op(pred, u, mem)
    # zNUMA 4, 1, 0 GB (0.4 GB rounds down); the second VM touches 3.6 GB of its 4: overpredicted
    assert um == pytest.approx(5 / 16) and op == pytest.approx(1 / 3)
    s_um, s_op = static_curve(u, mem, np.array([0.0, 0.5]))
    np.testing.assert_allclose(s_um, [0.0, 8 / 16])
    np.testing.assert_allclose(s_op, [0.0, 1 / 3])
    um_c, op_c = np.array([0.1, 0.3, 0.2]), np.array([0.01, 0.09, 0.05])
    assert op_at_um(um_c, op_c, 0.25) == pytest.approx(0.07)
    assert np.isnan(op_at_um(um_c, op_c, 0.4))
    assert um_at_op(um_c, op_c, 0.03) == pytest.approx(0.15)
    assert um_at_op(um_c, op_c, 0.001) == 0.0


def test_conformal_offset_moves_predictions_the_right_way():
    u = np.linspace(0.0, 0.99, 100)
    high = ConformalOffset(0.05).fit(u + 0.2, u)       # always overpredicts by 0.2
    assert high.offset_ == pytest.approx(0.2) and (high.apply(u + 0.2) <= u + 1e-12).all()
    low = ConformalOffset(0.05).fit(u - 0.1, u)        # always underpredicts by 0.1: raise it
    assert low.offset_ == pytest.approx(-0.1)
    assert (low.apply(np.array([0.3])) > 0.3).all()
    mixed = ConformalOffset(0.1).fit(np.zeros(9), -np.arange(9) / 10)  # scores 0.0 .. 0.8
    assert mixed.offset_ == pytest.approx(0.8)         # ceil(10 * 0.9) = 9th smallest


def test_encoder_parses_vm_types_and_leaves_the_rest_missing():
    vms = pd.DataFrame({"vm_id": ["a", "b"], "customer_id": ["c1", "c2"],
                        "vm_type": ["Standard_E16s_v5", "azure_Interactive_2c_4g"], "os": ["linux", "unknown"],
                        "region": ["eastus", "x"], "cluster_id": ["c", "d"], "vcpus": [16, 2],
                        "memory_gb": [128.0, 4.0], "cust_n": [3, 0], "cust_p50": [0.5, np.nan]})
    vocab = fit_vocabulary(vms)
    assert vocab["family"] == ["azure/E"] and vocab["vm_type"] == ["Standard_E16s_v5", "azure_Interactive_2c_4g"]
    enc = UmEncoder(vocab, ["cust_n", "cust_p50"])
    rows = [dict(zip(enc.features, r)) for r in enc.encode(vms).tolist()]
    assert rows[0]["family"] == 0 and rows[0]["generation"] == 5 and rows[0]["gb_per_vcpu"] == 8
    assert np.isnan(rows[1]["family"]) and np.isnan(rows[1]["generation"]) and rows[1]["vm_type"] == 1
    assert rows[0]["cust_p50"] == 0.5 and rows[1]["cust_n"] == 0
    with pytest.raises(ConfigError, match="cust_p75"):
        UmEncoder(vocab, ["cust_n", "cust_p75"]).encode(vms)


@pytest.mark.parametrize("cluster", ["names", "some missing", "absent"])
def test_frame_encoding_is_the_request_encoding_bit_for_bit(small_bundle, cluster):
    """`encode` (training, evaluate: codes per distinct value) equals ``head`` of the request columns (the
    service's path, a look-up per row) on the fleet's VMs and on values no vocabulary holds."""
    vf = pd.read_parquet(small_bundle / "features" / "vm_features.parquet")
    odd = pd.DataFrame({"vm_id": ["x1", "x2", "x3"], "customer_id": ["c", "c", "d"],
                        "vm_type": ["m7i.48xlarge", "totally-unknown", "Standard_D2s_v3"],
                        "os": ["plan9", "linux", "windows"], "region": ["mars-1", "eastus", "eastus"],
                        "cluster_id": [None, "new-cluster", None], "vcpus": [192, 3, 2],
                        "memory_gb": [768.0, 5.5, 8.0]})
    vms = pd.concat([vf, odd], ignore_index=True)
    if cluster == "some missing":
        vms.loc[vms.index[::7], "cluster_id"] = None
    elif cluster == "absent":
        vms = vms.drop(columns="cluster_id")
    reference = vf.iloc[: len(vf) // 2]               # a vocabulary that does not hold everything
    enc = UmEncoder(fit_vocabulary(reference), [c for c in vf.columns if c.startswith("cust_")])
    got = enc.encode(vms)
    cols = request.columns_of(vms)
    want = np.concatenate([enc.head(cols), vms[enc.customer_columns].to_numpy(np.float32)], axis=1)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))   # the same bits, NaN included
    assert np.isnan(got[-3:, 0]).sum() == 2                # unknown types are missing, a known one is coded
    seen = {c: sorted({v for v in values if v is not None})
            for c, values in zip(("vm_type", "os", "region"), (cols["vm_type"], cols["os"], cols["region"]))}
    assert {c: fit_vocabulary(vms)[c] for c in seen} == seen
    assert enc.encode(vms.iloc[:0]).shape == (0, len(enc.features))


def test_no_leakage_from_the_future(vmf):
    n = night(vmf, "2026-01-09", P)
    end = pd.Timestamp("2026-01-10", tz="UTC")
    assert (n.train.deleted_at < end).all() and (n.calib.deleted_at < end).all()
    assert (n.next_day.created_at >= end).all() and len(n.next_day) > 0
    model, cal = fit_night(n, 0.04, 0.04, seed=1)
    # Scramble every label the night could not have known: nothing may change.
    future = vmf.deleted_at.isna() | (vmf.deleted_at >= end)
    scrambled = vmf.copy()
    scrambled.loc[future, "untouched_fraction"] = np.random.default_rng(0).random(future.sum())
    n2 = night(scrambled, "2026-01-09", P)
    model2, cal2 = fit_night(n2, 0.04, 0.04, seed=1)
    np.testing.assert_array_equal(model.predict(n.next_day), model2.predict(n.next_day))
    assert cal.offset_ == cal2.offset_


def test_the_scored_fit_gives_the_calibration_predictions_its_offset_was_fit_on(vmf):
    n = night(vmf, "2026-01-09", P)
    model, cal, calib_pred = fit_night_scored(n, 0.04, 0.04, seed=1)
    np.testing.assert_array_equal(calib_pred, model.predict(n.calib))
    assert cal.offset_ == ConformalOffset(0.04).fit(calib_pred, n.calib.untouched_fraction).offset_
    assert fit_night(n, 0.04, 0.04, seed=1)[0] is model


def test_one_sort_gives_every_targets_offset_as_its_own_fit_does():
    rng = np.random.default_rng(5)
    pred, u = rng.random(301), rng.random(301)
    targets = [0.0005, 0.01, 0.04, 0.1, 0.5]
    got = conformal_offsets(pred, u, targets)
    assert list(got) == [ConformalOffset(t).fit(pred, u).offset_ for t in targets]
    assert got[0] == np.max(pred - u)                      # k past n: the largest score


def test_the_parity_check_runs_on_every_row_up_to_its_cap_and_a_seeded_sample_beyond():
    X = np.arange(30, dtype=np.float32).reshape(15, 2)
    assert parity_sample(X, seed=3, n=15) is X
    got = parity_sample(X, seed=3, n=6)
    assert got.shape == (6, 2) and np.all(np.diff(got[:, 0]) > 0)        # distinct rows, in their order
    assert {tuple(r) for r in got} <= {tuple(r) for r in X}
    np.testing.assert_array_equal(got, parity_sample(X, seed=3, n=6))
    assert not np.array_equal(got, parity_sample(X, seed=4, n=6))
    assert PARITY_ROWS >= 72_000           # the built-in fleet's training and calibration rows: every one checked


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_the_solvers_op_curve_ends_curve_lag_days_before_as_of_on_what_was_known_then(vmf, lag):
    """``curve_lag_days`` moves the UM backtest's last next day to ``lag`` days before as_of (null: the
    calibration's lag), and its scores still read no outcome observed after the end of as_of: scrambling every
    later label changes no night's UM or OP."""
    from pond.models.um_backtest import backtest

    as_of, end = "2026-01-09", pd.Timestamp("2026-01-10", tz="UTC")
    p = P.model_copy(update={"curve_lag_days": lag})
    nights = list(backtest_nights(vmf, as_of, p))
    assert len(nights) == P.backtest_nights
    first_next = [n.next_day.created_at.min().normalize() for n in nights]
    assert first_next[-1] == end - pd.Timedelta(days=lag + 1)
    assert first_next == sorted(first_next) and len(set(first_next)) == len(first_next)
    if lag == P.calib_lag_days:   # null is the calibration's lag
        for a, b in zip(nights, backtest_nights(vmf, as_of, P.model_copy(update={"curve_lag_days": None}))):
            pd.testing.assert_frame_equal(a.next_day, b.next_day)
    for n in nights:   # scored: ended by the end of as_of; censored: created that day, not ended by then
        assert (n.next_day.deleted_at < end).all()
    future = vmf.deleted_at.isna() | (vmf.deleted_at >= end)
    scrambled = vmf.copy()
    scrambled.loc[future, "untouched_fraction"] = np.random.default_rng(0).random(future.sum())
    got, sweep = backtest(vmf, as_of, p, seed=1)
    got2, sweep2 = backtest(scrambled, as_of, p, seed=1)
    pd.testing.assert_frame_equal(sweep, sweep2)
    pd.testing.assert_frame_equal(got, got2)
    if lag == 0:   # the as-of day's own VMs: some still run at its end, and are left out
        assert got.censored.iloc[-1] > 0


def test_a_nights_model_is_fit_once_and_other_rows_are_another_fit(vmf):
    """A backtest's nights share their training windows: the same rows (read again) give the model fit before, the
    model a fit of its own would give; another seed, quantile or label is another fit."""
    n = night(vmf, "2026-01-09", P)
    model, _ = fit_night(n, 0.04, 0.04, seed=1)
    assert fit_night(night(vmf.copy(), "2026-01-09", P), 0.04, 0.04, seed=1)[0] is model
    own = UntouchedModel(alpha=0.04, seed=1).fit(n.train, n.train.untouched_fraction.to_numpy())
    np.testing.assert_array_equal(own.predict(n.next_day), model.predict(n.next_day))
    assert fit_night(n, 0.04, 0.04, seed=2)[0] is not model and fit_night(n, 0.1, 0.04, seed=1)[0] is not model
    changed = vmf.copy()
    changed.loc[n.train.index[0], "untouched_fraction"] = 1 - n.train.untouched_fraction.iloc[0]
    assert fit_night(night(changed, "2026-01-09", P), 0.04, 0.04, seed=1)[0] is not model


@pytest.mark.parametrize("as_of", ["2026-01-06", "2026-01-09"])
def test_the_days_train_um_reads_hold_every_row_its_nights_use(vmf, as_of):
    """train_um reads only ``creation_days`` of the VM features: the same nights."""
    first, last = creation_days(as_of, P)
    kept = vmf[(vmf["day"] >= first) & (vmf["day"] <= last)]
    assert len(kept) < len(vmf)
    for full, part in zip([*backtest_nights(vmf, as_of, P), night(vmf, as_of, P)],
                          [*backtest_nights(kept, as_of, P), night(kept, as_of, P)]):
        for a, b in ((full.train, part.train), (full.calib, part.calib), (full.next_day, part.next_day)):
            pd.testing.assert_frame_equal(a, b)
        assert full.censored == part.censored


def test_float32_thresholds_keep_lightgbm_output_and_give_onnx_parity(vmf):
    n = night(vmf, "2026-01-09", P)
    model = UntouchedModel(alpha=0.1, seed=3).fit(n.train, n.train.untouched_fraction.to_numpy())
    X = model.transform_input(pd.concat([n.train, n.next_day]))
    nan_rows = X[:50].copy()
    nan_rows[:, ::2] = np.nan
    edge = boundary_rows(lightgbm_splits(model.booster_), X, n=300)
    rows = np.vstack([X, nan_rows, edge])
    onnx_bytes = export_um(model.booster_)
    assert export_um(model.booster_) == onnx_bytes  # same model, same bytes, same sha256
    assert check_regressor_parity(model.booster_, onnx_bytes, rows) < 1e-4
    again = float32_thresholds(model.booster_)  # idempotent: already float32
    np.testing.assert_array_equal(again.predict(rows), model.booster_.predict(rows))


def test_membership_graph_agrees_with_onnxmltools_and_is_smaller(vmf):
    """Our TreeEnsemble v5 graph vs onnxmltools' equality chains, on the rows the parity test uses."""
    import onnx

    n = night(vmf, "2026-01-09", P)
    model = UntouchedModel(alpha=0.1, seed=3).fit(n.train, n.train.untouched_fraction.to_numpy())
    X = model.transform_input(pd.concat([n.train, n.next_day]))
    unknown = X[:50].copy()
    unknown[:, :5] = 999.0                      # codes outside every category set
    negative = X[:50].copy()
    negative[:, :5] = -1.0
    rows = np.vstack([X, unknown, negative, boundary_rows(lightgbm_splits(model.booster_), X, n=300)])
    ours, theirs = export_um(model.booster_), export_um_onnxmltools(model.booster_)
    a = session(ours).run(None, {"X": rows})[0].ravel()
    b = session(theirs).run(None, {"X": rows})[0].ravel()
    assert np.max(np.abs(a - b)) < 1e-5
    assert check_regressor_parity(model.booster_, ours, rows) < 1e-4
    count = lambda m: sum(len(a.ints) for nd in onnx.load_from_string(m).graph.node
                          for a in nd.attribute if a.name == "nodes_featureids")
    assert count(ours) < count(theirs)


def test_unknown_category_takes_missing_branch(vmf):
    n = night(vmf, "2026-01-09", P)
    model = UntouchedModel(alpha=0.1, seed=3).fit(n.train, n.train.untouched_fraction.to_numpy())
    vm = n.next_day.head(1).copy()
    vm["region"] = "mars-north"
    X = model.transform_input(vm)
    assert np.isnan(X[0, 3]) and 0.0 <= model.predict(vm)[0] <= 1.0


@pytest.mark.slow
def test_train_um_stage(vmf, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "features").mkdir()
    vmf.to_parquet(tmp_path / "features" / "vm_features.parquet")
    params = params_file(tmp_path / "params.yaml", {
        "base": {"seed": 2, "as_of": "2026-01-09"},
        "train_um": {"train_days": 6, "calib_days": 1, "calib_lag_days": 1, "backtest_nights": 3,
                     "alphas": [0.01, 0.05, 0.2], "target_grid": [0.02, 0.04, 0.1]}})
    assert run_pond(["--params", str(params), "train_um", *_train_um_paths(tmp_path, "um", "m.json")]) == 0
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["backtest_nights"] == 3 and 0 <= m["calibrated.nights_within_target"] <= 1
    assert m["onnx_parity_max_abs_diff"] < 1e-4
    manifest = json.loads((tmp_path / "um" / "manifest.json").read_text())
    assert set(manifest["offsets"]) == {"0.02", "0.04", "0.1"}
    assert manifest["offsets"]["0.02"] >= manifest["offsets"]["0.1"]  # a stricter target lowers more
    curve = pd.read_parquet(tmp_path / "um" / "heldout_curves.parquet")
    assert list(curve.columns) == ["target_op", "um", "op", "op_max", "nights", "vms", "overpredicted"]
    assert (curve.overpredicted <= curve.vms).all()
    assert (np.diff(curve.um) >= -1e-12).all()  # a looser target never places less memory
    assert (tmp_path / "plots" / "um_tradeoff.png").exists()


@pytest.mark.slow
def test_a_changed_percentile_list_reaches_the_model_or_fails_loudly(small_raw, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    small = {"train_um": {"train_days": 6, "calib_days": 1, "calib_lag_days": 1, "backtest_nights": 2,
                          "alphas": [0.05], "target_grid": [0.04]}}
    params = params_file(tmp_path / "params.yaml", {"base": {"seed": 2, "as_of": "2026-01-09"},
                                                    "features": {"percentiles": [50, 75]}, **small})
    assert run_pond(["--params", str(params), "features", "--raw", str(small_raw), "--out", str(tmp_path / "features"),
                     "--metrics", str(tmp_path / "f.json")]) == 0
    assert run_pond(["--params", str(params), "train_um", *_train_um_paths(tmp_path, "um", "m.json")]) == 0
    manifest = json.loads((tmp_path / "um" / "manifest.json").read_text())
    assert manifest["features"][-3:] == ["cust_n", "cust_p50", "cust_p75"]
    assert "cust_p75" in (tmp_path / "um" / "um_lightgbm.txt").read_text()
    snapshot = pd.read_parquet(tmp_path / "features" / "snapshot" / "customer_percentiles.parquet")
    assert snapshot["cust_p75"].notna().any() and "cust_p80" not in snapshot
    stale = params_file(tmp_path / "stale.yaml", {"base": {"seed": 2, "as_of": "2026-01-09"},
                                                  "features": {"percentiles": [50, 80]}, **small})
    capsys.readouterr()
    assert run_pond(["--params", str(stale), "train_um", *_train_um_paths(tmp_path, "um2", "m2.json")]) == 2
    assert "features.percentiles gives ['cust_n', 'cust_p50', 'cust_p80']" in capsys.readouterr().err
    assert not (tmp_path / "um2").exists()


def _train_um_paths(wd: Path, out: str, metrics: str) -> list[str]:
    return ["--features", str(wd / "features"), "--out", str(wd / out), "--metrics", str(wd / metrics),
            "--plots", str(wd / "plots")]


def test_the_model_encodes_from_the_night_columns_alone(small_bundle):
    """What `train_um` reads (models.um_protocol.night_columns) is all the encoder needs."""
    path = small_bundle / "features" / "vm_features.parquet"
    vf = pq.read_table(path, columns=night_columns(pq.read_schema(path).names)).to_pandas()
    encoder = UmEncoder(fit_vocabulary(vf), [c for c in vf.columns if c.startswith("cust_")])
    X = encoder.encode(vf)
    assert X.shape == (len(vf), len(encoder.features)) and encoder.features[:len(HEAD)] == HEAD
