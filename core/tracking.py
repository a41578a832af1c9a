"""MLflow tracking: embedded by default (SQLite + local artifacts under data/mlflow), or a server.

`MLFLOW_TRACKING_URI` points every stage at a shared MLflow server instead. Nothing is set at
import time: `start_run` configures MLflow when a stage actually runs. Which experiment a run goes to is
an argument (`backtest` logs its nights' UM runs to ``pond-backtest``: metrics, plot and manifest; the models stay in
each night's folder); `POND_MLFLOW_EXPERIMENT`, when set, overrides it for every run of the process.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pond.core import night_run
from pond.core.night_run import HOST_TAG, PID_TAG
from pond.core.runtime import Runtime

LOCAL_DIR = Path("data/mlflow")


NIGHTLY = "pond"               # the nightly stages' experiment
BACKTEST = "pond-backtest"     # the UM runs a backtest trains for its past nights


def experiment(default: str = NIGHTLY) -> str:
    """The experiment a run goes to: POND_MLFLOW_EXPERIMENT when set, else ``default``."""
    return Runtime.now().mlflow_experiment or default


def _local_uri() -> str:
    return f"sqlite:///{(LOCAL_DIR / 'mlflow.db').resolve()}"


def tracking_uri() -> str:
    uri = Runtime.now().mlflow_tracking_uri
    if uri:
        return uri
    LOCAL_DIR.mkdir(parents=True, exist_ok=True)
    return _local_uri()


def requirements(*packages: str) -> list[str]:
    """A logged model's pip requirements: the installed versions of what its flavor loads it with.

    Without them MLflow infers the list by loading the model in a subprocess (about 3 s a model, on every night a
    backtest replays) and writes whatever that process imported, pytest and dask among them."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in packages]


def ensure_experiment(default_experiment: str = NIGHTLY) -> str:
    """The stage's experiment name, the experiment created where it is not yet (at the tracking URI, which this
    sets for the process). A stage that runs its work in several processes calls it first, so that they do not
    race to create it."""
    os.environ.setdefault(Runtime.variable("mlflow_disable_telemetry"), Runtime.now().mlflow_disable_telemetry)
    import mlflow

    uri = tracking_uri()
    embedded = uri == _local_uri()   # not the env variable: mlflow.set_tracking_uri sets it for the process
    mlflow.set_tracking_uri(uri)
    name = experiment(default_experiment)
    if mlflow.get_experiment_by_name(name) is None:
        artifacts = (LOCAL_DIR / "artifacts").resolve().as_uri() if embedded else None
        mlflow.create_experiment(name, artifact_location=artifacts, tags=night_run.KIND)
    return name


@contextmanager
def start_run(stage: str, params: dict[str, Any], tags: dict[str, str] | None = None,
              default_experiment: str = NIGHTLY) -> Iterator[Any]:
    """The stage's MLflow run. In the nightly experiment it nests under the night's parent run (``core.night_run``),
    whose id is the run's ``pond.night_run`` tag; a backtest's runs stand alone."""
    # Usage telemetry would try to reach the internet from every nightly run; operators may opt in.
    os.environ.setdefault(Runtime.variable("mlflow_disable_telemetry"), Runtime.now().mlflow_disable_telemetry)
    import mlflow
    from mlflow import MlflowClient

    exp = mlflow.set_experiment(ensure_experiment(default_experiment))
    client = MlflowClient()
    for key, value in night_run.KIND.items():
        if key not in exp.tags:           # experiments created before the tag
            client.set_experiment_tag(exp.experiment_id, key, value)
    host = socket.gethostname()
    close_abandoned(exp.experiment_id, stage, host)
    night = night_run.open_night(client, exp.experiment_id) if default_experiment == NIGHTLY else None
    run = mlflow.start_run(run_name=stage, parent_run_id=night,
                           tags={"stage": stage, HOST_TAG: host, PID_TAG: str(os.getpid()),
                                 **({NIGHT_RUN_TAG: night} if night else {}), **(tags or {})})
    try:
        with _stopped_by_sigterm():
            mlflow.log_params(_flatten(params))
            yield run
    except (KeyboardInterrupt, SystemExit):
        _end(mlflow, client, night, "KILLED")
        raise
    except BaseException:
        _end(mlflow, client, night, "FAILED")
        raise
    mlflow.end_run("FINISHED")


NIGHT_RUN_TAG = "pond.night_run"


def _end(mlflow: Any, client: Any, night: str | None, status: str) -> None:
    mlflow.end_run(status)
    if night is not None:
        night_run.mark(client, night, status)


def close_abandoned(experiment_id: str, stage: str, host: str) -> list[str]:
    """Mark KILLED the runs of ``stage`` still RUNNING whose process, on this host, is gone (killed with SIGKILL, or
    the machine stopped): MLflow would show them running forever. Runs of other hosts are left alone (their process
    cannot be seen from here). The run ids closed."""
    from mlflow import MlflowClient

    client = MlflowClient()
    found = client.search_runs([experiment_id], filter_string=f"attributes.status = 'RUNNING' and tags.stage = '{stage}' "
                                                               f"and tags.`{HOST_TAG}` = '{host}'")
    closed = []
    for r in found:
        pid = r.data.tags.get(PID_TAG, "")
        if pid.isdigit() and not _alive(int(pid)):
            client.set_terminated(r.info.run_id, "KILLED")
            closed.append(r.info.run_id)
            print(f"{stage}: MLflow run {r.info.run_id} was left RUNNING by process {pid}, which is gone: marked KILLED")
    return closed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # another user's process: alive
        return True
    return True


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler stopping the job) ends the stage as Ctrl-C does: the ``with`` blocks unwind
    (temp outputs removed, the MLflow run marked KILLED) and the process exits 143. Python's default would stop
    the process at once and leave the run RUNNING. Only the main thread can take a signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def not_found(exc: BaseException) -> bool:
    """True when MLflow says the registered model, version or alias does not exist (yet): the one
    answer that means "nothing there". Any other failure (the store unreachable, locked, corrupt)
    is not an absence and must not be read as one."""
    from mlflow.exceptions import MlflowException

    if not isinstance(exc, MlflowException):
        return False
    code = exc.error_code
    return code == "RESOURCE_DOES_NOT_EXIST" or (code == "INVALID_PARAMETER_VALUE" and "not found" in str(exc))


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, f"{key}."))
        else:
            out[key] = v
    return out
