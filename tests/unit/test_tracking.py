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


STAGE_SCRIPT = """
import sys, time
from pond.core.tracking import start_run
with start_run("train_li", {"a": 1}) as run:
    print(run.info.run_id, flush=True)
    if sys.argv[1] == "wait":
        time.sleep(120)
"""


def _stage(tmp_path, how: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    return subprocess.Popen([sys.executable, "-c", STAGE_SCRIPT, how], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _status(tmp_path, run_id: str) -> str:
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id).info.status


def test_a_stage_stopped_by_sigterm_ends_its_run_killed_and_exits_143(tmp_path):
    """A stage killed mid-run left its MLflow run RUNNING forever: SIGTERM now unwinds it like Ctrl-C."""
    import signal

    proc = _stage(tmp_path, "wait")
    run_id = proc.stdout.readline().strip()
    assert run_id, proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert _status(tmp_path, run_id) == "KILLED"


def test_a_run_left_running_by_a_process_killed_outright_is_closed_by_the_next_run(tmp_path):
    """SIGKILL gives the process no chance: the next run of the stage on this host sees the process is gone."""
    import signal

    proc = _stage(tmp_path, "wait")
    stale = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert _status(tmp_path, stale) == "RUNNING"
    nxt = _stage(tmp_path, "done")
    out, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err
    fresh = out.strip().splitlines()[-1]
    assert (_status(tmp_path, stale), _status(tmp_path, fresh)) == ("KILLED", "FINISHED")
    assert f"MLflow run {stale} was left RUNNING" in out


def test_a_stage_that_fails_ends_its_run_failed(tmp_path, monkeypatch):
    import mlflow
    import pytest

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(ValueError), start_run("train_li", {"a": 1}) as run:
        raise ValueError("a stage's own error")
    assert mlflow.get_run(run.info.run_id).info.status == "FAILED"
    with start_run("train_li", {"a": 1}) as run:
        pass
    assert mlflow.get_run(run.info.run_id).info.status == "FINISHED"
