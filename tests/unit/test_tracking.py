"""The embedded MLflow store keeps its artifacts under data/mlflow, for every experiment of a process."""

from __future__ import annotations

from pond.core.tracking import start_run


def test_embedded_store_keeps_artifacts_under_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset-below")   # so that teardown restores the original
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    uris = []
    for experiment in ("pond", "pond-backtest"):   # mlflow sets MLFLOW_TRACKING_URI after the first
        monkeypatch.setenv("POND_MLFLOW_EXPERIMENT", experiment)
        with start_run("stage", {"a": 1}) as run:
            uris.append(run.info.artifact_uri)
    expected = (tmp_path / "data" / "mlflow" / "artifacts").as_uri()
    assert all(u.startswith(expected) for u in uris), uris
    assert not (tmp_path / "mlruns").exists()


def test_the_experiment_is_an_argument_the_environment_overrides(monkeypatch):
    """A backtest names its experiment (``pond-backtest``) instead of setting POND_MLFLOW_EXPERIMENT for the
    stages it runs; an operator's POND_MLFLOW_EXPERIMENT still sends every run of the process elsewhere."""
    from pond.core.tracking import BACKTEST, experiment

    monkeypatch.delenv("POND_MLFLOW_EXPERIMENT", raising=False)
    assert (experiment(), experiment(BACKTEST)) == ("pond", "pond-backtest")
    monkeypatch.setenv("POND_MLFLOW_EXPERIMENT", "mine")
    assert (experiment(), experiment(BACKTEST)) == ("mine", "mine")


def test_a_logged_model_names_its_flavors_packages_not_the_process(tmp_path, monkeypatch):
    """The requirements MLflow stores beside a model are the pinned packages its flavor loads with (no inference
    subprocess, so no pytest or dask picked up from the process), and the model loads back."""
    from importlib.metadata import version

    import lightgbm
    import mlflow
    import numpy as np

    from pond.core.tracking import requirements

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset-below")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    x = np.arange(40, dtype=float).reshape(20, 2)
    booster = lightgbm.train({"verbose": -1, "min_data_in_leaf": 2}, lightgbm.Dataset(x, x[:, 0]), 2)
    assert requirements("lightgbm") == [f"lightgbm=={version('lightgbm')}"]
    with start_run("stage", {}) as _:
        info = mlflow.lightgbm.log_model(booster, name="m", pip_requirements=requirements("lightgbm"))
    local = mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "m"))
    listed = (tmp_path / "m" / "requirements.txt").read_text().split()
    assert f"lightgbm=={version('lightgbm')}" in listed and not any(r.startswith(("pytest", "dask")) for r in listed)
    np.testing.assert_allclose(mlflow.lightgbm.load_model(local).predict(x), booster.predict(x))
