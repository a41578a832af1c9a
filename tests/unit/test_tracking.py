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
