"""Against a running `mlflow server` (tracking + registry + artifacts over HTTP), not the embedded
SQLite file: register publishes there, the service follows `@champion` through it, and
moving the alias swaps the model with no failed request."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
import yaml

from tests.conftest import ROOT, run_pond, small_params
from tests.model.test_registry import _night
from tests.serving.conftest import request_of
from tests.serving.test_uvicorn import _free_port

pytestmark = pytest.mark.slow


def _start(cmd: list[str], log, **kw) -> subprocess.Popen:
    """Output to a file: a pipe nobody reads fills up and stalls a chatty server."""
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True, **kw)
    proc.log_path = log     # type: ignore[attr-defined]  # stdout is a file, so proc.stdout is None
    return proc


def _wait(url: str, proc: subprocess.Popen, what: str, timeout_s: float = 90) -> None:
    deadline = time.time() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"{what} did not start: {proc.log_path.read_text()[-2000:]}")
        time.sleep(0.3)


def server_env() -> dict[str, str]:
    """The environment of a test's `mlflow server`: no usage telemetry, and no job runner. MLflow 3's server starts
    huey consumers for its GenAI jobs by default (seven processes here), which the registry never uses: 20 s to
    answer /health instead of 13 alone, more beside the other test worker."""
    return {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


@pytest.fixture()
def mlflow_server(tmp_path):
    """`mlflow server` with a SQLite backend and a proxied artifact store, as a subprocess."""
    port = _free_port()
    proc = _start(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts")],
        tmp_path / "mlflow-server.log", cwd=tmp_path, env=server_env())
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{uri}/health", proc, "mlflow server")
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_register_and_serve_through_a_registry_server(mlflow_server, small_bundle, small_raw, next_day_vms,
                                                       tmp_path, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(small_params()))
    store = tmp_path / "nights"
    assert run_pond(["--params", str(params), *_night(small_bundle, small_raw, store, "night1")]) == 0
    # same models, LI off: the gate keeps version 1 as champion and makes version 2 the challenger
    assert run_pond(["--params", str(params), *_night(small_bundle, small_raw, store, "night2", without_li=True)]) == 0
    registry = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)
    assert registry.get_model_version_by_alias("pond-znuma", "champion").version in ("1", 1)
    assert not (tmp_path / "mlruns").exists() and not (ROOT / "mlruns" / "models").exists()

    port = _free_port()
    env = {**os.environ, "POND_REGISTRY_MODEL": "pond-znuma", "POND_MLFLOW_TRACKING_URI": mlflow_server,
           "POND_RELOAD_INTERVAL_S": "0.5"}
    env.pop("MLFLOW_TRACKING_URI", None)
    service = _start([sys.executable, "-m", "pond.pipelines", "serve", "--port", str(port)], tmp_path / "serve.log",
                     cwd=tmp_path, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{base}/readyz", service, "pond serve")
        assert httpx.get(f"{base}/readyz").json()["model_version"] == "pond-znuma/v1"
        reqs = [request_of(r) for r in next_day_vms.head(20).itertuples()]
        versions, failures, stop = set(), [], threading.Event()

        def hammer() -> None:
            with httpx.Client(base_url=base, timeout=10) as c:
                while not stop.is_set():
                    r = c.post("/v1/allocations/batch", json={"requests": reqs})
                    if r.status_code != 200:
                        failures.append(r.status_code)
                        continue
                    versions.update(a["model_version"] for a in r.json()["allocations"])

        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        registry.set_registered_model_alias("pond-znuma", "champion", 2)      # the operator promotes v2
        deadline = time.time() + 30
        while httpx.get(f"{base}/readyz").json()["model_version"] != "pond-znuma/v2":
            assert time.time() < deadline, "the service did not follow the alias"
            time.sleep(0.2)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
        assert failures == []
        assert versions == {"pond-znuma/v1", "pond-znuma/v2"}
    finally:
        service.terminate()
        service.wait(timeout=30)
