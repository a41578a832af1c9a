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
    assert compose["services"]["mlflow"]["environment"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    docker = (DEPLOY / "Dockerfile").read_text()
    assert "USER pond" in docker and "/readyz" in docker and "requirements/serve.txt" in docker


def _context() -> list[str]:
    """The Docker build context's files: the repository's files (tracked, or new and not git-ignored) that no
    .dockerignore pattern excludes (a pattern excludes a path or any folder above it; ``**/`` matches any depth)."""
    import fnmatch

    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    patterns += [p.removeprefix("**/") for p in patterns if p.startswith("**/")]
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    def excluded(path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        return any(fnmatch.fnmatchcase(q, p) for q in prefixes for p in patterns)
    return [f for f in listed if (ROOT / f).is_file() and not excluded(f)]


def test_the_image_builds_the_wheel_from_its_own_build_context(tmp_path):
    """The Dockerfile copies the build context (the repository minus .dockerignore): the wheel is built here from
    exactly that context (a package created after the Dockerfile last changed once stopped setuptools in the
    image build, when the Dockerfile copied package by package)."""
    import shutil
    import sys

    docker = (DEPLOY / "Dockerfile").read_text()
    assert "COPY . ." in docker
    context = tmp_path / "context"
    for name in _context():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, context / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                          str(tmp_path / "dist"), str(context)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(list((tmp_path / "dist").glob("pond_znuma-*.whl"))) == 1


def test_pyproject_lists_every_package_the_image_ships_and_no_other():
    """pyproject.toml's package list is the one hand-kept list: it names every package of the build context (a
    folder with __init__.py there), so a new package cannot be left out of the wheel, the image or the tests."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folder = {name: "pond." + name.rpartition("/")[0].replace("/", ".") for name in _context() if "/" in name}
    shipped = {f for name, f in folder.items() if name.endswith("/__init__.py")}
    assert shipped <= listed, f"pyproject.toml does not list the packages {sorted(shipped - listed)}"
    assert listed <= set(folder.values()), f"pyproject.toml lists {sorted(listed - set(folder.values()))}, " \
                                           "which the build context does not hold"
    assert not any(name.startswith(("tests/", "benchmarks/", "data/")) for name in _context())


def test_nightly_script_refuses_a_bad_day_before_running_anything(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "scripts" / "nightly.sh"), "--as-of", "28/01/2026"],
                         capture_output=True, text=True, check=False)
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
        busy = subprocess.run(run, capture_output=True, text=True, check=False)
    assert busy.returncode == 75 and "another night is still running" in busy.stderr
    assert busy.stdout == "" and not (tmp_path / "data").exists()
    # the lock let go: it starts (and stops: no export)
    free = subprocess.run(run, capture_output=True, text=True, check=False)
    assert "nightly: 20" in free.stdout and "another night" not in free.stderr
