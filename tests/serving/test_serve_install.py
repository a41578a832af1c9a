"""The service on the ``serve`` lock alone (issue 16): a fresh venv, no training package."""

from __future__ import annotations

import subprocess
import sys
import venv

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.unit.test_install import TRAIN_ONLY


@pytest.mark.slow
def test_serve_role_alone_answers_like_the_full_install(tmp_path, small_bundle, next_day_vms):
    """A fresh venv from requirements/serve.txt runs `pond predict` to the same allocations."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--require-hashes", "-r", str(ROOT / "requirements" / "serve.txt")], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    for mod in TRAIN_ONLY:
        assert subprocess.run([str(py), "-c", f"import {mod}"], capture_output=True).returncode != 0, mod
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
