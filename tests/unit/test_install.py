"""The locked, split install: each role's lock satisfies pyproject.toml; the service
imports no training package (tests/serving/test_serve_install.py runs it on the serve lock alone)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import PACKAGES, ROOT

ROLES = ("serve", "train", "dev")
TRAIN_ONLY = ("duckdb", "scipy", "sklearn", "lightgbm", "onnx", "skl2onnx", "onnxmltools", "dvc",
              "matplotlib")
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;\\]+)", re.MULTILINE)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(role: str) -> list[Requirement]:
    """The role's requirements from pyproject.toml, self-references (pond-znuma[x]) expanded."""
    project = _project()
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = [role], set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for r in map(Requirement, project["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == canonicalize_name(project["name"]):
                todo += [e for e in r.extras if e not in seen]
            else:
                out.append(r)
    return out


def pins(role: str) -> dict[str, str]:
    text = (ROOT / "requirements" / f"{role}.txt").read_text()
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


@pytest.mark.parametrize("role", ROLES)
def test_lock_pins_every_requirement_within_its_range(role):
    locked = pins(role)
    for req in requirements(role):
        name = canonicalize_name(req.name)
        assert name in locked, f"requirements/{role}.txt lacks {req.name}: run scripts/lock.sh"
        assert req.specifier.contains(locked[name], prereleases=True), \
            f"requirements/{role}.txt pins {req.name}=={locked[name]} outside {req.specifier}: run scripts/lock.sh"


@pytest.mark.parametrize("role", ROLES)
def test_lock_is_hashed(role):
    text = (ROOT / "requirements" / f"{role}.txt").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.strip())
    assert blocks and all("--hash=sha256:" in b for b in blocks if PIN.match(b))


def test_roles_share_versions_and_serve_has_no_training_package():
    serve, train, dev = (pins(r) for r in ROLES)
    assert all(train[k] == v for k, v in serve.items() if k in train)
    assert all(dev[k] == v for k, v in train.items() if k in dev)
    assert not {canonicalize_name(p) for p in ("duckdb", "lightgbm", "scikit-learn", "dvc", "matplotlib",
                                                "mlflow", "skl2onnx", "onnxmltools")} & serve.keys()


def test_service_imports_no_training_package():
    code = ("import sys; import pond.serving.app, pond.serving.cli, pond.serving.engine, pond.serving.offline, "
            "pond.serving.reload; from importlib.metadata import entry_points; "
            "[pond.load() for pond in entry_points(group='console_scripts', name='pond')];"
            f"print(sorted(m for m in {TRAIN_ONLY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"




def test_a_wheel_adds_one_import_root_and_every_module(tmp_path):
    """The folders the project is known by install as ``pond.<folder>``, nothing else lands in
    site-packages, and no module or reference file is left out (the package list in pyproject.toml is explicit)."""
    src = tmp_path / "src"    # a copy: building in the checkout would leave build/ behind
    for d in PACKAGES:
        shutil.copytree(ROOT / d, src / d, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    roots = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert roots == {"pond"}
    shipped = {n.removeprefix("pond/") for n in names if n.startswith("pond/")}
    tracked = {p.relative_to(ROOT).as_posix() for d in PACKAGES for p in (ROOT / d).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and (p.suffix == ".py" or "reference" in p.parts)}
    assert tracked - shipped == set()
