"""The service on the ``serve`` lock alone: a fresh venv, no training package."""

from __future__ import annotations

import subprocess
import sys
import venv

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.serving.test_registry_server import mlflow_server  # noqa: F401  (fixture)
from tests.unit.test_install import TRAIN_ONLY


@pytest.fixture(scope="module")
def serve_python(tmp_path_factory):
    """A fresh venv from requirements/serve.txt with the project installed without its dependencies."""
    env_dir = tmp_path_factory.mktemp("serve") / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]   # half the time
    subprocess.run([*pip, "--require-hashes", "-r", str(ROOT / "requirements" / "serve.txt")], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    return py


@pytest.mark.slow
def test_serve_role_alone_answers_like_the_full_install(serve_python, tmp_path, small_bundle, next_day_vms):
    """A fresh venv from requirements/serve.txt runs `pond predict` to the same allocations."""
    py = serve_python
    for mod in TRAIN_ONLY:
        assert subprocess.run([str(py), "-c", f"import {mod}"], capture_output=True, check=False).returncode != 0, mod
    cols = ["vm_id", "customer_id", "vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id"]
    next_day_vms.head(50)[cols].to_csv(tmp_path / "req.csv", index=False)
    bundle = ["--policy", str(small_bundle / "policy.json"), "--li", str(small_bundle / "li"),
              "--um", str(small_bundle / "um"), "--snapshot", str(small_bundle / "features" / "snapshot")]
    outs = {}
    for name, python in (("serve", str(py)), ("full", sys.executable)):
        out = tmp_path / f"{name}.parquet"
        subprocess.run([python, "-m", "pond.pipelines", "predict", str(tmp_path / "req.csv"), "--out", str(out), *bundle],
                       check=True, cwd=tmp_path, capture_output=True)
        outs[name] = pd.read_parquet(out)
    pd.testing.assert_frame_equal(outs["serve"], outs["full"])


FOLLOW = """
import sys
from pond.serving.reload import RegistrySource
engine = RegistrySource("pond-znuma", "champion", sys.argv[1], 0.5).load()
print(engine.version, engine.policy.li.sha256, engine.policy.um.sha256)
"""


@pytest.mark.slow
def test_serve_role_alone_loads_the_champion_from_a_registry_server(serve_python, mlflow_server,  # noqa: F811
                                                                    small_bundle, small_raw, tmp_path, monkeypatch):
    """The service's install (mlflow-skinny) downloads a version logged as an MLflow model (its bundle under the
    model's data/) from a registry server, and loads the same bundle the night registered."""
    import json

    import yaml

    from tests.conftest import run_pond, small_params
    from tests.model.test_registry import _night

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(small_params()))
    assert run_pond(["--params", str(params), *_night(small_bundle, small_raw, tmp_path / "nights", "night1")]) == 0
    out = subprocess.run([str(serve_python), "-c", FOLLOW, mlflow_server], capture_output=True, text=True,
                         cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    policy = json.loads((tmp_path / "nights" / "night1" / "bundle" / "policy.json").read_text())
    expected = f"pond-znuma/v1 {policy['li']['sha256']} {policy['um']['sha256']}"
    assert out.stdout.strip().splitlines()[-1] == expected
