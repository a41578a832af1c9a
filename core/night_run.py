"""The night's parent run: one MLflow run per nightly job, the stages' runs nested under it.

The stages of a `dvc repro` run as separate processes and DVC skips those whose inputs did not change, so no stage
knows whether it is the night's first. The parent is therefore the work tree's night still open: the first tracked
stage opens it, the next ones nest under it, and `register` closes it with the night's headline figures
(``close``). A night that fails stays open, marked with the stage's status, and the rerun (`dvc repro` again)
continues it. Runs are matched by host and work tree, so two clones sharing one tracking server keep their nights
apart.
"""

from __future__ import annotations

import hashlib
import os
import socket
from typing import Any

KIND_TAG, NIGHT = "pond.kind", "night"
HOST_TAG, PID_TAG = "pond.host", "pond.pid"    # where a run's process ran: a run left RUNNING by a killed one is closed
TREE_TAG = "pond.work_tree"                    # a digest of the work tree's path (a path may hold quotes)
OPEN_NAME = "night (in progress)"
# Without it MLflow 3's UI opens an experiment on its GenAI overview ("Traces: 0"), not on its runs.
KIND = {"mlflow.experimentKind": "custom_model_development"}


def work_tree() -> str:
    return hashlib.sha256(os.getcwd().encode()).hexdigest()[:16]


def open_night(client: Any, experiment_id: str) -> str:
    """The run id of this work tree's open night, opened here when there is none; a night a failed stage
    marked FAILED or KILLED is running again."""
    found = client.search_runs(
        [experiment_id], filter_string=f"tags.`{KIND_TAG}` = '{NIGHT}' and attributes.status != 'FINISHED' and "
                                       f"tags.`{HOST_TAG}` = '{socket.gethostname()}' and "
                                       f"tags.`{TREE_TAG}` = '{work_tree()}'",
        order_by=["attributes.start_time DESC"], max_results=1)
    if found:
        run = found[0]
        if run.info.status != "RUNNING":
            client.update_run(run.info.run_id, status="RUNNING")
        return run.info.run_id
    tags = {KIND_TAG: NIGHT, HOST_TAG: socket.gethostname(), TREE_TAG: work_tree()}
    return client.create_run(experiment_id, run_name=OPEN_NAME, tags=tags).info.run_id


def mark(client: Any, night_id: str, status: str) -> None:
    """A stage of the night ended ``status`` (FAILED, KILLED): the night shows it until a rerun continues it."""
    client.set_terminated(night_id, status)


def close(client: Any, night_id: str, name: str, metrics: dict[str, float], params: dict[str, Any],
          tags: dict[str, str]) -> str:
    """End the night FINISHED as ``name`` with its headline figures; the run id that holds them. A night whose
    close was interrupted after its params were logged (MLflow never changes a param) is left as it is, and the
    figures go to a fresh night run of the same name."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    if client.get_run(night_id).data.params:
        night_id = client.create_run(client.get_run(night_id).info.experiment_id, run_name=name,
                                     tags={KIND_TAG: NIGHT, HOST_TAG: socket.gethostname(),
                                           TREE_TAG: work_tree()}).info.run_id
    now = int(time.time() * 1000)
    client.log_batch(night_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                     params=[Param(k, str(v)) for k, v in params.items()],
                     tags=[RunTag(k, str(v)) for k, v in tags.items()])
    client.update_run(night_id, name=name)
    client.set_terminated(night_id, "FINISHED")
    return night_id
