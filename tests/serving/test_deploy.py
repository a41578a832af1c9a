"""The deployment files name only settings the service has, and the nightly script refuses bad input."""

from __future__ import annotations

import re
import subprocess

import yaml

from pond.serving.settings import Settings
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"


def _pond_variables(text: str) -> set[str]:
    return set(re.findall(r"\b(POND_[A-Z_]+)\b", text))


def test_deploy_files_set_only_real_settings():
    fields = {f"POND_{name.upper()}" for name in Settings.model_fields} | {"POND_MLFLOW_TRACKING_URI"}
    for path in (DEPLOY / "Dockerfile", DEPLOY / "compose.yaml", DEPLOY / "systemd" / "pond-nightly.service"):
        unknown = _pond_variables(path.read_text()) - fields
        assert not unknown, f"{path.name} sets {sorted(unknown)}, which serving.settings.Settings does not read"


def test_compose_runs_the_service_against_the_registry_server():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    env = compose["services"]["pond"]["environment"]
    assert env["POND_MLFLOW_TRACKING_URI"] == "http://mlflow:5000" and env["POND_REGISTRY_MODEL"] == "pond-znuma"
    assert compose["services"]["pond"]["depends_on"]["mlflow"]["condition"] == "service_healthy"
    docker = (DEPLOY / "Dockerfile").read_text()
    assert "USER pond" in docker and "/readyz" in docker and "requirements/serve.txt" in docker


def test_the_image_builds_the_wheel_from_its_own_build_context(tmp_path):
    """The Dockerfile copies the build context file by file: the wheel is built here from exactly what it copies
    (a package created after the Dockerfile last changed once stopped setuptools in the image build)."""
    import shutil
    import sys

    context = tmp_path / "context"
    lines = [line.split()[1:] for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    copies = [(src, words[-1]) for words in lines for src in words[:-1]]     # COPY src... dst
    assert copies, "the Dockerfile copies nothing"
    for src, dst in copies:
        path = ROOT / src
        target = context / src if dst.endswith("/") or dst == "." else context / dst
        if path.is_dir():
            shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                          str(tmp_path / "dist"), str(context)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(list((tmp_path / "dist").glob("pond_znuma-*.whl"))) == 1


def test_nightly_script_refuses_a_bad_day_before_running_anything(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "scripts" / "nightly.sh"), "--as-of", "28/01/2026"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "YYYY-MM-DD" in out.stderr and "nightly: 20" not in out.stdout


def test_nightly_script_does_nothing_while_another_night_runs(tmp_path):
    """From cron, a night that outlasts the interval must not have the next night's import replace its data/raw."""
    import fcntl

    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "nightly.sh"
    script.write_text((ROOT / "scripts" / "nightly.sh").read_text())
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    run = ["bash", str(script), "--as-of", "2026-01-28", "--import", str(tmp_path / "export")]
    with open(tmp_path / ".dvc" / "tmp" / "nightly.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = subprocess.run(run, capture_output=True, text=True)
    assert busy.returncode == 75 and "another night is still running" in busy.stderr
    assert busy.stdout == "" and not (tmp_path / "data").exists()
    free = subprocess.run(run, capture_output=True, text=True)   # the lock let go: it starts (and stops: no export)
    assert "nightly: 20" in free.stdout and "another night" not in free.stderr
